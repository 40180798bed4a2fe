"""The defaults table over several seeds, from the seed folders ``gpflow-augmented benchmark
--seeds S,T --output FOLDER`` wrote (``FOLDER/seed-S``): per dataset, each method's test error / NLL
averaged over the seeds, ± half the range of its NLL, the refused steps summed; ``lsm``'s NLL ÷ the
lowest and its error − the lowest on each seed and on the mean; then issue 33's target counts
and the geometric-mean NLL of each method over the datasets. The README's "When to pick it" table is
the mean columns.

    python tools/seed_mean_table.py defaults-own/seed-0 defaults-own/seed-1
"""

import json
import sys
from pathlib import Path

import numpy as np

# The table's column order; a run's other methods follow, and methods it did not run are left out.
ORDER = ["lsm", "sep", "rm", "softmax", "dirichlet", "lsm-vi"]


def _finals(folder: Path, dataset: str) -> dict:
    methods = json.loads((folder / dataset / "results.json").read_text())["methods"]
    return {m["name"]: m for m in methods}


def main(folders: list) -> None:
    # In the order the first folder's benchmark ran them.
    results = Path(folders[0]).glob("*/results.json")
    datasets = [
        p.parent.name for p in sorted(results, key=lambda p: json.loads(p.read_text())["created"])
    ]
    ran = list(_finals(Path(folders[0]), datasets[0]))
    methods = [n for n in ORDER if n in ran] + [n for n in ran if n not in ORDER]
    counts = np.zeros((len(folders) + 1, 2), int)
    log_nll: dict = {n: [] for n in methods}
    print(
        "| dataset | "
        + " | ".join(f"`{m}`" for m in methods)
        + " | `lsm` NLL ÷ best, each seed / mean | `lsm` error − best, each seed / mean |"
    )
    print("|---" * (len(methods) + 3) + "|")
    for dataset in datasets:
        runs = [_finals(Path(f), dataset) for f in folders]
        nll = [{n: r[n]["final"]["nll"] for n in methods} for r in runs]
        err = [{n: r[n]["final"]["error"] for n in methods} for r in runs]
        nll.append({n: np.mean([s[n] for s in nll]) for n in methods})
        err.append({n: np.mean([s[n] for s in err]) for n in methods})
        ratios, gaps = [], []
        for k, (seed_nll, seed_err) in enumerate(zip(nll, err)):
            best = min(seed_nll, key=seed_nll.get)
            ratio, gap = seed_nll["lsm"] / seed_nll[best], seed_err["lsm"] - min(seed_err.values())
            ratios.append("lowest" if best == "lsm" else f"{ratio:.3f} (`{best}`)")
            gaps.append(f"{gap:+.4f}")
            counts[k] += [ratio <= 1.02, gap <= 0.005]
        mean_nll, mean_err = nll[-1], err[-1]
        cells = []
        for n in methods:
            log_nll[n].append(np.log(mean_nll[n]))
            err, nll_text = f"{mean_err[n]:.4f}", f"{mean_nll[n]:.4f}"
            err = f"**{err}**" if mean_err[n] == min(mean_err.values()) else err
            nll_text = f"**{nll_text}**" if mean_nll[n] == min(mean_nll.values()) else nll_text
            spread = (max(s[n] for s in nll[:-1]) - min(s[n] for s in nll[:-1])) / 2
            refused = sum(r[n]["failed_steps"] for r in runs)
            cells.append(
                f"{err} / {nll_text} ±{spread:.4f}" + (f" ({refused} refused)" if refused else "")
            )
        print(
            f"| {dataset} | "
            + " | ".join(cells)
            + f" | {' / '.join(ratios)} | {' / '.join(gaps)} |"
        )
    print()
    for k, (near_nll, near_err) in enumerate(counts):
        label = folders[k] if k < len(folders) else "mean"
        print(
            f"{label}: NLL lowest or within 2 %: {near_nll} of {len(datasets)}; "
            f"error within 0.005: {near_err} of {len(datasets)}"
        )
    print(
        "geometric-mean NLL: "
        + ", ".join(f"{n} {np.exp(np.mean(v)):.4f}" for n, v in log_nll.items())
    )


if __name__ == "__main__":
    main(sys.argv[1:])
