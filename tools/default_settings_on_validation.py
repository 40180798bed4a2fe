"""Choose a method's default settings (positive bijector, Adam's learning rate, the exact-bound
methods' warm-start length, a kernel shared by the classes or one per class) on validation splits,
never on test data.

For each dataset and seed, the validation split ``tuning.validation_split`` carves from the training
data (the one ``--tune`` uses), and each method at its other defaults (M = 100, B = 200) once per
setting, under the same time budget. Prints validation error / NLL and, per dataset and method, the
setting with the lowest mean NLL over the seeds; then each setting's geometric-mean NLL against the
first setting's.

    python tools/default_settings_on_validation.py --data-dir ../shared/data --methods lsm --seeds
    0,1 \
        --bijectors softplus,exp --learning-rates own \
        --datasets vehicle,segment,satimage,shuttle,letter,waveform,pendigits,dna,optdigits,usps11k
"""

import argparse
import itertools
import json
import time

import numpy as np

from gpflow_augmented.comparison import baselines, compare
from gpflow_augmented.comparison.tuning import validation_split
from gpflow_augmented.datasets import load_dataset


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--datasets", required=True)
    parser.add_argument("--methods", required=True)
    parser.add_argument("--bijectors", default="softplus")
    parser.add_argument(
        "--learning-rates",
        default="own",
        help="comma-separated; 'own': each method's default (baselines.method_learning_rate)",
    )
    parser.add_argument(
        "--warm-start",
        default=str(baselines.EXACT_WARM_START),
        help="comma-separated warm-start lengths of the exact-bound methods",
    )
    parser.add_argument(
        "--kernels",
        default="shared",
        help="comma-separated: 'shared' (one kernel for all classes), 'per-class' (one a class)",
    )
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--time-budget", type=float, default=40.0)
    parser.add_argument("--output", help="a JSON file for every run's scores")
    args = parser.parse_args()
    settings = [
        {
            "positive_bijector": bijector,
            "learning_rate": None if rate == "own" else float(rate),
            "warm_start": int(warm),
            "kernels": kernels,
        }
        for bijector, rate, warm, kernels in itertools.product(
            args.bijectors.split(","),
            args.learning_rates.split(","),
            args.warm_start.split(","),
            args.kernels.split(","),
        )
    ]
    seeds = [int(seed) for seed in args.seeds.split(",")]
    names, methods = args.datasets.split(","), args.methods.split(",")

    rows = []
    for name in names:
        dataset = load_dataset(name, data_dir=args.data_dir)
        for seed in seeds:
            split = validation_split(dataset, 0.2, seed)
            for method, setting in itertools.product(methods, settings):
                started = time.time()
                options = {
                    key: value
                    for key, value in setting.items()
                    if key not in ("warm_start", "kernels")
                }
                # build_method reads the module constant, so every run is built as compare builds it
                baselines.EXACT_WARM_START = setting["warm_start"]
                result = compare(
                    split,
                    [method],
                    method_options={method: options},
                    seed=seed,
                    batch_size=200,
                    num_inducing=100,
                    time_budget=args.time_budget,
                    per_class_kernels=setting["kernels"] == "per-class",
                    progress=False,
                )
                final = result.methods[0].final_metrics
                rows.append(
                    {
                        "dataset": name,
                        "seed": seed,
                        "method": method,
                        **setting,
                        "setting": _label(setting),
                        "learning_rate": result.methods[0].options["learning_rate"],
                        "error": final["error"],
                        "nll": final["nll"],
                        "iterations": result.methods[0].iterations,
                        "confidence": float(result.methods[0].probabilities.max(axis=1).mean()),
                        "accuracy": 1.0 - final["error"],
                    }
                )
                print(
                    f"{name} seed {seed} {method} {_label(setting)}: "
                    f"validation error {final['error']:.4f} "
                    f"NLL {final['nll']:.4f} confidence {rows[-1]['confidence']:.3f} "
                    f"({result.methods[0].iterations} iterations, "
                    f"{time.time() - started:.0f} s)",
                    flush=True,
                )
    if args.output:
        with open(args.output, "w") as file:
            json.dump(rows, file, indent=1)

    for method in methods:
        mean_nll = np.array(
            [
                [
                    np.mean(
                        [
                            r["nll"]
                            for r in rows
                            if r["dataset"] == name
                            and r["method"] == method
                            and r["setting"] == _label(setting)
                        ]
                    )
                    for setting in settings
                ]
                for name in names
            ]
        )
        for name, row in zip(names, mean_nll):
            means = ", ".join(f"{_label(s)} {nll:.4f}" for s, nll in zip(settings, row))
            print(
                f"{method} {name}: mean validation NLL {means} "
                f"-> {_label(settings[int(np.argmin(row))])}"
            )
        wins = np.bincount(np.argmin(mean_nll, axis=1), minlength=len(settings))
        ratios = np.exp(np.mean(np.log(mean_nll / mean_nll[:, :1]), axis=0))
        for setting, won, ratio in zip(settings, wins, ratios):
            print(
                f"{method} {_label(setting)}: lowest on {won} of {len(names)}, "
                f"geometric-mean NLL {ratio:.3f} x {_label(settings[0])}'s"
            )


def _label(setting) -> str:
    rate = setting["learning_rate"]
    return (
        f"{setting['positive_bijector']} lr {'own' if rate is None else format(rate, 'g')} "
        f"warm start {setting['warm_start']}"
        + ("" if setting["kernels"] == "shared" else f", {setting['kernels']} kernels")
    )


if __name__ == "__main__":
    main()
