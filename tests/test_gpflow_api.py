"""What a GPflow user does with any GPflow model works on this one: Scipy on
``training_loss_closure``, ``print_summary``, and predictions with GPflow's shapes."""
import gpflow
import numpy as np
import pytest

import gpflow_augmented as ga


@pytest.fixture(scope="module")
def trained():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    Y = (X[:, :1] > 0).astype(np.int64) + (X[:, 1:] > 0.5)  # three classes
    model = ga.LogisticSoftmaxSVGP(gpflow.kernels.SquaredExponential(), X[::6].copy(), 3,
                                   num_data=len(X))
    ga.fit(model, (X, Y), iterations=40, batch_size=None, progress=False)
    return model, X, Y


def test_scipy_on_the_training_loss_closure_lowers_the_loss(trained):
    model, X, Y = trained
    model = gpflow.utilities.deepcopy(model)
    closure = model.training_loss_closure((X, Y))
    before = float(closure())
    result = gpflow.optimizers.Scipy().minimize(closure, model.trainable_variables,
                                                options={"maxiter": 20})
    assert np.isfinite(result.fun) and result.fun < before - 1e-3
    # Scipy moved the hyperparameters only: q(u) belongs to CAVI.
    names = {v.name.split(":")[0] for v in model.trainable_variables}
    assert not any("q_mu" in n or "q_sqrt" in n for n in names)


def test_print_summary_lists_q_and_the_hyperparameters(trained, capsys):
    model, _, _ = trained
    gpflow.utilities.print_summary(model)
    printed = capsys.readouterr().out
    for name in ("kernel.lengthscales", "kernel.variance", "q_mu", "q_sqrt"):
        assert name in printed


def test_predictions_have_gpflows_shapes(trained):
    model, X, Y = trained
    mean, variance = model.predict_f(X[:7])
    assert mean.shape == (7, 3) and variance.shape == (7, 3)
    _, full = model.predict_f(X[:7], full_cov=True)
    assert full.shape == (3, 7, 7)
    probabilities, _ = model.predict_y(X[:7])
    assert probabilities.shape == (7, 3)
    log_density = model.predict_log_density((X[:7], Y[:7]))
    assert log_density.shape == (7,)
    assert np.all(np.isfinite(log_density.numpy())) and np.all(log_density.numpy() < 0)
