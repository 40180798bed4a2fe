"""
A large real dataset against its size: each method's time per epoch and the process's peak memory
on seeded subsamples of N rows, and at the whole set the step's cost against M and against C (the
labels folded into fewer classes, k ↦ k mod C: a step's cost depends on C only through its shapes).

Each (N, method) runs in a process of its own that reads only its N rows (a subsample written
beforehand), held as NumPy arrays as ``compare`` holds them; each step is given its minibatch
(``MinibatchStream``). The peak resident memory is counted from the data loaded on (Linux's VmHWM,
reset then), once for the initialisation and once for training: what training holds beyond the
data must not grow with N. A step's time is the median
of compiled, warmed-up steps; an epoch is that × N / B.

    python -m benchmarks large-data ../shared/data/kddcup.npz --output large-data
"""

import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

_ROOT = Path(__file__).resolve().parents[1]

__all__ = [
    "DEFAULT_SIZES",
    "write_subsamples",
    "write_folded",
    "measure",
    "run_large_data",
    "large_data_report",
]

DEFAULT_SIZES = (10_000, 50_000, 100_000, 250_000, None)  # None: every row


def _resident_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (the peak since the last reset) of this process, in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0  # kB
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak() -> None:
    """Start the peak resident size (VmHWM) afresh from the current size (Linux ≥ 4.0)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def write_subsamples(path: str, sizes: Sequence[Optional[int]], folder: Path) -> List[Path]:
    """Seeded subsamples of ``path``'s training split (standardised as ``compare`` does), one
    ``.npz`` each, so that a measuring process reads only its own rows."""
    from gpflow_augmented.comparison.files import load_file

    dataset = load_file(path, seed=0)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for rows in sizes:
        X, Y = dataset.X_train, dataset.Y_train
        if rows is not None and rows < len(X):
            keep = np.random.default_rng(0).choice(len(X), rows, replace=False)
            X, Y = X[keep], Y[keep]
        files.append(folder / f"rows-{len(X)}.npz")
        np.savez(files[-1], X=X, Y=Y, num_classes=dataset.num_classes)
    return files


def write_folded(sample: Path, classes: Sequence[int]) -> List[Path]:
    """``sample``'s rows with their labels folded into each number of classes in ``classes``
    (k ↦ k mod C, every C at most the sample's), one ``.npz`` each beside it."""
    with np.load(sample) as arrays:
        X, Y, num_classes = arrays["X"], arrays["Y"], int(arrays["num_classes"])
    files = []
    for C in classes:
        if not 2 <= C <= num_classes:
            raise ValueError(f"cannot fold {num_classes} classes into {C}: give 2 to {num_classes}")
        files.append(sample.with_name(f"{sample.stem}-C{C}.npz"))
        np.savez(files[-1], X=X, Y=Y % C, num_classes=C)
    return files


def measure(
    sample: str, method: str, num_inducing: int, batch_size: int, steps: int
) -> Dict[str, Any]:
    """In this process: ``method``'s median step on the rows of ``sample`` (a
    :func:`write_subsamples` or :func:`write_folded` file), and the peak memory beyond the data
    of its initialisation (the inducing points by k-means++ over every row, the model) and of its
    training."""
    import tensorflow as tf

    from gpflow_augmented.comparison.baselines import build_method
    from gpflow_augmented.comparison.protocol import MinibatchStream
    from gpflow_augmented.initialisation import initial_kernel, inducing_points

    with np.load(sample) as arrays:
        X, Y, num_classes = arrays["X"], arrays["Y"], int(arrays["num_classes"])
    with_data = _resident_mb("VmRSS")
    _reset_peak()
    Z = inducing_points(X, num_inducing, seed=0)  # k-means++ over every row
    step = build_method(method, initial_kernel(X), Z, num_classes, len(X)).step
    initialisation_peak = _resident_mb("VmHWM")
    _reset_peak()
    stream = MinibatchStream(len(X), batch_size, seed=0)
    times = []
    for iteration in range(steps + 3):
        index = stream.indices(iteration)
        batch = tf.constant(X[index]), tf.constant(Y[index])
        start = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, step(*batch))
        if iteration >= 3:  # after tracing and the first runs
            times.append(time.perf_counter() - start)
    step_s = float(np.median(times))
    peak = _resident_mb("VmHWM")
    return {
        "N": len(X),
        "method": method,
        "M": num_inducing,
        "B": batch_size,
        "C": num_classes,
        "data_mb": (X.nbytes + Y.nbytes) / 2**20,
        "rss_with_data_mb": with_data,
        "initialisation_beyond_data_mb": initialisation_peak - with_data,
        "peak_rss_mb": peak,
        "beyond_data_mb": peak - with_data,
        "step_s": step_s,
        "epoch_s": step_s * len(X) / batch_size,
    }


