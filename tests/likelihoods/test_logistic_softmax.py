"""LogisticSoftmax as a stand-alone GPflow likelihood."""

import gpflow
import numpy as np
import pytest
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
    lik = ga.LogisticSoftmax(3, num_predictive_samples=2**16, predictive="mean")
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


def _geometric_mean_reference(Fmu, Fvar, log_weights, rng):
    """exp E log p(y = k | f) normalised over k, E by 400 000 plain Monte Carlo draws of f, and
    the standard error of each E log p."""
    F = Fmu + np.sqrt(Fvar) * rng.normal(size=(400_000,) + Fmu.shape)
    log_weighted = -np.logaddexp(0.0, -F) + log_weights
    log_p = log_weighted - np.log(np.exp(log_weighted).sum(-1, keepdims=True))
    expected = log_p.mean(0)
    reference = np.exp(expected) / np.exp(expected).sum(-1, keepdims=True)
    return reference, log_p.std(0) / np.sqrt(len(F))


@pytest.mark.parametrize("weighted", [False, True])
def test_the_geometric_mean_predictive_matches_monte_carlo(weighted):
    """The definition, normaliser and class weights included, against a Monte Carlo E log p(y = k
    | f): log p̂_k is a difference of such expectations, so 4.5 standard errors of each, doubled,
    bound its error."""
    rng = np.random.default_rng(2)
    Fmu, Fvar = rng.normal(scale=2.0, size=(5, 3)), rng.uniform(0.1, 3.0, (5, 3))
    Y = rng.integers(0, 3, (5, 1))
    lik = ga.LogisticSoftmax(3, predictive="geometric-mean", class_weights=weighted)
    log_weights = np.zeros(3)
    if weighted:
        lik.class_weights.assign([0.5, 1.0, 3.0])
        log_weights = np.log([0.5, 1.0, 3.0])
    reference, error = _geometric_mean_reference(Fmu, Fvar, log_weights, rng)
    p, var = lik.predict_mean_and_var(None, Fmu, Fvar)
    np.testing.assert_allclose(np.log(p.numpy()), np.log(reference), atol=9.0 * error.max())
    np.testing.assert_allclose(var.numpy(), p.numpy() * (1.0 - p.numpy()), rtol=1e-12)
    log_density = lik.predict_log_density(None, Fmu, Fvar, Y).numpy()
    np.testing.assert_allclose(log_density, np.log(p.numpy()[np.arange(5), Y[:, 0]]), rtol=1e-12)


def _quadrature_reference(Fmu, Fvar):
    """θ = 1: p̂_k ∝ exp E log σ(f_k), the class-independent normaliser cancelled, each E by
    adaptive quadrature (scipy's QUADPACK, independent of the Gauss–Hermite rule)."""
    from scipy import integrate, stats

    def expected_log_sigmoid(mu, var):
        def integrand(f):
            return -np.logaddexp(0.0, -f) * stats.norm.pdf(f, mu, np.sqrt(var))

        width = 12.0 * np.sqrt(var)
        return integrate.quad(integrand, mu - width, mu + width, epsabs=1e-12, limit=200)[0]

    expected = np.vectorize(expected_log_sigmoid)(Fmu, Fvar)
    return np.exp(expected) / np.exp(expected).sum(-1, keepdims=True)


def _quadrature_problem():
    rng = np.random.default_rng(4)
    return rng.normal(scale=3.0, size=(4, 3)), rng.uniform(0.1, 6.0, (4, 3))


def test_the_geometric_mean_predictive_matches_quadrature():
    """To 1e-8: the 40-node Gauss–Hermite rule integrates log σ(f), smooth and nearly linear in
    its tails, far more accurately than that at Var f ≤ 6."""
    Fmu, Fvar = _quadrature_problem()
    reference = _quadrature_reference(Fmu, Fvar)
    p, _ = ga.LogisticSoftmax(3, predictive="geometric-mean").predict_mean_and_var(None, Fmu, Fvar)
    np.testing.assert_allclose(p.numpy(), reference, atol=1e-8)
    # The posterior-predictive mean, the default, is another quantity: less confident where Var f
    # is large.
    mean_rule, _ = ga.LogisticSoftmax(3, predictive="mean").predict_mean_and_var(None, Fmu, Fvar)
    assert np.max(np.abs(mean_rule.numpy() - reference)) > 1e-2
    default, _ = ga.LogisticSoftmax(3).predict_mean_and_var(None, Fmu, Fvar)
    np.testing.assert_array_equal(default.numpy(), mean_rule.numpy())


