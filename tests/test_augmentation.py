"""The closed-form pieces of the augmentation, against independent computations."""
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import digamma

from gpflow_augmented import augmentation as aug


def random_marginals(seed, N=6, C=4, scale=3.0):
    rng = np.random.default_rng(seed)
    Fmu = rng.normal(scale=scale, size=(N, C))
    Fvar = rng.uniform(0.01, 2.0, size=(N, C))
    Y = np.eye(C)[rng.integers(0, C, N)]
    return Fmu, Fvar, Y


def test_polya_gamma_mean_matches_closed_form_and_limit():
    c = np.array([0.0, 1e-6, 1e-3, 0.1, 1.0, 10.0, 1e3])
    b = np.array([1.0, 2.0, 5.0, 1.0, 2.0, 5.0, 1.0])
    got = aug.polya_gamma_mean(b, c).numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        exact = np.where(c > 0, b * np.tanh(c / 2) / (2 * c), b / 4)
    np.testing.assert_allclose(got, exact, rtol=1e-12)
    with tf.GradientTape() as tape:
        cc = tf.constant(c)
        tape.watch(cc)
        value = aug.polya_gamma_mean(tf.constant(b), cc)
    assert np.all(np.isfinite(tape.gradient(value, cc).numpy()))


def test_polya_gamma_mean_matches_series_sampler():
    # PG(b, c) = (1/2π²) Σ_k g_k / ((k - ½)² + c²/(4π²)), g_k ~ Ga(b, 1): its mean, summed exactly
    # to a million terms, must equal the closed form.
    k = np.arange(1, 1_000_001)
    for b, c in [(1.0, 0.5), (2.0, 3.0), (5.0, 10.0)]:
        series = np.sum(b / ((k - 0.5) ** 2 + c**2 / (4 * np.pi**2))) / (2 * np.pi**2)
        np.testing.assert_allclose(aug.polya_gamma_mean(b, c).numpy(), series, rtol=1e-6)


@given(m=st.floats(-1e3, 1e3), v=st.floats(1e-12, 1e3))
@settings(max_examples=200, deadline=None, derandomize=True)
def test_log_one_minus_sigma_tilde_is_exact(m, v):
    got = aug.log_one_minus_sigma_tilde(tf.constant(m, tf.float64), tf.constant(v, tf.float64)).numpy()
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
        # expanding c = |m| + v/(2|m|) + O(v²/|m|³): 1 - σ̃ = (e^m + v/(4|m|)) / (1 + e^m) · (1 + O(v/m²))
        expected = np.logaddexp(m, np.log(v / (4 * abs(m)))) - np.log1p(np.exp(m))
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert np.isfinite(got) and got <= 0


def test_collapsed_closed_form_equals_augmented_elbo_at_optimum():
    Fmu, Fvar, Y = random_marginals(0)
    local = aug.collapsed_local_parameters(Fmu, Fvar, Y)
    augmented = aug.polya_gamma_terms(Fmu, Fvar, Y, local) + aug.collapsed_count_terms(Fmu, local)
    np.testing.assert_allclose(augmented, aug.collapsed_local_elbo(Fmu, Fvar, Y), rtol=1e-12)


def test_collapsed_local_parameters_are_the_optimum():
    # The augmented ELBO must be stationary in log γ (and maximal) at the collapsed update.
    Fmu, Fvar, Y = random_marginals(1)
    local = aug.collapsed_local_parameters(Fmu, Fvar, Y)
    log_gamma = tf.Variable(np.log(local.gamma.numpy()))
    with tf.GradientTape() as tape:
        gamma = tf.exp(log_gamma)
        perturbed = aug.LocalParameters(
            gamma=gamma, theta=aug.polya_gamma_mean(Y + gamma, local.c), c=local.c
        )
        value = tf.reduce_sum(
            aug.polya_gamma_terms(Fmu, Fvar, Y, perturbed) + aug.collapsed_count_terms(Fmu, perturbed)
        )
    np.testing.assert_allclose(tape.gradient(value, log_gamma), 0.0, atol=1e-10)
    for shift in (-0.3, 0.3):
        g = local.gamma * np.exp(shift)
        other = aug.LocalParameters(g, aug.polya_gamma_mean(Y + g, local.c), local.c)
        worse = aug.polya_gamma_terms(Fmu, Fvar, Y, other) + aug.collapsed_count_terms(Fmu, other)
        assert np.all(worse.numpy() < aug.collapsed_local_elbo(Fmu, Fvar, Y).numpy())


