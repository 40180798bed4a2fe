"""The two families' closed forms against independent computations, and at any fixed q(u):
Gamma–Poisson ELBO ≤ negative-multinomial ELBO ≤ non-augmented ELBO ≤ log p(y), on problems small
enough (N·C ≤ 6) for tensor-product Gauss–Hermite quadrature to give the integrals exactly."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
from gpflow.config import default_jitter
from gpflow.kullback_leiblers import gauss_kl
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import digamma

import gpflow_augmented as ga
from gpflow_augmented.likelihoods import augmentation
from gpflow_augmented.likelihoods import polya_gamma as pg
from gpflow_augmented.models import AUGMENTED_SCHEMES
from helpers import make_problem


def log_lik(F, y):
    """log p(y|f) for F [..., C]."""
    return ga.likelihoods.log_logistic_softmax(tf.constant(F)).numpy()[..., y]


def gauss_hermite(dim, points):
    x, w = np.polynomial.hermite_e.hermegauss(points)  # weight e^{-x²/2}
    w = w / np.sqrt(2 * np.pi)
    nodes = np.array(list(itertools.product(x, repeat=dim)))
    weights = np.prod(np.array(list(itertools.product(w, repeat=dim))), axis=1)
    return nodes, weights


def log_marginal_likelihood(K, y, num_classes, points):
    N = len(y)
    L = np.linalg.cholesky(K)
    z, w = gauss_hermite(N * num_classes, points)
    F = np.einsum("nm,smc->snc", L, z.reshape(-1, N, num_classes))  # f^c = L z^c
    log_terms = sum(log_lik(F[:, i], y[i]) for i in range(N))
    return np.log(np.sum(w * np.exp(log_terms)))


def vi_elbo(model, X, y):
    Fmu, Fvar = [a.numpy() for a in model.predict_f(X)]
    z, w = gauss_hermite(model.num_classes, 40)
    expected = sum(np.sum(w * log_lik(Fmu[i] + np.sqrt(Fvar[i]) * z, y[i])) for i in range(len(y)))
    return expected - float(gauss_kl(model.q_mu, model.q_sqrt))


# At N·C = 6, log p(y) is an 11⁶-node quadrature: those two sizes are in the slow tier.
@pytest.mark.parametrize(
    "num_data,num_classes",
    [
        pytest.param(2, 3, marks=pytest.mark.slow),
        pytest.param(3, 2, marks=pytest.mark.slow),
        (2, 2),
        (1, 3),
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_bound_ordering(num_data, num_classes, seed):
    rng = np.random.default_rng(seed)
    models = {}
    for scheme in AUGMENTED_SCHEMES:
        models[scheme], (X, Y) = make_problem(
            num_data, num_classes, seed=seed, variance=2.0, scheme=scheme
        )
    q_mu = rng.normal(size=(num_data, num_classes))
    q_sqrt = np.tril(rng.normal(scale=0.5, size=(num_classes, num_data, num_data)))
    q_sqrt[:, range(num_data), range(num_data)] = (
        np.abs(q_sqrt[:, range(num_data), range(num_data)]) + 0.3
    )
    for model in models.values():
        model.q_mu.assign(q_mu)
        model.q_sqrt.assign(q_sqrt)
    gamma_poisson = float(models["gamma-poisson"].elbo((X, Y)))
    negative_multinomial = float(models["negative-multinomial"].elbo((X, Y)))
    vi = vi_elbo(models["negative-multinomial"], X, Y[:, 0])
    K = models["negative-multinomial"].kernel(X).numpy() + default_jitter() * np.eye(num_data)
    log_py = log_marginal_likelihood(K, Y[:, 0], num_classes, 11)
    quadrature_error = abs(log_py - log_marginal_likelihood(K, Y[:, 0], num_classes, 8))
    assert quadrature_error < 1e-4
    # each gap must exceed the quadrature's own error, or the ordering would prove nothing
    gaps = np.diff([gamma_poisson, negative_multinomial, vi, log_py])
    assert np.all(gaps > 10 * quadrature_error), (gamma_poisson, negative_multinomial, vi, log_py)

    # The certificate users see: its exact ELBO is the quadrature's, its augmented bound the
    # negative-multinomial one, and so augmented ≤ exact ≤ log p(y), for both kinds of model.
    exact_model, _ = make_problem(num_data, num_classes, seed=seed, variance=2.0, scheme="exact")
    exact_model.q_mu.assign(q_mu)
    exact_model.q_sqrt.assign(q_sqrt)
    for model in (models["negative-multinomial"], exact_model):
        certificate = ga.certificate.bound_certificate(model, (X, Y))
        # The documented accuracy is 1e-4 nats per point; the certificate's own error estimate
        # must not understate the true error (the refined rule is far more accurate than it).
        true_error = abs(certificate.exact - vi)
        assert true_error < 1e-4 * num_data
        assert true_error < 1.5 * certificate.quadrature_error + 1e-9
        np.testing.assert_allclose(certificate.augmented, negative_multinomial, rtol=1e-9)
        assert certificate.augmented < certificate.exact < log_py
        np.testing.assert_allclose(float(model.exact_elbo((X, Y))), certificate.exact, rtol=1e-12)


def random_marginals(seed, N=6, C=4, scale=3.0):
    rng = np.random.default_rng(seed)
    Fmu = rng.normal(scale=scale, size=(N, C))
    Fvar = rng.uniform(0.01, 2.0, size=(N, C))
    Y = np.eye(C)[rng.integers(0, C, N)]
    return Fmu, Fvar, Y


def negative_multinomial_count_terms(local):
    """E[log π(n) - log q(n)] for q(n_i) = NM(1, p) against the improper negative-multinomial prior,
    with p recovered from γ (p_c = γ_c p_0, p_0 = 1 / (1 + Σγ)): valid at any γ, so that the
    closed form can be compared with the bound away from its optimum too (and differentiated)."""
    gamma = tf.convert_to_tensor(local.gamma)
    log_C = np.log(gamma.shape[-1])
    log_p0 = -tf.math.log1p(tf.reduce_sum(gamma, axis=-1))
    gamma_log_C_p = tf.reduce_sum(tf.math.xlogy(gamma, gamma), axis=-1) + tf.reduce_sum(
        gamma, axis=-1
    ) * (log_C + log_p0)
    return -log_C - log_p0 - gamma_log_C_p


@given(m=st.floats(-1e3, 1e3), v=st.floats(1e-12, 1e3))
@settings(max_examples=200, deadline=None, derandomize=True)
def test_log_one_minus_sigma_tilde_is_exact(m, v):
    got = augmentation.log_one_minus_sigma_tilde(
        tf.constant(m, tf.float64), tf.constant(v, tf.float64)
    ).numpy()
    # mpmath-free reference: 1 - σ̃ = (2cosh(c/2) - e^{-m/2}) / (2cosh(c/2)), in long double
    # where it is representable, else via the identity log(1-σ̃) ≈ log(e^{-c} + δ) for tiny values.
    mm = np.longdouble(m)
    cc = np.sqrt(mm**2 + np.longdouble(v))
    with np.errstate(over="ignore"):
        num = np.exp(cc / 2) + np.exp(-cc / 2) - np.exp(-mm / 2)
        den = np.exp(cc / 2) + np.exp(-cc / 2)
    # The subtraction loses log10(1/ratio) of long double's 19 digits: trust it only while that
    # leaves better than 1e-10 relative accuracy.
    if np.isfinite(den) and num > 0 and num / den > 1e-8:
        np.testing.assert_allclose(got, float(np.log(num / den)), rtol=1e-9, atol=1e-12)
    elif m < -1 and v < 1e-6 * m**2:
        # expanding c = |m| + v/(2|m|) + O(v²/|m|³): 1 - σ̃ = (e^m + v/(4|m|)) / (1 + e^m) · (1 +
        # O(v/m²))
        expected = np.logaddexp(m, np.log(v / (4 * abs(m)))) - np.log1p(np.exp(m))
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert np.isfinite(got) and got <= 0


def test_negative_multinomial_closed_form_equals_augmented_elbo_at_optimum():
    Fmu, Fvar, Y = random_marginals(0)
    local = augmentation.negative_multinomial_local_parameters(Fmu, Fvar, Y)
    augmented = augmentation.polya_gamma_terms(
        Fmu, Fvar, Y, local
    ) + negative_multinomial_count_terms(local)
    np.testing.assert_allclose(
        augmented, augmentation.negative_multinomial_local_elbo(Fmu, Fvar, Y), rtol=1e-12
    )


def test_negative_multinomial_local_parameters_are_the_optimum():
    # The augmented ELBO must be stationary in log γ (and maximal) at the negative-multinomial
    # update.
    Fmu, Fvar, Y = random_marginals(1)
    local = augmentation.negative_multinomial_local_parameters(Fmu, Fvar, Y)
    log_gamma = tf.Variable(np.log(local.gamma.numpy()))
    with tf.GradientTape() as tape:
        gamma = tf.exp(log_gamma)
        perturbed = pg.LocalParameters(
            gamma=gamma, theta=pg.polya_gamma_mean(Y + gamma, local.c), c=local.c
        )
        value = tf.reduce_sum(
            augmentation.polya_gamma_terms(Fmu, Fvar, Y, perturbed)
            + negative_multinomial_count_terms(perturbed)
        )
    np.testing.assert_allclose(tape.gradient(value, log_gamma), 0.0, atol=1e-10)
    for shift in (-0.3, 0.3):
        g = local.gamma * np.exp(shift)
        other = pg.LocalParameters(g, pg.polya_gamma_mean(Y + g, local.c), local.c)
        worse = augmentation.polya_gamma_terms(
            Fmu, Fvar, Y, other
        ) + negative_multinomial_count_terms(other)
        assert np.all(
            worse.numpy() < augmentation.negative_multinomial_local_elbo(Fmu, Fvar, Y).numpy()
        )


def test_gamma_poisson_fixed_point_solves_the_corrected_equations():
    """γ = exp(ψ(α) - log C) e^{-m/2} / (2 cosh(c/2)) (with the ½ the printed eq. 12 drops) and
    α = 1 + Σγ (eq. 13); the printed γ without ½ is not a fixed point."""
    Fmu, Fvar, Y = random_marginals(2)
    C = Fmu.shape[1]
    local = augmentation.gamma_poisson_local_parameters(Fmu, Fvar, Y, inner_iterations=5)
    gamma, alpha, c = local.gamma.numpy(), local.alpha.numpy(), local.c.numpy()
    corrected = (
        np.exp(digamma(alpha) - np.log(C))[:, None] * np.exp(-Fmu / 2) / (2 * np.cosh(c / 2))
    )
    np.testing.assert_allclose(gamma, corrected, rtol=1e-12)
    np.testing.assert_allclose(alpha, 1 + gamma.sum(1), rtol=1e-12)
    printed = 2 * corrected
    assert np.max(np.abs(printed - gamma) / gamma) > 0.5


@pytest.mark.slow
def test_gamma_poisson_alternation_converges_to_the_newton_fixed_point():
    """The paper's plain γ ↔ α alternation, run long enough, lands on the same fixed point, and each
    alternation raises the ELBO (it is coordinate ascent)."""
    Fmu, Fvar, Y = random_marginals(3, C=8)
    C = Fmu.shape[1]
    newton = augmentation.gamma_poisson_local_parameters(Fmu, Fvar, Y, inner_iterations=5)
    c = pg.tilt(Fmu, Fvar)
    log_st = augmentation.log_sigma_tilde(Fmu, c).numpy()
    alpha = np.full(len(Fmu), float(C))
    previous = -np.inf
    for _ in range(2000):
        gamma = np.exp(digamma(alpha) - np.log(C))[:, None] * np.exp(log_st)
        alpha = 1 + gamma.sum(1)
        state = pg.LocalParameters(gamma, pg.polya_gamma_mean(Y + gamma, c), c, alpha)
        value = float(
            np.sum(
                augmentation.polya_gamma_terms(Fmu, Fvar, Y, state)
                + augmentation.gamma_poisson_count_terms(state)
            )
        )
        assert value >= previous - 1e-9 * abs(value)
        previous = value
    np.testing.assert_allclose(alpha, newton.alpha.numpy(), rtol=1e-8)


def test_gamma_poisson_bound_is_below_negative_multinomial_bound():
    Fmu, Fvar, Y = random_marginals(4)
    local = augmentation.gamma_poisson_local_parameters(Fmu, Fvar, Y, 5)
    elbo = augmentation.polya_gamma_terms(
        Fmu, Fvar, Y, local
    ) + augmentation.gamma_poisson_count_terms(local)
    assert np.all(elbo.numpy() < augmentation.negative_multinomial_local_elbo(Fmu, Fvar, Y).numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_local_updates_finite_at_extreme_latents(dtype):
    Fmu = np.array([[1e3, -1e3, 0.0], [-1e3, -1e3, -1e3], [1e3, 1e3, 1e3]], dtype=dtype)
    Fvar = np.array([[1e-6, 1e-6, 1e-6], [1e-3, 1.0, 1e3], [0.0, 1e-8, 1.0]], dtype=dtype)
    Y = np.eye(3, dtype=dtype)
    for local in (
        augmentation.negative_multinomial_local_parameters(Fmu, Fvar, Y),
        augmentation.gamma_poisson_local_parameters(Fmu, Fvar, Y, 5),
    ):
        for value in local:
            if value is not None:
                assert np.all(np.isfinite(value.numpy()))
    assert np.all(np.isfinite(augmentation.negative_multinomial_local_elbo(Fmu, Fvar, Y).numpy()))
