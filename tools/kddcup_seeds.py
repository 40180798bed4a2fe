"""Issue 55's kddcup targets from ``compare`` runs of ``lsm`` and ``softmax`` (one folder a seed):
each method's final test error / NLL, ``lsm``'s largest rise of the test error above its best so
far after the first 10 % of its trace and its final NLL over its best along the trace, and the
training seconds each method takes to reach ``softmax``'s final NLL × 1.02 (on the traces' test
points). With ``--at SECONDS`` the target is ``softmax``'s NLL at its last reading by that time, so
that a longer run says when a method reaches what ``softmax`` had at a shorter budget.

    gpflow-augmented compare ../shared/data/kddcup.npz --methods lsm,softmax --time-budget 20 \\
        --seeds 0,1,2 --output kdd
    python tools/kddcup_seeds.py kdd/seed-0 kdd/seed-1 kdd/seed-2
"""

import argparse
import json
import os

from gpflow_augmented.comparison.results import time_to_reach


def nll_at(trace: list, seconds: float | None) -> float:
    """The NLL of the last reading by ``seconds`` of training (the final reading when None)."""
    readings = [point["nll"] for point in trace if seconds is None or point["time"] <= seconds]
    if not readings:
        raise SystemExit(f"softmax's trace has no reading by {seconds} s")
    return readings[-1]


def main(folders: list, at: float | None = None) -> None:
    columns = ["seed", "method", "error", "NLL", "largest error rise", "final NLL ÷ best"]
    where = "softmax NLL" if at is None else f"softmax's {at:g}-s NLL"
    print("| " + " | ".join(columns + [f"s to {where} × 1.02"]) + " |")
    print("|---|---|---|---|---|---|---|")
    for folder in folders:
        with open(os.path.join(folder, "results.json")) as file:
            results = json.load(file)
        methods = {method["name"]: method for method in results["methods"]}
        # The traces score the same subset of the test set; the target is on that subset.
        target = 1.02 * nll_at(methods["softmax"]["trace"], at)
        seed = results["settings"].get("seed", folder)
        for name, method in methods.items():
            trace = method["trace"]
            errors = [point["error"] for point in trace]
            start = len(errors) // 10
            best, rise = min(errors[: start + 1]), 0.0
            for error in errors[start:]:
                best = min(best, error)
                rise = max(rise, error - best)
            nll_ratio = trace[-1]["nll"] / min(point["nll"] for point in trace)
            reach = time_to_reach(trace, target)
            final = method["final"]
            reached = "never" if reach is None else f"{reach:.1f}"
            print(
                f"| {seed} | {name} | {final['error']:.4f} | {final['nll']:.4f} | {rise:.4f} "
                f"| {nll_ratio:.3f} | {reached} |"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "folders", nargs="+", help="compare's seed folders, each with its results.json"
    )
    parser.add_argument("--at", type=float, help="softmax's reading by these seconds is the target")
    arguments = parser.parse_args()
    main(arguments.folders, arguments.at)
