"""The exact-bound step: its expectation is accurate, its fixed point is the exact variational
optimum of stock SVGP + LogisticSoftmax, and it never fails or writes a NaN."""

import math
import gpflow
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import eigh
from scipy.special import expit, ndtri
from scipy.stats import qmc

import gpflow_augmented as ga
from helpers import MONOTONE_RTOL, make_problem, separable_problem, wine
from gpflow_augmented.likelihoods import expectation, logistic_softmax
from gpflow_augmented.cavi import CAVI


def sobol_reference(mu, var, replicates=8, log2_points=15):
    """E log Σ_c σ(f_c) by scrambled Sobol: the mean and standard error over replicates."""
    estimates = []
    for seed in range(replicates):
        eps = ndtri(qmc.Sobol(mu.shape[1], scramble=True, seed=seed).random(2**log2_points))
        F = mu[:, None] + np.sqrt(var)[:, None] * eps
        estimates.append(np.log(expit(F).sum(-1)).mean(1))
    return np.mean(estimates, 0), np.std(estimates, 0) / np.sqrt(replicates)


@pytest.mark.parametrize("num_classes", [3, 10])
@pytest.mark.slow
def test_expected_log_normaliser_matches_sobol_reference(num_classes):
    rng = np.random.default_rng(num_classes)
    mu = rng.normal(-2.0, 2.5, (60, num_classes))
    var = rng.uniform(0.01, 4.0, (60, num_classes)) ** 2 / 2
    reference, standard_error = sobol_reference(mu, var)
    got = expectation.expected_log_normaliser(tf.constant(mu), tf.constant(var)).numpy()
    assert standard_error.max() < 5e-5  # the reference can resolve the tolerance below
    # Measured: max error 4e-5 (C = 3) and 8e-5 (C = 10) with the default 20 Hermite nodes.
    np.testing.assert_allclose(got, reference, atol=2e-4)
    # A cruder rule is visibly worse, so the tolerance above does discriminate.
    crude = expectation.expected_log_normaliser(tf.constant(mu), tf.constant(var), num_hermite=6)
    assert np.abs(crude.numpy() - reference).max() > 1e-3


def test_small_eager_quadratures_skip_the_xla_compile_and_agree_with_it():
    """An eager call below _EAGER_UNFUSED_LIMIT (a certificate, an eager step) is evaluated op by op
    instead of compiling the fused quadrature for its shape; a larger one, and a call traced into a
    compiled step, compile it. Both evaluate the same sum, to round-off."""
    fused = expectation._fused_log_normaliser
    rng = np.random.default_rng(7)
    mu, var = (
        tf.constant(rng.normal(-1.0, 2.0, (23, 5))),
        tf.constant(rng.uniform(0.1, 3.0, (23, 5))),
    )
    traces = fused.experimental_get_tracing_count()
    eager = expectation.expected_log_normaliser(mu, var).numpy()
    assert fused.experimental_get_tracing_count() == traces
    compiled = tf.function(expectation.expected_log_normaliser)(mu, var).numpy()
    assert fused.experimental_get_tracing_count() == traces + 1
    # Summed in another order by XLA's fused loops: observed 2e-15.
    np.testing.assert_allclose(eager, compiled, rtol=1e-12)
    per_row = expectation._grid_size(
        tf.TensorShape([1, 5]), expectation.DEFAULT_NUM_HERMITE, expectation.S_STEP
    )
    rows = expectation._EAGER_UNFUSED_LIMIT // per_row + 1
    large = tf.zeros((rows, 5), tf.float64)
    expectation.expected_log_normaliser(large, large + 1.0)
    assert fused.experimental_get_tracing_count() == traces + 2


def test_sites_are_bonnet_price_derivatives():
    """linear - quadratic·m = E[∂ log p/∂f] and quadratic = -E[∂² log p/∂f²], by Monte Carlo."""
    rng = np.random.default_rng(0)
    mu, var = rng.normal(0, 1.5, (5, 4)), rng.uniform(0.1, 2.0, (5, 4))
    y = np.eye(4)[rng.integers(0, 4, 5)]
    _, linear, quadratic = expectation.exact_sites(
        tf.constant(mu), tf.constant(var), tf.constant(y)
    )
    eps = ndtri(qmc.Sobol(4, scramble=True, seed=1).random(2**16))
    F = mu[:, None] + np.sqrt(var)[:, None] * eps  # [N, S, C]
    s = expit(F)
    Z = s.sum(-1, keepdims=True)
    d1 = s * (1 - s)
    gradient = y[:, None] * (1 - s) - d1 / Z
    hessian = -y[:, None] * d1 - (d1 * (1 - 2 * s)) / Z + (d1 / Z) ** 2
    np.testing.assert_allclose(linear.numpy() - quadratic.numpy() * mu, gradient.mean(1), atol=2e-4)
    np.testing.assert_allclose(quadratic.numpy(), -hessian.mean(1), atol=2e-4)
    assert np.any(quadratic.numpy() < 0)  # the normaliser's curvature is not log-concave


