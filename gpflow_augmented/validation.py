"""
Checks of user data, so that bad input gives a clear error naming the problem and never a silent
wrong answer or a NaN ELBO.

``check_data`` is the one check of a batch (``fit``, the model's ELBO, ``CAVI``'s static check and,
through ``check_inputs``, the datasets); it runs in Python on arrays or tensors. ``data_status`` is
its value check as a tensor computation, for the compiled CAVI step, which must not leave the
device to validate:
the step assigns nothing unless the status is ``OK``, and its Python wrapper raises
``error_for_status``.
"""

import contextlib
import math
import numbers
from typing import Any, Callable, Iterator, List, Optional, Tuple

import numpy as np
import tensorflow as tf

__all__ = [
    "InvalidDataError",
    "NumericalError",
    "check_finite_inputs",
    "check_num_classes",
    "check_data",
    "check_inputs",
    "check_integer",
    "check_positive_number",
    "checked_label_rows",
    "checked_labels",
    "is_soft",
    "data_status",
    "error_for_status",
    "raise_for_status",
    "OK",
    "EMPTY_BATCH",
    "NONFINITE_INPUTS",
    "BAD_LABELS",
    "NUMERICAL_FAILURE",
    "BAD_STEP_SIZE",
    "OVERFLOWING_INPUTS",
    "BAD_SOFT_LABELS",
    "NUM_STATUS_CODES",
    "first_line",
    "numerical_errors",
    "step_size_status",
]

(
    OK,
    EMPTY_BATCH,
    NONFINITE_INPUTS,
    BAD_LABELS,
    NUMERICAL_FAILURE,
    BAD_STEP_SIZE,
    OVERFLOWING_INPUTS,
    BAD_SOFT_LABELS,
) = range(8)
NUM_STATUS_CODES = 8
_OVERFLOW_MESSAGE = (
    "X has values whose square overflows (|x| above about 1e154 in float64, 1e19 in float32), "
    "so every kernel distance is infinite: standardise the features"
)


class InvalidDataError(ValueError):
    """The data given to a model or optimizer cannot be used."""


class NumericalError(FloatingPointError):
    """An update failed numerically; the model's parameters were left as they were."""


def first_line(error: BaseException) -> str:
    """An error's message cut to its first line (TensorFlow's run on for pages), or its type's
    name when it has none: what a message of ours quotes as the reason."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@contextlib.contextmanager
def numerical_errors(what: str) -> Iterator[None]:
    """Turn TensorFlow's Cholesky failure into a :class:`NumericalError` naming ``what``."""
    try:
        yield
    except tf.errors.InvalidArgumentError as error:
        if "cholesky" not in error.message.lower():
            raise
        raise NumericalError(
            f"{what} failed ({error.message.splitlines()[0]}); the parameters were left "
            "unchanged. Increase gpflow.config jitter, or check the kernel hyperparameters"
        ) from None


def check_integer(value: Any, name: str, minimum: int = 1) -> int:
    """``value`` as an int if it is a whole number ≥ ``minimum`` (2.0 passes, 2.7, NaN, None,
    True and "3" do not); otherwise a ValueError naming ``name``."""
    whole = (
        isinstance(value, numbers.Real)
        and not isinstance(value, (bool, np.bool_))
        and math.isfinite(value)
        and value == math.trunc(value)
    )
    if not whole or int(value) < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum}, got {value!r}")
    return int(value)


def check_positive_number(
    value: Any, name: str, maximum: Optional[float] = None, allow_zero: bool = False
) -> float:
    """``value`` as a float if it is finite and > 0 (≥ 0 with ``allow_zero``; and ≤ ``maximum``);
    otherwise a ValueError naming ``name``."""
    lower = "≥ 0" if allow_zero else "> 0"
    upper = "" if maximum is None else f" and ≤ {maximum}"
    number = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    if (
        not number
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not allow_zero)
        or (maximum is not None and value > maximum)
    ):
        raise ValueError(f"{name} must be a finite number {lower}{upper}, got {value!r}")
    return float(value)


def check_num_classes(num_classes: object) -> int:
    return check_integer(num_classes, "num_classes", minimum=2)


