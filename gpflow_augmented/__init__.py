"""gpflow_augmented: fast, well-calibrated multi-class GP classification for GPflow.

The logistic-softmax likelihood σ(f_k) / Σ_c σ(f_c), made conditionally conjugate by Gamma, Poisson
and Pólya-Gamma augmentation, so that q(u) is updated in closed form by a compiled CAVI step.
"""
from ._quiet import quiet_start_up

with quiet_start_up():
    import tensorflow  # noqa: F401  (loaded here, quietly for the command-line tool)
    import gpflow  # noqa: F401

from . import (
    baselines,
    certificate,
    comparison,
    datasets,
    expectations,
    ground_truth,
    metrics,
    monitoring,
    plots,
    tuning,
    updates,
)
from .augmentation import LocalParameters
from .binary import BinaryLogisticSVGP
from .cavi import CAVI
from .checkpoints import CheckpointError, restore_checkpoint
from .certificate import BoundCertificate, bound_certificate
from .convergence import GlobalParameterConvergence
from .export import export_model, load_model
from .gibbs import GibbsSampler
from .mcmc import NutsSampler
from .posterior import PosteriorSamples
from .likelihoods import LogisticSoftmax
from .models import AUGMENTED_SCHEMES, SCHEMES, AugmentedSVGP, LogisticSoftmaxSVGP
from .initialisation import inducing_points, initial_kernel, median_lengthscale
from .schedules import ConstantStepSize, RobbinsMonro, StepSizeSchedule
from .training import EXACT_WARM_START, FitResult, Trainer, fit, minibatches
from .validation import InvalidDataError, NumericalError

__version__ = "0.1.0"

__all__ = [
    "AUGMENTED_SCHEMES",
    "AugmentedSVGP",
    "BinaryLogisticSVGP",
    "BoundCertificate",
    "bound_certificate",
    "certificate",
    "expectations",
    "CAVI",
    "CheckpointError",
    "EXACT_WARM_START",
    "GlobalParameterConvergence",
    "FitResult",
    "GibbsSampler",
    "NutsSampler",
    "PosteriorSamples",
    "Trainer",
    "baselines",
    "comparison",
    "datasets",
    "export_model",
    "fit",
    "ground_truth",
    "inducing_points",
    "initial_kernel",
    "load_model",
    "median_lengthscale",
    "metrics",
    "minibatches",
    "monitoring",
    "plots",
    "restore_checkpoint",
    "tuning",
    "ConstantStepSize",
    "InvalidDataError",
    "LocalParameters",
    "LogisticSoftmax",
    "LogisticSoftmaxSVGP",
    "NumericalError",
    "RobbinsMonro",
    "SCHEMES",
    "StepSizeSchedule",
    "__version__",
]