def _in_process(*arguments: Any) -> Dict[str, Any]:
    code = (
        "import json, sys; "
        f"sys.path.insert(0, {str(_ROOT)!r}); "
        "from benchmarks.large_data import measure; "
        f"print(json.dumps(measure(*{list(arguments)!r})))"
    )
    # TensorFlow's C++ log lines (start-up, the Cholesky backoff's tests) would fill stderr.
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=environment
    )
    if completed.returncode != 0:
        raise RuntimeError(f"measure{arguments} failed:\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def run_large_data(
    path: str,
    output: Optional[str] = None,
    sizes: Sequence[Optional[int]] = DEFAULT_SIZES,
    methods: Sequence[str] = ("lsm", "softmax"),
    inducing: Sequence[int] = (50, 100, 200),
    classes: Sequence[int] = (),
    batch_size: int = 200,
    steps: int = 30,
) -> Dict[str, Any]:
    """Every measurement, one process each (the last size is the one measured against M and C);
    with ``output``, writes large_data.json (stamped with the machine, the versions and the date)
    and large_data.md there."""
    from gpflow_augmented.comparison.runs import machine

    with tempfile.TemporaryDirectory() as scratch:
        samples = write_subsamples(path, sizes, Path(scratch))
        folded = write_folded(samples[-1], classes)
        results = {
            "stamp": {**machine(), "measured": datetime.date.today().isoformat()},
            "sizes": [
                _in_process(str(sample), method, 100, batch_size, steps)
                for sample in samples
                for method in methods
            ],
            "inducing": [
                _in_process(str(samples[-1]), method, M, batch_size, steps)
                for M in inducing
                for method in methods
            ],
            "classes": [
                _in_process(str(sample), method, 100, batch_size, steps)
                for sample in folded
                for method in methods
            ],
        }
    if output is not None:
        folder = Path(output)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "large_data.json").write_text(json.dumps(results, indent=1))
        (folder / "large_data.md").write_text(large_data_report(results))
    return results


def large_data_report(results: Dict[str, Any]) -> str:
    """The Markdown tables of :func:`run_large_data`'s results, under the line that says where and
    when they were measured."""
    from gpflow_augmented.comparison.report import measured_line

    stamp = results.get("stamp", {})
    lines = [
        measured_line(stamp.get("measured", "on an unknown date"), stamp),
        "",
        "| N | method | step | epoch | data | initialisation, beyond the data | "
        "training, beyond the data | peak memory |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["sizes"]:
        lines.append(
            f"| {r['N']:,} | {r['method']} | {1e3 * r['step_s']:.1f} ms | {r['epoch_s']:.1f} s | "
            f"{r['data_mb']:.0f} MB | {r['initialisation_beyond_data_mb']:.0f} MB | "
            f"{r['beyond_data_mb']:.0f} MB | {r['peak_rss_mb']:.0f} MB |"
        )
    for key, rows in (("M", results["inducing"]), ("C", results.get("classes", []))):
        if rows:
            lines += ["", f"| {key} | method | step | epoch |", "|---|---|---|---|"]
            lines += [
                f"| {r[key]} | {r['method']} | {1e3 * r['step_s']:.1f} ms | {r['epoch_s']:.1f} s |"
                for r in rows
            ]
    return "\n".join(lines) + "\n"
