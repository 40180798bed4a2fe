"""``lsm``'s rows of the benchmark's defaults table against a control run: test error / NLL (steps)
of each dataset in a control folder and in one folder a seed, and seed 0's NLL over the control's,
with their geometric mean (docs/stability.md, "What it costs").

    python tools/defaults_against_control.py control-s0 lsm-s0 lsm-s1

Each folder is one seed's folder of a ``gpflow-augmented benchmark --methods lsm`` output
(``OUTPUT/seed-S``; the control run with the variant to compare against; the first seed folder on
the control's seed).
"""

import json
import math
import os
import sys

METHOD = "lsm"


def final(folder: str, dataset: str) -> tuple:
    with open(os.path.join(folder, dataset, "results.json")) as file:
        methods = {method["name"]: method for method in json.load(file)["methods"]}
    method = methods[METHOD]
    return method["final"]["error"], method["final"]["nll"], method["iterations"]


def cell(result: tuple) -> str:
    return f"{result[0]:.4f} / {result[1]:.4f} ({result[2]})"


def main(control: str, seeds: list) -> None:
    datasets = sorted(
        name for name in os.listdir(control) if os.path.isdir(os.path.join(control, name))
    )
    seed_names = " | ".join(os.path.basename(folder.rstrip("/")) for folder in seeds)
    print(f"| dataset | {os.path.basename(control.rstrip('/'))} | {seed_names} | NLL ÷ control |")
    print("|---" * (len(seeds) + 3) + "|")
    ratios = []
    for dataset in datasets:
        reference = final(control, dataset)
        results = [final(folder, dataset) for folder in seeds]
        ratios.append(results[0][1] / reference[1])
        row = " | ".join(cell(result) for result in results)
        print(f"| {dataset} | {cell(reference)} | {row} | {ratios[-1]:.3f} |")
    geometric = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"| geometric mean |{' |' * (len(seeds) + 1)} {geometric:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
