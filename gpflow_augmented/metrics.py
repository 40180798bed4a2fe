"""Test metrics on predicted class probabilities: error, mean negative log-likelihood and
top-label expected calibration error (Guo et al. 2017)."""
import numpy as np

__all__ = ["error_rate", "mean_nll", "expected_calibration_error"]


def _labels(y: np.ndarray) -> np.ndarray:
    return np.asarray(y).reshape(-1).astype(np.int64)


def error_rate(probabilities: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(probabilities, axis=1) != _labels(y)))


def mean_nll(log_density: np.ndarray) -> float:
    """The mean of -log p(y*|x*), from a model's ``predict_log_density``."""
    return float(-np.mean(log_density))


def expected_calibration_error(
    probabilities: np.ndarray, y: np.ndarray, num_bins: int = 15
) -> float:
    """Top-label ECE: Σ_b (n_b / N) |accuracy_b - confidence_b| over equal-width confidence bins
    (right-closed, (k/B, (k+1)/B]), as in Guo et al. (2017)."""
    probabilities = np.asarray(probabilities)
    confidence = probabilities.max(axis=1)
    correct = np.argmax(probabilities, axis=1) == _labels(y)
    bins = np.clip(np.ceil(confidence * num_bins).astype(int) - 1, 0, num_bins - 1)
    ece = 0.0
    for b in range(num_bins):
        in_bin = bins == b
        if in_bin.any():
            ece += in_bin.mean() * abs(correct[in_bin].mean() - confidence[in_bin].mean())
    return float(ece)
