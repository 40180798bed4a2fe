"""Test metrics on predicted class probabilities [N, C] and integer labels [N] or [N, 1].

Two calibration errors are offered because the literature uses both:

* :func:`expected_calibration_error` — top-label ECE (Guo et al. 2017): bin the confidence
  max_k p_k into equal-width bins and average ``|accuracy − confidence|`` weighted by bin size.
* :func:`classwise_calibration_error` — one-vs-rest ECE, as the paper's authors computed it: for
  each class k, bin p_k over *all* test points and compare it with the frequency of y = k in the
  bin; the result is the mean over classes.

Bins are right-closed, (k/B, (k+1)/B], with 0 put in the first bin.

:class:`Evaluator` computes them all for any GPflow classifier on a test set, from its
``predict_y`` and ``predict_log_density``.
"""

from typing import Any, Callable, Dict, NamedTuple, Optional

import numpy as np
import tensorflow as tf
from gpflow.config import default_float
from gpflow.models import GPModel

from ._quiet import without_failed_step_warnings

__all__ = [
    "Evaluator",
    "ReliabilityCurve",
    "brier_score",
    "classwise_calibration_error",
    "error_rate",
    "expected_calibration_error",
    "mean_nll",
    "reliability_curve",
]


def _labels(y: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """The labels [N] as int64, refused unless there is one per row of ``probabilities`` and each
    is an integer in 0..C-1 (NumPy would otherwise broadcast a wrong-length vector, or truncate
    1.7 to 1, and return a number)."""
    from .validation import InvalidDataError

    y = np.asarray(y)
    probabilities = np.asarray(probabilities)
    if probabilities.ndim != 2:
        raise InvalidDataError(f"probabilities must be [N, C], got shape {probabilities.shape}")
    num_points, num_classes = probabilities.shape
    if y.ndim > 2 or (y.ndim == 2 and y.shape[1] != 1) or y.size != num_points:
        raise InvalidDataError(
            f"y must hold one label per row of probabilities ([{num_points}] or "
            f"[{num_points}, 1]), got shape {y.shape}"
        )
    y = y.reshape(-1)
    numeric = np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)
    if not numeric or not np.all(
        np.isfinite(y) & (y == np.round(y)) & (y >= 0) & (y < num_classes)
    ):
        raise InvalidDataError(
            f"labels must be integers in 0..{num_classes - 1} (the probabilities' C = "
            f"{num_classes})"
        )
    return y.astype(np.int64)


def _bin_index(values: np.ndarray, num_bins: int) -> np.ndarray:
    return np.clip(np.ceil(values * num_bins).astype(np.int64) - 1, 0, num_bins - 1)


def error_rate(probabilities: np.ndarray, y: np.ndarray) -> float:
    """The share of points whose most probable class (of ``probabilities`` [N, C]) is not their
    label ``y`` [N] or [N, 1]."""
    return float(np.mean(np.argmax(probabilities, axis=1) != _labels(y, probabilities)))


def mean_nll(log_density: np.ndarray) -> float:
    """The mean of -log p(y*|x*), from a model's ``predict_log_density``."""
    return float(-np.mean(log_density))


