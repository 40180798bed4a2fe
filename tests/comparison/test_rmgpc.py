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

import gpflow_augmented as ga
from gpflow_augmented.comparison import baselines, compare, protocol, tuning
from gpflow_augmented.comparison.baselines import build_method
from gpflow_augmented.comparison.rmgpc import RobustMulticlassEP
from gpflow_augmented.comparison.sep import ExpectationPropagation, whitened_marginals
from gpflow_augmented.validation import InvalidDataError
from helpers import factor_cavity


def _converge(model, steps=400, damping=0.5, step=None):
    """Run EP to its fixed point; returns the compiled step, which a caller may pass back in to
    re-converge the same model after changing its kernel (tracing costs more than the steps)."""
    if step is None:
        step = tf.function(ExpectationPropagation(model, damping).step)
    for _ in range(steps):
        step()
    before = [p.numpy().copy() for p in model.site_parameters]
    step()
    change = max(np.abs(p.numpy() - b).max() for p, b in zip(model.site_parameters, before))
    assert change < 1e-9, f"EP has not converged: the sites still change by {change:.2e}"
    return step


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


@pytest.mark.slow
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
            mean_y = (
                (1 - p) * np.sum(w * (m_y * above + np.sqrt(tau_y) * density)) + p * uniform * m_y
            ) / Z
            second_y = (
                (1 - p)
                * np.sum(w * ((m_y**2 + tau_y) * above + np.sqrt(tau_y) * (m_y + f_k) * density))
                + p * uniform * (m_y**2 + tau_y)
            ) / Z
            mean_k = ((1 - p) * np.sum(w * f_k * above) + p * uniform * m_k) / Z
            second_k = ((1 - p) * np.sum(w * f_k**2 * above) + p * uniform * (m_k**2 + tau_k)) / Z
            np.testing.assert_allclose([mean_y, mean_k], [mean[i, y], mean[i, k]], atol=1e-7)
            np.testing.assert_allclose(
                [second_y - mean_y**2, second_k - mean_k**2],
                [variance[i, y], variance[i, k]],
                rtol=1e-6,
            )
            np.testing.assert_allclose(p * uniform / Z, expit(q[i]), rtol=1e-7)
        # the prior factor ρ^z (1 − ρ)^(1−z): tilted P(z = 1) and ρ's first two moments
        p = expit(q[i] - sites[5][i])
        a_c, b_c = a - sites[6][i], b - sites[7][i]
        inlier, outlier = (1 - p) * b_c / (a_c + b_c), p * a_c / (a_c + b_c)
        Z = inlier + outlier
        np.testing.assert_allclose(outlier / Z, expit(q[i]), rtol=1e-7)
        first = (inlier * a_c + outlier * (a_c + 1)) / ((a_c + b_c + 1) * Z)
        second = (inlier * a_c * (a_c + 1) + outlier * (a_c + 1) * (a_c + 2)) / (
            (a_c + b_c + 1) * (a_c + b_c + 2) * Z
        )
        np.testing.assert_allclose(
            [first, second], [a / (a + b), a * (a + 1) / ((a + b) * (a + b + 1))], rtol=1e-7
        )


# (inputs, labels, tolerances on |Δ log p(y)|, the outlier probabilities, the posterior means)
TINY_PROBLEMS = {
    "separated": ([-1.0, 0.0, 1.0], [0, 1, 2], (0.3, 0.05, 0.15)),
    "separated, two alike": ([-1.0, -0.2, 1.0], [2, 0, 0], (0.3, 0.05, 0.15)),
    "conflicting neighbours": ([-0.48, -0.40, 0.63], [1, 0, 1], (0.3, 0.2, 0.35)),
}


@pytest.mark.parametrize("problem", TINY_PROBLEMS)
@pytest.mark.slow
def test_close_to_the_exact_posterior_of_a_tiny_problem(problem):
    """N = 3, C = 3: the 2³ outlier indicators are enumerated, ρ integrated in closed form
    (Beta–Bernoulli) and the latents by 10⁶ prior draws (Monte Carlo error below 0.005 in each
    quantity). EP's Q factorises over the classes and the indicators, one Gaussian per class:
    measured, that costs 0.13–0.22 nats of log p(y) (EP's is below the exact), ≤ 0.03 in the
    outlier probabilities and ≤ 0.11 in the posterior means when the points are apart; two close
    points with different labels make the exact posterior bimodal (either may be the outlier),
    which one Gaussian cannot follow: 0.14 in the outlier probabilities and 0.27 in the means."""
    inputs, labels, (log_z_tolerance, probability_tolerance, mean_tolerance) = TINY_PROBLEMS[
        problem
    ]
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
        weight = (
            np.exp(betaln(a0 + z.sum(), b0 + N - z.sum()) - betaln(a0, b0)) * float(C) ** -z.sum()
        )
        inliers_correct = correct[:, ~z].all(axis=1)
        mass = weight * inliers_correct.mean()
        evidence += mass
        outlier_mass += mass * z
        mean_f += weight * np.einsum("s,sic->ic", inliers_correct, f) / len(f)
    assert abs(float(model.log_marginal_likelihood()) - np.log(evidence)) < log_z_tolerance
    np.testing.assert_allclose(
        model.outlier_probability().numpy(), outlier_mass / evidence, atol=probability_tolerance
    )
    np.testing.assert_allclose(
        model.predict_f(X)[0].numpy(), mean_f / evidence, atol=mean_tolerance
    )


