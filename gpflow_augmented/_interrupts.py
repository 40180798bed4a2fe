"""Knowing Ctrl-C when it arrives in disguise.

A ``KeyboardInterrupt`` that lands while TensorFlow traces or AutoGraph converts a function can
come out as another error: its context stack's ``__exit__`` raises ``AssertionError('Concurrent
access?')`` with the interrupt as its context, and code that catches and re-raises may drop the
interrupt from the chain altogether. Inside :func:`noting_interrupts` the signal itself is noted as
it arrives, so :func:`raised_by_interrupt` knows an error that follows it for what it is, whatever
became of the exception on its way out.
"""

import contextlib
import signal
import threading
from typing import Any, Iterator, Optional

__all__ = ["noting_interrupts", "raised_by_interrupt"]

# The main thread's alone: Python runs signal handlers only there, so a noted SIGINT says nothing
# of an error in another thread, and another thread's training must not reset or count here.
_depth = 0  # how many noting_interrupts() the main thread has open
_noted = False  # whether SIGINT arrived since the outermost one opened


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _note_and_raise(signum: int, frame: Any) -> None:
    global _noted
    _noted = True
    signal.default_int_handler(signum, frame)


@contextlib.contextmanager
def noting_interrupts() -> Iterator[None]:
    """Within, SIGINT is noted as well as raised as ``KeyboardInterrupt``. Only Python's own
    handler in the main thread is replaced, for the duration: a handler the user installed, or an
    ignored SIGINT, is left as it is (and nothing is noted). In any other thread it does nothing."""
    global _depth, _noted
    if not _in_main_thread():
        yield
        return
    install = _depth == 0 and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if _depth == 0:
        _noted = False
    if install:
        signal.signal(signal.SIGINT, _note_and_raise)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if install:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def raised_by_interrupt(error: Optional[BaseException]) -> bool:
    """Whether ``error`` is Ctrl-C, or what Ctrl-C became on its way out: a ``KeyboardInterrupt``
    in its chain of causes and contexts, or, inside :func:`noting_interrupts`, any error once
    SIGINT has arrived (in the main thread only; elsewhere only the chain counts)."""
    if error is not None and _in_main_thread() and _depth > 0 and _noted:
        return True
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False
