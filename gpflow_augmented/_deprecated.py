"""
Names that moved keep working for one release, with a ``DeprecationWarning`` that gives the new
name: modules that moved into :mod:`gpflow_augmented.sampling` or
:mod:`gpflow_augmented.comparison` (``import gpflow_augmented.gibbs`` still works) and top-level
names that left ``gpflow_augmented``'s namespace.
"""
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
import warnings
from typing import Any, Optional, Sequence

MOVED_MODULES = {
    "gpflow_augmented.baselines": "gpflow_augmented.comparison.baselines",
    "gpflow_augmented.benchmark": "gpflow_augmented.comparison.benchmark",
    "gpflow_augmented.ci_utils": "gpflow_augmented.comparison.ci_utils",
    "gpflow_augmented.cli": "gpflow_augmented.comparison.cli",
    "gpflow_augmented.gibbs": "gpflow_augmented.sampling.gibbs",
    "gpflow_augmented.ground_truth": "gpflow_augmented.sampling.ground_truth",
    "gpflow_augmented.mcmc": "gpflow_augmented.sampling.nuts",
    "gpflow_augmented.plots": "gpflow_augmented.comparison.plots",
    "gpflow_augmented.posterior": "gpflow_augmented.sampling.posterior",
    "gpflow_augmented.scaling": "gpflow_augmented.comparison.scaling",
    "gpflow_augmented.tuning": "gpflow_augmented.comparison.tuning",
}

# Top-level names that moved: name -> the module that now holds it.
MOVED_NAMES = {
    "AUGMENTED_SCHEMES": "gpflow_augmented.models",
    "GibbsSampler": "gpflow_augmented.sampling",
    "LocalParameters": "gpflow_augmented.augmentation",
    "NutsSampler": "gpflow_augmented.sampling",
    "PosteriorSamples": "gpflow_augmented.sampling",
    "SCHEMES": "gpflow_augmented.models",
}


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


def moved_attribute(package: str, name: str) -> Any:
    """A moved top-level name or module of ``package``, with the warning; AttributeError if
    ``name`` never existed."""
    module_name = f"{package}.{name}"
    if module_name in MOVED_MODULES:
        warn_moved(module_name, MOVED_MODULES[module_name])
        return importlib.import_module(MOVED_MODULES[module_name])
    if name in MOVED_NAMES:
        warn_moved(module_name, f"{MOVED_NAMES[name]}.{name}")
        return getattr(importlib.import_module(MOVED_NAMES[name]), name)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old module path to the module at its new one (the same object, so its
    classes and state are shared), after the regular finders have found no file there."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[types.ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        warn_moved(spec.name, MOVED_MODULES[spec.name])
        return importlib.import_module(MOVED_MODULES[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        """The module was executed under its new name."""


def install_moved_module_finder() -> None:
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
