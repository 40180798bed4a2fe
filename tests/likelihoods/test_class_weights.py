"""Per-class weights θ, p(y = k | f) = θ_k σ(f_k) / Σ_c θ_c σ(f_c): the expectations and the
negative-multinomial bound carry them, and CAVI's closed-form update stops where the ELBO is
stationary in θ."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.likelihoods import augmentation
from gpflow_augmented.likelihoods.expectation import expected_log_logistic_softmax
from helpers import make_problem, variational_gradient_norm, weighted_problem

LOG_WEIGHTS = np.log([0.3, 1.0, 4.0])


def test_weighted_expectation_equals_tensor_product_quadrature():
    rng = np.random.default_rng(0)
    Fmu = rng.normal(-1.0, 2.0, size=(4, 3))
    Fvar = rng.uniform(0.1, 3.0, size=(4, 3))
    Y = np.eye(3)[[0, 1, 2, 1]]
    ours = expected_log_logistic_softmax(
        tf.constant(Fmu), tf.constant(Fvar), tf.constant(Y), log_weights=tf.constant(LOG_WEIGHTS)
    ).numpy()
    # 60 Hermite nodes per class on the full 3-D integrand: exact to ~1e-9 for these variances.
    x, w = np.polynomial.hermite.hermgauss(60)
    z, w = np.sqrt(2.0) * x, w / np.sqrt(np.pi)
    reference = []
    for m, v, y in zip(Fmu, Fvar, Y):
        grid = np.stack(
            np.meshgrid(*[m[c] + np.sqrt(v[c]) * z for c in range(3)], indexing="ij"), -1
        )
        weight = np.einsum("i,j,k->ijk", w, w, w)
        log_terms = LOG_WEIGHTS - np.logaddexp(0.0, -grid)
        log_p = log_terms[..., y.argmax()] - np.logaddexp.reduce(log_terms, axis=-1)
        reference.append(np.sum(weight * log_p))
    # The module's stated accuracy (20 nodes, grid step 1): below 1e-4 nats per point.
    np.testing.assert_allclose(ours, reference, atol=1e-4)
    unweighted = expected_log_logistic_softmax(tf.constant(Fmu), tf.constant(Fvar), tf.constant(Y))
    assert np.max(np.abs(ours - unweighted.numpy())) > 0.1  # the weights do enter


def test_weighted_negative_multinomial_bound_is_below_the_weighted_expectation():
    rng = np.random.default_rng(1)
    Fmu = tf.constant(rng.normal(-1.0, 3.0, size=(200, 3)))
    Fvar = tf.constant(rng.uniform(0.01, 4.0, size=(200, 3)))
    Y = tf.constant(np.eye(3)[rng.integers(0, 3, 200)])
    log_weights = tf.constant(LOG_WEIGHTS)
    exact = expected_log_logistic_softmax(Fmu, Fvar, Y, log_weights=log_weights).numpy()
    bound = augmentation.negative_multinomial_local_elbo(
        Fmu, Fvar, Y, log_weights=log_weights
    ).numpy()
    assert np.all(bound <= exact + 1e-4)  # 1e-4: the quadrature's stated error
    # Forgetting θ in the normaliser (but not in the numerator) breaks the ordering somewhere.
    broken = (
        augmentation.negative_multinomial_local_elbo(Fmu, Fvar, Y)
        + tf.reduce_sum(Y * log_weights, axis=-1)
    ).numpy()
    assert np.any(broken > exact + 1e-3)


def log_weight_gradient(model, data):
    """∂ELBO/∂log θ by autodiff of the model's own ELBO."""
    variable = model.likelihood.class_weights.unconstrained_variable
    with tf.GradientTape() as tape:
        tape.watch(variable)
        elbo = model.elbo((tf.constant(data[0]), tf.constant(data[1])))
    return tape.gradient(elbo, variable).numpy()


class ForgetsTheWeight(ga.LogisticSoftmax):
    """A deliberately wrong update: the exposure left multiplied by θ (θ ← n / Σ_i E p_k)."""

    def class_weight_statistics(self, Y, log_weight_gradient):
        counts, exposure = super().class_weight_statistics(Y, log_weight_gradient)
        return counts, exposure * self.class_weights


@pytest.mark.parametrize("scheme", ["exact", "negative-multinomial"])
@pytest.mark.slow
def test_class_weight_update_reaches_a_stationary_point_and_a_wrong_update_does_not(scheme):
    warm_start = 5 if scheme == "exact" else 0
    model, data = weighted_problem(scheme)
    start = np.max(np.abs(log_weight_gradient(model, data)))
    ga.CAVI(model, 1.0, warm_start_iterations=warm_start).iterate(data, 150)
    weights = model.likelihood.class_weights.numpy()
    assert start > 1.0
    assert np.max(weights) / np.min(weights) > 1.5  # the weights moved
    assert np.max(np.abs(log_weight_gradient(model, data))) < 1e-6 * start
    assert variational_gradient_norm(model, data) < 1e-6 * start
    if scheme == "exact":  # stationary in θ ⇔ the expected class frequencies match the counts
        Fmu, Fvar = model.predict_f(data[0])
        F = Fmu.numpy()[None] + np.sqrt(Fvar.numpy())[None] * np.random.default_rng(0).normal(
            size=(4000, *Fmu.shape)
        )
        counts = np.bincount(data[1][:, 0], minlength=3)
        p = (
            np.exp(
                ga.likelihoods.log_logistic_softmax(
                    tf.constant(F), model.likelihood.log_class_weights()
                ).numpy()
            )
            .mean(0)
            .sum(0)
        )
        np.testing.assert_allclose(p, counts, rtol=0.02)  # Monte Carlo: 4000 draws

    broken, _ = weighted_problem(scheme)
    broken.likelihood.__class__ = ForgetsTheWeight
    ga.CAVI(broken, 1.0, warm_start_iterations=warm_start).iterate(data, 150)
    assert np.max(np.abs(log_weight_gradient(broken, data))) > 1e-2 * start


