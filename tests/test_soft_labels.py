"""Rows of class probabilities as labels (one-hot or soft) in the variational models: one-hot rows
are exactly the integer labels, the bounds are linear in y, the exact-bound step's fixed point is
stationary, and rows that are not probability vectors are refused."""

import re

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from helpers import make_problem, model_variables, variational_gradient_norm

SCHEMES = ["exact", "negative-multinomial", "gamma-poisson"]


def one_hot(Y, C):
    return np.eye(C)[Y[:, 0]]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.slow
def test_one_hot_rows_are_the_integer_labels(scheme):
    models = []
    for rows in (False, True):
        model, (X, Y) = make_problem(40, 3, num_inducing=6, seed=4, scheme=scheme)
        labels = one_hot(Y, 3) if rows else Y
        elbo = model.elbo((X, labels)).numpy()
        # Eager: the step is the same `CAVI.update` that fit's compiled iteration runs below (and
        # that the full-batch test below compiles on soft labels), without two more traces.
        cavi_elbo = ga.CAVI(model, 0.7, compile=False).step((X, labels)).numpy()
        ga.fit(model, (X, labels), iterations=4, batch_size=10, progress=False)
        models.append((elbo, cavi_elbo, model_variables(model)))
    (e0, c0, v0), (e1, c1, v1) = models
    np.testing.assert_allclose(e1, e0, rtol=1e-12)
    np.testing.assert_allclose(c1, c0, rtol=1e-12)
    for a, b in zip(v1, v0):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("scheme", ["exact", "negative-multinomial"])
def test_the_bound_is_linear_in_the_label_rows(scheme):
    """E log p(y | f) = Σ_k y_k E log p(k | f) (exact), and the collapsed bound's y-terms are
    each class's own: so a mixture of two labellings gives the mixture of their bounds. A soft
    path that gathered one class per point (as the integer path does) would fail this."""
    model, (X, Y) = make_problem(30, 3, num_inducing=6, seed=5, scheme=scheme)
    ga.CAVI(model).step((X, Y))  # away from the prior, so that classes differ
    other = (Y + 1) % 3
    w = np.random.default_rng(0).uniform(0.1, 0.9, size=(30, 1))
    soft = w * one_hot(Y, 3) + (1 - w) * one_hot(other, 3)
    geometry = model.batch_geometry(tf.constant(X))

    def per_point(labels):
        local_elbo, _ = model.bound.batch_bound(
            model.likelihood, geometry, tf.constant(labels), 1.0
        )
        return local_elbo.numpy()

    np.testing.assert_allclose(
        per_point(soft),
        w[:, 0] * per_point(Y) + (1 - w[:, 0]) * per_point(other),
        rtol=1e-10,
        atol=1e-12,
    )


@pytest.mark.slow
def test_full_batch_steps_reach_a_stationary_point_of_the_exact_bound_with_soft_labels():
    model, (X, Y) = make_problem(40, 3, num_inducing=8, seed=6, scheme="exact")
    soft = 0.7 * one_hot(Y, 3) + 0.1  # rows sum to 1
    cavi = ga.CAVI(model, 1.0, warm_start_iterations=5)
    for _ in range(60):
        cavi.step((X, soft))
    assert variational_gradient_norm(model, (X, soft)) < 1e-6
    # and it is a different point from the hard labels' one
    hard, _ = make_problem(40, 3, num_inducing=8, seed=6, scheme="exact")
    hard_cavi = ga.CAVI(hard, 1.0, warm_start_iterations=5)
    for _ in range(60):
        hard_cavi.step((X, Y))
    assert not np.allclose(hard.q_mu.numpy(), model.q_mu.numpy(), atol=1e-3)


def test_a_stock_svgp_with_the_likelihood_agrees_on_soft_labels():
    model, (X, Y) = make_problem(30, 3, num_inducing=6, seed=7, scheme="exact")
    ga.CAVI(model).step((X, Y))
    svgp = gpflow.models.SVGP(
        model.kernel,
        ga.LogisticSoftmax(3),
        model.inducing_variable,
        num_latent_gps=3,
        q_mu=model.q_mu.numpy(),
        q_sqrt=model.q_sqrt.numpy(),
        num_data=30,
    )
    soft = 0.6 * one_hot(Y, 3) + 0.4 * one_hot((Y + 2) % 3, 3)
    np.testing.assert_allclose(
        svgp.elbo((X, soft)).numpy(), model.elbo((X, soft)).numpy(), rtol=1e-10
    )


BAD_ROWS = {
    "negative": lambda rows: rows - np.eye(3)[[0]] * 1.5,
    "rows not summing to 1": lambda rows: rows * 0.9,
    "NaN": lambda rows: np.where(np.arange(rows.size).reshape(rows.shape) == 4, np.nan, rows),
}


@pytest.fixture(scope="module")
def refusing():
    """One model with its compiled CAVI step and Trainer iteration, shared by the cases: their
    rows have the same shape and dtype, so each step is traced once for all of them (and as a
    refusal changes nothing, every case starts from the same model)."""
    model, (X, Y) = make_problem(20, 3, num_inducing=5, seed=0, scheme="exact")
    return model, X, Y, ga.CAVI(model), ga.Trainer(model)


@pytest.mark.parametrize("case", list(BAD_ROWS))
@pytest.mark.slow
def test_rows_that_are_not_probabilities_are_refused_and_change_nothing(case, refusing):
    model, X, Y, cavi, trainer = refusing
    bad = BAD_ROWS[case](one_hot(Y, 3))
    before = model_variables(model)
    message = re.escape("soft labels must be rows of C probabilities")
    for run in (
        lambda: cavi.step((X, bad)),
        lambda: trainer.step((X, bad)),
        lambda: ga.fit(model, (X, bad), iterations=1, progress=False),
        lambda: model.elbo((X, bad)),
    ):
        with pytest.raises(ga.InvalidDataError, match=message):
            run()
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        model.training_loss_closure((tf.constant(X), tf.constant(bad)))()
    for b, a in zip(before, model_variables(model)):
        np.testing.assert_array_equal(a, b)


def test_where_soft_labels_do_not_apply_they_are_refused_by_name():
    model, (X, Y) = make_problem(20, 3, num_inducing=5, seed=0, scheme="exact")
    rows = one_hot(Y, 3)
    with pytest.raises(ga.InvalidDataError, match=r"labels must be integers in 0\.\.2"):
        model.predict_log_density((X, rows))  # an observed class's density: integer labels
    with pytest.raises(ga.InvalidDataError, match=r"^class subsets need integer labels"):
        ga.CAVI(model, class_subset_size=2).step((X, rows))
    binary = ga.BinaryLogisticSVGP(gpflow.kernels.SquaredExponential(), X[:4].copy(), 20)
    with pytest.raises(
        ga.InvalidDataError,
        match=r"^Y must be a column of integer labels "
        r"\[N, 1\], got shape",
    ):
        ga.CAVI(binary).step((X, rows[:, :2]))
    with pytest.raises(
        ga.InvalidDataError,
        match=r"^Y must be a column of integer labels "
        r"\[N, 1\], got shape",
    ):
        ga.sampling.GibbsSampler((X, rows), gpflow.kernels.SquaredExponential(), 3)
