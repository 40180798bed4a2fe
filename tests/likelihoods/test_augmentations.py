"""At any fixed q(u): paper ELBO ≤ collapsed ELBO ≤ non-augmented ELBO ≤ log p(y), on problems small
enough (N·C ≤ 6) for tensor-product Gauss–Hermite quadrature to give the integrals exactly."""
import itertools

import numpy as np
import pytest
import tensorflow as tf
from gpflow.config import default_jitter
from gpflow.kullback_leiblers import gauss_kl

import gpflow_augmented as ga
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
    expected = sum(
        np.sum(w * log_lik(Fmu[i] + np.sqrt(Fvar[i]) * z, y[i])) for i in range(len(y))
    )
    return expected - float(gauss_kl(model.q_mu, model.q_sqrt))


@pytest.mark.parametrize("num_data,num_classes", [(2, 3), (3, 2), (2, 2), (1, 3)])
@pytest.mark.parametrize("seed", [0, 1])
def test_bound_ordering(num_data, num_classes, seed):
    rng = np.random.default_rng(seed)
    models = {}
    for scheme in AUGMENTED_SCHEMES:
        models[scheme], (X, Y) = make_problem(num_data, num_classes, seed=seed, variance=2.0,
                                              scheme=scheme)
    q_mu = rng.normal(size=(num_data, num_classes))
    q_sqrt = np.tril(rng.normal(scale=0.5, size=(num_classes, num_data, num_data)))
    q_sqrt[:, range(num_data), range(num_data)] = np.abs(q_sqrt[:, range(num_data), range(num_data)]) + 0.3
    for model in models.values():
        model.q_mu.assign(q_mu)
        model.q_sqrt.assign(q_sqrt)
    paper = float(models["gamma-poisson"].elbo((X, Y)))
    collapsed = float(models["negative-multinomial"].elbo((X, Y)))
    vi = vi_elbo(models["negative-multinomial"], X, Y[:, 0])
    K = models["negative-multinomial"].kernel(X).numpy() + default_jitter() * np.eye(num_data)
    log_py = log_marginal_likelihood(K, Y[:, 0], num_classes, 11)
    quadrature_error = abs(log_py - log_marginal_likelihood(K, Y[:, 0], num_classes, 8))
    assert quadrature_error < 1e-4
    # each gap must exceed the quadrature's own error, or the ordering would prove nothing
    gaps = np.diff([paper, collapsed, vi, log_py])
    assert np.all(gaps > 10 * quadrature_error), (paper, collapsed, vi, log_py)

    # The certificate users see: its exact ELBO is the quadrature's, its augmented bound the
    # collapsed one, and so augmented ≤ exact ≤ log p(y), for both kinds of model.
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
        np.testing.assert_allclose(certificate.augmented, collapsed, rtol=1e-9)
        assert certificate.augmented < certificate.exact < log_py
        np.testing.assert_allclose(float(model.exact_elbo((X, Y))), certificate.exact, rtol=1e-12)
