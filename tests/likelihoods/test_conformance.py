"""One conformance suite over every augmented likelihood: what CAVI, the bounds and the certificate
rely on, checked the same way for each.

* The sites a step consumes are the derivatives of the local ELBO they belong to: with ℓ(m, v) the
  augmented bound at its optimal local parameters (envelope theorem) or the exact expected
  log-likelihood, ∂ℓ/∂m = linear - quadratic·m and ∂ℓ/∂v = -quadratic/2, column by column.
* The augmented bound is below the exact expected log-likelihood at every point.
* The refined expectation agrees with the exact one to the quadrature's stated accuracy.
* The coefficients take any leading batch shape (CAVI's moments, a Gibbs sampler's draws).
* Where soft labels are accepted, every local ELBO is linear in the label rows.
* The class probabilities given f are a distribution, and the exact expectation at a point mass.
* The sampled and the expected versions agree: where q(f) is a point mass and the augmented family
  is exact given f, the Gibbs conditional's draws have the optimal local parameters as their mean.
"""

import numpy as np
import pytest
import tensorflow as tf

from helpers import Z_TOLERANCE, PrintedRateLogisticSoftmax

from gpflow_augmented.likelihoods import (
    BinaryLogistic,
    LogisticSoftmax,
    Marginals,
    MeanFieldGammaPoisson,
)


def _weighted():
    likelihood = LogisticSoftmax(3, class_weights=True)
    likelihood.class_weights.assign([0.5, 2.0, 1.2])
    return likelihood


LIKELIHOODS = {
    "logistic-softmax": lambda: LogisticSoftmax(3),
    "logistic-softmax gamma-poisson": lambda: LogisticSoftmax(
        3, augmentation=MeanFieldGammaPoisson()
    ),
    "logistic-softmax weighted": _weighted,
    "binary": BinaryLogistic,
}


class WrongCoefficients(LogisticSoftmax):
    """A planted mistake the suite must catch: the count's mean enters the linear coefficient
    with the wrong sign, (y + γ)/2 instead of (y - γ)/2."""

    def conjugate_coefficients(self, Y_rows, local):
        return (Y_rows + local.gamma) / 2, local.theta


def _marginals(likelihood, num_data=7, seed=0):
    rng = np.random.default_rng(seed)
    K = likelihood.num_latent_gps
    Fmu = tf.constant(rng.normal(scale=2.0, size=(num_data, K)))
    Fvar = tf.constant(rng.uniform(0.1, 2.0, size=(num_data, K)))
    Y = rng.integers(0, likelihood.num_classes, size=(num_data, 1))
    return Fmu, Fvar, Y


def _site_mismatch(local_elbo_and_sites, Fmu, Fvar):
    """The largest difference between autodiff of the local ELBO and what its sites say."""
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([Fmu, Fvar])
        local_elbo, linear, quadratic = local_elbo_and_sites(Fmu, Fvar)
        total = tf.reduce_sum(local_elbo)
    d_mean, d_var = tape.gradient(total, [Fmu, Fvar])
    linear, quadratic = tf.stop_gradient(linear), tf.stop_gradient(quadratic)
    return max(
        float(tf.reduce_max(tf.abs(d_mean - (linear - quadratic * Fmu)))),
        float(tf.reduce_max(tf.abs(d_var + quadratic / 2))),
    )


@pytest.mark.parametrize("name", LIKELIHOODS)
def test_the_augmented_sites_are_the_derivatives_of_the_augmented_bound(name):
    likelihood = LIKELIHOODS[name]()
    Fmu, Fvar, Y = _marginals(likelihood)
    mismatch = _site_mismatch(
        lambda m, v: likelihood.augmented_sites(Marginals(m, v), Y), Fmu, Fvar
    )
    # Closed forms against automatic differentiation of the same float64 expressions.
    assert mismatch < 1e-9


def test_the_suite_catches_a_wrong_coefficient():
    likelihood = WrongCoefficients(3)
    Fmu, Fvar, Y = _marginals(likelihood)
    assert (
        _site_mismatch(lambda m, v: likelihood.augmented_sites(Marginals(m, v), Y), Fmu, Fvar)
        > 1e-2
    )


@pytest.mark.parametrize("name", [n for n in LIKELIHOODS if LIKELIHOODS[n]().has_exact_sites])
def test_the_exact_sites_are_the_derivatives_of_the_expected_log_likelihood(name):
    likelihood = LIKELIHOODS[name]()
    Fmu, Fvar, Y = _marginals(likelihood)

    # exact_sites treats the marginals as constants: differentiate exact_local_elbo instead.
    def exact(m, v):
        marginals = Marginals(m, v)
        return (
            likelihood.exact_local_elbo(marginals, Y),
            *likelihood.exact_sites(marginals, Y)[1:],
        )

    assert _site_mismatch(exact, Fmu, Fvar) < 1e-9


@pytest.mark.parametrize("name", LIKELIHOODS)
def test_the_augmented_bound_is_below_the_exact_expectation(name):
    likelihood = LIKELIHOODS[name]()
    for seed in range(3):
        Fmu, Fvar, Y = _marginals(likelihood, num_data=50, seed=seed)
        marginals = Marginals(Fmu, Fvar)
        augmented = likelihood.augmented_local_elbo(marginals, Y).numpy()
        exact = likelihood.exact_local_elbo(marginals, Y).numpy()
        refined = likelihood.refined_exact_local_elbo(marginals, Y).numpy()
        # 1e-4 nats: the quadrature's stated error (test_logistic_softmax.py, docs/benchmarks.md
        # "Accuracy of the expectation"); the two differ by up to 3.4e-5 on these marginals.
        np.testing.assert_allclose(refined, exact, atol=1e-4)
        assert np.all(augmented <= exact + 1e-4)


