r"""
:class:`BinaryLogisticSVGP`: binary GP classification with the logistic likelihood σ(y'f), made
conjugate by one Pólya-Gamma variable per point (X-GPC, Wenzel et al. 2019): ``AugmentedSVGP``
with the :class:`~gpflow_augmented.likelihoods.BinaryLogistic` likelihood, whose module gives the
maths. The same :class:`~gpflow_augmented.CAVI`, schedules and :func:`~gpflow_augmented.fit` train
it as the multi-class model.

This is not :class:`~gpflow_augmented.LogisticSoftmaxSVGP` with C = 2. That model has two
independent latent GPs and p(y = 1 | f) = σ(f₁) / (σ(f₀) + σ(f₁)); this one has a single GP and
p(y = 1 | f) = σ(f), the likelihood of GPflow's ``Bernoulli(invlink=tf.sigmoid)``, with which it
predicts. The two put different priors on the class probability (at f = 0 draws, σ(f₁)/(σ(f₀) +
σ(f₁)) is far more concentrated around ½ than σ(f)), so their posteriors differ.
"""
from typing import Optional

import numpy as np
from check_shapes import check_shapes
from gpflow.kernels import Kernel
from gpflow.mean_functions import MeanFunction

from .likelihoods import BinaryLogistic
from .models import AugmentedSVGP

__all__ = ["BinaryLogisticSVGP"]


class BinaryLogisticSVGP(AugmentedSVGP):
    """Binary GP classification with the logistic link, trained by closed-form CAVI (X-GPC):
    ``AugmentedSVGP(kernel, BinaryLogistic(), inducing_variable, ...)``.

    :param kernel: the GP's kernel.
    :param inducing_variable: inducing inputs Z [M, D] (array or ``InducingPoints``).
    :param num_data: the training-set size N, which scales minibatch ELBOs and updates.
    :param whiten: parametrise q(u) through v = L⁻¹u, as GPflow's SVGP does (default True).
    :param mean_function: the prior mean of f, as in GPflow's SVGP (default zero).

    Labels are ``Y`` [N, 1] in {0, 1}. ``q_mu`` is [M, 1] and ``q_sqrt`` [1, M, M], as in a
    single-output GPflow ``SVGP``. Predictions are those of ``Bernoulli(invlink=tf.sigmoid)``,
    whose expectations over the Gaussian marginal of f are exact 1-D Gauss–Hermite quadrature.
    """

    @check_shapes(
        "q_mu: [M, 1] if q_mu is not None",
        "q_sqrt: [1, M, M] if q_sqrt is not None",
    )
    def __init__(
        self,
        kernel: Kernel,
        inducing_variable: object,
        num_data: Optional[int] = None,
        *,
        whiten: bool = True,
        q_mu: Optional[np.ndarray] = None,
        q_sqrt: Optional[np.ndarray] = None,
        mean_function: Optional[MeanFunction] = None,
    ) -> None:
        super().__init__(
            kernel, BinaryLogistic(), inducing_variable, num_data=num_data, whiten=whiten,
            q_mu=q_mu, q_sqrt=q_sqrt, mean_function=mean_function,
        )
