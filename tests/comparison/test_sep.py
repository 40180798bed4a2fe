"""Expectation propagation for the Heaviside likelihood (Villacampa-Calvo & Hernández-Lobato 2017):
the closed-form factor sites give the tilted moments that a quadrature computes; the predictive
integral is the arg-max probability; untied EP's fixed point matches every factor's moments, is
close to the exact posterior on problems small enough to integrate by Monte Carlo, and its
estimate of log p(y) has the gradient that finite differences of converged runs give; the tied
(stochastic) EP's fixed point is the average of the tilted projections; a failed step changes
nothing."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.config import Config, as_context
from scipy.special import log_ndtr as scipy_log_ndtr
from scipy.stats import norm

from gpflow_augmented.comparison.baselines import build_method
from gpflow_augmented.comparison.methods import ExpectationPropagationMethod
from gpflow_augmented.comparison.heaviside import (
    HeavisideLikelihood,
    log_ndtr,
    pairwise_probit_sites,
)
from gpflow_augmented.comparison.sep import ExpectationPropagation, HeavisideEP, HeavisideSEP
from gpflow_augmented.schedules import RobbinsMonro
from gpflow_augmented.validation import InvalidDataError
from helpers import factor_cavity

NODES, WEIGHTS = np.polynomial.hermite.hermgauss(120)


def tilted_moments(m_y, tau_y, m_k, tau_k, noise):
    """Z, and the mean and variance of u_y and u_k, of N(u_y; m_y, τ_y) N(u_k; m_k, τ_k)
    Φ((u_y − u_k)/√noise), by a 120 × 120 Gauss–Hermite product rule (independent of the closed
    form under test)."""
    u_y = m_y + np.sqrt(2 * tau_y) * NODES[:, None]
    u_k = m_k + np.sqrt(2 * tau_k) * NODES[None, :]
    weights = WEIGHTS[:, None] * WEIGHTS[None, :] / np.pi * norm.cdf((u_y - u_k) / np.sqrt(noise))
    Z = weights.sum()

    def moments(u):
        mean = (weights * u).sum() / Z
        return mean, (weights * (u - mean) ** 2).sum() / Z

    return (Z, *moments(u_y), *moments(u_k))


def random_cavities(rng, N, C):
    mean = rng.normal(scale=1.5, size=(N, C))
    variance = rng.uniform(0.05, 2.0, size=(N, C))
    noise = rng.uniform(0.1, 1.0, size=(N, C))
    labels = rng.integers(0, C, N)
    return mean, variance, noise, labels


def test_factor_sites_give_the_tilted_moments_of_a_quadrature():
    rng = np.random.default_rng(0)
    N, C = 6, 4
    mean, variance, noise, labels = random_cavities(rng, N, C)
    # each factor's own cavity of the label's latent, as untied EP has
    label_mean = mean[np.arange(N), labels][:, None] + rng.normal(scale=0.3, size=(N, C))
    label_variance = variance[np.arange(N), labels][:, None] * rng.uniform(0.5, 1.5, (N, C))
    sites = pairwise_probit_sites(
        *(tf.constant(a) for a in (label_mean, label_variance, mean, variance, noise)),
        tf.constant(labels),
    )
    sites = [s.numpy() for s in sites]
    for i in range(N):
        y = labels[i]
        for k in range(C):
            if k == y:
                assert all(s[i, k] == 0 for s in sites)
                continue
            Z, mean_y, var_y, mean_k, var_k = tilted_moments(
                label_mean[i, k],
                label_variance[i, k],
                mean[i, k],
                variance[i, k],
                noise[i, y] + noise[i, k],
            )
            np.testing.assert_allclose(sites[0][i, k], np.log(Z), rtol=1e-9, atol=1e-11)
            for cavity_mean, cavity_var, precision, shift, want_mean, want_var in (
                (
                    label_mean[i, k],
                    label_variance[i, k],
                    sites[1][i, k],
                    sites[2][i, k],
                    mean_y,
                    var_y,
                ),
                (mean[i, k], variance[i, k], sites[3][i, k], sites[4][i, k], mean_k, var_k),
            ):
                assert precision >= 0
                new_var = 1 / (1 / cavity_var + precision)
                np.testing.assert_allclose(new_var, want_var, rtol=1e-8)
                np.testing.assert_allclose(
                    new_var * (cavity_mean / cavity_var + shift), want_mean, rtol=1e-8, atol=1e-10
                )


@pytest.mark.parametrize(
    "dtype, rtol, gradient_rtol", [(np.float64, 1e-13, 2e-12), (np.float32, 1e-6, 5e-5)]
)
def test_log_ndtr_is_scipys_and_its_gradient_is_the_inverse_mills_ratio(dtype, rtol, gradient_rtol):
    """log Φ(x) from the far lower tail (where Φ underflows) to the far upper one (where it rounds
    to 1), across each branch's seam, and its gradient φ(x)/Φ(x), finite everywhere and right at
    x = 0 too. The tolerances are a few times the largest error measured (float64: 1.2e-14 at the
    series' seam, where TFP's three-term series is 2e-11 off; its gradient 7.6e-13 in the far
    tail; float32: erfc's own 1.8e-7, and 1.3e-5 on a gradient of 1e-30)."""
    x = np.concatenate(
        [np.linspace(-60.0, 40.0, 20_001), [-20.0, -10.0, -1e-30, 0.0, 1e-30, 5.0, 8.0]]
    ).astype(dtype)
    exact = scipy_log_ndtr(x.astype(np.float64))
    x_tensor = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x_tensor)
        value = log_ndtr(x_tensor)
    gradient = tape.gradient(value, x_tensor).numpy().astype(np.float64)
    value = value.numpy().astype(np.float64)
    # Below 0, log Φ is relatively exact; above, it is about −Φ(−x), of absolute size ≤ 0.7.
    below = x < 0
    np.testing.assert_allclose(value[below], exact[below], rtol=rtol)
    np.testing.assert_allclose(value[~below], exact[~below], rtol=0, atol=2 * np.finfo(dtype).eps)
    assert np.all(np.isfinite(gradient))
    mills = np.exp(norm.logpdf(x.astype(np.float64)) - exact)
    np.testing.assert_allclose(gradient, mills, rtol=gradient_rtol, atol=1e3 * np.finfo(dtype).tiny)


