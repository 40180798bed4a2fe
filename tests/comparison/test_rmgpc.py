"""Robust multi-class GP classification by EP (Hernández-Lobato et al. 2011): at EP's fixed point
every factor's tilted moments (latents, outlier indicator, outlier rate) are Q's; on problems
small enough to enumerate the indicators and integrate the latents by Monte Carlo, the estimate of
log p(y), the outlier probabilities and the posterior means are close to the exact ones; the
gradient with the sites fixed is the derivative of converged EP; flipped labels are the ones it
calls outliers."""
import itertools

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from scipy.special import betaln, expit
from scipy.stats import norm

from gpflow_augmented.comparison.rmgpc import RobustMulticlassEP
from gpflow_augmented.comparison.sep import ExpectationPropagation, whitened_marginals
from gpflow_augmented.validation import InvalidDataError
from helpers import factor_cavity

def _converge(model, steps=400, damping=0.5):
    step = tf.function(ExpectationPropagation(model, damping).step)
    for _ in range(steps):
        step()
    before = [p.numpy().copy() for p in model.site_parameters]
    step()
    change = max(np.abs(p.numpy() - b).max() for p, b in zip(model.site_parameters, before))
    assert change < 1e-9, f"EP has not converged: the sites still change by {change:.2e}"


def _marginals(model):
    """Q's means and variances [N, C] of the latents at the training points, as the step sees
    them (predict_f's differ by the conditional's jitter)."""
    L, A, _ = model._geometry(model.data[0])
    precision, shift = model._whitened_sites(L, A)
    chol = tf.linalg.cholesky(tf.eye(precision.shape[-1], dtype=precision.dtype) + precision)
    return (t.numpy() for t in whitened_marginals(chol, shift, A))


def _problem(N, C, seed, flip=0.0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=2.0, size=(C, 2))
    y = rng.integers(0, C, N)
    X = centres[y] + rng.normal(scale=0.7, size=(N, 2))
    flipped = rng.uniform(size=N) < flip
    y_observed = np.where(flipped, (y + rng.integers(1, C, N)) % C, y)
    return X, y_observed[:, None], flipped


def test_fixed_point_matches_every_factors_tilted_moments():
    X, Y, _ = _problem(12, 3, seed=0, flip=0.2)
    model = RobustMulticlassEP((X, Y), gpflow.kernels.SquaredExponential(lengthscales=1.5), 3)
    _converge(model)
    mean, variance = _marginals(model)
    sites = [p.numpy() for p in model.site_parameters]
    q = model._outlier_log_odds().numpy()
    a, b = (float(v) for v in model.outlier_rate_posterior())
    uniform = 3.0 ** (-1 / 2)
    for i in range(len(X)):
        y = Y[i, 0]
        for k in range(3):
            if k == y:
                continue
            m_y, tau_y, m_k, tau_k = factor_cavity(mean, variance, sites, i, k, y)
            p = expit(q[i] - sites[4][i, k])
            # The tilted distribution (1 − p)Θ(f_y − f_k) + p·c times the cavity: f_k by a
            # trapezoid rule on 200 001 points (Φ(β) is as sharp in f_k as f_y's cavity is
            # narrow), f_y above each point in closed form (a truncated normal's moments),
            # independently of the closed form under test.
            f_k = np.linspace(m_k - 12 * np.sqrt(tau_k), m_k + 12 * np.sqrt(tau_k), 200_001)
            w = norm.pdf(f_k, m_k, np.sqrt(tau_k)) * (f_k[1] - f_k[0])
            w[[0, -1]] /= 2
            beta = (m_y - f_k) / np.sqrt(tau_y)
            above, density = norm.cdf(beta), norm.pdf(beta)
            Z = (1 - p) * np.sum(w * above) + p * uniform
            mean_y = ((1 - p) * np.sum(w * (m_y * above + np.sqrt(tau_y) * density))
                      + p * uniform * m_y) / Z
            second_y = ((1 - p) * np.sum(w * ((m_y ** 2 + tau_y) * above
                                              + np.sqrt(tau_y) * (m_y + f_k) * density))
                        + p * uniform * (m_y ** 2 + tau_y)) / Z
            mean_k = ((1 - p) * np.sum(w * f_k * above) + p * uniform * m_k) / Z
            second_k = ((1 - p) * np.sum(w * f_k ** 2 * above)
                        + p * uniform * (m_k ** 2 + tau_k)) / Z
            np.testing.assert_allclose([mean_y, mean_k], [mean[i, y], mean[i, k]], atol=1e-7)
            np.testing.assert_allclose([second_y - mean_y ** 2, second_k - mean_k ** 2],
                                       [variance[i, y], variance[i, k]], rtol=1e-6)
            np.testing.assert_allclose(p * uniform / Z, expit(q[i]), rtol=1e-7)
        # the prior factor ρ^z (1 − ρ)^(1−z): tilted P(z = 1) and ρ's first two moments
        p = expit(q[i] - sites[5][i])
        a_c, b_c = a - sites[6][i], b - sites[7][i]
        inlier, outlier = (1 - p) * b_c / (a_c + b_c), p * a_c / (a_c + b_c)
        Z = inlier + outlier
        np.testing.assert_allclose(outlier / Z, expit(q[i]), rtol=1e-7)
        first = (inlier * a_c + outlier * (a_c + 1)) / ((a_c + b_c + 1) * Z)
        second = (inlier * a_c * (a_c + 1) + outlier * (a_c + 1) * (a_c + 2)) / (
            (a_c + b_c + 1) * (a_c + b_c + 2) * Z)
        np.testing.assert_allclose([first, second],
                                   [a / (a + b), a * (a + 1) / ((a + b) * (a + b + 1))],
                                   rtol=1e-7)


