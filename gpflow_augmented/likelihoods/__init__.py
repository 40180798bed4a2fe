"""
Likelihoods that own their augmentation: each is a complete GPflow likelihood (usable in stock
``SVGP``) and implements :class:`AugmentedLikelihood`, the contract through which
:class:`~gpflow_augmented.AugmentedSVGP` and :class:`~gpflow_augmented.CAVI` update q(u) in closed
form and the Gibbs sampler draws the auxiliary variables.
"""

from .base import AugmentedLikelihood, Marginals
from .binary import BinaryLogistic, binary_local_elbo
from .augmentation import LogisticSoftmaxAugmentation, MeanFieldGammaPoisson, NegativeMultinomial
from .expectation import log_logistic_softmax
from .logistic_softmax import (
    DEFAULT_NUM_PREDICTIVE_SAMPLES,
    PREDICTIVES,
    LogisticSoftmax,
    quasi_normal_samples,
    sobol_uniforms,
)

__all__ = [
    "AugmentedLikelihood",
    "BinaryLogistic",
    "DEFAULT_NUM_PREDICTIVE_SAMPLES",
    "LogisticSoftmax",
    "LogisticSoftmaxAugmentation",
    "Marginals",
    "MeanFieldGammaPoisson",
    "NegativeMultinomial",
    "PREDICTIVES",
    "binary_local_elbo",
    "log_logistic_softmax",
    "quasi_normal_samples",
    "sobol_uniforms",
]
