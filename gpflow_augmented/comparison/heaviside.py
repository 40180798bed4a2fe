r"""
The Heaviside (arg-max) likelihood of multi-class GP classification with Gaussian noise on the
latents, p(y = k | f) = P(f_k + ε_k > f_c + ε_c for every c ≠ k), ε_c ~ N(0, σ²) (Kim &
Ghahramani 2006; Villacampa-Calvo & Hernández-Lobato 2017, eq. 1): the "HS" model the UAI paper
compares against, trained by expectation propagation (:mod:`~gpflow_augmented.comparison.sep`).

Two computations live here:

* the predictive class probabilities, a one-dimensional integral of a product of Gaussian CDFs
  (Villacampa-Calvo 2017, eq. 11), by Gauss–Hermite quadrature in log space;
* the expectation-propagation moments of the paper's pairwise factors
  Φ((f_y − f_k) / √(s_y + s_k)) (eq. 6), which are closed form: with the cavity marginals
  N(m_c, τ_c) of the two latents, Z = Φ(β), β = (m_y − m_k) / √D, D = s_y + s_k + τ_y + τ_k, and
  the rank-one Gaussian site that matches the tilted mean and variance of each latent.
"""

from typing import NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import MeanAndVariance, Parameter, TensorType
from gpflow.config import default_float
from gpflow.likelihoods import Likelihood
from gpflow.utilities import positive

from ..likelihoods.expectation import _EAGER_UNFUSED_LIMIT
from ..validation import check_integer, check_num_classes, check_positive_number, checked_labels

__all__ = [
    "ArgMaxLikelihood",
    "FactorSites",
    "HeavisideLikelihood",
    "RobustHeavisideLikelihood",
    "log_ndtr",
    "pairwise_probit_sites",
    "site_totals",
]

_LOG_2PI = np.log(2.0 * np.pi)


def log_ndtr(x: tf.Tensor) -> tf.Tensor:
    """log Φ(x), accurate where Φ(x) underflows: one ``erfc`` above the lower tail (``log1p`` of
    the upper tail's mass for x ≥ 0, ``log`` of the mass below x < 0), the asymptotic series
    below it (Abramowitz & Stegun 26.2.12, to 945 / x¹⁰). TFP's ``log_cdf`` evaluates the normal CDF
    twice an element and a series of three terms; this is the predictive integral's inner loop,
    [N, C, C, J] elements."""
    x = tf.convert_to_tensor(x)
    # Where erfc is still far from underflow and the series' next term is below 3e-12 (float64)
    # or 1e-8 (float32) of the value.
    lower = tf.constant(-20.0 if x.dtype == tf.float64 else -10.0, x.dtype)
    middle = tf.maximum(x, lower)
    upper = middle >= 0.0
    # |x| by a where, not tf.abs, so that x = 0 takes the x ≥ 0 form's derivative.
    magnitude = tf.where(upper, middle, -middle)
    tail = 0.5 * tf.math.erfc(magnitude * np.sqrt(0.5))  # Φ(−|x|)
    # The unused branch's log must stay finite: tail underflows to 0 for x ≫ 0, and a where's
    # zero gradient times an infinite one is NaN.
    tiny = np.finfo(x.dtype.as_numpy_dtype).tiny
    log_middle = tf.where(upper, tf.math.log1p(-tail), tf.math.log(tf.maximum(tail, tiny)))
    low = tf.minimum(x, lower)
    r = 1.0 / tf.square(low)
    series = 1.0 - r * (1.0 - 3.0 * r * (1.0 - 5.0 * r * (1.0 - 7.0 * r * (1.0 - 9.0 * r))))
    log_low = -0.5 * tf.square(low) - 0.5 * _LOG_2PI + tf.math.log(series / -low)
    return tf.where(x > lower, log_middle, log_low)


def _log_arg_max_integral(mean: tf.Tensor, variance: tf.Tensor, num_hermite: int) -> tf.Tensor:
    """log ∫ N(f; m_k, V_k) Π_{c≠k} Φ((f − m_c)/√V_c) df [N, K] by Gauss–Hermite in f."""
    dtype = mean.dtype
    nodes, weights = np.polynomial.hermite.hermgauss(num_hermite)
    nodes, log_weights = tf.constant(nodes, dtype), tf.constant(np.log(weights), dtype)
    # f at each node for each candidate class k: [N, K, J].
    f = mean[:, :, None] + tf.sqrt(2.0 * variance)[:, :, None] * nodes
    # Φ((f − m_c)/√V_c) for every c: [N, K, C, J]; the c = k terms are left out.
    z = (f[:, :, None, :] - mean[:, None, :, None]) / tf.sqrt(variance)[:, None, :, None]
    not_k = (1.0 - tf.eye(mean.shape[-1], dtype=dtype))[None, :, :, None]
    log_product = tf.reduce_sum(not_k * log_ndtr(z), axis=2)  # [N, K, J]
    return tf.reduce_logsumexp(log_product + log_weights, axis=-1) - 0.5 * np.log(np.pi)


