"""How well a method can do having seen only some of the training points, whatever its optimiser.

``make`` writes a dataset's split for one seed, its training set cut to a seeded random subset of
points, as an ``.npz`` with ``is_test`` for ``gpflow-augmented compare``. Test points of classes
absent from the subset are dropped and the classes renumbered (a class needs training points);
that makes the test set easier, so the subset's NLL errs low. ``table`` prints, seed by seed, a
full run's ``softmax`` NLL × 1.02 beside each subset's fits, from one report's summaries::

    python tools/training_subset.py make kddcup --data-dir ../shared/data --seed 0 \\
        --points 20000 --output s0/kddcup-20k.npz
    gpflow-augmented compare s0/kddcup-20k.npz --methods lsm,softmax --time-budget 0 \\
        --max-iterations 7500 --seeds 0 --output subsets/s0-20k
    gpflow-augmented report kdd/ subsets --output kddcup-subsets
    python tools/training_subset.py table kddcup-subsets/summaries.json --full kddcup
"""

import argparse
import json
from typing import TYPE_CHECKING, Tuple

import numpy as np

if TYPE_CHECKING:
    from gpflow_augmented.datasets import Dataset


def training_subset(
    dataset: "Dataset", points: int, seed: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, y, is_test): ``points`` training points drawn without replacement (seeded), then the
    test points whose class is among theirs, labels renumbered 0..C'-1 in the original order."""
    if not 1 <= points <= len(dataset.X_train):
        raise SystemExit(f"--points must be in 1..{len(dataset.X_train)}, got {points}")
    chosen = np.random.default_rng(seed).choice(len(dataset.X_train), points, replace=False)
    y_train, y_test = dataset.Y_train[chosen, 0], dataset.Y_test[:, 0]
    kept = np.isin(y_test, y_train)
    _, y = np.unique(np.r_[y_train, y_test[kept]], return_inverse=True)
    X = np.vstack([dataset.X_train[chosen], dataset.X_test[kept]])
    is_test = np.r_[np.zeros(points, bool), np.ones(int(kept.sum()), bool)]
    return X, y, is_test


def table(records: list, full: str) -> str:
    """A markdown table: a row a seed, ``full``'s ``softmax`` NLL × 1.02 and then every other
    dataset's NLL a method, in bold where it is at or below that."""
    nll = {(r["dataset"], r["method"], r["seed"]): r["nll"] for r in records}
    seeds = sorted({seed for dataset, method, seed in nll if dataset == full})
    columns = sorted({(d, m) for d, m, _ in nll if d != full})
    header = " | ".join(f"{d} {m}" for d, m in columns)
    rows = [f"| seed | {full} softmax × 1.02 | {header} |", "|---" * (len(columns) + 2) + "|"]
    for seed in seeds:
        target = 1.02 * nll[(full, "softmax", seed)]
        cells = [nll.get((d, m, seed)) for d, m in columns]
        shown = ["–" if v is None else f"**{v:.5f}**" if v <= target else f"{v:.5f}" for v in cells]
        rows.append(f"| {seed} | {target:.5f} | " + " | ".join(shown) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make", help="write a training subset as .npz")
    make.add_argument("dataset")
    make.add_argument("--data-dir", default=None)
    make.add_argument("--seed", type=int, default=0, help="the split's seed and the subset's")
    make.add_argument("--points", type=int, required=True)
    make.add_argument("--output", required=True, help="the .npz to write")
    shown = commands.add_parser("table", help="the subsets' NLL against a full run's softmax")
    shown.add_argument("summaries", help="a report's summaries.json")
    shown.add_argument("--full", required=True, help="the full run's dataset name")
    args = parser.parse_args()
    if args.command == "table":
        with open(args.summaries) as file:
            print(table(json.load(file)["records"], args.full))
        return
    from gpflow_augmented.datasets import load_dataset  # TensorFlow, which the table needs not

    dataset = load_dataset(args.dataset, args.data_dir, seed=args.seed)
    X, y, is_test = training_subset(dataset, args.points, args.seed)
    np.savez(args.output, X=X, y=y, is_test=is_test)
    dropped = len(dataset.X_test) - int(is_test.sum())
    print(
        f"{args.output}: {args.points} training points in {y[~is_test].max() + 1} of "
        f"{dataset.num_classes} classes; {int(is_test.sum())} test points ({dropped} dropped)"
    )


if __name__ == "__main__":
    main()
