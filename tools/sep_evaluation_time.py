"""The test-metric evaluation of a letter-sized `sep` model (C = 26, D = 16, M = 100, 2000 points):
the probabilities and log densities from one Gauss–Hermite integral (the model's
predict_y_and_log_density, what Evaluator uses) against two (predict_y and predict_log_density
separately, as before 0c77d06). Both paths in one process, alternated twice; medians of three.

    python tools/sep_evaluation_time.py
"""

import time

import gpflow
import numpy as np

from gpflow_augmented.comparison.sep import HeavisideSEP
from gpflow_augmented.metrics import Evaluator

rng = np.random.default_rng(0)
N, D, C, M = 2000, 16, 26, 100
X, Y = rng.normal(size=(N, D)), rng.integers(0, C, (N, 1))
model = HeavisideSEP(
    gpflow.kernels.SquaredExponential(lengthscales=np.full(D, 4.0)), X[:M], C, num_data=N
)


class TwoIntegrals:
    """The model without predict_y_and_log_density: Evaluator calls its two predictions."""

    predict_y = staticmethod(model.predict_y)
    predict_log_density = staticmethod(model.predict_log_density)


for name, target in [("one integral", model), ("two integrals", TwoIntegrals())] * 2:
    evaluator = Evaluator(X, Y)
    started = time.perf_counter()
    evaluator.predictions(target)
    first = time.perf_counter() - started
    times = []
    for _ in range(3):
        started = time.perf_counter()
        evaluator.predictions(target)
        times.append(time.perf_counter() - started)
    print(
        f"{name}: first call (with tracing) {first:.2f} s, then median {np.median(times):.2f} s "
        f"per {N}-point evaluation"
    )