def exact_optimum(model, data, maxiter=5000):
    """Stock SVGP + LogisticSoftmax with the model's kernel and Z, q(u) optimised by L-BFGS."""
    svgp = gpflow.models.SVGP(
        model.kernel,
        ga.LogisticSoftmax(model.num_classes),
        model.inducing_variable.Z.numpy(),
        num_latent_gps=model.num_classes,
        num_data=model.num_data,
        whiten=model.whiten,
    )
    gpflow.utilities.set_trainable(svgp.kernel, False)
    gpflow.utilities.set_trainable(svgp.inducing_variable, False)
    result = gpflow.optimizers.Scipy().minimize(
        svgp.training_loss_closure(data), svgp.trainable_variables, options=dict(maxiter=maxiter)
    )
    assert result.success, result.message
    return svgp


def q_gradient(model, data):
    """max |∂ELBO/∂(q_mu, q_sqrt)| of the model's (exact) ELBO."""
    variables = [model.q_mu.unconstrained_variable, model.q_sqrt.unconstrained_variable]
    with tf.GradientTape() as tape:
        tape.watch(variables)
        elbo = model.elbo((tf.constant(data[0]), tf.constant(data[1])))
    return max(float(tf.reduce_max(tf.abs(g))) for g in tape.gradient(elbo, variables))


def exact_problems():
    d = wine()
    kernel = gpflow.kernels.SquaredExponential(lengthscales=ga.median_lengthscale(d.X_train))
    full_gp = ga.LogisticSoftmaxSVGP(
        kernel, d.X_train.copy(), 3, num_data=len(d.X_train), scheme="exact"
    )
    sparse, data = make_problem(80, 4, num_inducing=12, seed=7, variance=3.0, scheme="exact")
    return {
        "wine full GP": (full_gp, (d.X_train, d.Y_train), d.X_test),
        "sparse": (sparse, data, data[0]),
    }


@pytest.fixture(scope="module")
def optima():
    results = {}
    for name, (model, data, X_test) in exact_problems().items():
        svgp = exact_optimum(model, data)
        results[name] = (svgp.predict_y(X_test)[0].numpy(), float(svgp.elbo(data)))
    return results


SWEEPS = 150


def fixed_point(model, data):
    cavi = ga.CAVI(model, 1.0, warm_start_iterations=10)
    start_gradient = q_gradient(model, data)
    for _ in range(SWEEPS):
        cavi.step(data)
    return start_gradient


@pytest.mark.parametrize("name", ["wine full GP", "sparse"])
@pytest.mark.slow
def test_fixed_point_is_the_exact_vi_optimum(name, optima, capsys):
    model, data, X_test = exact_problems()[name]
    start_gradient = fixed_point(model, data)
    reference, reference_elbo = optima[name]
    distance = np.abs(model.predict_y(X_test)[0].numpy() - reference).max()
    gradient = q_gradient(model, data)
    with capsys.disabled():
        print(
            f"\n[{name}] max |Δp| = {distance:.2e}; ELBO {float(model.elbo(data)):.6f} vs "
            f"L-BFGS {reference_elbo:.6f}; gradient {start_gradient:.2e} → {gradient:.2e}"
        )
    assert distance < 1e-2
    assert float(model.elbo(data)) > reference_elbo - 1e-6 * abs(reference_elbo)
    assert start_gradient > 1.0 and gradient < 1e-6 * start_gradient


@pytest.mark.slow
def test_wrong_curvature_misses_the_optimum(optima, monkeypatch):
    """Price's factor 2 dropped: the step still converges, but to another point."""
    true_sites = expectation.exact_sites

    def half_curvature(*args, **kwargs):
        expected, linear, quadratic = true_sites(*args, **kwargs)
        Fmu = args[0]
        return expected, linear - quadratic * Fmu / 2, quadratic / 2

    monkeypatch.setattr(logistic_softmax, "exact_sites", half_curvature)
    model, data, X_test = exact_problems()["sparse"]
    fixed_point(model, data)
    assert q_gradient(model, data) > 1e-3


