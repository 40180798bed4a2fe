"""Inputs that used to give a wrong answer without an error: each is now refused, in eager and in
graph mode, with a message naming the problem, and (where a model is involved) nothing changes."""
import re

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from conftest import make_problem, model_variables

LABELS_C3 = re.escape("labels must be integers in 0..2 (num_classes=3)")


def _bad_label_columns(Y):
    seven, negative, fractional = (Y.astype(np.float64) for _ in range(3))
    seven[1, 0], negative[0, 0], fractional[2, 0] = 7, -1, 1.7
    return {"label 7": seven, "label -1": negative, "label 1.7": fractional}


@pytest.fixture(scope="module")
def trained():
    model, (X, Y) = make_problem(30, 3, num_inducing=6, seed=1, scheme="exact")
    ga.CAVI(model).step((X, Y))
    return model, (X, Y)


@pytest.mark.parametrize("case", ["label 7", "label -1", "label 1.7"])
def test_predict_log_density_refuses_bad_labels_eagerly_and_compiled(trained, case):
    model, (X, Y) = trained
    bad = _bad_label_columns(Y)[case]
    with pytest.raises(ga.InvalidDataError, match=r"^" + LABELS_C3):
        model.predict_log_density((X, bad))
    compiled = tf.function(model.predict_log_density)
    with pytest.raises(tf.errors.InvalidArgumentError, match=LABELS_C3):
        compiled((tf.constant(X), tf.constant(bad)))
    # The valid labels still give finite log densities, so the check is not refusing everything.
    assert np.all(np.isfinite(compiled((tf.constant(X), tf.constant(Y, tf.float64))).numpy()))


def test_under_xla_a_bad_label_gives_nan_not_a_perfect_score(trained):
    """XLA drops assertions; the only signal left is a NaN where the wrong label is."""
    model, (X, Y) = trained
    bad = _bad_label_columns(Y)["label 7"]
    log_density = tf.function(model.predict_log_density, jit_compile=True)(
        (tf.constant(X), tf.constant(bad)))
    assert np.isnan(log_density.numpy()[1]) and np.all(np.isfinite(np.delete(log_density, 1)))
    elbo = tf.function(model.elbo, jit_compile=True)((tf.constant(X), tf.constant(bad)))
    assert np.isnan(elbo.numpy())


def test_compiled_training_loss_closure_refuses_labels_equal_to_c(trained):
    model, (X, Y) = trained
    bad = np.full_like(Y, 3)
    closure = model.training_loss_closure((tf.constant(X), tf.constant(bad)))  # compiled
    with pytest.raises(tf.errors.InvalidArgumentError, match=LABELS_C3):
        closure()
    before = model_variables(model)
    with pytest.raises(tf.errors.InvalidArgumentError, match=LABELS_C3):
        gpflow.optimizers.Scipy().minimize(closure, model.trainable_variables,
                                           options=dict(maxiter=2))
    for b, a in zip(before, model_variables(model)):
        np.testing.assert_array_equal(a, b)


def test_logistic_softmax_in_a_stock_svgp_refuses_bad_labels():
    """It used to give a *higher* ELBO for labels outside 0..C-1 than for valid ones."""
    _, (X, Y) = make_problem(20, 3, seed=2)
    model = gpflow.models.SVGP(gpflow.kernels.SquaredExponential(), ga.LogisticSoftmax(3),
                               X[:5].copy(), num_latent_gps=3)
    bad = np.where(np.arange(20)[:, None] == 4, 3, Y)
    with pytest.raises(ga.InvalidDataError, match=LABELS_C3):
        model.elbo((X, bad))
    with pytest.raises(tf.errors.InvalidArgumentError, match=LABELS_C3):
        model.training_loss_closure((tf.constant(X), tf.constant(bad)))()


@pytest.mark.parametrize("label", [5, -1, 0.5])
def test_binary_model_refuses_labels_outside_0_and_1(label):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    Y = (X[:, :1] > 0).astype(np.int64)
    model = ga.BinaryLogisticSVGP(gpflow.kernels.SquaredExponential(), X[:4].copy(), 12)
    bad = Y.astype(np.float64)
    bad[3, 0] = label
    message = r"labels must be integers in 0\.\.1 \(num_classes=2\)"
    with pytest.raises(ga.InvalidDataError, match=message):
        model.predict_log_density((X, bad))
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        tf.function(model.predict_log_density)((tf.constant(X), tf.constant(bad)))
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        model.training_loss_closure((tf.constant(X), tf.constant(bad)))()


@pytest.mark.parametrize("metric", [
    ga.metrics.error_rate, ga.metrics.expected_calibration_error, ga.metrics.brier_score,
    ga.metrics.classwise_calibration_error, ga.metrics.reliability_curve,
])
def test_metrics_refuse_labels_that_do_not_match_the_probabilities(metric):
    probabilities = np.full((4, 3), 1 / 3)
    with pytest.raises(ga.InvalidDataError, match=r"^y must hold one label per row"):
        metric(probabilities, np.array([0, 1, 2]))  # used to broadcast
    with pytest.raises(ga.InvalidDataError, match=r"^y must hold one label per row"):
        metric(probabilities, np.zeros((4, 2)))
    for bad in ([0, 1, 2, 3], [0, 1, 2, 1.7], [0, -1, 2, 1]):
        with pytest.raises(ga.InvalidDataError, match=r"^labels must be integers in 0\.\.2"):
            metric(probabilities, np.array(bad))
    metric(probabilities, np.array([[0], [1], [2], [1]]))  # a column is fine


@pytest.mark.parametrize("num_data", [2.7, float("nan"), 0, True, "10"])
def test_num_data_must_be_a_whole_positive_number(num_data):
    with pytest.raises(ValueError, match=r"^num_data must be an integer ≥ 1, got"):
        ga.LogisticSoftmaxSVGP(gpflow.kernels.SquaredExponential(), np.zeros((3, 1)), 3,
                               num_data=num_data)


def test_num_data_given_as_a_whole_float_is_accepted():
    model = ga.LogisticSoftmaxSVGP(gpflow.kernels.SquaredExponential(), np.zeros((3, 1)), 3,
                                   num_data=10.0)
    assert model.num_data == 10 and isinstance(model.num_data, int)


def test_predictions_refuse_non_finite_inputs(trained):
    model, (X, _) = trained
    X_nan = X.copy()
    X_nan[2, 1] = np.nan
    with pytest.raises(ga.InvalidDataError, match=r"^X contains NaN or inf \(first at row 2"):
        model.predict_y(X_nan)
    with pytest.raises(tf.errors.InvalidArgumentError, match="X contains NaN or inf"):
        tf.function(model.predict_f)(tf.constant(X_nan))
