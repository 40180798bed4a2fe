"""
How a training step's cost grows: with the number of classes (class subsets), the number of
training points (streamed), the number of inducing points, the precision, and against the dense
linear algebra it cannot avoid (a roofline for this machine).

Every figure is a median of compiled, warmed-up steps measured side by side in one run. Run it as
``python -m benchmarks scale --output DIR`` (writes ``scale.md`` and ``scale.json``).
"""

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.config import default_float

from gpflow_augmented.cavi import CAVI
from gpflow_augmented.datasets.synthetic import synthetic_stream
from gpflow_augmented.models import LogisticSoftmaxSVGP
from gpflow_augmented.schedules import RobbinsMonro
from gpflow_augmented.training import Trainer, fit

# The repository's root, for the subprocesses that import this module.
_ROOT = Path(__file__).resolve().parents[1]

__all__ = [
    "median_time",
    "synthetic_model",
    "class_scaling",
    "data_scaling",
    "inducing_scaling",
    "precision_comparison",
    "roofline",
    "streamed_fit_memory",
    "run_scaling",
]


def median_time(function: Callable[[], object], repeats: int = 20, warmup: int = 3) -> float:
    """Median wall time of ``function()`` in seconds; its result is read back to the host, so
    asynchronous work is counted."""

    def run_to_host() -> None:
        tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, function())

    for _ in range(warmup):
        run_to_host()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_to_host()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def synthetic_model(
    num_classes: int, num_inducing: int, input_dim: int, num_data: int, seed: int = 0
) -> LogisticSoftmaxSVGP:
    """A model with one SE kernel shared by all classes and random inducing inputs."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(num_inducing, input_dim))
    kernel = gpflow.kernels.SquaredExponential(lengthscales=np.sqrt(input_dim))
    # The scheme the scale figures of docs/scale.md were measured with.
    return LogisticSoftmaxSVGP(
        kernel, Z, num_classes, num_data=num_data, scheme="negative-multinomial"
    )


def _batch(batch_size: int, num_classes: int, input_dim: int, seed: int = 0) -> tuple:
    X, Y = next(iter(synthetic_stream(batch_size, batch_size, num_classes, input_dim, seed)))
    return X, Y


def _cavi_step_time(
    num_classes: int,
    subset_size: Optional[int],
    batch_size: int,
    num_inducing: int,
    input_dim: int,
    jit_compile: bool = False,
    repeats: int = 20,
) -> float:
    model = synthetic_model(num_classes, num_inducing, input_dim, num_data=100 * batch_size)
    cavi = CAVI(model, RobbinsMonro(), class_subset_size=subset_size, jit_compile=jit_compile)
    X, Y = _batch(batch_size, num_classes, input_dim)
    return median_time(lambda: cavi._step_fn(X, Y), repeats=repeats, warmup=min(3, repeats))


def class_scaling(
    class_counts: Sequence[int] = (10, 100, 1000),
    subset_size: int = 10,
    batch_size: int = 200,
    num_inducing: int = 100,
    input_dim: int = 10,
) -> List[Dict]:
    """The CAVI step's time (compiled graph) with |K| = ``subset_size`` classes per step, and
    with all classes."""
    rows = []
    for num_classes in class_counts:
        subset = _cavi_step_time(num_classes, subset_size, batch_size, num_inducing, input_dim)
        full = _cavi_step_time(num_classes, None, batch_size, num_inducing, input_dim, repeats=3)
        rows.append(
            {
                "C": num_classes,
                "K": subset_size,
                "subset_step_s": subset,
                "all_classes_step_s": full,
            }
        )
    base = rows[0]["subset_step_s"]
    for row in rows:
        row["subset_ratio"] = row["subset_step_s"] / base
    return rows


def streamed_fit_memory(
    num_data: int,
    steps: int = 40,
    batch_size: int = 500,
    num_inducing: int = 50,
    num_classes: int = 5,
    input_dim: int = 32,
) -> Dict:
    """Peak resident memory of a process that trains on ``num_data`` streamed points, and the
    median step time (run each size in its own process: the peak is per process)."""
    code = (
        "import json, sys; "
        f"sys.path.insert(0, {str(_ROOT)!r}); "
        "from benchmarks.scaling import _streamed_fit_in_process; "
        f"print(json.dumps(_streamed_fit_in_process({num_data}, {steps}, {batch_size}, "
        f"{num_inducing}, {num_classes}, {input_dim})))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _streamed_fit_in_process(
    num_data: int,
    steps: int,
    batch_size: int,
    num_inducing: int,
    num_classes: int,
    input_dim: int,
) -> Dict:
    model = synthetic_model(num_classes, num_inducing, input_dim, num_data)
    stream = synthetic_stream(num_data, batch_size, num_classes, input_dim)
    trainer = Trainer(model, RobbinsMonro(), 0.01)
    fit(model, stream, iterations=3, trainer=trainer, progress=False)  # trace and warm up
    before = _peak_rss_mb()
    times = []
    batches = iter(stream.repeat())
    for _ in range(steps):
        batch = next(batches)
        start = time.perf_counter()
        trainer.step(batch)
        times.append(time.perf_counter() - start)
    return {
        "N": num_data,
        "peak_rss_mb": _peak_rss_mb(),
        "peak_after_warmup_mb": before,
        "step_s": float(np.median(times)),
        "iteration": int(trainer.iteration.numpy()),
    }


def data_scaling(sizes: Sequence[int] = (10**4, 10**5, 10**6), **kwargs: int) -> List[Dict]:
    """Peak memory and step time of training on N streamed points, each N in its own process."""
    return [streamed_fit_memory(num_data, **kwargs) for num_data in sizes]


def inducing_scaling(
    inducing: Sequence[int] = (50, 100, 200, 400),
    num_classes: int = 10,
    batch_size: int = 200,
    input_dim: int = 10,
    jit_compile: bool = False,
) -> Dict:
    """The CAVI step's time against M, the exponent of a power law fitted to all of it, and the
    local exponents between consecutive M (B·M² terms dominate while M < B, M³ terms beyond)."""
    rows = [
        {
            "M": M,
            "step_s": _cavi_step_time(
                num_classes, None, batch_size, M, input_dim, jit_compile=jit_compile
            ),
        }
        for M in inducing
    ]
    log_m, log_t = np.log([r["M"] for r in rows]), np.log([r["step_s"] for r in rows])
    slope = np.polyfit(log_m, log_t, 1)[0]
    for row, local in zip(rows[1:], np.diff(log_t) / np.diff(log_m)):
        row["local_exponent"] = float(local)
    return {"rows": rows, "exponent": float(slope), "C": num_classes, "B": batch_size}


def _dense_operations(num_classes: int, batch_size: int, num_inducing: int) -> Callable:
    """The operations no implementation of the step can avoid: C Cholesky factorisations of M×M
    and the C·B·M² products (the precision statistics and the marginal variances)."""
    dtype = default_float()
    rng = np.random.default_rng(0)
    A = tf.constant(rng.normal(size=(1, num_inducing, batch_size)), dtype)
    weights = tf.constant(rng.uniform(size=(num_classes, 1, batch_size)), dtype)
    sqrt = tf.constant(np.tril(rng.normal(size=(num_classes, num_inducing, num_inducing))), dtype)
    eye = tf.eye(num_inducing, dtype=dtype)

    def dense() -> tf.Tensor:
        precision = eye + tf.linalg.matmul(A * weights, A, transpose_b=True)  # C·B·M²
        variances = tf.reduce_sum(tf.square(tf.linalg.matmul(sqrt, A, transpose_a=True)), -2)
        return tf.linalg.cholesky(precision), variances  # C · M³/3

    return dense


def roofline(
    shapes: Sequence[tuple] = ((10, 200, 100), (10, 200, 200), (100, 200, 100)),
    input_dim: int = 10,
) -> List[Dict]:
    """The CAVI step's time against that of its unavoidable dense operations at the same
    (C, B, M), compiled the same way, with and without XLA."""
    rows = []
    for num_classes, batch_size, num_inducing in shapes:
        row = {"C": num_classes, "B": batch_size, "M": num_inducing}
        for jit_compile in (False, True):
            key = "xla" if jit_compile else "graph"
            dense = tf.function(
                _dense_operations(num_classes, batch_size, num_inducing),
                jit_compile=jit_compile,
                autograph=False,
            )
            row[f"dense_{key}_s"] = median_time(dense)
            row[f"step_{key}_s"] = _cavi_step_time(
                num_classes, None, batch_size, num_inducing, input_dim, jit_compile=jit_compile
            )
            row[f"ratio_{key}"] = row[f"step_{key}_s"] / row[f"dense_{key}_s"]
        rows.append(row)
    return rows


def precision_comparison(
    dataset: str = "satimage",
    iterations: int = 300,
    batch_size: int = 200,
    num_inducing: int = 100,
    seed: int = 0,
) -> Dict:
    """The whole ``fit`` (CAVI + Adam, ``jit_compile=True``) in float64 and float32 from the same
    start on a bundled dataset: time per step and how far float32's predictions are from
    float64's."""
    from gpflow_augmented.datasets import load_dataset
    from gpflow_augmented.initialisation import inducing_points, initial_kernel
    from gpflow_augmented.metrics import error_rate

    data = load_dataset(dataset, seed=seed)
    Z = inducing_points(data.X_train, num_inducing, seed=seed)
    results: Dict = {
        "dataset": dataset,
        "iterations": iterations,
        "B": batch_size,
        "M": num_inducing,
    }
    probabilities = {}
    for name, dtype in (("float64", np.float64), ("float32", np.float32)):
        with gpflow.config.as_context(gpflow.config.Config(float=dtype, jitter=1e-6)):
            model = LogisticSoftmaxSVGP(
                initial_kernel(data.X_train),
                Z.astype(dtype),
                data.num_classes,
                num_data=len(data.X_train),
                scheme="negative-multinomial",
            )  # as docs/scale.md's figures
            trainer = Trainer(model, RobbinsMonro(), 0.01, jit_compile=True)
            fit(
                model,
                (data.X_train, data.Y_train),
                iterations=2,
                batch_size=batch_size,
                trainer=trainer,
                seed=seed,
                progress=False,
            )  # compile
            start = time.perf_counter()
            result = fit(
                model,
                (data.X_train, data.Y_train),
                iterations=iterations,
                batch_size=batch_size,
                trainer=trainer,
                seed=seed,
                progress=False,
            )
            seconds = time.perf_counter() - start
            X_test = data.X_test.astype(dtype)
            p = model.predict_y(X_test)[0].numpy().astype(np.float64)
            log_density = model.predict_log_density((X_test, data.Y_test)).numpy()
        probabilities[name] = p
        results[name] = {
            "step_s": seconds / iterations,
            "final_elbo": float(result.elbo[-1]),
            "error": float(error_rate(p, data.Y_test)),
            "nll": float(-np.mean(log_density)),
        }
    results["float32_speedup"] = results["float64"]["step_s"] / results["float32"]["step_s"]
    results["max_abs_dp"] = float(np.abs(probabilities["float64"] - probabilities["float32"]).max())
    results["mean_abs_dp"] = float(
        np.abs(probabilities["float64"] - probabilities["float32"]).mean()
    )
    return results


