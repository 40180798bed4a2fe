r"""
:class:`BinaryLogisticSVGP`: binary GP classification with the logistic likelihood σ(y'f), made
conjugate by one Pólya-Gamma variable per point (X-GPC, Wenzel et al. 2019).

Labels are ``Y`` [N, 1] in {0, 1}, as for GPflow's ``Bernoulli`` likelihood; internally
y' = 2y - 1 ∈ {-1, +1}. With σ(y'f) = ½ e^{y'f/2} E_{PG(ω|1,0)}[e^{-ωf²/2}] and q(ω) = PG(1, c):

* local update (paper eq. 11): c = sqrt(E[f²]) = sqrt(m² + v), θ = E[ω] = tanh(c/2) / (2c);
* per point ``E_aug - KL_PG = -log 2 + y'm/2 - θ(m² + v)/2 - log cosh(c/2) + θc²/2``, which at the
  optimal c is the Jaakkola–Jordan bound ``y'm/2 - log(2 cosh(c/2))`` on E log σ(y'f);
* global update (eq. 12): the augmented log-likelihood is ``(y'/2)·f - θ·f²/2``, so q(u) takes the
  same closed-form natural-parameter step as the multi-class model (:mod:`~gpflow_augmented.updates`),
  driven by the same :class:`~gpflow_augmented.CAVI`, schedules and :func:`~gpflow_augmented.fit`.

This is not :class:`~gpflow_augmented.LogisticSoftmaxSVGP` with C = 2. That model has two
independent latent GPs and p(y = 1 | f) = σ(f₁) / (σ(f₀) + σ(f₁)); this one has a single GP and
p(y = 1 | f) = σ(f), the likelihood of GPflow's ``Bernoulli(invlink=tf.sigmoid)``, with which it
predicts. The two put different priors on the class probability (at f = 0 draws, σ(f₁)/(σ(f₀) +
σ(f₁)) is far more concentrated around ½ than σ(f)), so their posteriors differ.
"""
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import RegressionData
from gpflow.config import default_float
from gpflow.kernels import Kernel
from gpflow.likelihoods import Bernoulli
from gpflow.mean_functions import MeanFunction

from .expectations import expected_log_sigmoid
from .augmentation import log_cosh_half, polya_gamma_mean, tilt
from .models import AugmentedSVGP
from .validation import checked_labels

__all__ = ["BinaryLogisticSVGP", "binary_local_elbo"]


@check_shapes(
    "Fmu: [N, 1]", "Fvar: [N, 1]", "sign: [N, 1]", "c: [N, 1]", "theta: [N, 1]", "return: [N]"
)
def binary_local_elbo(
    Fmu: tf.Tensor, Fvar: tf.Tensor, sign: tf.Tensor, c: tf.Tensor, theta: tf.Tensor
) -> tf.Tensor:
    """E_q[log augmented likelihood] - KL(PG(1, c) || PG(1, 0)) per point, at any tilt c.

    ``theta`` must be E[ω] = tanh(c/2)/(2c) under q(ω) = PG(1, c); it is taken as an argument so
    that c and θ can be held fixed while differentiating (envelope theorem).
    """
    second_moment = tf.square(Fmu) + Fvar
    per_point = (
        -np.log(2.0)
        + sign * Fmu / 2
        - theta * second_moment / 2
        - log_cosh_half(c)
        + theta * tf.square(c) / 2
    )
    return per_point[:, 0]


class BinaryLogisticSVGP(AugmentedSVGP):
    """Binary GP classification with the logistic link, trained by closed-form CAVI (X-GPC).

    :param kernel: the GP's kernel.
    :param inducing_variable: inducing inputs Z [M, D] (array or ``InducingPoints``).
    :param num_data: the training-set size N, which scales minibatch ELBOs and updates.
    :param whiten: parametrise q(u) through v = L⁻¹u, as GPflow's SVGP does (default True).
    :param mean_function: the prior mean of f, as in GPflow's SVGP (default zero).

    ``q_mu`` is [M, 1] and ``q_sqrt`` [1, M, M], as in a single-output GPflow ``SVGP``.
    Predictions use ``Bernoulli(invlink=tf.sigmoid)``, whose expectations over the Gaussian
    marginal of f are exact 1-D Gauss–Hermite quadrature.
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
            kernel, inducing_variable, Bernoulli(invlink=tf.sigmoid), 1, 2, num_data, whiten,
            q_mu, q_sqrt, mean_function,
        )

    @inherit_check_shapes
    def predict_log_density(
        self, data: RegressionData, full_cov: bool = False, full_output_cov: bool = False
    ) -> tf.Tensor:
        # GPflow's Bernoulli reads any label other than 1 as 0: the labels are checked here (the
        # multi-class likelihood checks its own).
        valid = checked_labels(data[1], self.num_classes)[1]
        log_density = super().predict_log_density(data, full_cov, full_output_cov)
        return tf.where(valid, log_density, tf.constant(np.nan, log_density.dtype))

    @staticmethod
    @check_shapes("Y: [N, 1]", "return: [N, 1]")
    def label_sign(Y: tf.Tensor) -> tf.Tensor:
        """y' = 2y - 1 ∈ {-1, +1} from labels y ∈ {0, 1}."""
        return 2 * tf.cast(Y, default_float()) - 1

    @inherit_check_shapes
    def local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> tf.Tensor:
        return self.conjugate_terms(Fmu, Fvar, Y)[0]

    @inherit_check_shapes
    def exact_local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> tf.Tensor:
        sign = self.label_sign(Y)
        return expected_log_sigmoid(sign[:, 0] * Fmu[:, 0], Fvar[:, 0])

    @inherit_check_shapes
    def conjugate_terms(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        augmented_sites: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The optimal q(ω) = PG(1, c) is held fixed while differentiating: at the optimum its
        derivative vanishes, so this is the gradient of the optimised bound. (The sites are always
        the augmented ones: this model has no exact-bound step.)"""
        sign = self.label_sign(Y)
        c = tf.stop_gradient(tilt(Fmu, Fvar))
        theta = polya_gamma_mean(tf.ones_like(c), c)
        return binary_local_elbo(Fmu, Fvar, sign, c, theta), sign / 2, theta
