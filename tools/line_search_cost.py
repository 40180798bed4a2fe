"""docs/benchmarks.md, "The full-batch step, line-searched": the minibatch step's cost with and
without the line search (vehicle, B = 200, 60 batches × 5 interleaved repetitions in one process,
median ms), and a full-batch `fit` at its defaults (its smallest ELBO rise after the warm start).

    python tools/line_search_cost.py
"""

import time
import numpy as np
import gpflow
import gpflow_augmented as ga
from gpflow_augmented.cavi import CAVI

d = ga.datasets.load_dataset("vehicle")
X, Y = d.X_train, d.Y_train.astype(np.int64)
original = CAVI._searches_line


def never(self, geometry):
    return False


def build(searched):
    CAVI._searches_line = original if searched else never
    m = ga.LogisticSoftmaxSVGP(
        ga.initial_kernel(X), ga.inducing_points(X, 100, seed=0), 4, num_data=len(X), scheme="exact"
    )
    gpflow.set_trainable(m.inducing_variable, False)
    t = ga.Trainer(m, ga.RobbinsMonro(), 0.01)
    return t


trainers = {s: build(s) for s in (True, False)}
rng = np.random.default_rng(0)
batches = [rng.choice(len(X), 200, replace=False) for _ in range(60)]
for s, t in trainers.items():
    CAVI._searches_line = original if s else never
    t.step((X[batches[0]], Y[batches[0]]))  # trace
times = {True: [], False: []}
for rep in range(5):
    for s, t in trainers.items():
        t0 = time.perf_counter()
        for b in batches:
            t.step((X[b], Y[b]))
        times[s].append((time.perf_counter() - t0) / len(batches) * 1e3)
med = {s: np.median(v) for s, v in times.items()}
print(
    "minibatch ms/step searched %.2f unsearched %.2f ratio %.3f"
    % (med[True], med[False], med[True] / med[False]),
    {s: np.round(v, 2) for s, v in times.items()},
)
CAVI._searches_line = original
m = ga.LogisticSoftmaxSVGP(
    ga.initial_kernel(X), ga.inducing_points(X, 100, seed=0), 4, num_data=len(X), scheme="exact"
)
r = ga.fit(m, (X, Y), batch_size=None, iterations=300, progress=False)
e = r.elbo
print(
    "fit full batch: min diff after warm start",
    np.diff(e[50:]).min(),
    "final",
    e[-1],
    "variance",
    float(m.kernel.variance.numpy()),
)