def run_scaling(output: Optional[str] = None, quick: bool = False) -> Dict:
    """Every measurement above, side by side in one run; with ``output``, writes scale.json and
    the Markdown tables scale.md there. ``quick`` uses smaller sizes (a smoke test)."""
    if quick:
        results = {
            "classes": class_scaling((10, 20), subset_size=5, batch_size=50, num_inducing=20),
            "data": data_scaling((10**3,), steps=3, batch_size=100, num_inducing=10),
            "inducing": inducing_scaling((10, 20), num_classes=3, batch_size=50),
            "precision": precision_comparison(
                "wine", iterations=10, batch_size=50, num_inducing=10
            ),
            "roofline": roofline(((3, 50, 10),)),
        }
    else:
        results = {
            "classes": class_scaling(),
            "data": data_scaling(),
            "inducing": inducing_scaling(),
            "precision": precision_comparison(),
            "roofline": roofline(),
        }
    if output is not None:
        folder = Path(output)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "scale.json").write_text(json.dumps(results, indent=2))
        (folder / "scale.md").write_text(scaling_report(results))
    return results


def scaling_report(results: Dict) -> str:
    """The Markdown tables of :func:`run_scaling`'s results."""
    lines = [
        "Compiled CAVI steps (`tf.function`, no XLA unless stated), medians; "
        "synthetic Gaussian-mixture data, D = 10, one SE kernel shared by all classes.",
        "",
        "### Step time against the number of classes (class subsets, B = 200, M = 100)",
        "",
        "| C | \\|K\\| | step with \\|K\\| classes | ratio to C = "
        f"{results['classes'][0]['C']} | step with all C classes |",
        "|---|---|---|---|---|",
    ]
    for r in results["classes"]:
        lines.append(
            f"| {r['C']} | {r['K']} | {1e3 * r['subset_step_s']:.1f} ms | "
            f"{r['subset_ratio']:.2f} | {1e3 * r['all_classes_step_s']:.1f} ms |"
        )
    lines += [
        "",
        "### Streamed training against N",
        "",
        "| N | peak memory (process) | median step |",
        "|---|---|---|",
    ]
    for r in results["data"]:
        lines.append(f"| {r['N']:,} | {r['peak_rss_mb']:.0f} MB | {1e3 * r['step_s']:.1f} ms |")
    inducing = results["inducing"]
    lines += [
        "",
        f"### Step time against M (C = {inducing['C']}, B = {inducing['B']}): "
        f"fitted exponent {inducing['exponent']:.2f}",
        "",
        "| M | step | local exponent (from the previous M) |",
        "|---|---|---|",
    ]
    for r in inducing["rows"]:
        local = f"{r['local_exponent']:.2f}" if "local_exponent" in r else "-"
        lines.append(f"| {r['M']} | {1e3 * r['step_s']:.1f} ms | {local} |")
    p = results["precision"]
    lines += [
        "",
        f"### float32 against float64 (`fit`, XLA, {p['dataset']}, "
        f"{p['iterations']} steps, B = {p['B']}, M = {p['M']})",
        "",
        "| precision | step | final minibatch ELBO | test error | test NLL |",
        "|---|---|---|---|---|",
    ]
    for name in ("float64", "float32"):
        r = p[name]
        lines.append(
            f"| {name} | {1e3 * r['step_s']:.1f} ms | {r['final_elbo']:.1f} | "
            f"{r['error']:.4f} | {r['nll']:.4f} |"
        )
    lines += [
        "",
        f"float32 speed-up {p['float32_speedup']:.2f}×; predictive probabilities "
        f"differ by {p['max_abs_dp']:.2e} at most ({p['mean_abs_dp']:.2e} on average).",
        "",
        "### Roofline: the step against its unavoidable dense operations",
        "",
        "| C | B | M | dense ops (graph) | step (graph) | ratio | dense ops (XLA) | "
        "step (XLA) | ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["roofline"]:
        lines.append(
            f"| {r['C']} | {r['B']} | {r['M']} | {1e3 * r['dense_graph_s']:.2f} ms | "
            f"{1e3 * r['step_graph_s']:.2f} ms | {r['ratio_graph']:.1f} | "
            f"{1e3 * r['dense_xla_s']:.2f} ms | {1e3 * r['step_xla_s']:.2f} ms | "
            f"{r['ratio_xla']:.1f} |"
        )
    return "\n".join(lines) + "\n"
