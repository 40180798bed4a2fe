"""The default model left running (issue 55): ``fit`` at its defaults on a dataset (an ``.npz`` with
``X`` and ``y``, optionally a random sample of its rows), the test error and NLL every ``--every``
steps, and the stability property: after the first 10 % of the run the error never rises more
than 0.01 above the best error so far, and the final NLL is within 10 % of the best along the run.

``--without-mean-sites`` runs the broken variant: q(u)'s mean steps on the exact sites
(``ExactBound.mean_sites`` returns ``None``), as before the mean's curvature was raised.

    python tools/stability_trace.py ../shared/data/kddcup.npz --rows 100000 --iterations 600 \\
        --every 100

Prints the trace as a Markdown table row by row (step, error, NLL, kernel variance) and the
property's verdict with the run's ``TrainingReport``.
"""

import argparse
import sys
import time
from pathlib import Path

# The benchmark studies (benchmarks/) sit beside tools/ at the repository's root, outside the wheel.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpflow
import numpy as np
import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.bounds import ExactBound
from benchmarks.stability import subsample

MAX_ERROR_RISE = 0.01
MAX_NLL_RATIO = 1.1


def sampled(path: str, rows: int, seed: int) -> ga.datasets.Dataset:
    """The dataset at ``path``, or ``rows`` of its rows (:func:`subsample`), split with ``seed``."""
    data = np.load(path, allow_pickle=True)
    X, y = data["X"], data["y"]
    if rows:
        X, y = subsample(X, y, rows, seed)
    return ga.datasets.from_arrays("data", X, y, seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("data", help="an .npz with X and y")
    parser.add_argument("--rows", type=int, default=0, help="a random sample of this many rows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=600)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--num-inducing", type=int, default=100)
    parser.add_argument("--test-points", type=int, default=20000)
    parser.add_argument("--without-mean-sites", action="store_true")
    args = parser.parse_args()
    if args.without_mean_sites:
        ExactBound.mean_sites = lambda self, *_: None  # type: ignore[method-assign]
    dataset = sampled(args.data, args.rows, args.seed)
    tf.random.set_seed(args.seed)
    model = ga.LogisticSoftmaxSVGP(
        ga.initial_kernel(dataset.X_train),
        ga.inducing_points(dataset.X_train, args.num_inducing, seed=args.seed),
        dataset.num_classes,
        num_data=len(dataset.X_train),
        mean_function=gpflow.mean_functions.Constant(),
    )
    test = (dataset.X_test[: args.test_points], dataset.Y_test[: args.test_points])
    print(f"{len(dataset.X_train)} training points, C = {dataset.num_classes}, seed {args.seed}")
    print("| step | seconds | error | NLL | σ² |\n|---|---|---|---|---|")
    trace = []
    start = time.perf_counter()

    def measure(step: int, model: ga.LogisticSoftmaxSVGP, elbo: float) -> None:
        if step % args.every:
            return
        error = ga.metrics.error_rate(model.predict_y(test[0])[0].numpy(), test[1])
        nll = ga.metrics.mean_nll(model.predict_log_density(test).numpy())
        variance = float(model.kernel.variance.numpy())
        trace.append((error, nll))
        seconds = time.perf_counter() - start
        print(f"| {step} | {seconds:.0f} | {error:.4f} | {nll:.4f} | {variance:.3g} |", flush=True)

    train = (dataset.X_train, dataset.Y_train)
    result = ga.fit(
        model,
        train,
        iterations=args.iterations,
        batch_size=args.batch_size,
        callback=measure,
        seed=args.seed,
        progress=False,
    )
    errors, nlls = np.array(trace).T
    begin = len(errors) // 10
    rise = float(np.max(errors[begin:] - np.minimum.accumulate(errors)[begin:]))
    ratio = float(nlls[-1] / nlls.min())
    holds = rise <= MAX_ERROR_RISE and ratio <= MAX_NLL_RATIO
    print(
        f"largest rise of the error above its best: {rise:.4f}; final NLL / best: {ratio:.3f}; "
        f"the property {'holds' if holds else 'fails'}. {result.report}"
    )


if __name__ == "__main__":
    main()
