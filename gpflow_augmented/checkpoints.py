"""
Restoring a ``tf.train.Checkpoint`` all or nothing.

``tf.train.Checkpoint.read`` assigns variables one by one as it matches them, so a checkpoint
that does not fit (another number of classes, inducing points or features) raises only after it
has overwritten whatever it matched first, e.g. the inducing points and the kernel, and a
truncated file fails half-way with an ``IndexError``. :func:`restore_checkpoint` keeps the
values of every variable it may touch and puts them back if anything fails.
"""

from typing import Any, Callable, List

import numpy as np
import tensorflow as tf

from .validation import first_line

__all__ = [
    "CheckpointError",
    "restore_checkpoint",
    "keep_values",
]


class CheckpointError(ValueError):
    """A checkpoint could not be restored into the objects given; nothing was changed."""


def _variables(checkpoint: tf.train.Checkpoint) -> List[tf.Variable]:
    found, seen = [], set()
    for trackable in tf.train.TrackableView(checkpoint).descendants():
        if isinstance(trackable, tf.Variable) and id(trackable) not in seen:
            seen.add(id(trackable))
            found.append(trackable)
    return found


def keep_values(checkpoint: tf.train.Checkpoint) -> Callable[[], None]:
    """Copy the value of every variable ``checkpoint`` would save; the function returned puts
    those values back. Unlike writing the checkpoint and reading it again, an interruption
    (Ctrl-C) part-way through leaves no half-done restore for TensorFlow to warn about when it is
    deleted, and nothing touches the disk."""
    variables = _variables(checkpoint)
    kept = [np.array(v.numpy(), copy=True) for v in variables]

    def put_back() -> None:
        for variable, value in zip(variables, kept):
            variable.assign(value)

    return put_back


def restore_checkpoint(path: str, **objects: Any) -> Any:
    """Restore ``tf.train.Checkpoint(**objects)`` from ``path`` (a prefix as ``save`` returned it,
    or a folder, whose latest checkpoint is read), e.g.
    ``restore_checkpoint(path, model=model, trainer=trainer)``.

    Every variable of the objects given must be in the checkpoint with the same shape (the
    checkpoint may hold more, e.g. a trainer when only the model is given); otherwise
    :class:`CheckpointError` names the problem and every variable holds the value it had before
    the call. Returns the load status."""
    if tf.io.gfile.isdir(str(path)):
        latest = tf.train.latest_checkpoint(str(path))
        if latest is None:
            raise CheckpointError(f"{path}: no checkpoint in this folder")
        path = latest
    checkpoint = tf.train.Checkpoint(**objects)
    put_back = keep_values(checkpoint)
    try:
        status = checkpoint.read(str(path))
        status.assert_existing_objects_matched()
    except Exception as error:  # noqa: BLE001 - anything that stops the read undoes it
        put_back()
        reason = first_line(error)
        if isinstance(error, (IndexError, tf.errors.DataLossError)):
            reason = f"the file is truncated or corrupt ({reason})"
        elif isinstance(error, tf.errors.NotFoundError):
            reason = f"no checkpoint there ({reason})"
        raise CheckpointError(
            f"{path}: cannot restore into {', '.join(objects)}: {reason}; nothing was restored"
        ) from None
    return status