# XLA fuses the [N, K, C, J] chain into one loop that never stores that tensor, which op by op
# is most of a many-class evaluation's time. One trace a shape, as the step's quadrature
# (likelihoods/expectation.py); an eager call small enough to cost less than the compile is
# evaluated op by op.
_fused_log_arg_max_integral = tf.function(_log_arg_max_integral, jit_compile=True, autograph=False)


def _log_arg_max_probabilities(mean: tf.Tensor, variance: tf.Tensor, num_hermite: int) -> tf.Tensor:
    if tf.executing_eagerly():
        num_points, num_classes = mean.shape
        if num_points * num_classes**2 * num_hermite <= _EAGER_UNFUSED_LIMIT:
            return _log_arg_max_integral(mean, variance, num_hermite)
    return _fused_log_arg_max_integral(mean, variance, num_hermite)


class FactorSites(NamedTuple):
    """EP on each point's factors k ≠ y, one per column k (zero in the label's column): the log
    normaliser and the rank-one Gaussian sites exp(−π f²/2 + ν f) the factor places on the label's
    latent f_y and on f_k. π ≥ 0 always."""

    log_normaliser: tf.Tensor  # [N, C] log Z_ik
    label_precision: tf.Tensor  # [N, C] π of factor k's site on f_y
    label_shift: tf.Tensor  # [N, C] ν of that site
    other_precision: tf.Tensor  # [N, C] π of factor k's site on f_k
    other_shift: tf.Tensor  # [N, C]
    log_heaviside: tf.Tensor  # [N, C] log Φ(β_ik), the probability the Heaviside part gives