def test_paper_fixed_point_solves_the_corrected_equations():
    """γ = exp(ψ(α) - log C) e^{-m/2} / (2 cosh(c/2)) (with the ½ the printed eq. 12 drops) and
    α = 1 + Σγ (eq. 13); the printed γ without ½ is not a fixed point."""
    Fmu, Fvar, Y = random_marginals(2)
    C = Fmu.shape[1]
    local = aug.paper_local_parameters(Fmu, Fvar, Y, inner_iterations=5)
    gamma, alpha, c = local.gamma.numpy(), local.alpha.numpy(), local.c.numpy()
    corrected = np.exp(digamma(alpha) - np.log(C))[:, None] * np.exp(-Fmu / 2) / (2 * np.cosh(c / 2))
    np.testing.assert_allclose(gamma, corrected, rtol=1e-12)
    np.testing.assert_allclose(alpha, 1 + gamma.sum(1), rtol=1e-12)
    printed = 2 * corrected
    assert np.max(np.abs(printed - gamma) / gamma) > 0.5


def test_paper_alternation_converges_to_the_newton_fixed_point():
    """The paper's plain γ ↔ α alternation, run long enough, lands on the same fixed point, and each
    alternation raises the ELBO (it is coordinate ascent)."""
    Fmu, Fvar, Y = random_marginals(3, C=8)
    C = Fmu.shape[1]
    newton = aug.paper_local_parameters(Fmu, Fvar, Y, inner_iterations=5)
    c = aug.tilt(Fmu, Fvar)
    log_st = aug.log_sigma_tilde(Fmu, c).numpy()
    alpha = np.full(len(Fmu), float(C))
    previous = -np.inf
    for _ in range(2000):
        gamma = np.exp(digamma(alpha) - np.log(C))[:, None] * np.exp(log_st)
        alpha = 1 + gamma.sum(1)
        state = aug.LocalParameters(gamma, aug.polya_gamma_mean(Y + gamma, c), c, alpha)
        value = float(np.sum(aug.polya_gamma_terms(Fmu, Fvar, Y, state) + aug.paper_count_terms(state)))
        assert value >= previous - 1e-9 * abs(value)
        previous = value
    np.testing.assert_allclose(alpha, newton.alpha.numpy(), rtol=1e-8)


def test_paper_bound_is_below_collapsed_bound():
    Fmu, Fvar, Y = random_marginals(4)
    paper = aug.paper_local_parameters(Fmu, Fvar, Y, 5)
    paper_elbo = aug.polya_gamma_terms(Fmu, Fvar, Y, paper) + aug.paper_count_terms(paper)
    assert np.all(paper_elbo.numpy() < aug.collapsed_local_elbo(Fmu, Fvar, Y).numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_local_updates_finite_at_extreme_latents(dtype):
    Fmu = np.array([[1e3, -1e3, 0.0], [-1e3, -1e3, -1e3], [1e3, 1e3, 1e3]], dtype=dtype)
    Fvar = np.array([[1e-6, 1e-6, 1e-6], [1e-3, 1.0, 1e3], [0.0, 1e-8, 1.0]], dtype=dtype)
    Y = np.eye(3, dtype=dtype)
    for local in (aug.collapsed_local_parameters(Fmu, Fvar, Y),
                  aug.paper_local_parameters(Fmu, Fvar, Y, 5)):
        for value in local:
            if value is not None:
                assert np.all(np.isfinite(value.numpy()))
    assert np.all(np.isfinite(aug.collapsed_local_elbo(Fmu, Fvar, Y).numpy()))
