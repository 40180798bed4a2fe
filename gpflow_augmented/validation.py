"""
Checks of user data, so that bad input gives a clear error naming the problem and never a silent
wrong answer or a NaN ELBO.

``check_data`` runs in Python on concrete (eager or NumPy) data. ``data_status`` is the same check
as a tensor computation, for the compiled CAVI step, which must not leave the device to validate:
the step assigns nothing unless the status is ``OK``, and its Python wrapper raises
``error_for_status``.
"""
from typing import Optional

import numpy as np
import tensorflow as tf

__all__ = [
    "InvalidDataError",
    "NumericalError",
    "check_num_classes",
    "check_data",
    "data_status",
    "error_for_status",
    "raise_for_status",
]

OK, EMPTY_BATCH, NONFINITE_INPUTS, BAD_LABELS, NUMERICAL_FAILURE = range(5)
NUM_STATUS_CODES = 5


class InvalidDataError(ValueError):
    """The data given to a model or optimizer cannot be used."""


class NumericalError(FloatingPointError):
    """An update failed numerically; the model's parameters were left as they were."""


def check_num_classes(num_classes: object) -> int:
    if isinstance(num_classes, bool) or int(num_classes) != num_classes or num_classes < 2:
        raise ValueError(f"num_classes must be an integer ≥ 2, got {num_classes!r}")
    return int(num_classes)


def check_data(X: object, Y: object, num_classes: int, input_dim: Optional[int] = None) -> None:
    """Raise :class:`InvalidDataError` unless X is [N, D] finite and Y is [N, 1] integers in 0..C-1."""
    X, Y = np.asarray(X), np.asarray(Y)
    if X.ndim != 2:
        raise InvalidDataError(f"X must be a 2-D array [N, D], got shape {X.shape}")
    if Y.ndim != 2 or Y.shape[1] != 1:
        raise InvalidDataError(f"Y must be a column of integer labels [N, 1], got shape {Y.shape}")
    if X.shape[0] != Y.shape[0]:
        raise InvalidDataError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}")
    if X.shape[0] == 0:
        raise InvalidDataError("the batch is empty (N = 0)")
    if input_dim is not None and X.shape[1] != input_dim:
        raise InvalidDataError(f"X has {X.shape[1]} columns, the model expects {input_dim}")
    if not np.issubdtype(X.dtype, np.number):
        raise InvalidDataError(f"X must be numeric, got dtype {X.dtype}")
    if not np.all(np.isfinite(X)):
        bad = np.argwhere(~np.isfinite(X))[0]
        raise InvalidDataError(f"X contains NaN or inf (first at row {bad[0]}, column {bad[1]})")
    if not (np.issubdtype(Y.dtype, np.integer) or np.issubdtype(Y.dtype, np.floating)):
        raise InvalidDataError(f"Y must hold integer class labels, got dtype {Y.dtype}")
    if np.issubdtype(Y.dtype, np.floating) and not np.all(np.isfinite(Y) & (Y == np.round(Y))):
        raise InvalidDataError("Y must hold integer class labels 0..C-1, found non-integer values")
    if Y.min() < 0 or Y.max() >= num_classes:
        raise InvalidDataError(
            f"labels must be in 0..{num_classes - 1} (num_classes={num_classes}), "
            f"found values from {Y.min()} to {Y.max()}"
        )


def data_status(X: tf.Tensor, Y: tf.Tensor, num_classes: int) -> tf.Tensor:
    """The checks of :func:`check_data` on the values, as an int32 status computed on the device."""
    if Y.dtype.is_floating:
        integral = tf.reduce_all(tf.math.is_finite(Y) & tf.equal(Y, tf.round(Y)))
    else:
        integral = tf.constant(True)
    labels = tf.cast(Y, tf.float64) if Y.dtype.is_floating else tf.cast(Y, tf.int64)
    in_range = tf.reduce_all((labels >= 0) & (labels < num_classes))
    status = tf.where(integral & in_range, OK, BAD_LABELS)
    status = tf.where(tf.reduce_all(tf.math.is_finite(X)), status, NONFINITE_INPUTS)
    return tf.where(tf.shape(X)[0] > 0, status, EMPTY_BATCH)


def error_for_status(status: int, num_classes: int) -> Exception:
    messages = {
        EMPTY_BATCH: (InvalidDataError, "the batch is empty (N = 0)"),
        NONFINITE_INPUTS: (InvalidDataError, "X contains NaN or inf"),
        BAD_LABELS: (
            InvalidDataError,
            f"labels must be integers in 0..{num_classes - 1} (num_classes={num_classes})",
        ),
        NUMERICAL_FAILURE: (
            NumericalError,
            "the update produced non-finite values (a Cholesky factorisation failed); "
            "the parameters were left unchanged. Increase gpflow.config jitter, or check the "
            "kernel hyperparameters",
        ),
    }
    kind, message = messages[status]
    return kind(message + "; nothing was updated")


def raise_for_status(status: tf.Tensor, num_classes: int) -> None:
    """Raise the error of a compiled step's status (one host read), or nothing if it is ``OK``."""
    status = int(status)
    if status != OK:
        raise error_for_status(status, num_classes)