# (inputs, labels, tolerances on |Δ log p(y)|, the outlier probabilities, the posterior means)
TINY_PROBLEMS = {
    "separated": ([-1.0, 0.0, 1.0], [0, 1, 2], (0.3, 0.05, 0.15)),
    "separated, two alike": ([-1.0, -0.2, 1.0], [2, 0, 0], (0.3, 0.05, 0.15)),
    "conflicting neighbours": ([-0.48, -0.40, 0.63], [1, 0, 1], (0.3, 0.2, 0.35)),
}


@pytest.mark.parametrize("problem", TINY_PROBLEMS)
def test_close_to_the_exact_posterior_of_a_tiny_problem(problem):
    """N = 3, C = 3: the 2³ outlier indicators are enumerated, ρ integrated in closed form
    (Beta–Bernoulli) and the latents by 10⁶ prior draws (Monte Carlo error below 0.005 in each
    quantity). EP's Q factorises over the classes and the indicators, one Gaussian per class:
    measured, that costs 0.13–0.22 nats of log p(y) (EP's is below the exact), ≤ 0.03 in the
    outlier probabilities and ≤ 0.11 in the posterior means when the points are apart; two close
    points with different labels make the exact posterior bimodal (either may be the outlier),
    which one Gaussian cannot follow: 0.14 in the outlier probabilities and 0.27 in the means."""
    inputs, labels, (log_z_tolerance, probability_tolerance, mean_tolerance) = \
        TINY_PROBLEMS[problem]
    rng = np.random.default_rng(0)
    N, C, (a0, b0) = 3, 3, (1.0, 4.0)
    X, Y = np.array(inputs)[:, None], np.array(labels)[:, None]
    kernel = gpflow.kernels.SquaredExponential(lengthscales=0.8, variance=2.0)
    model = RobustMulticlassEP((X, Y), kernel, C, outlier_prior=(a0, b0))
    _converge(model, steps=600)
    K = kernel(X).numpy() + gpflow.config.default_jitter() * np.eye(N)
    f = np.einsum("ij,sjc->sic", np.linalg.cholesky(K), rng.standard_normal((1_000_000, N, C)))
    correct = f.argmax(-1) == Y[:, 0]  # [S, N]
    evidence, outlier_mass, mean_f = 0.0, np.zeros(N), np.zeros((N, C))
    for z in itertools.product((0, 1), repeat=N):
        z = np.array(z, bool)
        weight = np.exp(betaln(a0 + z.sum(), b0 + N - z.sum()) - betaln(a0, b0)) * \
            float(C) ** -z.sum()
        inliers_correct = correct[:, ~z].all(axis=1)
        mass = weight * inliers_correct.mean()
        evidence += mass
        outlier_mass += mass * z
        mean_f += weight * np.einsum("s,sic->ic", inliers_correct, f) / len(f)
    assert abs(float(model.log_marginal_likelihood()) - np.log(evidence)) < log_z_tolerance
    np.testing.assert_allclose(model.outlier_probability().numpy(), outlier_mass / evidence,
                               atol=probability_tolerance)
    np.testing.assert_allclose(model.predict_f(X)[0].numpy(), mean_f / evidence,
                               atol=mean_tolerance)


