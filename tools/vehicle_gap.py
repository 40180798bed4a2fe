"""The vehicle gap diagnosis of docs/benchmarks.md ("Where vehicle's gap to `sep` comes from"):
`sep` and `lsm` iteration-matched on the same minibatches (M = 100, B = 200, seed 0), then `lsm` at
`sep`'s lengthscales, then q(u) and σ² refit at both lengthscale sets with the exact ELBO reported.
Writes <dataset>_lengthscales.npz for tools/vehicle_variance_sweep.py.

    python tools/vehicle_gap.py vehicle 3000 exp 0.01 [DATA_DIR]
"""

import sys
import time

import numpy as np
import gpflow
import tensorflow as tf
import gpflow_augmented as ga
from gpflow_augmented.comparison.baselines import build_method, positive_parameters
from gpflow_augmented.comparison.protocol import MinibatchStream

name = sys.argv[1] if len(sys.argv) > 1 else "vehicle"
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
bij = sys.argv[3] if len(sys.argv) > 3 else "exp"
lr = float(sys.argv[4]) if len(sys.argv) > 4 else 0.01
d = ga.datasets.load_dataset(name, data_dir=sys.argv[5] if len(sys.argv) > 5 else None)
X, Y, Xt, Yt = d.X_train, d.Y_train, d.X_test, d.Y_test
C = d.num_classes
Z = ga.inducing_points(X, 100, seed=0)
stream = MinibatchStream(len(X), 200, 0)


def nll(model):
    p = model.predict_y(Xt)[0].numpy()
    p = p / p.sum(1, keepdims=True)
    return float(-np.mean(np.log(np.take_along_axis(p, Yt.astype(int), 1)))), float(
        np.mean(p.argmax(1) != Yt[:, 0])
    )


def train(method_name, fixed_lengthscales=None):
    tf.random.set_seed(0)
    with positive_parameters(bij):
        kernel = ga.initial_kernel(X)
        m = build_method(method_name, kernel, Z, C, len(X), learning_rate=lr)
    if fixed_lengthscales is not None:
        m.model.kernel.lengthscales.assign(fixed_lengthscales)
        gpflow.set_trainable(m.model.kernel.lengthscales, False)
        if hasattr(m, "trainer"):
            m.trainer = ga.Trainer(
                m.model, ga.RobbinsMonro(), lr, warm_start_iterations=ga.EXACT_WARM_START
            )
    t = time.time()
    for it in range(iters):
        idx = stream.indices(it)
        m.step(tf.constant(X[idx]), tf.constant(Y[idx]))
    return m, time.time() - t


def exact_elbo_refit(model):
    # q(u) and the variance at their optimum for these lengthscales: damped full-batch steps
    # no warm start, as when docs/benchmarks.md's figures were measured
    cavi = ga.CAVI(model, 0.5, update_variance=True, warm_start_iterations=0)
    for _ in range(300):
        cavi.step((X, Y))
    return float(model.elbo((X, Y)))


for label, m_name, ls in [("sep", "sep", None), ("lsm", "lsm", None)]:
    m, secs = train(m_name, ls)
    k = m.model.kernel
    print(
        f"{label}: {secs:.0f}s NLL/err {nll(m.model)} var {float(k.variance.numpy()):.3g} "
        f"ls gm {np.exp(np.mean(np.log(k.lengthscales.numpy()))):.3g}",
        flush=True,
    )
    if label == "sep":
        sep_ls = k.lengthscales.numpy().copy()
    else:
        lsm_model = m.model
lsm_ls = lsm_model.kernel.lengthscales.numpy().copy()
m_sepls, secs = train("lsm", sep_ls)
print(
    f"lsm at sep's lengthscales: NLL/err {nll(m_sepls.model)} "
    f"var {float(m_sepls.model.kernel.variance.numpy()):.3g}",
    flush=True,
)
e_own = exact_elbo_refit(lsm_model)
n_own = nll(lsm_model)
e_sep = exact_elbo_refit(m_sepls.model)
n_sep = nll(m_sepls.model)
print(
    f"refit q(u), variance: own lengthscales ELBO {e_own:.2f} NLL {n_own} "
    f"var {float(lsm_model.kernel.variance.numpy()):.3g}"
)
print(
    f"refit q(u), variance: sep lengthscales ELBO {e_sep:.2f} NLL {n_sep} "
    f"var {float(m_sepls.model.kernel.variance.numpy()):.3g}"
)
np.savez(f"{name}_lengthscales.npz", sep=sep_ls, lsm=lsm_ls)
