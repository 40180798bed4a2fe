"""The ``DeprecationWarning`` of a renamed argument or method, pointing at the caller's line."""
import os
import sys
import warnings


def warn_moved(old: str, new: str) -> None:
    warnings.warn(f"{old} has moved to {new}; the old name will be removed in the next release",
                  DeprecationWarning, stacklevel=_caller_stacklevel())


def _caller_stacklevel() -> int:
    """The stack level of the first frame outside this module, the package's ``__getattr__`` and
    the import machinery, so that the warning points at the user's line."""
    own_files = (__file__, os.path.join(os.path.dirname(__file__), "__init__.py"))
    frame, level = sys._getframe(1), 1
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename in own_files:
            level += 1
        elif not filename.startswith("<frozen importlib"):  # warnings skips those itself
            break
        frame = frame.f_back
    return level
