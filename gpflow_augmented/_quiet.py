"""Quiet start-up for the command-line tool.

Importing TensorFlow writes a screenful of C++ log lines to the process's standard error (oneDNN,
CUDA drivers, CPU features) before its own log level applies, and later CUDA and rendezvous
messages. The command-line tool raises TensorFlow's C++ log level (unless the user has set
``TF_CPP_MIN_LOG_LEVEL``) and sends file descriptor 2 to the null device while TensorFlow loads,
unless ``--verbose`` is given. Importing the library from Python changes nothing.
"""

import contextlib
import os
import sys
from typing import Iterator

__all__ = ["quiet_start_up", "running_the_command_line_tool"]


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
    if not running_the_command_line_tool() or "--verbose" in sys.argv[1:]:
        yield
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
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
