"""
Restoring a ``tf.train.Checkpoint`` all or nothing.

``tf.train.Checkpoint.read`` assigns variables one by one as it matches them, so a checkpoint
that does not fit (another number of classes, inducing points or features) raises only after it
has overwritten whatever it matched first, e.g. the inducing points and the kernel, and a
truncated file fails half-way with an ``IndexError``. :func:`restore_checkpoint` keeps the
values of every variable it may touch and puts them back if anything fails.
"""

import re
import warnings
from pathlib import Path
from typing import Any, Callable, List, Optional

import numpy as np
import tensorflow as tf

from .validation import first_line

__all__ = [
    "CheckpointError",
    "CheckpointWarning",
    "latest_checkpoint",
    "restore_checkpoint",
    "keep_values",
]


class CheckpointError(ValueError):
    """A checkpoint could not be restored into the objects given; nothing was changed."""


class CheckpointWarning(UserWarning):
    """A folder's checkpoint state file is missing or unreadable, and its newest complete
    checkpoint is used instead."""


def latest_checkpoint(folder: str) -> Optional[str]:
    """The prefix of ``folder``'s latest checkpoint: the one its state file (``checkpoint``, as
    ``tf.train.CheckpointManager`` and ``Checkpoint.save`` write it) names, or, where that file is
    missing, unreadable or names a checkpoint that is not there, the complete ``<prefix>-N`` (its
    ``.index`` file present) with the largest N, with a :class:`CheckpointWarning`. ``None`` when
    the folder holds none. Unlike ``tf.train.latest_checkpoint``, a damaged state file is not
    read as "no checkpoint"."""
    root = Path(folder)
    state = root / "checkpoint"
    named = None
    if state.is_file():
        try:
            found = re.search(r'^model_checkpoint_path:\s*"(.*)"\s*$', state.read_text(), re.M)
        except (OSError, UnicodeDecodeError):
            found = None
        named = None if found is None else str(root / found.group(1))
        if named is not None and Path(named + ".index").is_file():
            return named
    numbered = []
    for index in root.glob("*-*.index"):
        match = re.fullmatch(r"(.*)-(\d+)\.index", index.name)
        if match:
            numbered.append((int(match.group(2)), str(root / index.name[: -len(".index")])))
    if not numbered:
        return None
    newest = max(numbered)[1]
    why = "is missing" if not state.is_file() else "cannot be read or names no checkpoint there"
    warnings.warn(
        f"{state} {why}; using {Path(newest).name}, the newest complete checkpoint in the folder",
        CheckpointWarning,
        stacklevel=2,
    )
    return newest


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
    or a folder, whose latest checkpoint is read).

    Every variable of the objects given must be in the checkpoint with the same shape (the
    checkpoint may hold more, e.g. a trainer when only the model is given); otherwise
    :class:`CheckpointError` names the problem and every variable holds the value it had before
    the call. Returns the load status::

        trainer = ga.Trainer(model)
        tf.train.Checkpoint(model=model, trainer=trainer).save("checkpoints/run")
        ga.restore_checkpoint("checkpoints", model=model, trainer=trainer)
    """
    if tf.io.gfile.isdir(str(path)):
        latest = latest_checkpoint(str(path))
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
