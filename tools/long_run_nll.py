"""Issue 33: does the default `lsm` become over-confident in long runs? Runs it for many more
iterations than the benchmark gives it (no time budget) on a dataset's validation split (carved from
its training data, as --tune does) and on its test split, and prints the NLL and error along the
way, with the kernel variance at the end.

    python tools/long_run_nll.py ../shared/data vehicle,segment 30000 0
"""

import sys

import numpy as np

from gpflow_augmented.comparison import compare
from gpflow_augmented.comparison.tuning import validation_split
from gpflow_augmented.datasets import load_dataset


def main(data_dir, names, iterations, seed):
    for name in names:
        dataset = load_dataset(name, data_dir=data_dir)
        for split_name, split in (
            ("validation", validation_split(dataset, 0.2, seed)),
            ("test", dataset),
        ):
            result = compare(
                split,
                ["lsm"],
                seed=seed,
                time_budget=None,
                max_iterations=iterations,
                trace_test_points=None,
                progress=False,
            )
            run = result.methods[0]
            trace = [e for e in run.trace if e["iteration"] > 0]
            best = min(trace, key=lambda e: e["nll"])
            marks = sorted({int(iterations * f) for f in (0.01, 0.03, 0.1, 0.3, 1.0)})
            shown = []
            for mark in marks:
                entry = min(trace, key=lambda e: abs(e["iteration"] - mark))
                shown.append(f"{entry['iteration']}: {entry['error']:.4f} / {entry['nll']:.4f}")
            variance = np.ravel(run.method.model.kernel.variance.numpy())
            print(
                f"{name} {split_name}: "
                + "; ".join(shown)
                + f" | lowest NLL {best['nll']:.4f} at {best['iteration']} | final "
                f"{run.final_metrics['error']:.4f} / {run.final_metrics['nll']:.4f}, σ² "
                f"{variance[0]:.1f}, {run.final_metrics['time']:.0f} s",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4]))
