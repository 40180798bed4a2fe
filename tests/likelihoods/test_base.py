"""The augmented-likelihood contract: the likelihood owns its augmentation, and the closed-form
step the model takes from it is GPflow's own natural-gradient step on the same bound.

One CAVI step at ρ = 1 must equal ``gpflow.optimizers.NaturalGradient(gamma=1)`` on the augmented
ELBO with the local parameters frozen at their optimum: given the local parameters the bound is
conjugate in q(u), so a unit natural-gradient step lands on its maximiser, which is what the
closed-form step computes. A likelihood whose coefficients are wrong (linear not halved) must
break the equality."""

import warnings

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.class_subsets import ClassSubset
from gpflow_augmented.likelihoods import (
    AugmentedLikelihood,
    BinaryLogistic,
    LogisticSoftmax,
    Marginals,
    MeanFieldGammaPoisson,
    NegativeMultinomial,
)
from helpers import cavi_proposal


def _problem(num_data=40, num_classes=3, num_inducing=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(num_data, 2))
    Y = rng.integers(0, num_classes, size=(num_data, 1))
    Z = X[rng.choice(num_data, num_inducing, replace=False)]
    return X, Y, Z


def _natural_gradient_step(model, X, Y):
    """GPflow's NaturalGradient(gamma=1) on -(augmented ELBO) with q(ω, n, λ) frozen where the
    current q(u) puts its optimum."""
    likelihood = model.likelihood
    Fmu, Fvar = model.predict_f(X)
    Y_rows = likelihood.label_rows(tf.constant(Y))
    frozen = tf.nest.map_structure(
        tf.constant, likelihood.local_parameters(Marginals(Fmu, Fvar), Y_rows)
    )

    def loss():
        Fmu, Fvar = model.predict_f(X)
        bound = likelihood.augmented_local_elbo(Marginals(Fmu, Fvar), tf.constant(Y), local=frozen)
        return -(tf.reduce_sum(bound) - model.prior_kl())

    gpflow.optimizers.NaturalGradient(gamma=1.0).minimize(loss, [(model.q_mu, model.q_sqrt)])
    return model.q_mu.numpy(), model.q_sqrt.numpy()


def _cavi_and_natural_gradient(likelihood_class=LogisticSoftmax):
    X, Y, Z = _problem()
    kernel = gpflow.kernels.SquaredExponential(lengthscales=1.0)
    models = []
    for _ in range(2):
        likelihood = likelihood_class(3, augmentation=MeanFieldGammaPoisson())
        model = ga.AugmentedSVGP(gpflow.utilities.deepcopy(kernel), likelihood, Z, num_data=len(X))
        ga.CAVI(model, 0.5).step((X, Y))  # away from the prior, identically for both
        models.append(model)
    ga.CAVI(models[0], 1.0).step((X, Y))
    natgrad_mu, natgrad_sqrt = _natural_gradient_step(models[1], X, Y)
    return (models[0].q_mu.numpy(), models[0].q_sqrt.numpy()), (natgrad_mu, natgrad_sqrt)


def test_one_cavi_step_is_gpflows_unit_natural_gradient_step_on_the_augmented_bound():
    (cavi_mu, cavi_sqrt), (natgrad_mu, natgrad_sqrt) = _cavi_and_natural_gradient()
    assert np.max(np.abs(cavi_mu)) > 0.1  # the step moved somewhere
    # Both are one M = 8 Cholesky away from the same natural parameters (GPflow's through two
    # factorisations and an inverse): agreement to ~1e-10 of values O(1).
    np.testing.assert_allclose(cavi_mu, natgrad_mu, atol=1e-9)
    covariance = lambda sqrt: sqrt @ np.swapaxes(sqrt, -1, -2)  # noqa: E731
    np.testing.assert_allclose(covariance(cavi_sqrt), covariance(natgrad_sqrt), atol=1e-9)


class _UnhalvedLinear(LogisticSoftmax):
    def conjugate_coefficients(self, Y_rows, local):
        linear, quadratic = super().conjugate_coefficients(Y_rows, local)
        return 2 * linear, quadratic


def test_the_equivalence_breaks_for_wrong_coefficients():
    (cavi_mu, _), (natgrad_mu, _) = _cavi_and_natural_gradient(_UnhalvedLinear)
    assert np.max(np.abs(cavi_mu - natgrad_mu)) > 1e-2


def test_the_likelihood_owns_the_scheme_and_a_scheme_name_not_listed_is_refused():
    X, Y, Z = _problem()
    kernel = gpflow.kernels.SquaredExponential()
    for scheme, family in [
        ("negative-multinomial", NegativeMultinomial),
        ("gamma-poisson", MeanFieldGammaPoisson),
    ]:
        model = ga.LogisticSoftmaxSVGP(kernel, Z, 3, scheme=scheme)
        assert model.scheme == scheme and model.bound == ga.AugmentedBound()
        assert isinstance(model.likelihood.augmentation, family)
    for unknown in ("collapsed", "paper", "mean-field"):
        with pytest.raises(ValueError, match="scheme must be one of"):
            ga.LogisticSoftmaxSVGP(kernel, Z, 3, scheme=unknown)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exact = ga.LogisticSoftmaxSVGP(kernel, Z, 3)
    assert exact.bound == ga.ExactBound()
    assert isinstance(exact.likelihood.augmentation, NegativeMultinomial)


