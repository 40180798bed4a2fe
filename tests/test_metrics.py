"""Metric functions against values computed by hand (the arithmetic is in the comments)."""

import numpy as np
import pytest

from gpflow_augmented import metrics

# Binary example chosen so that no probability lies on a bin edge.
P0 = np.array([0.95, 0.55, 0.35, 0.25, 0.91])
PROBABILITIES = np.stack([P0, 1 - P0], axis=1)
LABELS = np.array([0, 1, 1, 1, 1])


def test_error_rate():
    # predicted classes 0, 0, 1, 1, 0 against 0, 1, 1, 1, 1: two mistakes in five
    assert metrics.error_rate(PROBABILITIES, LABELS) == pytest.approx(0.4)
    assert metrics.error_rate(PROBABILITIES, LABELS[:, None]) == pytest.approx(0.4)


def test_top_label_ece_by_hand():
    # confidences 0.95, 0.55, 0.65, 0.75, 0.91, correct T, F, T, T, F; with 15 bins of width 1/15
    # they fall in bins 14, 8, 9, 11, 13 (all different), so
    # ECE = (|1-.95| + |0-.55| + |1-.65| + |1-.75| + |0-.91|) / 5 = 2.11 / 5
    assert metrics.expected_calibration_error(PROBABILITIES, LABELS) == pytest.approx(0.422)


def test_top_label_ece_shares_a_bin():
    # 0.9 and 0.92 share bin 13 = (13/15, 14/15]: accuracy 1/2, confidence 0.91, weight 2/3;
    # 0.6 (correct) is alone in bin 8: gap 0.4, weight 1/3. ECE = 2/3·0.41 + 1/3·0.4
    p = np.array([[0.9, 0.1], [0.08, 0.92], [0.6, 0.4]])
    y = np.array([0, 0, 0])
    assert metrics.expected_calibration_error(p, y) == pytest.approx(2 / 3 * 0.41 + 0.4 / 3)


def test_classwise_ece_by_hand():
    # class 0, 10 bins: 0.95 and 0.91 share bin 9 (frequency of y=0: 1/2, mean p: 0.93),
    # 0.55, 0.35, 0.25 are alone with y≠0: (2·0.43 + 0.55 + 0.35 + 0.25) / 5 = 0.402.
    # class 1 is the mirror image (0.05 and 0.09 share bin 0, y=1 once): also 0.402.
    assert metrics.classwise_calibration_error(PROBABILITIES, LABELS) == pytest.approx(0.402)


def test_calibrated_predictions_have_zero_ece_and_known_brier():
    # ten identical predictions (0.7, 0.2, 0.1) with labels in exactly those proportions
    p = np.tile([0.7, 0.2, 0.1], (10, 1))
    y = np.array([0] * 7 + [1] * 2 + [2])
    assert metrics.expected_calibration_error(p, y) == pytest.approx(0.0, abs=1e-12)
    assert metrics.classwise_calibration_error(p, y) == pytest.approx(0.0, abs=1e-12)
    # Brier per point: y=0: .09+.04+.01 = .14; y=1: .49+.64+.01 = 1.14; y=2: .49+.04+.81 = 1.34
    assert metrics.brier_score(p, y) == pytest.approx((7 * 0.14 + 2 * 1.14 + 1.34) / 10)


def test_brier_extremes():
    y = np.array([0, 1])
    assert metrics.brier_score(np.eye(2), y) == 0.0
    assert metrics.brier_score(np.eye(2)[::-1], y) == pytest.approx(2.0)


def test_mean_nll():
    assert metrics.mean_nll(np.log([0.5, 0.25])) == pytest.approx((np.log(2) + np.log(4)) / 2)


def test_reliability_curve_matches_ece():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4), size=500)
    y = rng.integers(0, 4, 500)
    curve = metrics.reliability_curve(p, y, num_bins=15)
    assert curve.count.sum() == 500 and len(curve.edges) == 16
    filled = curve.count > 0
    ece = np.sum(curve.count[filled] / 500 * np.abs(curve.accuracy - curve.confidence)[filled])
    assert ece == pytest.approx(metrics.expected_calibration_error(p, y, 15))
    assert np.all(
        (curve.confidence[filled] > curve.edges[:-1][filled])
        & (curve.confidence[filled] <= curve.edges[1:][filled])
    )


def test_the_evaluator_traces_once_per_model_and_predicts_every_row():
    """The last, shorter chunk is padded to the others' shape: a second trace per model (what
    made TensorFlow warn of retracing in a benchmark's log) would make the count 2."""
    import gpflow
    import tensorflow as tf

    import gpflow_augmented as ga

    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((25, 2)), rng.integers(0, 3, (25, 1))
    model = ga.LogisticSoftmaxSVGP(gpflow.kernels.SquaredExponential(), X[:4].copy(), 3)
    evaluator = metrics.Evaluator(X, Y, chunk_size=10)
    predictions = evaluator.predictions(model)
    evaluator.predictions(model)
    assert evaluator._compiled[id(model)].experimental_get_tracing_count() == 1
    np.testing.assert_allclose(
        predictions["probabilities"], model.predict_y(X)[0].numpy(), rtol=1e-12
    )
    np.testing.assert_allclose(
        predictions["log_density"],
        model.predict_log_density((X, tf.constant(Y))).numpy(),
        rtol=1e-12,
    )
    with pytest.raises(ValueError, match="at least one point"):
        metrics.Evaluator(X[:0], Y[:0])


@pytest.mark.parametrize("gpflow_svgp", [False, True])
def test_the_evaluator_draws_the_predictive_once_for_both_predictions(gpflow_svgp, monkeypatch):
    """The mean rule's quasi-Monte Carlo draws are the cost of each prediction: the compiled
    evaluation makes them once for the probabilities and the log densities together, for this
    package's model and for GPflow's SVGP with the likelihood."""
    import gpflow

    import gpflow_augmented as ga

    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((12, 2)), rng.integers(0, 3, (12, 1))
    likelihood = ga.LogisticSoftmax(3)
    kernel, Z = gpflow.kernels.SquaredExponential(), X[:4].copy()
    model = (
        gpflow.models.SVGP(kernel, likelihood, Z, num_latent_gps=3)
        if gpflow_svgp
        else ga.LogisticSoftmaxSVGP(kernel, Z, 3, likelihood=likelihood)
    )
    draws = []
    sample = type(likelihood)._latent_samples
    monkeypatch.setattr(
        type(likelihood),
        "_latent_samples",
        lambda self, *args: draws.append(1) or sample(self, *args),
    )
    predictions = metrics.Evaluator(X, Y).predictions(model)
    assert len(draws) == 1
    np.testing.assert_allclose(
        predictions["probabilities"], model.predict_y(X)[0].numpy(), rtol=1e-12
    )
