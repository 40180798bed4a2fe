"""
The exact posterior by sampling, the ground truth the variational methods are measured against:
:class:`GibbsSampler` on the augmented model (exact Pólya-Gamma draws), :class:`NutsSampler` on
the non-augmented one (the independent check), :class:`PosteriorSamples` (predictions and
convergence diagnostics from the draws) and :func:`compare_with_gibbs` (the paper's Figure 5).

This layer uses the library and is used by :mod:`gpflow_augmented.comparison`, never the reverse;
``import gpflow_augmented`` does not load it (nor polyagamma).
"""

from .gibbs import GibbsSampler
from .ground_truth import GroundTruthComparison, compare_with_gibbs
from .nuts import NutsSampler
from .posterior import PosteriorSamples

__all__ = [
    "GibbsSampler",
    "GroundTruthComparison",
    "NutsSampler",
    "PosteriorSamples",
    "compare_with_gibbs",
]
