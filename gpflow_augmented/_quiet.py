"""Quiet start-up for the command-line tool.

Importing TensorFlow writes a screenful of C++ log lines to the process's standard error (oneDNN,
CUDA drivers, CPU features) before its own log level applies, and later CUDA and rendezvous
messages. The command-line tool raises TensorFlow's C++ log level (unless the user has set
``TF_CPP_MIN_LOG_LEVEL``) and sends file descriptor 2 to the null device while TensorFlow loads,
unless ``--verbose`` is given; the processes it starts (a benchmark's, one a dataset) load as
quietly. Importing the library from Python changes nothing.

A training step factorises matrices that may not be positive definite on purpose (its backoff and
trust region test them so), and TensorFlow's CPU kernel logs a warning for each one that fails; a
compiled step that raises on a failed factor (a peer's natural-gradient step) logs its error again
as it aborts; XLA announces itself the first time the step's quadrature is compiled.
:func:`without_failed_step_warnings` keeps those lines, and only those, off the terminal during a
step (the information lines only where the user has not set TensorFlow's log level). What the
step's safeguards did is reported in words (:class:`~gpflow_augmented.TrainingReport`, a
comparison's failed steps).
"""

import contextlib
import os
import re
import sys
import tempfile
import threading
from typing import IO, Iterator, List, Optional

__all__ = ["quiet_start_up", "running_the_command_line_tool", "without_failed_step_warnings"]

#: Set by a quiet start-up, so that the processes the tool starts start quietly too.
_QUIET_START = "GPFLOW_AUGMENTED_QUIET_START"


def running_the_command_line_tool() -> bool:
    """Whether this process is ``gpflow-augmented`` or ``python -m gpflow_augmented``."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if argv and os.path.basename(argv[0]) == "gpflow-augmented":
        return True
    if len(argv) > 1 and os.path.basename(argv[1]) == "gpflow-augmented":
        return True  # `python .../bin/gpflow-augmented`
    return any(a == "-m" and b == "gpflow_augmented" for a, b in zip(argv, argv[1:]))


@contextlib.contextmanager
def quiet_start_up() -> Iterator[None]:
    """For the command-line tool without ``--verbose``: TensorFlow's C++ log level at 3 (errors
    the tool reports itself) and standard error muted while the libraries load."""
    started_quietly = os.environ.get(_QUIET_START) == "1"  # by a quiet tool (benchmark)
    if "--verbose" in sys.argv[1:] or not (running_the_command_line_tool() or started_quietly):
        yield
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ[_QUIET_START] = "1"
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


#: What TensorFlow's CPU kernel logs for every matrix it cannot factorise. The step tests positive
#: definiteness by factorising (the backoff, the trust region) and reports a failure itself.
_CHOLESKY_WARNING = b"Cholesky decomposition was not successful"
#: What TensorFlow logs when a compiled function stops at an error, which the caller receives as an
#: exception; the lines after it that start with white space are its own (the failing node).
_ABORTED_FUNCTION = b"Local rendezvous is aborting with status"
#: A native information line (absl's format: I, the date, the time, the thread, file:line]), such as
#: XLA's start-up lines when the step's quadrature is first compiled. Warnings and errors are kept,
#: and information lines too where the user set TensorFlow's log level or per-module logging.
_NATIVE_INFORMATION = re.compile(rb"^I\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ \]]+:\d+\] ")
_LOG_SETTINGS = ("TF_CPP_MIN_LOG_LEVEL", "TF_CPP_VMODULE", "TF_CPP_MAX_VLOG_LEVEL")


class _NativeLog:
    """The scratch file that holds what native code wrote to file descriptor 2 during a step, and
    whether a step's block is already filtering (a trainer's step inside a comparison's, or
    another thread's step: descriptor 2 is the process's)."""

    file: Optional[IO[bytes]] = None
    active: bool = False
    lock = threading.Lock()


def _kept_lines(lines: List[bytes], keep_information: bool = False) -> List[bytes]:
    """``lines`` without TensorFlow's Cholesky warnings, aborted-function entries and (unless
    ``keep_information``) native information lines."""
    kept: List[bytes] = []
    in_dropped_entry = False
    for line in lines:
        if in_dropped_entry and line[:1].isspace():
            continue
        information = not keep_information and bool(_NATIVE_INFORMATION.match(line))
        in_dropped_entry = _ABORTED_FUNCTION in line or information
        if not in_dropped_entry and _CHOLESKY_WARNING not in line:
            kept.append(line)
    return kept


@contextlib.contextmanager
def without_failed_step_warnings() -> Iterator[List[int]]:
    """File descriptor 2 sent to a scratch file while the block runs, then everything written
    there but TensorFlow's Cholesky warnings, aborted-function entries and information lines
    written back. Yields a list that receives the number of lines dropped; it stays empty where
    the block filters nothing itself: inside another such block (which filters its lines), or
    where descriptor 2 cannot be redirected."""
    dropped: List[int] = []
    with _NativeLog.lock:
        outermost = not _NativeLog.active
        _NativeLog.active = True
    if not outermost:
        yield dropped
        return
    saved: Optional[int] = None
    try:
        try:
            _flush_standard_error()
            if _NativeLog.file is None:
                _NativeLog.file = tempfile.TemporaryFile()
            _NativeLog.file.seek(0)
            _NativeLog.file.truncate()
            saved = os.dup(2)
            os.dup2(_NativeLog.file.fileno(), 2)
        except (OSError, ValueError):
            if saved is not None:
                os.close(saved)
            saved = None
        yield dropped
    finally:
        try:
            if saved is not None and _NativeLog.file is not None:
                _write_back(saved, _NativeLog.file, dropped)
        finally:
            _NativeLog.active = False


def _flush_standard_error() -> None:
    if sys.stderr is not None:  # None under pythonw
        sys.stderr.flush()


def _write_back(saved: int, scratch: IO[bytes], dropped: List[int]) -> None:
    """Descriptor 2 put back as it was, and the scratch file's lines that are kept written to it."""
    _flush_standard_error()
    os.dup2(saved, 2)
    os.close(saved)
    scratch.seek(0)
    lines = scratch.read().splitlines(keepends=True)
    keep_information = any(setting in os.environ for setting in _LOG_SETTINGS)
    kept = _kept_lines(lines, keep_information)
    dropped.append(len(lines) - len(kept))
    remaining = b"".join(kept)
    while remaining:
        remaining = remaining[os.write(2, remaining) :]
