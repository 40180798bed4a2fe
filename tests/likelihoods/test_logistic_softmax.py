"""LogisticSoftmax as a stand-alone GPflow likelihood."""

import gpflow
import numpy as np
from scipy.special import expit

import gpflow_augmented as ga
from helpers import make_problem


def test_log_prob_matches_numpy():
    rng = np.random.default_rng(0)
    F = rng.normal(scale=5, size=(7, 4))
    Y = rng.integers(0, 4, (7, 1))
    p = expit(F) / expit(F).sum(1, keepdims=True)
    got = ga.LogisticSoftmax(4).log_prob(None, F, Y).numpy()
    np.testing.assert_allclose(got, np.log(p[np.arange(7), Y[:, 0]]), rtol=1e-12)
    assert np.all(
        np.isfinite(
            ga.LogisticSoftmax(2).log_prob(None, np.array([[1e4, -1e4]]), np.array([[1]])).numpy()
        )
    )


def test_predictions_match_brute_force_monte_carlo():
    """Against 400 000 plain Monte Carlo draws, with tolerances from their own standard errors
    (4.5 of them: a correct implementation fails with probability < 1e-4 per entry). The
    quasi-Monte Carlo predictions use 2¹⁶ points here, so their own error (~1e-5) is negligible;
    the variational expectation is a quadrature whose stated error is 1e-4 nats."""
    rng = np.random.default_rng(1)
    Fmu, Fvar = rng.normal(size=(5, 3)), rng.uniform(0.1, 3, (5, 3))
    Y = rng.integers(0, 3, (5, 1))
    lik = ga.LogisticSoftmax(3, num_predictive_samples=2**16)
    p, _ = lik.predict_mean_and_var(None, Fmu, Fvar)
    F = Fmu + np.sqrt(Fvar) * rng.normal(size=(400_000, 5, 3))
    draws = expit(F) / expit(F).sum(-1, keepdims=True)  # [S, N, C]
    brute, error = draws.mean(0), draws.std(0) / np.sqrt(len(F))
    assert np.all(np.abs(p.numpy() - brute) < 4.5 * error + 1e-5)
    observed = draws[:, np.arange(5), Y[:, 0]]  # p(y_n | f) per draw
    log_density = lik.predict_log_density(None, Fmu, Fvar, Y).numpy()
    # delta method: the standard error of log(mean) is se(mean) / mean
    log_error = observed.std(0) / np.sqrt(len(F)) / observed.mean(0)
    assert np.all(np.abs(log_density - np.log(observed.mean(0))) < 4.5 * log_error + 1e-5)
    log_p = np.log(observed)
    expected, expected_error = log_p.mean(0), log_p.std(0) / np.sqrt(len(F))
    got = lik.variational_expectations(None, Fmu, Fvar, Y).numpy()
    assert np.all(np.abs(got - expected) < 4.5 * expected_error + 1e-4)
    assert expected_error.max() < 5e-3  # the check is far tighter than the old atol of 1e-2


def test_variational_expectations_are_deterministic():
    lik = ga.LogisticSoftmax(3)
    args = (None, np.zeros((2, 3)), np.ones((2, 3)), np.zeros((2, 1), int))
    np.testing.assert_array_equal(
        lik.variational_expectations(*args), lik.variational_expectations(*args)
    )


def test_works_inside_stock_svgp():
    model, (X, Y) = make_problem(40, 3, num_inducing=8)
    svgp = gpflow.models.SVGP(
        model.kernel, ga.LogisticSoftmax(3), model.inducing_variable, num_latent_gps=3, num_data=40
    )
    loss = svgp.training_loss_closure((X, Y))
    before = float(loss())
    gpflow.optimizers.Scipy().minimize(loss, svgp.trainable_variables, options=dict(maxiter=50))
    assert float(loss()) < before