@pytest.mark.parametrize("name", LIKELIHOODS)
def test_the_coefficients_take_any_leading_batch_shape(name):
    likelihood = LIKELIHOODS[name]()
    Fmu, Fvar, Y = _marginals(likelihood)
    Y_rows = likelihood.label_rows(tf.constant(Y))
    local = likelihood.local_parameters(Marginals(Fmu, Fvar), Y_rows)
    draws = type(local)(*(None if x is None else tf.stack([x, 2 * x]) for x in local))
    linear, quadratic = likelihood.conjugate_coefficients(tf.stack([Y_rows, Y_rows]), draws)
    assert linear.shape == quadratic.shape == (2, *Fmu.shape)
    one_linear, one_quadratic = likelihood.conjugate_coefficients(Y_rows, local)
    np.testing.assert_allclose(linear[0], one_linear)
    np.testing.assert_allclose(quadratic[0], one_quadratic)


@pytest.mark.parametrize("name", [n for n in LIKELIHOODS if LIKELIHOODS[n]().accepts_soft_labels])
def test_every_local_elbo_is_linear_in_the_label_rows(name):
    likelihood = LIKELIHOODS[name]()
    Fmu, Fvar, Y = _marginals(likelihood, num_data=20)
    C = likelihood.num_classes
    first, second = np.eye(C)[Y[:, 0]], np.eye(C)[(Y[:, 0] + 1) % C]
    w = np.random.default_rng(1).uniform(size=(len(Y), 1))
    marginals = Marginals(Fmu, Fvar)
    for local_elbo in (likelihood.augmented_local_elbo, likelihood.exact_local_elbo):
        mixed = local_elbo(marginals, tf.constant(w * first + (1 - w) * second)).numpy()
        expected = (
            w[:, 0] * local_elbo(marginals, tf.constant(first)).numpy()
            + (1 - w[:, 0]) * local_elbo(marginals, tf.constant(second)).numpy()
        )
        np.testing.assert_allclose(mixed, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", LIKELIHOODS)
def test_class_probabilities_are_a_distribution_and_the_exact_expectation_at_a_point_mass(name):
    likelihood = LIKELIHOODS[name]()
    Fmu, _, Y = _marginals(likelihood)
    log_p = likelihood.log_class_probabilities(Fmu).numpy()
    assert log_p.shape == (len(Y), likelihood.num_classes)
    np.testing.assert_allclose(np.exp(log_p).sum(axis=1), 1.0, rtol=1e-12)
    # E_q log p(y | f) at a variance of 1e-12: its quadrature error and the variance's own
    # effect are far below 1e-8.
    expected = likelihood.exact_local_elbo(
        Marginals(Fmu, tf.zeros_like(Fmu) + 1e-12), tf.constant(Y)
    )
    np.testing.assert_allclose(expected, log_p[np.arange(len(Y)), Y[:, 0]], atol=1e-8)


# Likelihoods whose optimal q(ω) at a point-mass q(f) is the exact conditional p(ω | f, y): the
# negative-multinomial family (λ integrated out, as the blocked scan draws it) and the binary one.
EXACT_GIVEN_F = {
    "logistic-softmax": LIKELIHOODS["logistic-softmax"],
    "binary": LIKELIHOODS["binary"],
    "printed Poisson rate (must fail)": lambda: PrintedRateLogisticSoftmax(3),
}


def _draws_against_moments(likelihood, num_draws=20_000):
    """z-scores of the draws' means of (γ, θ) = (n, ω) against the optimal local parameters at
    q(f) = δ(f), for one f per point."""
    Fmu, _, Y = _marginals(likelihood)
    Y_rows = likelihood.label_rows(tf.constant(Y))
    local = likelihood.local_parameters(Marginals(Fmu, tf.zeros_like(Fmu)), Y_rows)
    rng = np.random.default_rng(0)
    F = np.broadcast_to(Fmu.numpy().T, (num_draws, *Fmu.shape[::-1]))  # [S, K, N]
    state = likelihood.initial_gibbs_state(F, rng)
    draws, _ = likelihood.draw_auxiliaries(F, Y_rows.numpy().T, state, rng, "blocked")
    z = []
    for drawn, expected in ((draws.gamma, local.gamma), (draws.theta, local.theta)):
        error = drawn.std(axis=0) / np.sqrt(num_draws) + 1e-12
        z.append(np.max(np.abs(drawn.mean(axis=0) - expected.numpy().T) / error))
    return max(z)


@pytest.mark.parametrize("name", EXACT_GIVEN_F)
def test_the_gibbs_conditionals_average_to_the_optimal_local_parameters(name):
    likelihood = EXACT_GIVEN_F[name]()
    z = _draws_against_moments(likelihood)
    if name.endswith("(must fail)"):
        assert z > 10 * Z_TOLERANCE, z
    else:
        assert z < Z_TOLERANCE, z