_SOFT_LABEL_TOLERANCE = 1e-6
_SOFT_LABEL_MESSAGE = "soft labels must be rows of C probabilities (≥ 0, each row summing to 1)"


def is_soft(Y: Any, num_classes: int) -> bool:
    """Whether labels of this (static) shape are rows [N, C] of class probabilities (one-hot or
    soft) rather than a column [N, 1] of class indices."""
    shape = np.shape(Y) if not isinstance(Y, tf.Tensor) else tuple(Y.shape)
    return len(shape) == 2 and num_classes > 1 and shape[1] == num_classes


def _shape(value: Any) -> Tuple[Optional[int], ...]:
    """The (static) shape of an array or a tensor; ``None`` for a dimension not known yet."""
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return tuple(value.shape)
    return np.shape(value)


def _is_numeric_dtype(value: object) -> bool:
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return value.dtype.is_integer or value.dtype.is_floating
    dtype = np.asarray(value).dtype
    return np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)


def _dtype_name(value: object) -> str:
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return value.dtype.name
    return str(np.asarray(value).dtype)


def check_inputs(
    X: object,
    input_dim: Optional[int] = None,
    check_values: bool = True,
    prefix: str = "",
    check_overflow: bool = True,
) -> None:
    """Raise :class:`InvalidDataError` unless ``X`` is [N, D] (D = ``input_dim`` if given) and,
    with ``check_values``, finite numbers whose squares do not overflow (unless not
    ``check_overflow``: raw features that will be standardised). ``prefix`` names the data in the
    message (a dataset's name)."""
    shape = _shape(X)
    if len(shape) != 2:
        raise InvalidDataError(f"{prefix}X must be a 2-D array [N, D], got shape {shape}")
    if input_dim is not None and shape[1] is not None and shape[1] != input_dim:
        raise InvalidDataError(f"{prefix}X has {shape[1]} columns, the model expects {input_dim}")
    if not check_values:
        return
    X = np.asarray(X)
    if not np.issubdtype(X.dtype, np.number):
        raise InvalidDataError(f"{prefix}X must be numeric, got dtype {X.dtype}")
    if not np.all(np.isfinite(X)):
        bad = np.argwhere(~np.isfinite(X))[0]
        raise InvalidDataError(
            f"{prefix}X contains NaN or inf (first at row {bad[0]}, column {bad[1]})"
        )
    with np.errstate(over="ignore"):
        if check_overflow and not np.all(np.isfinite(np.square(np.asarray(X, dtype=np.float64)))):
            raise InvalidDataError(prefix + _OVERFLOW_MESSAGE)


def check_data(
    X: object,
    Y: object,
    num_classes: int,
    input_dim: Optional[int] = None,
    allow_soft: bool = False,
    check_values: bool = True,
) -> None:
    """The one check of a batch, for arrays and tensors alike: raise :class:`InvalidDataError`
    unless X is [N, D] with N ≥ 1 and Y is [N, 1] integers in 0..C-1, or (``allow_soft``) rows
    [N, C] of class probabilities. Without ``check_values`` only shapes and dtypes are checked
    (the compiled step checks the values on the device, :func:`data_status`)."""
    if not _is_numeric_dtype(Y):
        raise InvalidDataError(
            f"{_label_error_message(num_classes)}, got dtype {_dtype_name(Y)}; map class names to "
            "0..C-1 first (gpflow_augmented.datasets.from_arrays maps class names)"
        )
    x_shape, y_shape = _shape(X), _shape(Y)
    check_inputs(X, check_values=False)
    soft = allow_soft and is_soft(Y, num_classes)
    if not soft and (len(y_shape) != 2 or y_shape[1] != 1):
        also = f" or rows of class probabilities [N, {num_classes}]" if allow_soft else ""
        raise InvalidDataError(
            f"Y must be a column of integer labels [N, 1]{also}, got shape {y_shape}"
        )
    if None not in (x_shape[0], y_shape[0]) and x_shape[0] != y_shape[0]:
        raise InvalidDataError(f"X has {x_shape[0]} rows but Y has {y_shape[0]}")
    if x_shape[0] == 0:
        raise InvalidDataError("the batch is empty (N = 0)")
    check_inputs(X, input_dim, check_values)
    if not check_values:
        return
    Y = np.asarray(Y)
    if soft:
        if (
            not np.all(np.isfinite(Y))
            or np.any(Y < 0)
            or np.any(np.abs(Y.sum(axis=1) - 1) > _SOFT_LABEL_TOLERANCE)
        ):
            raise InvalidDataError(_SOFT_LABEL_MESSAGE)
        return
    if np.issubdtype(Y.dtype, np.floating) and not np.all(np.isfinite(Y) & (Y == np.round(Y))):
        raise InvalidDataError("Y must hold integer class labels 0..C-1, found non-integer values")
    if Y.min() < 0 or Y.max() >= num_classes:
        raise InvalidDataError(
            f"labels must be in 0..{num_classes - 1} (num_classes={num_classes}), "
            f"found values from {Y.min()} to {Y.max()}"
        )