def test_predictive_probabilities_are_the_arg_max_frequencies_of_the_noisy_latents():
    rng = np.random.default_rng(1)
    N, C, S = 5, 4, 400_000
    Fmu, Fvar = rng.normal(size=(N, C)), rng.uniform(0.01, 2.0, (N, C))
    likelihood = HeavisideLikelihood(C, noise_variance=0.3)
    p = np.exp(likelihood.log_class_probabilities(tf.constant(Fmu), tf.constant(Fvar)).numpy())
    F = Fmu + np.sqrt(Fvar + 0.3) * rng.standard_normal((S, N, C))
    frequencies = np.stack([(F.argmax(-1) == k).mean(0) for k in range(C)], axis=-1)
    standard_error = np.sqrt(p * (1 - p) / S)
    assert np.all(np.abs(p - frequencies) < 4 * standard_error + 1e-12)
    # The 64-node quadrature against a dense trapezoid rule on the same integral.
    V = Fvar + 0.3
    for i, k in [(0, 0), (3, 2)]:
        f = np.linspace(
            Fmu[i, k] - 12 * np.sqrt(V[i, k]), Fmu[i, k] + 12 * np.sqrt(V[i, k]), 200_001
        )
        integrand = norm.pdf(f, Fmu[i, k], np.sqrt(V[i, k]))
        for c in range(C):
            if c != k:
                integrand = integrand * norm.cdf((f - Fmu[i, c]) / np.sqrt(V[i, c]))
        np.testing.assert_allclose(p[i, k], np.trapz(integrand, f), rtol=1e-8)
    log_density = likelihood.predict_log_density(
        None, tf.constant(Fmu), tf.constant(Fvar), tf.constant([[0], [1], [2], [3], [1]])
    )
    np.testing.assert_allclose(log_density.numpy(), np.log(p[range(N), [0, 1, 2, 3, 1]]))


def _problem(N, C, M=None, seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=1.5, size=(C, 2))
    y = rng.integers(0, C, N)
    X = centres[y] + rng.normal(size=(N, 2))
    Z = X if M is None else X[rng.choice(N, M, replace=False)]
    kernel = gpflow.kernels.SquaredExponential(lengthscales=1.2, variance=1.5)
    return X, y[:, None], Z, kernel


