r"""
The logistic likelihood σ(y'f) for binary labels, made conjugate by one Pólya-Gamma variable per
point (X-GPC, Wenzel et al. 2019).

Labels are ``Y`` [N, 1] in {0, 1}, as for GPflow's ``Bernoulli``; internally y' = 2y - 1 ∈ {-1, +1}.
With σ(y'f) = ½ e^{y'f/2} E_{PG(ω|1,0)}[e^{-ωf²/2}] and q(ω) = PG(1, c):

* local update (paper eq. 11): c = sqrt(E[f²]) = sqrt(m² + v), θ = E[ω] = tanh(c/2) / (2c);
* per point ``E_aug - KL_PG = -log 2 + y'm/2 - θ(m² + v)/2 - log cosh(c/2) + θc²/2``, which at the
  optimal c is the Jaakkola–Jordan bound ``y'm/2 - log(2 cosh(c/2))`` on E log σ(y'f);
* the conjugate coefficients: given ω the augmented log-likelihood is ``(y'/2)·f - ω·f²/2``;
* the Gibbs conditional (Polson, Scott and Windle 2013): ω | f ~ PG(1, ``|f|``).
"""

from typing import Any, Optional, Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import TensorType
from gpflow.config import default_float
from gpflow.likelihoods import Bernoulli

from .polya_gamma import (
    LocalParameters,
    log_cosh_half,
    polya_gamma_mean,
    sample_polya_gamma,
    tilt,
)
from ..class_subsets import ClassSubset
from .expectation import expected_log_sigmoid
from ..validation import checked_labels
from .base import AugmentedLikelihood, Marginals

__all__ = ["BinaryLogistic", "binary_local_elbo"]


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


class BinaryLogistic(Bernoulli, AugmentedLikelihood):
    """GPflow's ``Bernoulli(invlink=tf.sigmoid)`` with its Pólya-Gamma augmentation: predictions
    are Bernoulli's (exact 1-D Gauss–Hermite quadrature), training is closed-form CAVI."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(invlink=tf.sigmoid, **kwargs)

    @property
    def num_classes(self) -> int:
        return 2

    @property
    def num_latent_gps(self) -> int:
        return 1

    @property
    def has_gibbs_conditionals(self) -> bool:
        return True

    @inherit_check_shapes
    def _predict_log_density(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType, Y: TensorType
    ) -> tf.Tensor:
        # Bernoulli reads any label other than 1 as 0: labels are checked here, and an invalid
        # one's density is NaN under XLA, which drops the assertion.
        valid = checked_labels(Y, self.num_classes)[1]
        log_density = super()._predict_log_density(X, Fmu, Fvar, Y)
        return tf.where(valid, log_density, tf.constant(np.nan, log_density.dtype))

    @inherit_check_shapes
    def label_rows(self, Y: tf.Tensor, subset: Optional[ClassSubset] = None) -> tf.Tensor:
        """y' = 2y - 1 ∈ {-1, +1} from labels y ∈ {0, 1}."""
        _no_subsets(subset)
        return 2 * tf.cast(Y, default_float()) - 1

    @inherit_check_shapes
    def local_parameters(self, marginals: Marginals, Y_rows: tf.Tensor) -> LocalParameters:
        # The optimal q(ω) = PG(1, c) is held fixed while differentiating: at the optimum its
        # derivative vanishes. There are no Poisson counts: γ = 0.
        _no_subsets(marginals.subset)
        c = tf.stop_gradient(tilt(marginals.mean, marginals.variance))
        return LocalParameters(
            gamma=tf.zeros_like(c), theta=polya_gamma_mean(tf.ones_like(c), c), c=c
        )

    @inherit_check_shapes
    def conjugate_coefficients(
        self, Y_rows: tf.Tensor, local: LocalParameters
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        return Y_rows / 2, local.theta

    @inherit_check_shapes
    def augmented_local_elbo(
        self, marginals: Marginals, Y: tf.Tensor, local: Optional[LocalParameters] = None
    ) -> tf.Tensor:
        sign = self.label_rows(Y, marginals.subset)
        if local is None:
            local = self.local_parameters(marginals, sign)
        return binary_local_elbo(marginals.mean, marginals.variance, sign, local.c, local.theta)

    @inherit_check_shapes
    def log_class_probabilities(self, F: tf.Tensor) -> tf.Tensor:
        # p(y = 0 | f) = σ(-f), p(y = 1 | f) = σ(f)
        return tf.math.log_sigmoid(tf.concat([-F, F], axis=-1))

    def draw_auxiliaries(
        self,
        F: np.ndarray,
        Y_rows: np.ndarray,
        state: Any,
        rng: np.random.Generator,
        scan: str = "blocked",
    ) -> Tuple[LocalParameters, None]:
        """ω | f ~ PG(1, ``|f|``); one block whatever the scan, and no state."""
        c = np.abs(F)
        omega = sample_polya_gamma(np.ones_like(c), c, rng)
        return LocalParameters(gamma=np.zeros_like(c), theta=omega, c=c), None

    @inherit_check_shapes
    def exact_local_elbo(self, marginals: Marginals, Y: tf.Tensor) -> tf.Tensor:
        sign = self.label_rows(Y, marginals.subset)
        return expected_log_sigmoid(sign[:, 0] * marginals.mean[:, 0], marginals.variance[:, 0])


def _no_subsets(subset: Optional[ClassSubset]) -> None:
    if subset is not None:
        raise ValueError("class subsets need a multi-class likelihood (one latent GP per class)")