@pytest.mark.slow
def test_fused_trainer_step_updates_the_weights_as_the_cavi_step_does():
    fused, data = weighted_problem("exact")
    plain, _ = weighted_problem("exact")
    ga.Trainer(fused, step_size=0.6, learning_rate=0.01, warm_start_iterations=0).step(data)
    # the Trainer's default variance update, and its warm start (none)
    ga.CAVI(plain, 0.6, update_variance=True, warm_start_iterations=0).step(data)
    np.testing.assert_allclose(
        fused.likelihood.class_weights.numpy(), plain.likelihood.class_weights.numpy(), rtol=1e-10
    )
    np.testing.assert_allclose(fused.q_mu.numpy(), plain.q_mu.numpy(), rtol=1e-9, atol=1e-12)
    assert not np.allclose(fused.likelihood.class_weights.numpy(), 1.0)


@pytest.mark.slow
def test_a_warm_start_step_carries_the_weights_in_the_fused_and_in_the_cavi_step():
    """A warm-start step takes the collapsed bound's sites, which carry θ, and both kinds of step
    update θ: the fused Trainer iteration (which once dropped θ from those sites) and the CAVI
    step (whose θ statistic, taken through a tf.cond around the XLA-compiled expectation, once
    came back as zero after the warm start) must agree."""
    fused, data = weighted_problem("exact")
    plain, _ = weighted_problem("exact")
    with tf.init_scope():
        for model in (fused, plain):  # unequal weights, so that forgetting them shows
            model.likelihood.class_weights.assign(np.exp(LOG_WEIGHTS))
    # A warm-start step, then an exact one; Adam at rate 0 leaves the kernel as CAVI alone does.
    trainer = ga.Trainer(fused, step_size=0.6, learning_rate=0.0, warm_start_iterations=1)
    cavi = ga.CAVI(plain, 0.6, warm_start_iterations=1, update_variance=True)
    for _ in range(2):
        trainer.step(data)
        cavi.step(data)
    np.testing.assert_allclose(fused.q_mu.numpy(), plain.q_mu.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        fused.likelihood.class_weights.numpy(), plain.likelihood.class_weights.numpy(), rtol=1e-10
    )
    assert np.max(np.abs(plain.likelihood.class_weights.numpy() - np.exp(LOG_WEIGHTS))) > 1e-3


def test_weighted_model_elbo_and_predictions_equal_stock_svgp_with_the_same_weights():
    model, data = weighted_problem("exact")
    ga.CAVI(model, 0.7, warm_start_iterations=3).iterate(data, 5)
    likelihood = ga.LogisticSoftmax(3, class_weights=True)
    likelihood.class_weights.assign(model.likelihood.class_weights)
    svgp = gpflow.models.SVGP(
        model.kernel,
        likelihood,
        model.inducing_variable.Z.numpy(),
        num_latent_gps=3,
        num_data=60,
        whiten=True,
        q_mu=model.q_mu.numpy(),
        q_sqrt=model.q_sqrt.numpy(),
    )
    assert likelihood.class_weights.trainable  # in a stock SVGP, Adam learns them
    theta = model.likelihood.class_weights.unconstrained_variable
    assert any(v is theta for v in ga.CAVI(model).owned_variables)  # in ours, CAVI does
    np.testing.assert_allclose(float(model.elbo(data)), float(svgp.elbo(data)), rtol=1e-10)
    np.testing.assert_allclose(
        model.predict_y(data[0])[0].numpy(), svgp.predict_y(data[0])[0].numpy(), rtol=1e-10
    )


def test_class_weights_lift_the_confidence_cap():
    # C = 10, the observed latent +4 and the others -4: max p is 0.858 with θ = 1; a learned θ
    # that down-weights the other classes by 10 lifts it to 0.984.
    F = tf.constant([[4.0] + [-4.0] * 9], tf.float64)
    capped = np.exp(ga.likelihoods.log_logistic_softmax(F).numpy())[0, 0]
    log_weights = tf.constant([0.0] + [np.log(0.1)] * 9, tf.float64)
    lifted = np.exp(ga.likelihoods.log_logistic_softmax(F, log_weights).numpy())[0, 0]
    np.testing.assert_allclose(capped, 0.858, atol=1e-3)
    assert lifted > 0.98


def test_class_weights_refuse_what_they_do_not_support():
    with pytest.raises(ValueError, match="class weights need the NegativeMultinomial"):
        make_problem(20, 3, scheme="gamma-poisson", class_weights=True)
    model, _ = make_problem(20, 3, scheme="exact", class_weights=True)
    with pytest.raises(ValueError, match="class_subset_size"):
        ga.CAVI(model, 0.5, class_subset_size=2)


def test_a_refused_step_leaves_the_weights_unchanged():
    model, (X, y) = weighted_problem("exact")
    cavi = ga.CAVI(model, 0.5)
    cavi.step((X, y))
    weights = model.likelihood.class_weights.numpy().copy()
    exposure = cavi.class_weight_exposure.numpy().copy()
    with pytest.raises(ga.InvalidDataError):
        cavi.step((X, np.full_like(y, 7)))
    np.testing.assert_array_equal(model.likelihood.class_weights.numpy(), weights)
    np.testing.assert_array_equal(cavi.class_weight_exposure.numpy(), exposure)