def test_gradient_with_the_sites_fixed_is_the_derivative_of_converged_ep():
    """Where EP's fixed point is stationary in every site, the gradient with the sites fixed is
    the derivative of converged EP (central differences, step 1e-4). The Beta sites match ρ's
    first two moments (supplement, eq. 10), not E[log ρ] and E[log(1 − ρ)], so they are
    stationary only as ρ's posterior concentrates: with the prior Beta(100, 900) they agree to
    1e-8; with the default Beta(1, 9) the gradient is 2.6 % off (measured), which Adam tolerates."""
    X, Y, _ = _problem(10, 3, seed=1, flip=0.2)

    def converged(lengthscale):
        model = RobustMulticlassEP(
            (X, Y), gpflow.kernels.SquaredExponential(lengthscales=lengthscale), 3,
            outlier_prior=(100.0, 900.0))
        _converge(model, steps=600)
        return model

    model = converged(1.3)
    unconstrained = model.kernel.lengthscales.unconstrained_variable
    with tf.GradientTape() as tape:
        value = model.log_marginal_likelihood()
    gradient = float(tape.gradient(value, unconstrained) / tf.math.sigmoid(unconstrained))
    h = 1e-4
    up, down = (float(converged(1.3 + d).log_marginal_likelihood()) for d in (h, -h))
    np.testing.assert_allclose(gradient, (up - down) / (2 * h), rtol=1e-4)


def test_the_flipped_labels_are_the_likely_outliers():
    X, Y, flipped = _problem(60, 3, seed=3, flip=0.2)
    model = RobustMulticlassEP((X, Y), gpflow.kernels.SquaredExponential(lengthscales=1.5), 3)
    _converge(model)
    probability = model.outlier_probability().numpy()
    # the chance that a flipped point ranks above a kept one (the ROC area)
    auc = np.mean(probability[flipped][:, None] > probability[~flipped][None, :])
    assert flipped.sum() >= 5 and auc > 0.85, auc
    a, b = (float(v) for v in model.outlier_rate_posterior())
    assert 0.05 < a / (a + b) < 0.4
    np.testing.assert_allclose(model.likelihood.outlier_rate.numpy(), a / (a + b))
    p = model.predict_y(X[:4])[0].numpy()
    assert np.all(p >= a / (a + b) / 3 * 0.999)  # no class below the outliers' share


def test_bad_input_is_refused():
    X, Y, _ = _problem(10, 3, seed=0)
    kernel = gpflow.kernels.SquaredExponential()
    with pytest.raises(InvalidDataError, match="label"):
        RobustMulticlassEP((X, np.full_like(Y, 3)), kernel, 3)
    with pytest.raises(ValueError, match="outlier_prior"):
        RobustMulticlassEP((X, Y), kernel, 3, outlier_prior=(0.0, 1.0))
    with pytest.raises(TypeError, match="one kernel"):
        RobustMulticlassEP((X, Y), gpflow.kernels.SeparateIndependent([kernel] * 3), 3)