def _converge(model, data=None, steps=300, damping=0.5, step=None):
    """Run EP to its fixed point; returns the compiled step, which a caller may pass back in to
    re-converge the same model after changing its kernel (tracing costs more than the steps)."""
    if step is None:
        step = tf.function(ExpectationPropagation(model, damping).step)
    for _ in range(steps):
        step(data)
    before = [p.numpy().copy() for p in model.site_parameters]
    step(data)
    change = max(np.abs(p.numpy() - b).max() for p, b in zip(model.site_parameters, before))
    assert change < 1e-9, f"EP has not converged: the sites still change by {change:.2e}"
    return step


def _numpy_projection(model, X):
    """(A [M, N], q's means and variances of aᵀv [N, C], s [N, C]) in numpy from the kernel."""
    Z = model.inducing_variable.Z.numpy()
    kernel = model.kernel
    Kmm = kernel(Z).numpy() + gpflow.config.default_jitter() * np.eye(len(Z))
    L = np.linalg.cholesky(Kmm)
    A = np.linalg.solve(L, kernel(Z, X).numpy())
    q_mu, q_sqrt = (t.numpy() for t in model.whitened_posterior())
    mean = A.T @ q_mu
    variance = np.stack([np.sum((q_sqrt[c].T @ A) ** 2, axis=0) for c in range(q_mu.shape[1])], -1)
    residual = kernel(X, full_cov=False).numpy() - np.sum(A**2, axis=0)
    noise = residual[:, None] + model.likelihood.noise_variance.numpy()
    return A, mean, variance, np.broadcast_to(noise, mean.shape)


def test_untied_ep_fixed_point_matches_every_factors_tilted_moments():
    X, Y, Z, kernel = _problem(20, 3, M=8)
    model = HeavisideEP((X, Y), kernel, Z, 3)
    _converge(model, steps=600)
    _, mean, variance, noise = _numpy_projection(model, X)
    sites = [p.numpy() for p in model.site_parameters]
    for i in range(len(X)):
        y = Y[i, 0]
        for k in range(3):
            if k == y:
                continue
            m_y, tau_y, m_k, tau_k = factor_cavity(mean, variance, sites, i, k, y)
            _, mean_y, var_y, mean_k, var_k = tilted_moments(
                m_y, tau_y, m_k, tau_k, noise[i, y] + noise[i, k]
            )
            np.testing.assert_allclose([mean_y, mean_k], [mean[i, y], mean[i, k]], atol=1e-7)
            np.testing.assert_allclose([var_y, var_k], [variance[i, y], variance[i, k]], rtol=1e-7)


