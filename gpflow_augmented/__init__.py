"""gpflow_augmented: fast, well-calibrated multi-class GP classification for GPflow.

The logistic-softmax likelihood σ(f_k) / Σ_c σ(f_c), made conditionally conjugate by Gamma, Poisson
and Pólya-Gamma augmentation, so that q(u) is updated in closed form by a compiled CAVI step.

This namespace is the library: models, likelihoods, the CAVI optimizer and its step-size schedules,
training, monitoring, metrics and datasets. Two layers build on it and load only when used:
:mod:`gpflow_augmented.sampling` (Gibbs and NUTS ground truth) and
:mod:`gpflow_augmented.comparison` (GPflow's classifiers side by side, the benchmark and the
``gpflow-augmented`` command).
"""

from typing import Any

from ._quiet import quiet_start_up

with quiet_start_up():
    import tensorflow  # noqa: F401  (loaded here, quietly for the command-line tool)
    import gpflow  # noqa: F401

from . import datasets, metrics, monitoring
from .cavi import CAVI
from .certificate import BoundCertificate, bound_certificate
from .checkpoints import CheckpointError, CheckpointWarning, latest_checkpoint, restore_checkpoint
from .convergence import GlobalParameterConvergence
from .export import export_model, load_model
from .initialisation import inducing_points, initial_kernel, median_lengthscale
from .likelihoods import LogisticSoftmax
from .models import AugmentedSVGP, BinaryLogisticSVGP, LogisticSoftmaxSVGP
from .schedules import ConstantStepSize, RobbinsMonro, StepSizeSchedule
from .bounds import (
    EXACT_AVERAGING,
    EXACT_LEARNING_RATE,
    EXACT_LEARNING_RATE_DECAY_STEPS,
    EXACT_WARM_START,
    AugmentedBound,
    Bound,
    ExactBound,
)
from .training import FitResult, Trainer, TrainingReport, TrainingWarning, fit, minibatches
from .validation import InvalidDataError, NumericalError

__version__ = "0.2.0"

__all__ = [
    "AugmentedBound",
    "AugmentedSVGP",
    "BinaryLogisticSVGP",
    "Bound",
    "BoundCertificate",
    "CAVI",
    "CheckpointError",
    "CheckpointWarning",
    "ConstantStepSize",
    "EXACT_AVERAGING",
    "EXACT_LEARNING_RATE",
    "EXACT_LEARNING_RATE_DECAY_STEPS",
    "EXACT_WARM_START",
    "ExactBound",
    "FitResult",
    "GlobalParameterConvergence",
    "InvalidDataError",
    "LogisticSoftmax",
    "LogisticSoftmaxSVGP",
    "NumericalError",
    "RobbinsMonro",
    "StepSizeSchedule",
    "Trainer",
    "TrainingReport",
    "TrainingWarning",
    "__version__",
    "bound_certificate",
    "datasets",
    "export_model",
    "fit",
    "inducing_points",
    "initial_kernel",
    "latest_checkpoint",
    "load_model",
    "median_lengthscale",
    "metrics",
    "minibatches",
    "monitoring",
    "restore_checkpoint",
]

_LAYERS = ("comparison", "sampling")


def __getattr__(name: str) -> Any:
    # The layers above the library load on first use (``gpflow_augmented.comparison``): importing
    # the library alone must not pull in matplotlib or polyagamma.
    if name in _LAYERS:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted([*__all__, *_LAYERS])
