"""
What the notebooks in ``notebooks/`` share, as GPflow's own ``gpflow.ci_utils`` does for its:
a fast mode, switched on by an environment variable, that shrinks every loop so the test suite can
run each notebook top to bottom in seconds; where the benchmark data lives; where figures go.

``GPFLOW_AUGMENTED_FAST=1``   fast mode (the test suite sets it)
``GPFLOW_AUGMENTED_DATA``     the folder of benchmark ``.npz`` files (also the default of
                              ``gpflow-augmented benchmark --data-dir``); without it the notebooks
                              use the bundled datasets
``GPFLOW_AUGMENTED_OUTPUT``   where figures are written (default: ``notebook-output``)
"""

import os
from pathlib import Path
from typing import Optional, TypeVar

__all__ = [
    "DATA_DIR_VARIABLE",
    "FAST_MODE_VARIABLE",
    "is_fast_mode",
    "reduce_in_fast_mode",
    "benchmark_data_dir",
    "output_dir",
]

FAST_MODE_VARIABLE = "GPFLOW_AUGMENTED_FAST"
DATA_DIR_VARIABLE = "GPFLOW_AUGMENTED_DATA"
_T = TypeVar("_T")


def is_fast_mode() -> bool:
    return os.environ.get(FAST_MODE_VARIABLE, "") not in ("", "0", "false", "False")


def reduce_in_fast_mode(full: _T, fast: _T) -> _T:
    """``fast`` in fast mode, else ``full``: the size of a loop, a list of settings, a budget."""
    return fast if is_fast_mode() else full


def benchmark_data_dir(required: str = "") -> Optional[Path]:
    """The benchmark data folder holding ``<required>.npz`` (any folder if ``required`` is
    empty), or ``None`` if there is none, so that a notebook can fall back to a bundled set."""
    candidate = os.environ.get(DATA_DIR_VARIABLE, "")
    folder = Path(candidate)
    if candidate and folder.is_dir() and (not required or (folder / f"{required}.npz").exists()):
        return folder
    return None


def output_dir(notebook: str) -> Path:
    """``$GPFLOW_AUGMENTED_OUTPUT/<notebook>``, created."""
    folder = Path(os.environ.get("GPFLOW_AUGMENTED_OUTPUT", "notebook-output")) / notebook
    folder.mkdir(parents=True, exist_ok=True)
    return folder
