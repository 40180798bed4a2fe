"""Seconds per step and peak memory of the full-GP method ``rmgpc`` on N rows of segment (C = 7),
the measurement behind ``baselines.FULL_GP_MAX_POINTS`` (docs/benchmarks.md, "rmgpc's size limit").
Run one process per N, so that each peak is its own:

    python tools/rmgpc_size.py 1000 --data-dir ../shared/data

The method is built by ``baselines.build_method`` as ``compare`` builds it; one traced step, then
the median of three.
"""

import argparse
import resource
import time

import numpy as np
import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.comparison.baselines import build_method

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("num_data", type=int)
parser.add_argument("--data-dir", required=True)
args = parser.parse_args()

dataset = ga.datasets.load_dataset("segment", args.data_dir)
rng = np.random.default_rng(0)
rows = rng.choice(len(dataset.X_train), args.num_data, replace=args.num_data > len(dataset.X_train))
X, Y = dataset.X_train[rows], dataset.Y_train[rows]
if args.num_data > len(
    dataset.X_train
):  # rows drawn twice, moved apart so that K stays positive definite
    X = X + 1e-3 * rng.standard_normal(X.shape)
method = build_method(
    "rmgpc", ga.initial_kernel(X), X[:5], dataset.num_classes, len(X), full_batch=True, data=(X, Y)
)
X_tensor, Y_tensor = tf.constant(X), tf.constant(Y)
method.step(X_tensor, Y_tensor)  # traced
seconds = []
for _ in range(3):
    start = time.perf_counter()
    method.step(X_tensor, Y_tensor)
    seconds.append(time.perf_counter() - start)
print(
    f"N={len(X)} C={dataset.num_classes}: {np.median(seconds):.2f} s per step, peak RSS "
    f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2:.2f} GiB, "
    f"{method.failed_steps} failed steps"
)