@given(
    num_data=st.integers(3, 30),
    num_classes=st.integers(2, 6),
    lengthscale=st.floats(0.2, 3.0),
    variance=st.floats(0.1, 1e3),
    whiten=st.booleans(),
    minibatch=st.booleans(),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=15, deadline=None, derandomize=True)
@pytest.mark.slow
def test_exact_steps_never_fail(
    num_data, num_classes, lengthscale, variance, whiten, minibatch, seed
):
    """ρ = 1 from the prior, no warm start, kernel variance up to 1e3: every step is taken and
    finite (the backoff keeps the precision positive definite)."""
    model, (X, Y) = make_problem(
        num_data,
        num_classes,
        num_inducing=max(2, num_data // 2),
        seed=seed,
        lengthscale=lengthscale,
        variance=variance,
        scheme="exact",
        whiten=whiten,
    )
    # Eager: the same update as the compiled step (test_compiled_and_xla_steps_equal_eager), without
    # a trace for each of the 15 problems.
    cavi = ga.CAVI(model, 1.0, compile=False)
    rng = np.random.default_rng(seed)
    for _ in range(8):
        batch = (
            rng.choice(num_data, max(1, num_data // 3), replace=False) if minibatch else slice(None)
        )
        elbo = cavi.step((X[batch], Y[batch]))
        assert np.isfinite(elbo.numpy())
    assert int(cavi.iteration) == 8
    assert np.all(np.isfinite(model.q_mu.numpy())) and np.all(np.isfinite(model.q_sqrt.numpy()))


def never_line_searched(self, geometry):
    return False


def full_batch_elbos(steps=120, jit_compile=False):
    """CAVI's full-batch ELBOs at ρ = 1 on separable classes at a large fixed kernel variance
    (358, where the ELBO wants it), after the 50 warm-start steps."""
    model, data = separable_problem()
    model.kernel.variance.assign(358.0)
    optimizer = ga.CAVI(model, warm_start_iterations=50, jit_compile=jit_compile)
    return np.array([float(optimizer.step(data)) for _ in range(50 + steps)])[50:]


@pytest.mark.slow
def test_full_batch_steps_never_lower_the_elbo_and_reach_its_optimum(monkeypatch):
    """The exact bound's sites make its ρ = 1 step a Newton step, which overshoots where E_q log
    p(y | f) is far from quadratic; on the full batch the step halves ρ until the ELBO does not
    fall. Without that (the broken variant) the ELBO falls by up to 3.6e6 on this problem and never
    settles; with it every step rises (to float64 round-off) and the last ones agree to 1e-6.
    It halves ρ on the first steps after the warm start, so XLA = graph is checked where it does."""
    elbos = full_batch_elbos()
    assert np.all(np.diff(elbos) >= -MONOTONE_RTOL * np.abs(elbos[1:])), np.diff(elbos).min()
    assert np.ptp(elbos[-10:]) < 1e-6, elbos[-10:]
    # The search compiles with XLA (a while loop of conditionals) and takes the same steps.
    np.testing.assert_allclose(full_batch_elbos(10, jit_compile=True), elbos[:10], rtol=1e-9)
    monkeypatch.setattr(CAVI, "_searches_line", never_line_searched)
    unsearched = full_batch_elbos()
    assert np.diff(unsearched).min() < -1.0, np.diff(unsearched).min()


@pytest.mark.slow
def test_the_search_is_traced_for_every_batch_on_the_exact_bound_only(monkeypatch):
    """A minibatch step is line-searched on its own batch's bound as the full batch is; an
    augmented bound's step (θ ≥ 0: it ascends its bound at any ρ) and a class subset's are not."""
    traced = []
    original = CAVI._line_search

    def recorded(self, *args, **kwargs):
        traced.append(int(args[0].marginals.mean.shape[0]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CAVI, "_line_search", recorded)
    model, (X, Y) = make_problem(30, 3, num_inducing=6, seed=1, scheme="exact")
    trainer = ga.Trainer(model)
    trainer.step((X[:10], Y[:10]))  # a minibatch: N / B = 3
    assert traced == [10]
    trainer.step((X, Y))  # the full batch, traced anew
    assert traced == [10, 30]
    augmented, data = make_problem(30, 3, num_inducing=6, seed=1, scheme="negative-multinomial")
    ga.CAVI(augmented).step(data)
    ga.CAVI(model, class_subset_size=2).step((X, Y))
    assert traced == [10, 30]


@pytest.mark.slow
def test_backoff_takes_a_shorter_step_and_refuses_a_hopeless_one(monkeypatch):
    # The sites below are deliberately wrong, so the full-batch line search would rightly keep
    # q(u) where it is; this is about the factorisation's backoff, which comes before it. No warm
    # start: the exact sites from the first step.
    monkeypatch.setattr(CAVI, "_searches_line", never_line_searched)
    model, data = make_problem(30, 3, num_inducing=8, seed=3, scheme="exact")
    ga.CAVI(model, 1.0, warm_start_iterations=0).step(data)
    true_sites = expectation.exact_sites

    def negative_curvature(factor):
        def sites(*args, **kwargs):
            expected, linear, quadratic = true_sites(*args, **kwargs)
            return expected, linear, quadratic - factor

        return sites

    # Moderately negative: Λ̂ is indefinite, a shorter step is positive definite.
    monkeypatch.setattr(logistic_softmax, "exact_sites", negative_curvature(5.0))
    before = [v.numpy().copy() for v in model.variables]
    geometry = model.batch_geometry(tf.constant(data[0]))
    q_mu, q_sqrt = geometry.q_mu, geometry.q_sqrt
    _, linear, quadratic = model.bound.sites(model.likelihood, geometry, tf.constant(data[1]), None)
    statistics = ga.updates.conjugate_statistics(geometry.A, linear, quadratic)
    scale = ga.updates.minibatch_scale(model.num_data, float(len(data[0])))
    eye = np.eye(8)[None] + scale.numpy() * statistics[0].numpy()
    assert np.linalg.eigvalsh(eye).min() < 0  # the full step has no Cholesky factor
    _, _, rho = ga.updates.natural_parameter_step_with_backoff(
        q_mu, q_sqrt, statistics, scale, tf.constant(1.0, tf.float64)
    )
    assert np.all(rho.numpy() < 1) and np.all(rho.numpy() > 0)
    ga.CAVI(model, 1.0, warm_start_iterations=0).step(data)
    assert np.all(np.isfinite(model.q_sqrt.numpy()))
    assert not np.array_equal(model.q_mu.numpy(), before[0])

    # Hopeless: no halving helps; the step is refused and q(u) is bit-identical (the full-batch
    # line search, back on, halves further and then refuses it too, rather than stepping by 0).
    monkeypatch.undo()
    monkeypatch.setattr(logistic_softmax, "exact_sites", negative_curvature(1e12))
    before = [v.numpy().copy() for v in model.variables]
    cavi = ga.CAVI(model, 1.0, warm_start_iterations=0)
    with pytest.raises(ga.NumericalError):
        cavi.step(data)
    for got, want in zip(model.variables, before):
        np.testing.assert_array_equal(got.numpy(), want)
    assert int(cavi.iteration) == 0


def largest_covariance_growth(old_sqrt, new_sqrt):
    """max over directions of x'S_new x / x'S_old x, per class."""
    return np.array(
        [
            eigh(n @ n.T, o @ o.T, eigvals_only=True).max()
            for o, n in zip(np.asarray(old_sqrt), np.asarray(new_sqrt))
        ]
    )


def test_a_minibatch_step_with_negative_sites_keeps_the_covariance_within_a_factor_of_two():
    # Whitened q(v) with precision Λ = 10 I and one batch site of curvature θ < 0 along e₁, scaled
    # by N/B = 100. At ρ = ½, Λ_new's e₁ eigenvalue is 5 + ½(1 + 100 θ) = 10⁻³: positive
    # definite, so the factorisation's backoff alone takes it, and the covariance grows 10⁴-fold
    # along e₁ (shuttle's runaway, module docstring of gpflow_augmented.updates). Λ_new ⪰ Λ / 2
    # needs 10 - 20ρ + 10⁻³ρ ≥ 5, so exactly one halving (ρ = ¼) restores it. A second class with
    # θ = 0 there is untouched.
    theta = (1e-3 - 5.5) / 50.0
    e1 = np.array([1.0, 0.0, 0.0])
    statistics = (
        tf.constant(np.stack([theta * np.outer(e1, e1), np.zeros((3, 3))])),
        tf.constant(np.zeros((3, 2))),
    )
    q_mu = tf.constant(np.full((3, 2), 0.3))
    q_sqrt = tf.constant(np.stack([np.eye(3)] * 2) / np.sqrt(10.0))
    scale, half = tf.constant(100.0, tf.float64), tf.constant(0.5, tf.float64)

    def step(ratio):
        return ga.updates.natural_parameter_step_with_backoff(
            q_mu, q_sqrt, statistics, scale, half, min_precision_ratio=ratio
        )

    _, sqrt, rho = step(ga.updates.MIN_PRECISION_RATIO)
    np.testing.assert_array_equal(rho.numpy(), [0.25, 0.5])
    growth = largest_covariance_growth(q_sqrt, sqrt)
    assert np.all(growth <= 2.0 + 1e-9)
    # Without the trust region (κ = 0, the code before) the same step is taken at ρ = ½.
    _, sqrt, rho = step(0.0)
    np.testing.assert_array_equal(rho.numpy(), [0.5, 0.5])
    assert largest_covariance_growth(q_sqrt, sqrt)[0] > 1e3


@pytest.mark.slow
def test_fit_returns_the_certificate_and_trains_hyperparameters_on_the_exact_bound():
    model, data = make_problem(60, 3, num_inducing=10, seed=9, scheme="negative-multinomial")
    twin, _ = make_problem(60, 3, num_inducing=10, seed=9, scheme="negative-multinomial")
    result = ga.fit(
        model,
        data,
        iterations=1,
        batch_size=None,
        learning_rate=0.1,
        hyperparameter_bound=ga.ExactBound(),
        progress=False,
    )
    # The same iteration by hand: the CAVI step with the variance, then one Adam step on the
    # exact ELBO for the other hyperparameters.
    ga.CAVI(twin, update_variance=True).step(data)
    adam = gpflow.keras.tf_keras.optimizers.Adam(0.1)
    variables = adam_variables(twin)
    with tf.GradientTape() as tape:
        loss = -(twin.exact_elbo(data) + twin.log_prior_density())
    adam.apply_gradients(zip(tape.gradient(loss, variables), variables))
    np.testing.assert_allclose(
        model.kernel.variance.numpy(), twin.kernel.variance.numpy(), rtol=1e-12
    )
    np.testing.assert_allclose(
        model.kernel.lengthscales.numpy(), twin.kernel.lengthscales.numpy(), rtol=1e-12
    )
    certificate = result.certificate
    assert certificate.augmented < certificate.exact and certificate.gap > 0
    np.testing.assert_allclose(certificate.exact, float(model.exact_elbo(data)), rtol=1e-10)
    np.testing.assert_allclose(certificate.augmented, float(model.elbo(data)), rtol=1e-10)
    with pytest.raises(TypeError, match="hyperparameter_bound must be None .* got 'exact'"):
        ga.Trainer(model, hyperparameter_bound="exact")
    # On the exact bound the hyperparameter gradient is the step's own: another bound is refused.
    exact_model, _ = make_problem(60, 3, num_inducing=10, seed=9, scheme="exact")
    with pytest.raises(ValueError, match="hyperparameter_bound must be None or the model's"):
        ga.Trainer(exact_model, hyperparameter_bound=ga.AugmentedBound())


@pytest.mark.slow
def test_the_default_learning_rate_is_the_one_chosen_for_the_models_bound():
    exact, data = make_problem(30, 3, num_inducing=5, seed=0, scheme="exact")
    augmented, _ = make_problem(30, 3, num_inducing=5, seed=0, scheme="negative-multinomial")
    result = ga.fit(exact, data, iterations=1, batch_size=None, progress=False)
    assert float(result.trainer.learning_rate) == pytest.approx(ga.EXACT_LEARNING_RATE)
    assert float(ga.Trainer(augmented).adam.learning_rate) == pytest.approx(0.01)
    assert float(ga.Trainer(exact, learning_rate=0.02).adam.learning_rate) == pytest.approx(0.02)


def _rate_after(trainer, data, steps):
    """(Adam's steps, the rate of the last one) after ``steps`` steps on the full batch."""
    for _ in range(steps):
        trainer.step(data)
    return int(trainer.adam.iterations), float(trainer.adam.learning_rate)


def test_adams_rate_decays_as_its_inverse_square_root_on_the_exact_bound_only():
    exact, data = make_problem(30, 3, num_inducing=5, seed=0, scheme="exact")
    augmented, _ = make_problem(30, 3, num_inducing=5, seed=0, scheme="negative-multinomial")
    decay = ga.EXACT_LEARNING_RATE_DECAY_STEPS
    steps, rate = _rate_after(ga.Trainer(exact, warm_start_iterations=0), data, 30)
    assert steps == 30  # the last step was Adam's step t = 29
    assert rate == pytest.approx(ga.EXACT_LEARNING_RATE / np.sqrt(1 + 29 / decay), rel=1e-6)
    trainer = ga.Trainer(exact, learning_rate=0.05, learning_rate_decay_steps=10.0)
    trainer.learning_rate.assign(0.02)  # the rate at step 0 can be changed after the build
    assert _rate_after(trainer, data, 31)[1] == pytest.approx(0.02 / 2.0, rel=1e-6)
    constant = ga.Trainer(exact, learning_rate_decay_steps=math.inf, warm_start_iterations=0)
    assert _rate_after(constant, data, 5)[1] == pytest.approx(ga.EXACT_LEARNING_RATE)
    assert _rate_after(ga.Trainer(augmented), data, 5)[1] == pytest.approx(0.01)
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="learning_rate_decay_steps"):
            ga.Trainer(exact, learning_rate_decay_steps=bad)


def adam_variables(model):
    """The trainable variables but the kernel variance, which CAVI updates by default in fit."""
    variance = model.kernel.variance.unconstrained_variable
    return [v for v in model.trainable_variables if v is not variance]


def manual_exact_iteration(model, cavi, adam, batch, gradient_after_step=False):
    """What the fused iteration must equal: the exact ELBO's hyperparameter gradient at q(u) before
    the CAVI step, the CAVI step (with the kernel variance), then Adam on the other hyperparameters
    (with ``gradient_after_step`` the gradient is taken after the step instead: the unfused order,
    which the test must tell apart)."""
    X, Y = tf.constant(batch[0]), tf.constant(batch[1])
    variables = adam_variables(model)

    def gradient():
        with tf.GradientTape() as tape:
            loss = -(model.exact_elbo((X, Y)) + model.log_prior_density())
        return tape.gradient(loss, variables)

    gradients = None if gradient_after_step else gradient()
    cavi.update(X, Y)
    if gradient_after_step:
        gradients = gradient()
    adam.apply_gradients(zip(gradients, variables))


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.slow
def test_fused_exact_iteration_equals_gradient_before_the_step_then_cavi(whiten):
    # Minibatches, ρ < 1, a learned constant prior mean and one warm-start step: the fused
    # iteration takes the collapsed sites first, then the sites from its own backward pass. No
    # averaging: with it the fused iteration's gradient is at the iterate, which the manual
    # iteration's model.elbo does not see.
    def build():
        model, data = make_problem(
            60,
            3,
            num_inducing=12,
            seed=4,
            scheme="exact",
            whiten=whiten,
            mean_function=gpflow.mean_functions.Constant(np.array([-1.0])),
        )
        model.kernel.lengthscales.assign(1.5)
        return model, data

    fused, data = build()
    trainer = ga.Trainer(
        fused,
        0.8,
        learning_rate=0.05,
        warm_start_iterations=1,
        learning_rate_decay_steps=math.inf,
        averaging=math.inf,
    )
    manual, _ = build()
    cavi = ga.CAVI(
        manual,
        0.8,
        warm_start_iterations=1,
        update_variance=True,
        compile=False,
        averaging=math.inf,
    )
    adam = gpflow.keras.tf_keras.optimizers.Adam(0.05)
    unfused, _ = build()
    unfused_cavi = ga.CAVI(
        unfused,
        0.8,
        warm_start_iterations=1,
        update_variance=True,
        compile=False,
        averaging=math.inf,
    )
    unfused_adam = gpflow.keras.tf_keras.optimizers.Adam(0.05)
    rng = np.random.default_rng(0)
    for _ in range(4):
        index = rng.choice(60, 20, replace=False)
        batch = (data[0][index], data[1][index])
        trainer.step(batch)
        manual_exact_iteration(manual, cavi, adam, batch)
        manual_exact_iteration(unfused, unfused_cavi, unfused_adam, batch, gradient_after_step=True)
    for got, want, other in zip(fused.variables, manual.variables, unfused.variables):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-11)
    # The order matters by far more than the tolerance, so the comparison can tell them apart.
    assert (
        np.max(np.abs(fused.kernel.lengthscales.numpy() - unfused.kernel.lengthscales.numpy()))
        > 1e-6
    )