@check_shapes(
    "label_mean: [N, C]",
    "label_variance: [N, C]",
    "other_mean: [N, C]",
    "other_variance: [N, C]",
    "factor_noise: [N, C]",
    "labels: [N]",
    "outlier_log_odds: [N, C]",
)
def pairwise_probit_sites(
    label_mean: tf.Tensor,
    label_variance: tf.Tensor,
    other_mean: tf.Tensor,
    other_variance: tf.Tensor,
    factor_noise: tf.Tensor,
    labels: tf.Tensor,
    outlier_log_odds: Optional[tf.Tensor] = None,
) -> FactorSites:
    r"""EP on each point's C − 1 factors Φ((f_y − f_k)/√(s_y + s_k)), k ≠ y (y the label); with
    ``outlier_log_odds`` q (the cavity's log-odds that the point is an outlier, p = σ(q)), on the
    robust factors of Hernández-Lobato et al. (2011), whose expectation over the outlier indicator
    is (1 − p)·Φ(β) + p·C^{−1/(C−1)}: an outlier's label is uniform, 1/C over its C − 1 factors.

    :param label_mean: column k: the mean of f_y under factor k's cavity.
    :param label_variance: its variance.
    :param other_mean: column k: the mean of f_k under factor k's cavity.
    :param other_variance: its variance.
    :param factor_noise: s_ic, the variance the factor adds to latent c (the FITC conditional
        variance plus the noise σ²).
    """
    num_classes = other_mean.shape[-1]
    own = tf.one_hot(labels, num_classes, dtype=other_mean.dtype)  # [N, C]
    others = 1.0 - own
    s_y = tf.reduce_sum(own * factor_noise, axis=-1, keepdims=True)
    total_variance = s_y + factor_noise + label_variance + other_variance
    beta = (label_mean - other_mean) / tf.sqrt(total_variance)
    log_heaviside = log_ndtr(beta)
    if outlier_log_odds is None:
        log_z, log_inlier = log_heaviside, tf.zeros_like(beta)
    else:
        log_inlier = -tf.nn.softplus(outlier_log_odds)  # log(1 − p)
        log_uniform = -tf.nn.softplus(-outlier_log_odds) - np.log(num_classes) / (num_classes - 1)
        log_z = tf.reduce_logsumexp(tf.stack([log_inlier + log_heaviside, log_uniform]), 0)
    # (1 − p)φ(β)/Z in log space: it grows like −β where Φ(β) underflows.
    ratio = tf.exp(log_inlier - 0.5 * tf.square(beta) - 0.5 * _LOG_2PI - log_z)
    gradient = ratio / tf.sqrt(total_variance)  # ∂ log Z / ∂m_y = −∂ log Z / ∂m_k
    curvature = -ratio * (beta + ratio) / total_variance  # ∂² log Z / ∂m_y² = ∂² / ∂m_k²

    def site(mean: tf.Tensor, variance: tf.Tensor, slope: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        # The site whose product with the cavity N(mean, variance) has the tilted moments
        # mean + variance·slope and variance + variance²·curvature.
        denominator = 1.0 + variance * curvature
        return (
            others * -curvature / denominator,
            others * (slope - mean * curvature) / denominator,
        )

    return FactorSites(
        others * log_z,
        *site(label_mean, label_variance, gradient),
        *site(other_mean, other_variance, -gradient),
        others * log_heaviside,
    )


@check_shapes(
    "labels: [N]",
    "label_precision: [N, C]",
    "label_shift: [N, C]",
    "other_precision: [N, C]",
    "other_shift: [N, C]",
    "return[0]: [N, C]",
    "return[1]: [N, C]",
)
def site_totals(
    labels: tf.Tensor,
    label_precision: tf.Tensor,
    label_shift: tf.Tensor,
    other_precision: tf.Tensor,
    other_shift: tf.Tensor,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """(π, ν) [N, C] that each point's factors place on each latent, summed: on the label's
    column the C − 1 factors' sites on f_y, elsewhere factor k = c's site on f_c (the parts of
    :class:`FactorSites`)."""
    own = tf.one_hot(labels, other_shift.shape[-1], dtype=other_shift.dtype)

    def total(label_part: tf.Tensor, other_part: tf.Tensor) -> tf.Tensor:
        return other_part + own * tf.reduce_sum(label_part, axis=-1, keepdims=True)

    return total(label_precision, other_precision), total(label_shift, other_shift)


class ArgMaxLikelihood(Likelihood):
    """p(y = k | f) = (1 − ε)·P(arg max_c (f_c + ε_c) = k) + ε/C with ε_c ~ N(0, σ²): what
    :class:`HeavisideLikelihood` (σ², ε = 0) and :class:`RobustHeavisideLikelihood` (σ = 0, ε)
    share. Labels are integers 0..C−1 in a column ``Y`` [N, 1]."""

    def __init__(self, num_classes: int, num_hermite: int) -> None:
        num_classes = check_num_classes(num_classes)
        super().__init__(input_dim=None, latent_dim=num_classes, observation_dim=None)
        self.num_classes = num_classes
        self.num_hermite = check_integer(num_hermite, "num_hermite", minimum=2)

    def latent_noise(self, dtype: tf.DType) -> tf.Tensor:
        """σ², the variance of the Gaussian noise on every latent."""
        return tf.zeros([], dtype)

    def _outlier_rate(self, dtype: tf.DType) -> Optional[tf.Tensor]:
        return None

    @check_shapes("Fmu: [N, C]", "Fvar: [N, C]", "return: [N, C]")
    def log_class_probabilities(self, Fmu: tf.Tensor, Fvar: tf.Tensor) -> tf.Tensor:
        """log p(y = k) [N, C] under f ~ N(Fmu, Fvar): with V_c = Fvar_c + σ²,
        log ∫ N(f; m_k, V_k) Π_{c≠k} Φ((f − m_c)/√V_c) df by Gauss–Hermite in f, mixed with the
        uniform 1/C by the outlier rate ε."""
        Fmu = tf.convert_to_tensor(Fmu)
        dtype = Fmu.dtype
        variance = tf.convert_to_tensor(Fvar) + self.latent_noise(dtype)  # [N, C]
        log_p = _log_arg_max_probabilities(Fmu, variance, self.num_hermite)
        rate = self._outlier_rate(dtype)
        if rate is None:
            return log_p
        return tf.reduce_logsumexp(
            tf.stack(
                [
                    tf.math.log1p(-rate) + log_p,
                    tf.broadcast_to(tf.math.log(rate) - np.log(self.num_classes), tf.shape(log_p)),
                ]
            ),
            0,
        )

    @inherit_check_shapes
    def _variational_expectations(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType, Y: TensorType
    ) -> tf.Tensor:
        raise NotImplementedError(
            f"{type(self).__name__} is trained by expectation propagation, not by a variational "
            "bound; use gpflow.likelihoods.MultiClass (robust-max) for VI"
        )

    @inherit_check_shapes
    def _predict_mean_and_var(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType
    ) -> MeanAndVariance:
        p = tf.exp(self.log_class_probabilities(Fmu, Fvar))
        return p, p - tf.square(p)

    @inherit_check_shapes
    def _predict_log_density(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType, Y: TensorType
    ) -> tf.Tensor:
        return self.label_log_density(self.log_class_probabilities(Fmu, Fvar), Y)

    @check_shapes("log_p: [N, C]", "Y: [N, 1]", "return: [N]")
    def label_log_density(self, log_p: tf.Tensor, Y: TensorType) -> tf.Tensor:
        """log p(y) [N] picked from the class log-probabilities ``log_p``."""
        labels, valid = checked_labels(Y, self.num_classes)
        log_density = tf.gather(log_p, labels[:, None], batch_dims=1)[:, 0]
        # Under XLA, which drops the label assertion, a bad label gives NaN, not a number.
        return tf.where(valid, log_density, tf.constant(np.nan, log_density.dtype))


class HeavisideLikelihood(ArgMaxLikelihood):
    """p(y = k | f) = P(arg max_c (f_c + ε_c) = k), ε_c ~ N(0, σ²) independent; labels are
    integers 0..C−1 in a column ``Y`` [N, 1].

    :param num_classes: C ≥ 2.
    :param noise_variance: σ² > 0, a positive :class:`gpflow.Parameter` learned with the kernel
        (the "additive noise parameter" of the paper's covariance function).
    :param num_hermite: Gauss–Hermite nodes of the one-dimensional predictive integral.
    """

    def __init__(
        self, num_classes: int, noise_variance: float = 0.1, num_hermite: int = 64
    ) -> None:
        super().__init__(num_classes, num_hermite)
        self.noise_variance = Parameter(
            check_positive_number(noise_variance, "noise_variance"),
            transform=positive(),
            dtype=default_float(),
        )

    def latent_noise(self, dtype: tf.DType) -> tf.Tensor:
        return tf.cast(self.noise_variance, dtype)

    @inherit_check_shapes
    def _log_prob(self, X: TensorType, F: TensorType, Y: TensorType) -> tf.Tensor:
        F = tf.convert_to_tensor(F)
        return self._predict_log_density(X, F, tf.zeros_like(F), Y)


class RobustHeavisideLikelihood(ArgMaxLikelihood):
    """p(y = k | f) = (1 − ε)·Θ(k = arg max_c f_c) + ε/C: a point's label is the arg max of the
    noiseless latents, or with probability ε a uniformly drawn class (Hernández-Lobato et al.
    2011). ``outlier_rate`` ε is a non-trainable :class:`gpflow.Parameter` in [0, 1) that the EP
    step sets to the posterior mean of the outlier rate ρ.

    :param num_classes: C ≥ 2.
    :param outlier_rate: ε's initial value.
    :param num_hermite: Gauss–Hermite nodes of the one-dimensional predictive integral.
    """

    def __init__(self, num_classes: int, outlier_rate: float = 0.1, num_hermite: int = 64) -> None:
        super().__init__(num_classes, num_hermite)
        rate = check_positive_number(outlier_rate, "outlier_rate", allow_zero=True)
        if rate >= 1:
            raise ValueError(f"outlier_rate must be in [0, 1), got {outlier_rate!r}")
        self.outlier_rate = Parameter(rate, dtype=default_float(), trainable=False)

    def _outlier_rate(self, dtype: tf.DType) -> Optional[tf.Tensor]:
        return tf.cast(self.outlier_rate, dtype)

    @inherit_check_shapes
    def _log_prob(self, X: TensorType, F: TensorType, Y: TensorType) -> tf.Tensor:
        F = tf.convert_to_tensor(F)
        labels, valid = checked_labels(Y, self.num_classes)
        rate = tf.cast(self.outlier_rate, F.dtype)
        # ties have probability zero under any Gaussian q(f)
        is_arg_max = tf.cast(tf.equal(tf.argmax(F, axis=-1, output_type=tf.int32), labels), F.dtype)
        log_p = tf.math.log((1.0 - rate) * is_arg_max + rate / self.num_classes)
        return tf.where(valid, log_p, tf.constant(np.nan, log_p.dtype))