def test_gradient_with_the_sites_fixed_is_the_derivative_of_converged_ep():
    """Where EP's fixed point is stationary in every site, the gradient with the sites fixed is
    the derivative of converged EP (central differences, step 1e-4). The Beta sites match ρ's
    first two moments (supplement, eq. 10), not E[log ρ] and E[log(1 − ρ)], so they are
    stationary only as ρ's posterior concentrates: with the prior Beta(100, 900) they agree to
    1e-8; with the default Beta(1, 9) the gradient is 2.6 % off (measured), which Adam tolerates."""
    X, Y, _ = _problem(10, 3, seed=1, flip=0.2)
    model = RobustMulticlassEP(
        (X, Y), gpflow.kernels.SquaredExponential(lengthscales=1.3), 3, outlier_prior=(100.0, 900.0)
    )
    # The sites stop moving (by 1e-11, round-off) after about 150 steps, from zero sites or from
    # the neighbouring fixed point alike: 300 leave a margin of two.
    step = _converge(model, steps=300)
    unconstrained = model.kernel.lengthscales.unconstrained_variable
    with tf.GradientTape() as tape:
        value = model.log_marginal_likelihood()
    gradient = float(tape.gradient(value, unconstrained) / tf.math.sigmoid(unconstrained))
    h = 1e-4

    def converged_at(lengthscale):
        # The same model and compiled step, re-converged from the neighbouring fixed point: EP's
        # fixed point does not depend on where it starts, and _converge checks it was reached.
        model.kernel.lengthscales.assign(lengthscale)
        _converge(model, steps=300, step=step)
        return float(model.log_marginal_likelihood())

    up, down = converged_at(1.3 + h), converged_at(1.3 - h)
    np.testing.assert_allclose(gradient, (up - down) / (2 * h), rtol=1e-4)


@pytest.mark.slow
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


# RMGPC as the comparison method 'rmgpc': a full GP given the whole training set at every step.


def _rmgpc_dataset(N=60, C=3, seed=6):
    X, Y, _ = _problem(N + 30, C, seed=seed)
    is_test = np.r_[np.zeros(N, bool), np.ones(30, bool)]
    return ga.datasets.from_arrays("blobs", X, Y[:, 0], is_test)


def test_the_rmgpc_method_refuses_minibatches_too_many_points_and_sparse_options(monkeypatch):
    """Each refusal names the method and comes before anything is computed or trained: the
    inducing points, the first thing compare computes, and tuning's candidates fail the test."""
    d = _rmgpc_dataset()
    N = len(d.X_train)

    def too_late(*args, **kwargs):
        raise AssertionError("computed before the refusal")

    monkeypatch.setattr(protocol, "kmeans_inducing_points", too_late)
    monkeypatch.setattr(tuning, "compare", too_late)
    with pytest.raises(ValueError, match="'rmgpc' is a full GP.*no minibatches"):
        tuning.tune(d, ["lsm", "rmgpc"], batch_size=16, max_iterations=1)
    with pytest.raises(ValueError, match="'rmgpc' has no ρ schedule"):
        tuning.tune(
            d,
            ["lsm", "rmgpc"],
            batch_size=N,
            max_iterations=1,
            method_options={"rmgpc": {"step_size": "constant-0.1"}},
        )
    with pytest.raises(
        ValueError,
        match=r"'rmgpc' is a full GP, trained on the whole training "
        r"set at every step: it takes no minibatches \(give a "
        rf"batch size of at least N = {N}\)",
    ):
        compare(d, ["lsm", "rmgpc"], batch_size=16, max_iterations=1)
    monkeypatch.setattr(baselines, "FULL_GP_MAX_POINTS", N - 1)
    with pytest.raises(
        ValueError, match=f"N = {N} training points is more than its limit of {N - 1}"
    ):
        compare(d, ["rmgpc"], batch_size=N, max_iterations=1)
    monkeypatch.setattr(baselines, "FULL_GP_MAX_POINTS", N)
    with pytest.raises(ValueError, match="its inducing inputs are the training inputs"):
        compare(d, ["rmgpc"], batch_size=N, max_iterations=1, train_inducing_points=True)
    with pytest.raises(ValueError, match="'rmgpc' has no ρ schedule"):
        compare(
            d,
            ["lsm", "rmgpc"],
            batch_size=N,
            max_iterations=1,
            method_options={"rmgpc": {"step_size": "constant-0.1"}},
        )
    monkeypatch.undo()
    X, Y = d.X_train, d.Y_train
    with pytest.raises(ValueError, match="build it on its training set"):
        build_method("rmgpc", ga.initial_kernel(X), X[:5], 3, N, full_batch=True)
    with pytest.raises(ValueError, match="data= is for the full-GP methods"):
        build_method("lsm", ga.initial_kernel(X), X[:5], 3, N, data=(X, Y))
    with pytest.raises(InvalidDataError, match="label"):
        build_method(
            "rmgpc",
            ga.initial_kernel(X),
            X[:5],
            3,
            N,
            full_batch=True,
            data=(X, np.full_like(Y, 3)),
        )