def test_a_wrong_geometric_mean_is_caught(monkeypatch):
    """log E σ(f) in place of E log σ(f), the quantity the mean rule averages, is caught."""
    import gpflow_augmented.likelihoods.logistic_softmax as module

    def log_of_mean(Fmu, Fvar, num_hermite=40):
        z, w = np.polynomial.hermite_e.hermegauss(num_hermite)
        f = np.asarray(Fmu)[..., None] + np.sqrt(np.asarray(Fvar))[..., None] * z
        return np.log((expit(f) * w).sum(-1) / w.sum())

    Fmu, Fvar = _quadrature_problem()
    reference = _quadrature_reference(Fmu, Fvar)
    monkeypatch.setattr(module, "expected_log_sigmoid", log_of_mean)
    p, _ = ga.LogisticSoftmax(3, predictive="geometric-mean").predict_mean_and_var(None, Fmu, Fvar)
    assert np.max(np.abs(p.numpy() - reference)) > 1e-2


def test_both_predictives_agree_without_variance_and_a_bad_one_is_refused():
    rng = np.random.default_rng(3)
    Fmu = rng.normal(scale=3.0, size=(6, 4))
    Y = rng.integers(0, 4, (6, 1))
    zero = np.zeros_like(Fmu)
    exact = np.exp(ga.LogisticSoftmax(4).log_prob(None, Fmu, Y).numpy())
    for rule in ga.likelihoods.PREDICTIVES:
        lik = ga.LogisticSoftmax(4, predictive=rule)
        got = np.exp(lik.predict_log_density(None, Fmu, zero, Y).numpy())
        np.testing.assert_allclose(got, exact, rtol=1e-6)
    with pytest.raises(ValueError, match="predictive"):
        ga.LogisticSoftmax(4, predictive="median")


def test_the_geometric_mean_works_in_float32():
    lik = ga.LogisticSoftmax(3, predictive="geometric-mean")
    Fmu = np.array([[8.0, -30.0, 0.5]], np.float32)
    p, _ = lik.predict_mean_and_var(None, Fmu, np.full_like(Fmu, 4.0))
    assert p.dtype == np.float32 and np.isclose(float(np.sum(p)), 1.0, atol=1e-6)


@pytest.mark.parametrize("rule", ["mean", "geometric-mean"])
def test_both_predictions_from_one_evaluation_are_the_two_predictions(rule):
    """The fused pair is what ``predict_mean_and_var`` and ``predict_log_density`` give, to
    rounding; a class the predictive all but rules out keeps a finite log density (its
    probability, ~e^-800, is below what a float64 holds)."""
    rng = np.random.default_rng(3)
    Fmu, Fvar = rng.normal(scale=3, size=(6, 4)), rng.uniform(0.1, 4, (6, 4))
    Fmu[0], Fvar[0] = [800.0, -800.0, 0.0, 0.0], 1e-6
    Y = np.array([[1], [0], [3], [2], [1], [0]])
    lik = ga.LogisticSoftmax(4, predictive=rule)
    p, log_density = lik.predict_mean_and_log_density(None, Fmu, Fvar, Y)
    np.testing.assert_allclose(p, lik.predict_mean_and_var(None, Fmu, Fvar)[0], rtol=1e-12)
    np.testing.assert_allclose(log_density, lik.predict_log_density(None, Fmu, Fvar, Y), rtol=1e-12)
    assert np.isfinite(log_density[0]) and log_density[0] < -700
    np.testing.assert_allclose(np.sum(p, axis=1), 1.0, rtol=1e-12)
