"""The binary X-GPC model: properties that fail if its updates or its ELBO are wrong."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import gpflow_augmented as ga
from gpflow_augmented.likelihoods import BinaryLogistic, binary_local_elbo, polya_gamma
from gpflow_augmented.models import BinaryLogisticSVGP

from helpers import assert_monotone, binary_problem, cavi_trace, variational_gradient_norm


def wine_one_vs_rest():
    """A real binary task: wine cultivar 1 against the other two (standardised, seeded split)."""
    d = ga.datasets.load_dataset("wine", test_fraction=0.3, seed=0)
    return d.X_train, (d.Y_train == 1).astype(int), d.X_test, (d.Y_test == 1).astype(int)


@given(
    num_data=st.integers(3, 40),
    lengthscale=st.floats(0.3, 3.0),
    variance=st.floats(0.3, 5.0),
    whiten=st.booleans(),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=10, deadline=None, derandomize=True)
@pytest.mark.slow
def test_elbo_never_decreases_random_problems(num_data, lengthscale, variance, whiten, seed):
    model, data = binary_problem(
        num_data, max(2, num_data // 2), seed, lengthscale, variance, whiten
    )
    assert_monotone(cavi_trace(model, data, compile=True))


def test_elbo_never_decreases_on_real_data():
    X, Y, _, _ = wine_one_vs_rest()
    kernel = gpflow.kernels.SquaredExponential(lengthscales=ga.median_lengthscale(X))
    model = BinaryLogisticSVGP(kernel, X[::2].copy(), num_data=len(X))
    elbos = cavi_trace(model, (X, Y), compile=True)
    assert_monotone(elbos)
    assert elbos[-1] > elbos[0] + 10


@pytest.mark.parametrize("whiten", [True, False])
def test_zero_gradient_at_fixed_point(whiten):
    model, data = binary_problem(40, 12, seed=1, whiten=whiten)
    before = variational_gradient_norm(model, data)
    ga.CAVI(model).iterate(data, iterations=300)
    after = variational_gradient_norm(model, data)
    assert before > 1e-2
    assert after < 1e-7 * max(1.0, before)


class ThetaTimesMeanLogistic(BinaryLogistic):
    """The reference implementation's ELBO bug: θ·m where θ·(m² + v) is meant. Its CAVI updates
    are still right (they do not use the ELBO), so only a gradient test can see it."""

    def augmented_local_elbo(self, marginals, Y, local=None):
        local_elbo = super().augmented_local_elbo(marginals, Y, local)
        Fmu, Fvar = marginals.mean, marginals.variance
        c = tf.stop_gradient(polya_gamma.tilt(Fmu, Fvar))
        theta = polya_gamma.polya_gamma_mean(tf.ones_like(c), c)
        right = theta * (tf.square(Fmu) + Fvar) / 2
        wrong = theta * Fmu / 2
        return local_elbo + tf.reduce_sum(right - wrong, axis=-1)


def theta_times_mean_svgp(kernel, Z, num_data):
    return ga.AugmentedSVGP(kernel, ThetaTimesMeanLogistic(), Z, num_data=num_data)


def hyperparameter_gradient_error(model_class):
    """|autodiff - finite difference| / |gradient| of the ELBO in the kernel hyperparameters at
    the CAVI fixed point. The finite differences re-optimise the local parameters (model.elbo sets
    c at its optimum for whatever hyperparameters it sees); autodiff holds them fixed."""
    X, Y, _, _ = wine_one_vs_rest()
    X, Y = X[:60], Y[:60]
    kernel = gpflow.kernels.SquaredExponential(variance=2.0, lengthscales=3.0)
    model = model_class(kernel, X[::3].copy(), num_data=len(X))
    ga.CAVI(model).iterate((X, Y), iterations=200)
    parameters = [model.kernel.variance, model.kernel.lengthscales]
    with tf.GradientTape() as tape:
        elbo = model.elbo((X, Y))
    autodiff = np.array(
        [float(g) for g in tape.gradient(elbo, [p.unconstrained_variable for p in parameters])]
    )
    step = 1e-5
    finite = []
    for parameter in parameters:
        variable = parameter.unconstrained_variable
        centre = variable.numpy()
        values = []
        for sign in (1, -1):
            variable.assign(centre + sign * step)
            values.append(float(model.elbo((X, Y))))
        variable.assign(centre)
        finite.append((values[0] - values[1]) / (2 * step))
    finite = np.array(finite)
    assert np.max(np.abs(finite)) > 1.0  # a gradient worth checking
    return np.max(np.abs(autodiff - finite)) / np.max(np.abs(finite))


def test_hyperparameter_gradient_matches_finite_differences():
    # Central differences with h = 1e-5 on an ELBO of O(100): truncation O(h²) and round-off
    # O(1e-16·100/h) are both ~1e-9 relative to gradients of O(1-10).
    assert hyperparameter_gradient_error(BinaryLogisticSVGP) < 1e-6


def test_gradient_check_catches_theta_times_mean():
    assert hyperparameter_gradient_error(theta_times_mean_svgp) > 1e-2


def test_local_elbo_is_the_jaakkola_jordan_bound_at_the_optimum():
    rng = np.random.default_rng(4)
    Fmu = rng.normal(scale=3.0, size=(50, 1))
    Fvar = rng.uniform(0.01, 4.0, size=(50, 1))
    sign = rng.choice([-1.0, 1.0], size=(50, 1))
    c = np.sqrt(Fmu**2 + Fvar)
    theta = np.tanh(c / 2) / (2 * c)
    got = binary_local_elbo(Fmu, Fvar, sign, c, theta).numpy()
    want = (sign * Fmu / 2 - np.log(2 * np.cosh(c / 2)))[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # Any other tilt gives a lower bound (c is the unique maximiser).
    for other in (0.5 * c, 2 * c):
        t = np.tanh(other / 2) / (2 * other)
        assert np.all(binary_local_elbo(Fmu, Fvar, sign, other, t).numpy() < got)
    # ... and the bound is below the exact E log σ(y'f) (Gauss–Hermite).
    nodes, weights = np.polynomial.hermite.hermgauss(60)
    f = Fmu + np.sqrt(2 * Fvar) * nodes
    exact = (-np.logaddexp(0.0, -sign * f)) @ weights / np.sqrt(np.pi)
    assert np.all(got <= exact + 1e-12)


def test_matches_stock_svgp_with_bernoulli_trained_by_gradients():
    # Same kernel (fixed), same inducing inputs (fixed); CAVI to its fixed point against GPflow's
    # SVGP + Bernoulli(sigmoid) with q(u) optimised by L-BFGS on the exact (quadrature) ELBO.
    X, Y, X_test, _ = wine_one_vs_rest()
    kernel = gpflow.kernels.SquaredExponential(lengthscales=ga.median_lengthscale(X))
    Z = X[::3].copy()
    model = BinaryLogisticSVGP(kernel, Z, num_data=len(X))
    ga.CAVI(model).iterate((X, Y), iterations=100)
    stock = gpflow.models.SVGP(
        kernel, gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid), Z, num_data=len(X), whiten=True
    )
    gpflow.utilities.set_trainable(stock.kernel, False)
    gpflow.utilities.set_trainable(stock.inducing_variable, False)
    gpflow.optimizers.Scipy().minimize(
        stock.training_loss_closure((X, Y)), stock.trainable_variables, options={"maxiter": 5000}
    )
    ours, _ = model.predict_y(X_test)
    theirs, _ = stock.predict_y(X_test)
    difference = np.max(np.abs(ours.numpy() - theirs.numpy()))
    print(f"binary X-GPC vs SVGP + Bernoulli: max |Δp| = {difference:.4f}")
    assert difference < 0.02
    assert np.mean((theirs.numpy() > 0.5) == (ours.numpy() > 0.5)) > 0.95


@pytest.mark.parametrize("labels", [[0, 1, 2], [-1, 1, 1]])
def test_labels_outside_zero_one_raise(labels):
    model, _ = binary_problem(10, 3)
    X = np.zeros((3, 2))
    Y = np.array(labels)[:, None]
    before = [v.numpy().copy() for v in model.variables]
    with pytest.raises(ga.InvalidDataError, match="labels"):
        ga.CAVI(model).step((X, Y))
    for v, b in zip(model.variables, before):
        np.testing.assert_array_equal(v.numpy(), b)


def test_stop_rule_ends_training_at_the_fixed_point():
    model, data = binary_problem(60, 15, seed=7)
    rule = ga.GlobalParameterConvergence(threshold=1e-4, window=5)
    result = ga.fit(
        model,
        data,
        iterations=500,
        batch_size=None,
        train_hyperparameters=False,
        stop_rule=rule,
        progress=False,
    )
    assert result.converged and 5 < len(result.elbo) < 500
    assert rule.average_change < 1e-4
    # Full-batch CAVI from there on barely moves the ELBO: the rule stopped near the optimum.
    stopped = float(model.elbo(data))
    ga.CAVI(model).iterate(data, iterations=200)
    assert float(model.elbo(data)) - stopped < 1e-3 * abs(stopped)


def test_stop_rule_waits_for_a_full_window_and_validates():
    model, data = binary_problem(20, 5, seed=8)
    rule = ga.GlobalParameterConvergence(threshold=1e300, window=3)
    # Even a huge threshold needs `window` changes, i.e. window + 1 observed states.
    assert [rule.update(model) for _ in range(4)] == [False, False, False, True]
    with pytest.raises(ValueError, match="threshold"):
        ga.GlobalParameterConvergence(threshold=0.0)
    with pytest.raises(ValueError, match="window"):
        ga.GlobalParameterConvergence(window=0)
