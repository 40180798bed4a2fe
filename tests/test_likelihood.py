"""LogisticSoftmax as a stand-alone GPflow likelihood."""
import gpflow
import numpy as np
from scipy.special import expit

import gpflow_augmented as ga


def test_log_prob_matches_numpy():
    rng = np.random.default_rng(0)
    F = rng.normal(scale=5, size=(7, 4))
    Y = rng.integers(0, 4, (7, 1))
    p = expit(F) / expit(F).sum(1, keepdims=True)
    got = ga.LogisticSoftmax(4).log_prob(None, F, Y).numpy()
    np.testing.assert_allclose(got, np.log(p[np.arange(7), Y[:, 0]]), rtol=1e-12)
    assert np.all(np.isfinite(ga.LogisticSoftmax(2).log_prob(None, np.array([[1e4, -1e4]]),
                                                             np.array([[1]])).numpy()))


def test_predictions_match_brute_force_monte_carlo():
    rng = np.random.default_rng(1)
    Fmu, Fvar = rng.normal(size=(5, 3)), rng.uniform(0.1, 3, (5, 3))
    Y = rng.integers(0, 3, (5, 1))
    lik = ga.LogisticSoftmax(3)
    p, _ = lik.predict_mean_and_var(None, Fmu, Fvar)
    F = Fmu + np.sqrt(Fvar) * rng.normal(size=(400_000, 5, 3))
    brute = (expit(F) / expit(F).sum(-1, keepdims=True)).mean(0)
    np.testing.assert_allclose(p.numpy(), brute, atol=3e-3)  # QMC error with 1000 points
    np.testing.assert_allclose(
        lik.predict_log_density(None, Fmu, Fvar, Y).numpy(), np.log(brute[np.arange(5), Y[:, 0]]),
        atol=1e-2)
    log_p = np.log(expit(F) / expit(F).sum(-1, keepdims=True))[..., np.arange(5), Y[:, 0]].mean(0)
    np.testing.assert_allclose(lik.variational_expectations(None, Fmu, Fvar, Y).numpy(),
                               log_p, atol=1e-2)


def test_variational_expectations_are_deterministic():
    lik = ga.LogisticSoftmax(3)
    args = (None, np.zeros((2, 3)), np.ones((2, 3)), np.zeros((2, 1), int))
    np.testing.assert_array_equal(lik.variational_expectations(*args), lik.variational_expectations(*args))


def test_works_inside_stock_svgp():
    model, (X, Y) = __import__("conftest").make_problem(40, 3, num_inducing=8)
    svgp = gpflow.models.SVGP(model.kernel, ga.LogisticSoftmax(3), model.inducing_variable,
                              num_latent_gps=3, num_data=40)
    loss = svgp.training_loss_closure((X, Y))
    before = float(loss())
    gpflow.optimizers.Scipy().minimize(loss, svgp.trainable_variables, options=dict(maxiter=50))
    assert float(loss()) < before
    p, _ = svgp.predict_y(X)
    np.testing.assert_allclose(p.numpy().sum(1), 1.0, rtol=1e-10)
