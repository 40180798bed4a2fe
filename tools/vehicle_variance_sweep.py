"""The kernel-variance sweep of docs/benchmarks.md: at fixed lengthscales (`sep`'s and `lsm`'s, from
tools/vehicle_gap.py's vehicle_lengthscales.npz), q(u) converged by 300 full-batch steps at each σ²;
exact ELBO and test NLL.

    python tools/vehicle_gap.py vehicle 3000 exp 0.01 && python tools/vehicle_variance_sweep.py
"""

import numpy as np
import gpflow
import gpflow_augmented as ga

d = ga.datasets.load_dataset("vehicle")
X, Y, Xt, Yt = d.X_train, d.Y_train.astype(np.int64), d.X_test, d.Y_test
ls = np.load("vehicle_lengthscales.npz")
Z = ga.inducing_points(X, 100, seed=0)


def nll(model):
    p = model.predict_y(Xt)[0].numpy()
    p = p / p.sum(1, keepdims=True)
    return float(-np.mean(np.log(np.take_along_axis(p, Yt.astype(int), 1)))), float(
        np.mean(p.argmax(1) != Yt[:, 0])
    )


for name in ["sep", "lsm"]:
    for variance in [10.0, 100.0, 1e3, 1e4, 1e5]:
        kernel = gpflow.kernels.SquaredExponential(variance=variance, lengthscales=ls[name])
        model = ga.LogisticSoftmaxSVGP(
            kernel,
            Z.copy(),
            4,
            num_data=len(X),
            scheme="exact",
            mean_function=gpflow.mean_functions.Constant(),
        )
        cavi = ga.CAVI(model, 1.0, warm_start_iterations=50)
        for _ in range(300):
            e = cavi.step((X, Y))
        print(
            f"{name} lengthscales, σ² {variance:g}: ELBO {float(e):.2f} NLL/err {nll(model)}",
            flush=True,
        )