def test_tied_ep_fixed_point_is_the_average_of_the_tilted_projections():
    """Stochastic EP's fixed point: each class's tied site equals the sum of the sites that every
    factor's tilted distribution implies from the cavity that removes the average site."""
    X, Y, Z, kernel = _problem(30, 3, M=8, seed=2)
    model = HeavisideSEP(kernel, Z, 3)
    _converge(model, (X, Y))
    A, mean, variance, noise = _numpy_projection(model, X)
    precision = np.eye(8)[None] + model.site_precision.numpy()  # coordinates of the current L
    shift = model.site_shift.numpy()
    C, N = 3, len(X)
    counts = np.bincount(Y[:, 0], minlength=C)
    num_factors = N + counts * (C - 2)
    implied_precision, implied_shift = np.zeros_like(precision), np.zeros_like(shift)
    for c in range(C):
        removed = 1 / num_factors[c]
        cavity_cov = np.linalg.inv(precision[c] - removed * model.site_precision.numpy()[c])
        cavity_mean = cavity_cov @ (shift[:, c] * (1 - removed))
        m = A.T @ cavity_mean
        tau = np.einsum("mn,mk,kn->n", A, cavity_cov, A)
        if c == 0:
            cavity = np.zeros((N, C, 2))
        cavity[:, c] = np.stack([m, tau], -1)
    for i in range(N):
        y = Y[i, 0]
        for k in range(C):
            if k == y:
                continue
            (m_y, tau_y), (m_k, tau_k) = cavity[i, y], cavity[i, k]
            _, mean_y, var_y, mean_k, var_k = tilted_moments(
                m_y, tau_y, m_k, tau_k, noise[i, y] + noise[i, k]
            )
            for c, m, tau, new_mean, new_var in (
                (y, m_y, tau_y, mean_y, var_y),
                (k, m_k, tau_k, mean_k, var_k),
            ):
                site_precision = 1 / new_var - 1 / tau
                site_shift = new_mean / new_var - m / tau
                implied_precision[c] += site_precision * np.outer(A[:, i], A[:, i])
                implied_shift[:, c] += site_shift * A[:, i]
    np.testing.assert_allclose(
        implied_precision, model.site_precision.numpy(), rtol=1e-6, atol=1e-8
    )
    np.testing.assert_allclose(implied_shift, shift, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.slow
def test_untied_ep_is_close_to_the_exact_posterior_of_a_tiny_full_gp(seed):
    """N = 3 points, C = 3 classes, inducing points at the data (a full GP): the exact log p(y)
    and posterior means of the paper's model (7), by importance sampling from the prior with 10⁶
    draws (standard error of log p(y) ≤ 0.004), against EP's. EP's q factorises over the classes
    (paper, eq. 8) while the factors couple them; on these problems that costs at most 0.2 nats of
    log p(y) (measured 0.07–0.18) and 0.05 in the posterior means (measured ≤ 0.031)."""
    rng = np.random.default_rng(seed)
    N, C, noise = 3, 3, 0.5
    X, Y = rng.uniform(-1, 1, (N, 1)), rng.integers(0, C, (N, 1))
    kernel = gpflow.kernels.SquaredExponential(lengthscales=0.8, variance=2.0)
    model = HeavisideEP((X, Y), kernel, X, C, noise_variance=noise)
    _converge(model, steps=400)
    K = kernel(X).numpy() + gpflow.config.default_jitter() * np.eye(N)
    f = np.einsum("ij,sjc->sic", np.linalg.cholesky(K), rng.standard_normal((1_000_000, N, C)))
    log_w = sum(
        norm.logcdf((f[:, i, Y[i, 0]] - f[:, i, c]) / np.sqrt(2 * noise))
        for i in range(N)
        for c in range(C)
        if c != Y[i, 0]
    )
    w = np.exp(log_w)
    assert w.std() / np.sqrt(len(w)) / w.mean() < 0.004
    exact_mean = np.einsum("s,sic->ic", w, f) / w.sum()
    assert abs(float(model.log_marginal_likelihood()) - np.log(w.mean())) < 0.2
    np.testing.assert_allclose(model.predict_f(X)[0].numpy(), exact_mean, atol=0.05)


def test_one_factor_ep_is_exact():
    """With one factor, EP's cavity is the prior and log Z_q is the factor's exact log Φ, whatever
    the class factorisation: this checks every term of the estimate of log p(y)."""
    X, Y = np.array([[0.3]]), np.array([[1]])
    kernel = gpflow.kernels.SquaredExponential(variance=1.7)
    model = HeavisideEP((X, Y), kernel, np.array([[0.3], [1.1]]), 2, noise_variance=0.4)
    _converge(model)
    # Φ((f_1 − f_0)/√(2σ²)) under a zero-mean prior symmetric in the classes: exactly ½
    np.testing.assert_allclose(float(model.log_marginal_likelihood()), np.log(0.5), rtol=1e-9)


def test_gradient_with_the_sites_fixed_is_the_derivative_of_converged_ep():
    """At EP's fixed point log Z_q is stationary in the sites, so its gradient with the sites held
    fixed (what Adam follows, eq. 10) is the derivative of log Z_q re-converged at each value of
    the hyperparameter: central differences of converged runs (step 1e-4, error O(h²))."""
    X, Y, Z, _ = _problem(15, 3, M=6, seed=4)
    kernel = gpflow.kernels.SquaredExponential(lengthscales=1.2, variance=1.5)
    model = HeavisideEP((X, Y), kernel, Z, 3)
    # The sites stop moving (by 1e-16) after about 100 steps, from zero sites or from the
    # neighbouring fixed point alike: 200 leave a margin of two.
    step = _converge(model, steps=200)
    with tf.GradientTape() as tape:
        value = model.log_marginal_likelihood()
    unconstrained = model.kernel.lengthscales.unconstrained_variable
    # the lengthscale is softplus(unconstrained): d/dℓ = d/du / sigmoid(u)
    gradient = float(tape.gradient(value, unconstrained) / tf.math.sigmoid(unconstrained))
    h = 1e-4

    def converged_at(lengthscale):
        # The same model and compiled step, re-converged from the neighbouring fixed point: EP's
        # fixed point does not depend on where it starts, and _converge checks it was reached.
        model.kernel.lengthscales.assign(lengthscale)
        _converge(model, steps=200, step=step)
        return float(model.log_marginal_likelihood())

    up, down = converged_at(1.2 + h), converged_at(1.2 - h)
    np.testing.assert_allclose(gradient, (up - down) / (2 * h), rtol=1e-4)


def test_a_failed_step_leaves_the_sites_unchanged_and_bad_labels_are_refused():
    X, Y, Z, kernel = _problem(20, 3, M=6)
    model = HeavisideSEP(kernel, Z, 3, num_data=20)
    ep = ExpectationPropagation(model, 0.5)
    step = tf.function(ep.step)
    step((X, Y))
    before = [p.numpy().copy() for p in (*model.site_parameters, model.site_cholesky)]
    model.likelihood.noise_variance.unconstrained_variable.assign(np.nan)
    value, applied = step((X, Y))
    assert not bool(applied) and np.isnan(float(value))
    for parameter, old in zip((*model.site_parameters, model.site_cholesky), before):
        np.testing.assert_array_equal(parameter.numpy(), old)
    assert int(ep.iteration) == 1
    with pytest.raises(InvalidDataError, match="label"):
        model.log_marginal_likelihood((X, np.full_like(Y, 3)))
    with pytest.raises(ValueError, match="damping"):
        ExpectationPropagation(model, 1.5)


def _sep_trace(dtype, jit_compile, steps=5):
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(60, 2)), rng.integers(0, 3, (60, 1))
    with as_context(Config(float=dtype)):
        method = build_method("sep", gpflow.kernels.SquaredExponential(), X[:10], 3, 60)
        if jit_compile:
            method = ExpectationPropagationMethod(
                "sep",
                method.model,
                float(method.adam.learning_rate),
                RobbinsMonro(),
                jit_compile=True,
            )
        values = [
            float(method.step(tf.constant(X[:30], dtype), tf.constant(Y[:30])))
            for _ in range(steps)
        ]
        return np.array(values), method.model.site_shift.numpy()


