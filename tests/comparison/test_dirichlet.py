"""The Dirichlet GP classifier (Milios et al. 2018) as a comparison method: its regression targets
and noise are the log-normal moment match of the Dirichlet's Gamma components, its likelihood is
Gaussian (so one full-batch natural-gradient step of size 1 reaches the optimum), and its class
probabilities integrate the softmax of q(f) correctly."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import expit, softmax

import gpflow_augmented as ga
from gpflow_augmented.comparison.baselines import build_method
from gpflow_augmented.comparison.dirichlet import (
    DirichletClassification,
    dirichlet_regression_targets,
)
from helpers import Z_TOLERANCE, make_problem


@pytest.mark.parametrize("alpha_epsilon", [0.01, 0.1, 1.0])
def test_targets_are_the_log_normal_moment_match_of_the_gamma_components(alpha_epsilon):
    """A Dirichlet(α) draw is Gamma(α_c, 1) draws normalised; the method replaces each by the
    log-normal with the same mean α_c and variance α_c."""
    one_hot = np.eye(3)[[0, 2, 1, 1]]
    targets, variance = (
        t.numpy() for t in dirichlet_regression_targets(tf.constant(one_hot), alpha_epsilon)
    )
    alpha = one_hot + alpha_epsilon
    mean = np.exp(targets + variance / 2)
    second_moment_minus_mean_squared = (np.exp(variance) - 1) * np.exp(2 * targets + variance)
    np.testing.assert_allclose(mean, alpha, rtol=1e-12)
    np.testing.assert_allclose(second_moment_minus_mean_squared, alpha, rtol=1e-12)
    # the paper's numbers for α_ε = 0.01: σ² = log 101 off the label, log(1/1.01 + 1) on it
    if alpha_epsilon == 0.01:
        np.testing.assert_allclose(variance[0], [np.log(1 / 1.01 + 1), np.log(101), np.log(101)])


def test_variational_expectations_equal_gpflows_gaussian_with_each_points_noise():
    rng = np.random.default_rng(0)
    N, C = 7, 3
    Y = rng.integers(0, C, (N, 1))
    Fmu, Fvar = rng.normal(size=(N, C)), rng.uniform(0.1, 2.0, (N, C))
    likelihood = DirichletClassification(C, alpha_epsilon=0.05)
    ours = likelihood.variational_expectations(None, Fmu, Fvar, Y).numpy()
    targets, variance = (t.numpy() for t in likelihood.regression_targets(Y, tf.float64))
    theirs = np.zeros(N)
    for n in range(N):
        for c in range(C):
            gaussian = gpflow.likelihoods.Gaussian(variance=variance[n, c])
            theirs[n] += gaussian.variational_expectations(
                None,
                Fmu[n : n + 1, c : c + 1],
                Fvar[n : n + 1, c : c + 1],
                targets[n : n + 1, c : c + 1],
            ).numpy()[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_one_full_batch_natural_gradient_step_reaches_the_optimum():
    """The likelihood is Gaussian in f, so q(u) is conjugate: NaturalGradient(γ = 1) on the full
    batch lands on the optimum, where the ELBO's gradient in q(u) is zero."""
    _, (X, Y) = make_problem(40, 3, num_inducing=8, seed=2)
    method = build_method("dirichlet", gpflow.kernels.SquaredExponential(), X[:8], 3, len(X))
    model = method.model
    data = (tf.constant(X), tf.constant(Y))
    variables = [model.q_mu.unconstrained_variable, model.q_sqrt.unconstrained_variable]

    def q_gradient():
        with tf.GradientTape() as tape:
            tape.watch(variables)
            elbo = model.elbo(data)
        return max(float(tf.reduce_max(tf.abs(g))) for g in tape.gradient(elbo, variables))

    before = q_gradient()
    gpflow.optimizers.NaturalGradient(gamma=1.0).minimize(
        lambda: model.training_loss(data), [(model.q_mu, model.q_sqrt)]
    )
    assert before > 1.0 and q_gradient() < 1e-6 * before


def test_two_class_probabilities_equal_quadrature():
    """With C = 2 the softmax is σ(f_1 - f_0), a one-dimensional integral: quasi-Monte Carlo with
    1024 points is within 1e-3 of 60-point Gauss-Hermite (observed ≤ 3.3e-4). The softmax of the
    means alone, ignoring q(f)'s variances of up to 8 here, is off by more than 0.05."""
    rng = np.random.default_rng(1)
    Fmu, Fvar = rng.normal(scale=2.0, size=(20, 2)), rng.uniform(0.05, 4.0, (20, 2))
    p, _ = DirichletClassification(2).predict_mean_and_var(None, Fmu, Fvar)
    nodes, weights = hermegauss(60)
    difference_mean = Fmu[:, 1] - Fmu[:, 0]
    difference_sd = np.sqrt(Fvar.sum(axis=1))
    exact = expit(difference_mean[:, None] + difference_sd[:, None] * nodes) @ weights
    exact /= weights.sum()
    np.testing.assert_allclose(p.numpy()[:, 1], exact, atol=1e-3)
    assert np.max(np.abs(expit(difference_mean) - exact)) > 0.05


def test_many_class_probabilities_agree_with_plain_monte_carlo():
    rng = np.random.default_rng(2)
    N, C, S = 6, 5, 200_000
    Fmu, Fvar = rng.normal(scale=2.0, size=(N, C)), rng.uniform(0.05, 4.0, (N, C))
    likelihood = DirichletClassification(C, num_predictive_samples=4096)
    p, _ = likelihood.predict_mean_and_var(None, Fmu, Fvar)
    draws = softmax(Fmu + np.sqrt(Fvar) * rng.normal(size=(S, N, C)), axis=-1)
    standard_error = draws.std(axis=0) / np.sqrt(S)
    assert np.max(np.abs(p.numpy() - draws.mean(axis=0)) / standard_error) < Z_TOLERANCE
    log_density = likelihood.predict_log_density(None, Fmu, Fvar, np.arange(N)[:, None] % C)
    np.testing.assert_allclose(
        np.exp(log_density.numpy()), p.numpy()[np.arange(N), np.arange(N) % C], rtol=1e-10
    )


def test_bad_labels_and_options_are_refused_by_name():
    likelihood = DirichletClassification(3)
    with pytest.raises(ga.InvalidDataError, match="label"):
        likelihood.variational_expectations(
            None, np.zeros((2, 3)), np.ones((2, 3)), np.array([[0], [3]])
        )
    with pytest.raises(ValueError, match="alpha_epsilon"):
        DirichletClassification(3, alpha_epsilon=0.0)
    with pytest.raises(ValueError, match="alpha_epsilon"):
        build_method(
            "rm", gpflow.kernels.SquaredExponential(), np.zeros((2, 2)), 3, 10, alpha_epsilon=0.1
        )