def test_the_rmgpc_method_refuses_any_batch_but_its_training_set_and_changes_nothing():
    d = _rmgpc_dataset()
    X, Y = d.X_train, d.Y_train
    method = build_method(
        "rmgpc", ga.initial_kernel(X), X[:5], 3, len(X), full_batch=True, data=(X, Y)
    )
    before = [v.numpy().copy() for v in method.model.variables]
    for bad_X, bad_Y in [(X[::-1], Y[::-1]), (X[:-1], Y[:-1]), (X, (Y + 1) % 3)]:
        with pytest.raises(ValueError, match="must be given that whole training set, in its order"):
            method.step(tf.constant(bad_X), tf.constant(bad_Y))
    for variable, value in zip(method.model.variables, before):
        np.testing.assert_array_equal(variable.numpy(), value)
    method.step(tf.constant(X), tf.constant(Y))
    assert method.ep.iteration.numpy() == 1 and method.failed_steps == 0


@pytest.mark.slow
def test_the_rmgpc_method_moves_the_kernel_up_the_ep_estimate_of_the_evidence():
    """Adam on minus the EP estimate of log p(y): the kernel it reaches gives settled EP a higher
    estimate than the kernel it started from. A sign error, or Adam on another objective, fails
    this. Measured: −22.709 at the start, −17.537 reached; at the start EP settles slowly (its
    sites still move 4e-4 per step after 1200 steps) but its estimate moves by 3e-4 nats over
    steps 200 to 300 and by 4e-4 more up to step 680, so a 1-nat margin is far outside what is
    left to settle.

    The start is settled on the method's own model before it trains, with the same compiled EP
    step as the end, and the model is then put back exactly: a second method with a learning rate
    of zero would trace its step again for the same start."""
    d = _rmgpc_dataset(N=50, seed=4)
    X, Y = d.X_train, d.Y_train
    method = build_method(
        "rmgpc",
        ga.initial_kernel(X),
        X,
        3,
        len(X),
        full_batch=True,
        data=(X, Y),
        learning_rate=0.05,
    )
    step = tf.function(ExpectationPropagation(method.model, 0.5).step)  # the kernel fixed

    def settled():
        estimates = [float(step()[0]) for _ in range(300)]
        assert abs(estimates[-1] - estimates[-100]) < 1e-3, estimates[-100:]
        return estimates[-1]

    initial = [v.numpy().copy() for v in method.model.variables]
    evidence = {"start": settled()}
    for variable, value in zip(method.model.variables, initial):
        variable.assign(value)
    for _ in range(80):
        method.step(tf.constant(X), tf.constant(Y))
    assert method.failed_steps == 0
    evidence["reached"] = settled()
    assert evidence["reached"] > evidence["start"] + 1.0, evidence


def test_a_prior_factor_with_an_improper_cavity_keeps_its_sites_and_the_others_update():
    """EP skips a factor whose cavity Beta is improper (here factor 0: b − b̃₀ < 0). Without the
    skip that one factor made the whole step non-finite, and so every later step: on 300 points
    of segment with the initial kernel, every step from the third failed."""
    from gpflow_augmented.comparison.rmgpc import _sequential_rate_sites

    def f64(values):
        return tf.constant(values, tf.float64)

    site_a, site_b = f64([0.5, 0.1, 0.2]), f64([3.0, -1.5, -0.6])
    a, b = 1.0 + tf.reduce_sum(site_a), 2.0 + tf.reduce_sum(site_b)  # Beta(1, 2) prior
    site_odds, cavity_odds = f64([0.3, -0.2, 0.1]), f64([-1.0, 0.5, 2.0])
    assert float(b - site_b[0]) < 0 < float(b - site_b[1])
    new_odds, new_a, new_b = (
        t.numpy() for t in _sequential_rate_sites(cavity_odds, site_odds, site_a, site_b, a, b)
    )
    assert np.all(np.isfinite(np.r_[new_odds, new_a, new_b]))
    assert (new_odds[0], new_a[0], new_b[0]) == (0.3, 0.5, 3.0)
    assert np.all(new_a[1:] != site_a.numpy()[1:]) and np.all(new_odds[1:] != site_odds.numpy()[1:])
    # the Beta left after the sweep is proper
    assert 1.0 + new_a.sum() > 0 and 2.0 + new_b.sum() > 0