def test_the_model_never_changes_the_likelihood_it_is_given():
    """The model leaves the likelihood object it is given unchanged: its augmentation and whether
    its class weights train."""
    X, Y, Z = _problem()
    kernel = gpflow.kernels.SquaredExponential()
    weighted = LogisticSoftmax(3, class_weights=True)
    family = weighted.augmentation
    model = ga.LogisticSoftmaxSVGP(kernel, Z, 3, num_data=len(X), likelihood=weighted)
    assert weighted.augmentation is family and weighted.class_weights.trainable
    # CAVI owns the class weights, so Adam leaves them alone without touching `trainable`.
    theta = weighted.class_weights.unconstrained_variable
    assert any(v is theta for v in ga.CAVI(model).owned_variables)
    assert not any(v is theta for v in ga.Trainer(model).hyperparameter_variables)
    plain = LogisticSoftmax(3)
    with pytest.raises(
        ValueError,
        match=r"scheme='gamma-poisson' needs a likelihood with the "
        r"MeanFieldGammaPoisson\(5\) augmentation, got NegativeMultinomial\(\)",
    ):
        ga.LogisticSoftmaxSVGP(kernel, Z, 3, scheme="gamma-poisson", likelihood=plain)
    assert plain.augmentation == NegativeMultinomial()
    mean_field = LogisticSoftmax(3, augmentation=MeanFieldGammaPoisson(3))
    with pytest.raises(ValueError, match=r"MeanFieldGammaPoisson\(7\) augmentation"):
        ga.LogisticSoftmaxSVGP(
            kernel, Z, 3, scheme="gamma-poisson", inner_iterations=7, likelihood=mean_field
        )
    with pytest.raises(ValueError, match=r"scheme='exact' needs .* NegativeMultinomial\(\)"):
        ga.LogisticSoftmaxSVGP(kernel, Z, 3, likelihood=mean_field)
    model = ga.LogisticSoftmaxSVGP(kernel, Z, 3, scheme="gamma-poisson", likelihood=mean_field)
    assert model.likelihood.augmentation == MeanFieldGammaPoisson(3)


def test_one_model_class_serves_both_likelihoods_and_refuses_what_they_cannot_do():
    X, Y, Z = _problem()
    kernel = gpflow.kernels.SquaredExponential()
    binary = ga.AugmentedSVGP(kernel, BinaryLogistic(), Z, num_data=len(X))
    assert binary.q_mu.shape == (8, 1) and binary.num_classes == 2
    elbos = [float(ga.CAVI(binary).step((X, Y % 2))) for _ in range(3)]
    assert elbos[1] > elbos[0] and elbos[2] >= elbos[1] - 1e-9  # exact coordinate ascent
    with pytest.raises(ValueError, match="BinaryLogistic has no exact-bound step"):
        ga.AugmentedSVGP(kernel, BinaryLogistic(), Z, bound=ga.ExactBound())
    with pytest.raises(TypeError, match="bound must be a Bound .* got 'exact'"):
        ga.AugmentedSVGP(kernel, LogisticSoftmax(3), Z, bound="exact")
    with pytest.raises(TypeError, match="augmented likelihood"):
        ga.AugmentedSVGP(kernel, gpflow.likelihoods.Bernoulli(), Z)
    with pytest.raises(ValueError, match="class weights need the NegativeMultinomial"):
        LogisticSoftmax(3, class_weights=True, augmentation=MeanFieldGammaPoisson())
    with pytest.raises(TypeError, match="abstract"):
        AugmentedLikelihood(input_dim=None, latent_dim=1, observation_dim=None)


def test_class_indices_given_directly_are_refused_by_name():
    X, Y, Z = _problem()
    model = ga.LogisticSoftmaxSVGP(gpflow.kernels.SquaredExponential(), Z, 3, num_data=len(X))
    cavi = ga.CAVI(model, 0.5, class_subset_size=2, compile=False)
    cavi.step((X, Y))  # away from the prior, where a subset's estimate equals the whole ELBO
    subset = ClassSubset(tf.constant([2, 0], tf.int32), 3)
    assert float(model.elbo((X, Y), subset)) != float(model.elbo((X, Y)))
    with pytest.raises(TypeError, match=r"ClassSubset\(classes, num_classes\)"):
        model.elbo((X, Y), tf.constant([2, 0], tf.int32))
    with pytest.raises(TypeError, match="ClassSubset"):
        cavi_proposal(cavi, X, Y, 0.7, [2, 0])
