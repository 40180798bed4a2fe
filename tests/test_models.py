"""The models as GPflow models. What a GPflow user does with any GPflow model works on this one:
Scipy on ``training_loss_closure``, ``print_summary``, and predictions with GPflow's shapes.

A prior mean function (GPflow's ``mean_function``) in the closed-form models: the marginals, the
ELBO and the predictions include it, and the step's sites are re-expressed in f minus the mean, so
the fixed point is still the optimum of the bound."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from helpers import make_problem, variational_gradient_norm


@pytest.fixture(scope="module")
def trained():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    Y = (X[:, :1] > 0).astype(np.int64) + (X[:, 1:] > 0.5)  # three classes
    model = ga.LogisticSoftmaxSVGP(
        gpflow.kernels.SquaredExponential(), X[::6].copy(), 3, num_data=len(X)
    )
    ga.fit(model, (X, Y), iterations=40, batch_size=None, progress=False)
    return model, X, Y


@pytest.mark.slow
def test_scipy_on_the_training_loss_closure_lowers_the_loss(trained):
    model, X, Y = trained
    model = gpflow.utilities.deepcopy(model)
    closure = model.training_loss_closure((X, Y))
    before = float(closure())
    result = gpflow.optimizers.Scipy().minimize(
        closure, model.trainable_variables, options={"maxiter": 20}
    )
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


# -- a prior mean function ------------------------------------------------------------------


def with_constant_mean(scheme, c=-2.5, whiten=True):
    return make_problem(
        50,
        3,
        num_inducing=10,
        seed=3,
        variance=2.0,
        scheme=scheme,
        whiten=whiten,
        mean_function=gpflow.mean_functions.Constant(np.array([c])),
    )


@pytest.mark.slow
def test_exact_elbo_and_predictions_equal_stock_svgp_with_the_same_mean():
    model, data = with_constant_mean("exact")
    ga.CAVI(model, 0.7, warm_start_iterations=3).iterate(data, 5)  # a q(u) that is not the prior
    svgp = gpflow.models.SVGP(
        model.kernel,
        ga.LogisticSoftmax(3),
        model.inducing_variable.Z.numpy(),
        num_latent_gps=3,
        num_data=50,
        whiten=True,
        mean_function=model.mean_function,
        q_mu=model.q_mu.numpy(),
        q_sqrt=model.q_sqrt.numpy(),
    )
    np.testing.assert_allclose(float(model.elbo(data)), float(svgp.elbo(data)), rtol=1e-10)
    for ours, stock in zip(model.predict_f(data[0]), svgp.predict_f(data[0])):
        np.testing.assert_allclose(ours.numpy(), stock.numpy(), rtol=1e-10, atol=1e-12)
    geometry = model.batch_geometry(tf.constant(data[0]))
    np.testing.assert_allclose(
        geometry.marginals.mean.numpy(), model.predict_f(data[0])[0].numpy(), rtol=1e-10, atol=1e-12
    )


class ForgetsTheMean(ga.CAVI):
    """A deliberately wrong step: it feeds the sites in f to q(u) over f - μ."""

    def _step_from_sites(self, geometry, Y, local_elbo, linear, quadratic, *rest):
        forgotten = linear + quadratic * geometry.prior_mean
        return super()._step_from_sites(geometry, Y, local_elbo, forgotten, quadratic, *rest)


@pytest.mark.parametrize(
    "scheme,whiten", [("exact", True), ("negative-multinomial", True), ("exact", False)]
)
@pytest.mark.slow
def test_fixed_point_with_a_mean_has_zero_gradient_and_forgetting_it_does_not(scheme, whiten):
    warm_start = 10 if scheme == "exact" else 0
    model, data = with_constant_mean(scheme, whiten=whiten)
    start = variational_gradient_norm(model, data)
    ga.CAVI(model, 1.0, warm_start_iterations=warm_start).iterate(data, 80)
    assert start > 1.0 and variational_gradient_norm(model, data) < 1e-8 * start

    broken, _ = with_constant_mean(scheme, whiten=whiten)
    ForgetsTheMean(broken, 1.0, warm_start_iterations=warm_start).iterate(data, 80)
    assert variational_gradient_norm(broken, data) > 1e-2 * start