def _label_error_message(num_classes: int) -> str:
    return f"labels must be integers in 0..{num_classes - 1} (num_classes={num_classes})"


def _class_indices_valid(Y: tf.Tensor, num_classes: int) -> tf.Tensor:
    """Elementwise: an integer value in 0..C-1 (exactly, for float labels)."""
    if Y.dtype.is_floating:
        values = tf.cast(Y, tf.float64)
        integral = tf.math.is_finite(values) & tf.equal(values, tf.round(values))
        return integral & (values >= 0) & (values < num_classes)
    values = tf.cast(Y, tf.int64)
    return (values >= 0) & (values < num_classes)


def _refuse_unless(
    valid: tf.Tensor, message: str, detail: Callable[[], str] = lambda: ""
) -> List[tf.Operation]:
    """Refuse unless every ``valid``: eagerly by raising :class:`InvalidDataError` (``message``
    and the eager-only ``detail``), in a graph by the returned assertion, for the caller's
    control dependencies. XLA drops assertions; callers make the invalid results NaN for it."""
    if tf.executing_eagerly():
        if not bool(tf.reduce_all(valid)):
            raise InvalidDataError(message + detail())
        return []
    return [tf.debugging.Assert(tf.reduce_all(valid), [message])]


def checked_labels(Y: tf.Tensor, num_classes: int) -> Tuple[tf.Tensor, tf.Tensor]:
    """Labels ``Y`` [N, 1] as int32 class indices [N], and whether each is valid [N].

    Every entry point that takes labels goes through this, so a label that is not an integer in
    0..C-1 is refused wherever it arrives: eagerly with :class:`InvalidDataError`, in a
    ``tf.function`` by an assertion (``tf.errors.InvalidArgumentError`` carrying the same
    message). XLA drops assertions, so callers also make the invalid points' results NaN, which
    under ``jit_compile=True`` is the only signal left (the package's own compiled steps
    validate through a status instead, :func:`data_status`)."""
    Y = tf.convert_to_tensor(Y)
    if Y.dtype == tf.string or not (Y.dtype.is_integer or Y.dtype.is_floating):
        raise InvalidDataError(f"{_label_error_message(num_classes)}, got dtype {Y.dtype.name}")
    if Y.shape.rank is not None and (Y.shape.rank == 0 or Y.shape[-1] not in (1, None)):
        # Rows of class probabilities are not class indices; reading their first column would be.
        raise InvalidDataError(
            f"{_label_error_message(num_classes)} in a column [N, 1], got shape {tuple(Y.shape)}"
        )
    values = Y[..., 0]
    valid = _class_indices_valid(values, num_classes)
    checks = _refuse_unless(
        valid,
        _label_error_message(num_classes),
        lambda: f", found {values.numpy()[~valid.numpy()][0]:g}",
    )
    with tf.control_dependencies(checks):
        labels = tf.cast(tf.where(valid, values, tf.zeros_like(values)), tf.int32)
    return labels, valid


