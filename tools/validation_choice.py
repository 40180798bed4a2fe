"""Design choices of our methods made on validation splits carved from the training data (the
test sets are never read): each method, and for the exact-bound methods each warm-start length, is
trained on 80 % of a dataset's training set and scored by its final NLL on the other 20 %
(docs/benchmarks.md, "Choices made on validation").

    python tools/validation_choice.py --data-dir ../shared/data \
        --datasets shuttle,satimage,segment,letter,vehicle,waveform,pendigits,dna,optdigits,usps11k \
        --methods lsm --warm-start 0,50 --time-budget 40 --output warm_start.json
"""
import argparse
import json

from gpflow_augmented.comparison import baselines
from gpflow_augmented.comparison import compare
from gpflow_augmented.datasets import load_dataset
from gpflow_augmented.comparison.tuning import validation_split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--datasets", required=True)
    parser.add_argument("--methods", required=True)
    parser.add_argument("--warm-start", default=str(baselines.EXACT_WARM_START),
                        help="comma-separated warm-start lengths of the exact-bound methods")
    parser.add_argument("--time-budget", type=float, default=40.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    rows = []
    for name in args.datasets.split(","):
        split = validation_split(load_dataset(name, args.data_dir), 0.2, args.seed)
        for method in args.methods.split(","):
            for warm_start in [int(v) for v in args.warm_start.split(",")]:
                # build_method reads the module constant, so every run is built as compare builds it
                baselines.EXACT_WARM_START = warm_start
                result = compare(split, [method], time_budget=args.time_budget,
                                 seed=args.seed).methods[0]
                rows.append({"dataset": name, "method": method, "warm_start": warm_start,
                             "validation_error": result.final_metrics["error"],
                             "validation_nll": result.final_metrics["nll"],
                             "iterations": result.iterations})
                print(rows[-1], flush=True)
                with open(args.output, "w") as file:
                    json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