@pytest.mark.slow
def test_the_step_compiles_with_xla_and_float32_follows_float64():
    """The whole step (EP and Adam) under jit_compile=True, as on a GPU: the same values as the
    compiled graph to rounding; in float32, the float64 values to float32's precision."""
    reference, sites = _sep_trace(np.float64, jit_compile=False)
    xla, xla_sites = _sep_trace(np.float64, jit_compile=True)
    np.testing.assert_allclose(xla, reference, rtol=1e-10)
    np.testing.assert_allclose(xla_sites, sites, rtol=1e-8, atol=1e-10)
    single, _ = _sep_trace(np.float32, jit_compile=False)
    np.testing.assert_allclose(single, reference, rtol=1e-4)


def test_an_evaluator_takes_both_predictions_from_one_quadrature(monkeypatch):
    """The predictive integral ([N, C, C, J] normal CDFs) is most of an evaluation's cost on many
    classes: the evaluator's probabilities and log densities come from one evaluation of it, and
    equal predict_y's and predict_log_density's."""
    from gpflow_augmented.metrics import Evaluator

    X, Y, Z, kernel = _problem(40, 4, M=8, seed=3)
    model = HeavisideSEP(kernel, Z, 4, num_data=40)
    step = tf.function(ExpectationPropagation(model, 0.5).step)
    for _ in range(20):  # sites away from their zero start, so the posterior is not the prior
        step((X, Y))
    integrals = []
    integral = HeavisideLikelihood.log_class_probabilities

    def counted(self, Fmu, Fvar):
        integrals.append(1)
        return integral(self, Fmu, Fvar)

    monkeypatch.setattr(HeavisideLikelihood, "log_class_probabilities", counted)
    predictions = Evaluator(X, Y).predictions(model)  # traced once: one chunk shape
    assert len(integrals) == 1
    monkeypatch.undo()
    np.testing.assert_allclose(
        predictions["probabilities"], model.predict_y(X)[0].numpy(), rtol=1e-12, atol=0
    )
    np.testing.assert_allclose(
        predictions["log_density"], model.predict_log_density((X, Y)).numpy(), rtol=1e-12, atol=0
    )
