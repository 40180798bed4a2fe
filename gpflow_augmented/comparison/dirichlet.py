r"""
Dirichlet-based GP classification (Milios et al., NeurIPS 2018), the peer GPyTorch users are
pointed to as its fast multi-class GP (``DirichletClassificationLikelihood``), as a GPflow
likelihood, so that it runs in the comparison with the same kernel, inducing points, minibatches
and clock as every other method.

Classification becomes heteroscedastic regression, one GP per class, on transformed labels: with
α_c = 1[y = c] + α_ε, the Dirichlet's Gamma components are approximated by log-normals with
σ²_c = log(1/α_c + 1) and mean ỹ_c = log α_c - σ²_c / 2, so f_c ~ GP is regressed on ỹ_c with
fixed noise σ²_c. The model is conjugate, and it trains as ``SVGP`` with this Gaussian likelihood.
Class probabilities are those of the Dirichlet's normalised Gamma draws, exp f_c / Σ_c' exp f_c':
the softmax of q(f)'s draws, averaged by quasi-Monte Carlo.

The observations are the class labels [N, 1], as for every other method; the likelihood computes
the regression targets and noise from them.
"""

from typing import Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import MeanAndVariance, TensorType
from gpflow.likelihoods import Likelihood

from ..likelihoods.logistic_softmax import quasi_latent_samples
from ..validation import check_integer, check_num_classes, check_positive_number, checked_label_rows

__all__ = ["DEFAULT_ALPHA_EPSILON", "DirichletClassification", "dirichlet_regression_targets"]

# GPyTorch's default; Milios et al. tune it (it sets how far the non-label classes' targets sit).
DEFAULT_ALPHA_EPSILON = 0.01


@check_shapes("one_hot: [N, C]", "return[0]: [N, C]", "return[1]: [N, C]")
def dirichlet_regression_targets(
    one_hot: tf.Tensor, alpha_epsilon: float
) -> Tuple[tf.Tensor, tf.Tensor]:
    """(ỹ, σ²) [N, C]: the regression targets log α - σ²/2 and their noise variances
    log(1/α + 1), with α = one-hot + α_ε (Milios et al. 2018, section 4)."""
    alpha = one_hot + tf.constant(alpha_epsilon, dtype=one_hot.dtype)  # not tf.cast: float32 first
    variance = tf.math.log1p(1.0 / alpha)
    return tf.math.log(alpha) - variance / 2.0, variance


class DirichletClassification(Likelihood):
    """The Dirichlet classifier's likelihood: Gaussian regression of each class's latent on its
    transformed label, with fixed per-point noise (see the module docstring).

    :param num_classes: C ≥ 2; labels are integers 0..C-1 in a column ``Y`` [N, 1].
    :param alpha_epsilon: α_ε > 0, the Dirichlet concentration of the classes a point is not in.
    :param num_predictive_samples: quasi-Monte Carlo points for the class probabilities.
    :param seed: the seed of the quasi-Monte Carlo points' random shift.
    """

    def __init__(
        self,
        num_classes: int,
        alpha_epsilon: float = DEFAULT_ALPHA_EPSILON,
        num_predictive_samples: int = 1024,
        seed: int = 0,
    ) -> None:
        num_classes = check_num_classes(num_classes)
        super().__init__(input_dim=None, latent_dim=num_classes, observation_dim=None)
        self.num_classes = num_classes
        self.alpha_epsilon = check_positive_number(alpha_epsilon, "alpha_epsilon")
        self.num_predictive_samples = check_integer(
            num_predictive_samples, "num_predictive_samples"
        )
        self.seed = check_integer(seed, "seed", minimum=0)

    def regression_targets(self, Y: TensorType, dtype: tf.DType) -> Tuple[tf.Tensor, tf.Tensor]:
        """(ỹ, σ²) [N, C] of integer labels ``Y`` [N, 1]; a bad label is refused by name (and is a
        NaN row under XLA, which drops the check)."""
        one_hot = checked_label_rows(Y, self.num_classes, dtype, False)
        return dirichlet_regression_targets(one_hot, self.alpha_epsilon)

    @inherit_check_shapes
    def _log_prob(self, X: TensorType, F: TensorType, Y: TensorType) -> tf.Tensor:
        F = tf.convert_to_tensor(F)
        return self._variational_expectations(X, F, tf.zeros_like(F), Y)

    @inherit_check_shapes
    def _variational_expectations(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType, Y: TensorType
    ) -> tf.Tensor:
        Fmu = tf.convert_to_tensor(Fmu)
        targets, variance = self.regression_targets(Y, Fmu.dtype)
        return tf.reduce_sum(
            -0.5
            * (
                np.log(2.0 * np.pi)
                + tf.math.log(variance)
                + (tf.square(targets - Fmu) + Fvar) / variance
            ),
            axis=-1,
        )

    def _latent_samples(self, Fmu: TensorType, Fvar: TensorType) -> tf.Tensor:
        return quasi_latent_samples(Fmu, Fvar, self.num_predictive_samples, self.seed)

    @inherit_check_shapes
    def _predict_mean_and_var(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType
    ) -> MeanAndVariance:
        p = tf.reduce_mean(tf.nn.softmax(self._latent_samples(Fmu, Fvar), axis=-1), axis=0)
        return p, p - tf.square(p)

    @inherit_check_shapes
    def _predict_log_density(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType, Y: TensorType
    ) -> tf.Tensor:
        F = self._latent_samples(Fmu, Fvar)
        one_hot = checked_label_rows(Y, self.num_classes, F.dtype, False)
        log_p = tf.reduce_sum(one_hot * tf.nn.log_softmax(F, axis=-1), axis=-1)  # [S, N]
        num = tf.cast(self.num_predictive_samples, log_p.dtype)
        return tf.reduce_logsumexp(log_p, axis=0) - tf.math.log(num)