def brier_score(probabilities: np.ndarray, y: np.ndarray) -> float:
    """The multi-class Brier score: the mean over points of Σ_k (p_k − [y = k])², in [0, 2]."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    one_hot = np.eye(probabilities.shape[1])[_labels(y, probabilities)]
    return float(np.mean(np.sum((probabilities - one_hot) ** 2, axis=1)))


def _calibration_gap(predicted: np.ndarray, observed: np.ndarray, num_bins: int) -> float:
    """Σ_b (n_b / N) |mean(observed)_b − mean(predicted)_b| over equal-width bins of
    ``predicted``."""
    bins = _bin_index(predicted, num_bins)
    predicted_sum = np.bincount(bins, weights=predicted, minlength=num_bins)
    observed_sum = np.bincount(bins, weights=observed.astype(np.float64), minlength=num_bins)
    return float(np.sum(np.abs(observed_sum - predicted_sum)) / len(predicted))


def expected_calibration_error(
    probabilities: np.ndarray, y: np.ndarray, num_bins: int = 15
) -> float:
    """Top-label ECE with ``num_bins`` equal-width confidence bins (Guo et al. 2017)."""
    probabilities = np.asarray(probabilities)
    confidence = probabilities.max(axis=1)
    correct = np.argmax(probabilities, axis=1) == _labels(y, probabilities)
    return _calibration_gap(confidence, correct, num_bins)


def classwise_calibration_error(
    probabilities: np.ndarray, y: np.ndarray, num_bins: int = 10
) -> float:
    """One-vs-rest ECE: the mean over classes k of the ECE of p_k against [y = k]."""
    probabilities = np.asarray(probabilities)
    labels = _labels(y, probabilities)
    num_classes = probabilities.shape[1]
    return float(
        np.mean(
            [
                _calibration_gap(probabilities[:, k], labels == k, num_bins)
                for k in range(num_classes)
            ]
        )
    )


class ReliabilityCurve(NamedTuple):
    """Per-bin statistics of a top-label reliability diagram (empty bins have count 0 and NaN)."""

    edges: np.ndarray  # [B + 1]
    count: np.ndarray  # type: ignore[assignment]  # [B]; a field named as tuple's method
    accuracy: np.ndarray  # [B]
    confidence: np.ndarray  # [B]


def reliability_curve(
    probabilities: np.ndarray, y: np.ndarray, num_bins: int = 15
) -> ReliabilityCurve:
    """Each of ``num_bins`` equal-width bins of the top-label confidence: its mean confidence, its
    accuracy and its number of points (the reliability diagram's data)."""
    probabilities = np.asarray(probabilities)
    confidence = probabilities.max(axis=1)
    correct = (np.argmax(probabilities, axis=1) == _labels(y, probabilities)).astype(np.float64)
    bins = _bin_index(confidence, num_bins)
    count = np.bincount(bins, minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(bins, weights=correct, minlength=num_bins) / count
        mean_confidence = np.bincount(bins, weights=confidence, minlength=num_bins) / count
    return ReliabilityCurve(np.linspace(0.0, 1.0, num_bins + 1), count, accuracy, mean_confidence)


class Evaluator:
    """Test metrics of any GPflow classifier, computed by compiled predictions in fixed-size
    chunks (memory stays bounded for Monte Carlo predictive densities on large test sets)."""

    def __init__(self, X: np.ndarray, Y: np.ndarray, chunk_size: int = 1000) -> None:
        self.X: np.ndarray = np.asarray(X, dtype=default_float())
        self.Y = np.asarray(Y).reshape(-1, 1).astype(np.int64)
        if len(self.X) == 0 or len(self.X) != len(self.Y):
            raise ValueError(
                f"Evaluator needs one label per test point and at least one point, "
                f"got {len(self.X)} points and {len(self.Y)} labels"
            )
        self.chunk_size = chunk_size
        self._compiled: Dict[int, Callable] = {}
        self.latest_probabilities: Optional[np.ndarray] = None

    def predictions(self, model: Any) -> Dict[str, np.ndarray]:
        """``model``'s class probabilities [N, C] and log predictive densities [N] of the test
        points, by one compiled prediction a model (in chunks of ``chunk_size`` rows)."""
        key = id(model)
        if key not in self._compiled:
            self._compiled[key] = tf.function(_both_predictions(model), autograph=False)
        predict = self._compiled[key]
        # Every chunk has one shape, the last one padded with the first rows and cut back: one
        # trace per model. (TensorFlow counts the traces of all models' predictions together, as
        # one function's, and warns of retracing when a second shape doubles them.)
        size = min(self.chunk_size, len(self.X))
        probabilities, log_density = [], []
        # A prediction may be the process's first XLA compile (a peer's fused predictive
        # integral), which TensorFlow announces on file descriptor 2, as it does in a step.
        with without_failed_step_warnings():
            for start in range(0, len(self.X), size):
                rows = min(size, len(self.X) - start)
                padding = np.arange(size - rows)
                p, lp = predict(
                    np.concatenate([self.X[start : start + rows], self.X[padding]]),
                    np.concatenate([self.Y[start : start + rows], self.Y[padding]]),
                )
                p, lp = p.numpy()[:rows], lp.numpy()[:rows]
                if p.shape[1] == 1:  # a binary model predicts p(y = 1) only
                    p = np.hstack([1.0 - p, p])
                probabilities.append(p)
                log_density.append(np.reshape(lp, -1))
        return {
            "probabilities": np.concatenate(probabilities),
            "log_density": np.concatenate(log_density),
        }

    def __call__(self, model: Any) -> Dict[str, float]:
        predictions = self.predictions(model)
        p, y = predictions["probabilities"], self.Y
        self.latest_probabilities = p
        return {
            "error": error_rate(p, y),
            "nll": mean_nll(predictions["log_density"]),
            "ece": expected_calibration_error(p, y, num_bins=15),
            "classwise_ece": classwise_calibration_error(p, y, num_bins=10),
            "brier": brier_score(p, y),
        }


def _both_predictions(model: Any) -> Callable:
    """(X, Y) → (class probabilities, log predictive densities). A model, or a GPflow model's
    likelihood, whose two predictions share a costly part gives both from one evaluation."""
    both = getattr(model, "predict_y_and_log_density", None)
    if both is not None:
        return both
    fused = getattr(getattr(model, "likelihood", None), "predict_mean_and_log_density", None)
    if fused is not None and isinstance(model, GPModel):
        # A GPflow model predicts y from q(f) at X through its likelihood, as this does.
        return lambda X, Y: fused(X, *model.predict_f(X), Y)
    return lambda X, Y: (model.predict_y(X)[0], model.predict_log_density((X, Y)))
