"""``lsm``'s rows of the benchmark's defaults table against a control run: test error / NLL (steps)
of each dataset in a control folder and in one folder a seed, and seed 0's NLL over the control's,
with their geometric mean (docs/stability.md, "What it costs").

    python tools/defaults_against_control.py control-s0 lsm-s0 lsm-s1

Each folder is one seed's folder of a ``gpflow-augmented benchmark --methods lsm`` output
(``OUTPUT/seed-S``; the control run with the variant to compare against; the first seed folder on
the control's seed).

Given two reports' ``summaries.json`` instead, every seed both hold: each dataset's mean test NLL
of the control and of the variant, their ratio, the paired difference with its 95 % interval
(``comparison.statistics.paired_difference``), the mean errors and steps (docs/stability.md, "The
averaged q(u)"):

    python tools/defaults_against_control.py control/summaries.json variant/summaries.json
"""

import json
import math
import os
import statistics
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


def _records(path: str) -> dict:
    with open(path) as file:
        records = json.load(file)["records"]
    return {(r["dataset"], r["seed"]): r for r in records if r["method"] == METHOD}


def paired(control_path: str, variant_path: str) -> None:
    from gpflow_augmented.comparison.statistics import mean_interval, paired_difference

    control, variant = _records(control_path), _records(variant_path)
    print(
        "| dataset | seeds | control NLL | variant NLL | ÷ control | paired difference [95 %] "
        "| error, control / variant | steps, control / variant |"
    )
    print("|---" * 8 + "|")
    ratios = []
    for dataset in sorted({name for name, _ in control}):
        seeds = sorted(s for name, s in control if name == dataset and (name, s) in variant)
        if not seeds:
            continue

        def column(records: dict, key: str) -> list:
            return [records[(dataset, seed)][key] for seed in seeds]

        before, after = mean_interval(column(control, "nll")), mean_interval(column(variant, "nll"))
        difference = paired_difference(column(variant, "nll"), column(control, "nll"))
        ratios.append(after.mean / before.mean)
        errors = [statistics.fmean(column(r, "error")) for r in (control, variant)]
        steps = [statistics.fmean(column(r, "iterations")) for r in (control, variant)]
        print(
            f"| {dataset} | {len(seeds)} | {before.mean:.4f} | {after.mean:.4f} | {ratios[-1]:.3f} "
            f"| {difference.mean:+.4f} [{difference.low:+.4f}, {difference.high:+.4f}] "
            f"| {errors[0]:.4f} / {errors[1]:.4f} | {steps[0]:.0f} / {steps[1]:.0f} |"
        )
    geometric = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"| geometric mean | | | | {geometric:.3f} | | | |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and all(path.endswith(".json") for path in sys.argv[1:]):
        paired(sys.argv[1], sys.argv[2])
    else:
        main(sys.argv[1], sys.argv[2:])