def checked_label_rows(
    Y: tf.Tensor, num_classes: int, dtype: tf.DType, allow_soft: bool = True
) -> tf.Tensor:
    """Labels as rows [..., C] of class probabilities: one-hot rows of a column of class indices,
    or (``allow_soft``) the rows themselves when ``Y`` is [N, C]. Refused as
    :func:`checked_labels` refuses bad indices (a row that is not a probability vector: eagerly
    :class:`InvalidDataError`, an assertion in a graph, NaN under XLA)."""
    Y = tf.convert_to_tensor(Y)
    if allow_soft and is_soft(Y, num_classes):
        valid = _soft_labels_valid(Y)
        with tf.control_dependencies(_refuse_unless(valid, _SOFT_LABEL_MESSAGE)):
            rows = tf.cast(Y, dtype)
    else:
        labels, valid = checked_labels(Y, num_classes)
        rows = tf.one_hot(labels, num_classes, dtype=dtype)
    return tf.where(valid[..., None], rows, tf.constant(np.nan, dtype))


def check_finite_inputs(X: tf.Tensor) -> tf.Tensor:
    """``X`` after a check that it has no NaN or inf: :class:`InvalidDataError` eagerly, an
    assertion in a ``tf.function`` (dropped under XLA, where the NaN then shows in the result)."""
    X = tf.convert_to_tensor(X)

    def first_bad() -> str:
        bad = np.argwhere(~np.isfinite(X.numpy()))[0]
        return f" (first at row {bad[0]}, column {bad[-1]})"

    with tf.control_dependencies(
        _refuse_unless(tf.math.is_finite(X), "X contains NaN or inf", first_bad)
    ):
        return tf.identity(X)


def _soft_labels_valid(Y: tf.Tensor) -> tf.Tensor:
    """Per row: finite, non-negative and summing to 1 (within _SOFT_LABEL_TOLERANCE)."""
    Y = tf.cast(Y, tf.float64)
    return tf.reduce_all(tf.math.is_finite(Y) & (Y >= 0), axis=-1) & (
        tf.abs(tf.reduce_sum(Y, axis=-1) - 1) <= _SOFT_LABEL_TOLERANCE
    )


def data_status(X: tf.Tensor, Y: tf.Tensor, num_classes: int) -> tf.Tensor:
    """The checks of :func:`check_data` on the values, as an int32 status computed on the device
    (labels of shape [N, C] are rows of class probabilities)."""
    if is_soft(Y, num_classes):
        status = tf.where(tf.reduce_all(_soft_labels_valid(Y)), OK, BAD_SOFT_LABELS)
    else:
        status = tf.where(tf.reduce_all(_class_indices_valid(Y, num_classes)), OK, BAD_LABELS)
    status = tf.where(tf.reduce_all(tf.math.is_finite(tf.square(X))), status, OVERFLOWING_INPUTS)
    status = tf.where(tf.reduce_all(tf.math.is_finite(X)), status, NONFINITE_INPUTS)
    return tf.where(tf.shape(X)[0] > 0, status, EMPTY_BATCH)


def step_size_status(status: tf.Tensor, step_size: tf.Tensor) -> tf.Tensor:
    """``status``, or ``BAD_STEP_SIZE`` if the batch was valid but ρ (from a schedule, computed
    in the step) is not in (0, 1]: ρ = 0 trains nothing, ρ > 1 overshoots."""
    rho = tf.convert_to_tensor(step_size)
    in_range = tf.reduce_all(tf.math.is_finite(rho) & (rho > 0) & (rho <= 1))
    return tf.where((status == OK) & ~in_range, BAD_STEP_SIZE, status)


def error_for_status(status: int, num_classes: int) -> Exception:
    messages = {
        EMPTY_BATCH: (InvalidDataError, "the batch is empty (N = 0)"),
        NONFINITE_INPUTS: (InvalidDataError, "X contains NaN or inf"),
        OVERFLOWING_INPUTS: (InvalidDataError, _OVERFLOW_MESSAGE),
        BAD_SOFT_LABELS: (InvalidDataError, _SOFT_LABEL_MESSAGE),
        BAD_LABELS: (InvalidDataError, _label_error_message(num_classes)),
        BAD_STEP_SIZE: (
            ValueError,
            "the step-size schedule gave a ρ outside (0, 1] (or not finite) at this iteration",
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
