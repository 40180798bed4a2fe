r"""
Robust multi-class GP classification (Hernández-Lobato, Hernández-Lobato & Dupont, NeurIPS 2011):
labelling errors are explicit. Each point has an indicator z_i ~ Bernoulli(ρ), ρ ~ Beta(a₀, b₀):
with z_i = 0 its label is the arg max of the noiseless latents, with z_i = 1 a uniformly drawn
class. A full GP (no inducing points; the paper's sizes), inference by expectation propagation
with the supplement's factorisation:

* likelihood factors ψ_ik = Θ(f_y − f_k)^{1−z_i} (C^{−1/(C−1)})^{z_i}, k ≠ y_i (the C − 1 factors of
  an outlier give 1/C together), each with a rank-one Gaussian site on f_y and on f_k and a
  Bernoulli site exp(q̃_ik z_i);
* prior factors ψ_i = ρ^{z_i}(1 − ρ)^{1−z_i}, each with a Bernoulli site exp(q̃_i z_i) and a Beta
  site ρ^{ã_i−1}(1 − ρ)^{b̃_i−1}, whose update matches ρ's first two moments (supplement, eq. 10).

Q(f, z, ρ) = Π_c N(f^c) Π_i Bernoulli(z_i; σ(q_i)) Beta(ρ; a, b) with q_i = q̃_i + Σ_k q̃_ik,
a = a₀ + Σ_i (ã_i − 1), b likewise. σ(q_i) is the posterior probability that point i is an
outlier (:meth:`RobustMulticlassEP.outlier_probability`); the predictive mixes the arg-max
probability with 1/C by the posterior mean of ρ.

What limits its scale: the full GP's O(C N³) per EP sweep and O(C N²) memory.
"""

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from gpflow.base import Parameter, RegressionData
from gpflow.config import default_float
from gpflow.kernels import Kernel, MultioutputKernel
from gpflow.models.training_mixins import InternalDataTrainingLossMixin
from gpflow.utilities import set_trainable

from ..validation import check_data, check_positive_number, checked_labels
from .heaviside import RobustHeavisideLikelihood, pairwise_probit_sites
from .sep import (
    EPState,
    ExpectationPropagationModel,
    log_normaliser_change,
    rank_one_cavity,
    untied_whitened_sites,
    whitened_marginals,
)

__all__ = ["RobustMulticlassEP"]


def _log_beta(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    return tf.math.lgamma(a) + tf.math.lgamma(b) - tf.math.lgamma(a + b)


def _prior_factor_moments(
    cavity_odds: tf.Tensor, cavity_a: tf.Tensor, cavity_b: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The normaliser Z_i of the prior factor ρ^z (1 − ρ)^(1−z) times the cavity
    Bernoulli(z; σ(q)) Beta(ρ; a, b), and ρ's first two moments under the tilted distribution
    (supplement, eq. 11)."""
    mean_rate = cavity_a / (cavity_a + cavity_b)
    inlier_weight = tf.math.sigmoid(-cavity_odds) * (1.0 - mean_rate)
    outlier_weight = tf.math.sigmoid(cavity_odds) * mean_rate
    normaliser = inlier_weight + outlier_weight
    total = cavity_a + cavity_b
    first = (inlier_weight * cavity_a + outlier_weight * (cavity_a + 1.0)) / (
        (total + 1.0) * normaliser
    )
    second = (
        inlier_weight * cavity_a * (cavity_a + 1.0)
        + outlier_weight * (cavity_a + 1.0) * (cavity_a + 2.0)
    ) / ((total + 1.0) * (total + 2.0) * normaliser)
    return normaliser, first, second


def _sequential_rate_sites(
    cavity_odds: tf.Tensor,
    site_odds: tf.Tensor,
    site_a: tf.Tensor,
    site_b: tf.Tensor,
    a: tf.Tensor,
    b: tf.Tensor,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """One sweep over the prior factors, each updated from the Beta(a, b) the previous left:
    the new Bernoulli sites log a' − log b' (a', b' the cavity's) and the Beta sites
    (ã − 1, b̃ − 1) of the Beta that matches the tilted ρ's first two moments (supplement,
    eqs. 9–10). A factor whose cavity Beta(a', b') is improper (a' ≤ 0 or b' ≤ 0), or whose
    update would leave Q's Beta improper, keeps its sites, as EP skips such updates: one such
    factor would otherwise make the whole step non-finite, and every later step with it."""

    def update(
        carry: Tuple[tf.Tensor, ...], factor: Tuple[tf.Tensor, ...]
    ) -> Tuple[tf.Tensor, ...]:
        a, b = carry[0], carry[1]
        odds, cavity_log_odds, old_a, old_b = factor
        cavity_a, cavity_b = a - old_a, b - old_b
        proper = (cavity_a > 0.0) & (cavity_b > 0.0)
        # Evaluated at a proper stand-in where the cavity is not, so that no NaN enters the
        # gradient of the tf.where below.
        safe_a = tf.where(proper, cavity_a, tf.ones_like(cavity_a))
        safe_b = tf.where(proper, cavity_b, tf.ones_like(cavity_b))
        _, first, second = _prior_factor_moments(cavity_log_odds, safe_a, safe_b)
        concentration = (first - second) / (second - tf.square(first))
        new_a = first * concentration - safe_a
        new_b = (1.0 - first) * concentration - safe_b
        accepted = proper & (safe_a + new_a > 0.0) & (safe_b + new_b > 0.0)
        new_a, new_b = tf.where(accepted, new_a, old_a), tf.where(accepted, new_b, old_b)
        new_odds = tf.where(accepted, tf.math.log(safe_a) - tf.math.log(safe_b), odds)
        return (a - old_a + new_a, b - old_b + new_b, new_odds, new_a, new_b)

    zero = tf.zeros([], a.dtype)
    swept = tf.scan(
        update, (site_odds, cavity_odds, site_a, site_b), initializer=(a, b, zero, zero, zero)
    )
    return swept[2], swept[3], swept[4]


class RobustMulticlassEP(ExpectationPropagationModel, InternalDataTrainingLossMixin):
    """RMGPC on the training set ``data = (X, Y)`` it holds (labels [N, 1] in 0..C−1).

    :param kernel: one kernel shared by the classes.
    :param num_classes: C ≥ 2.
    :param outlier_prior: (a₀, b₀) of the Beta prior on the outlier rate ρ; the default (1, 9) has
        mean 0.1.
    :param num_hermite: Gauss–Hermite nodes of the predictive integral.

    The sites are non-trainable :class:`gpflow.Parameter`\\ s that
    :class:`~gpflow_augmented.comparison.sep.ExpectationPropagation` updates; ``training_loss`` is
    minus the EP estimate of log p(y) with the sites fixed, for the kernel's hyperparameters.
    """

    def __init__(
        self,
        data: RegressionData,
        kernel: Kernel,
        num_classes: int,
        *,
        outlier_prior: Tuple[float, float] = (1.0, 9.0),
        num_hermite: int = 64,
    ) -> None:
        if isinstance(kernel, MultioutputKernel):
            raise TypeError("RobustMulticlassEP takes one kernel shared by the classes")
        a0, b0 = (check_positive_number(v, "outlier_prior") for v in outlier_prior)
        X, Y = data
        likelihood = RobustHeavisideLikelihood(num_classes, a0 / (a0 + b0), num_hermite)
        check_data(X, Y, likelihood.num_classes, np.shape(X)[-1])
        # The full GP: the inducing inputs are the training inputs, fixed.
        super().__init__(kernel, np.asarray(X, dtype=default_float()), likelihood)
        set_trainable(self.inducing_variable, False)
        self.data = (tf.convert_to_tensor(X, dtype=default_float()), tf.convert_to_tensor(Y))
        self.outlier_prior = (a0, b0)
        N, C = len(X), self.num_classes

        def zeros(*shape: int) -> Parameter:
            return Parameter(np.zeros(shape), dtype=default_float(), trainable=False)

        # Factor (i, k)'s Gaussian sites on f_{y_i} and on f_k (column k), and its Bernoulli site.
        self.label_site_precision, self.label_site_shift = zeros(N, C), zeros(N, C)
        self.other_site_precision, self.other_site_shift = zeros(N, C), zeros(N, C)
        self.factor_outlier_log_odds = zeros(N, C)
        # Factor i's Bernoulli site and Beta site (stored as ã_i − 1, b̃_i − 1, its natural
        # parameters).
        self.prior_outlier_log_odds = zeros(N)
        self.rate_site_a, self.rate_site_b = zeros(N), zeros(N)

    @property
    def site_parameters(self) -> Tuple[Parameter, ...]:
        return (
            self.label_site_precision,
            self.label_site_shift,
            self.other_site_precision,
            self.other_site_shift,
            self.factor_outlier_log_odds,
            self.prior_outlier_log_odds,
            self.rate_site_a,
            self.rate_site_b,
        )

    def _whitened_sites(
        self, L: tf.Tensor, A: Optional[tf.Tensor] = None
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        return untied_whitened_sites(self, A)

    def _outlier_log_odds(self) -> tf.Tensor:
        return tf.reduce_sum(self.factor_outlier_log_odds, axis=-1) + tf.convert_to_tensor(
            self.prior_outlier_log_odds
        )

    def _rate_posterior(self, site_a: tf.Tensor, site_b: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        a0, b0 = self.outlier_prior
        return a0 + tf.reduce_sum(site_a), b0 + tf.reduce_sum(site_b)

    def outlier_probability(self) -> tf.Tensor:
        """The posterior probability [N] that each training point is an outlier (its label
        drawn uniformly, not by the latents)."""
        return tf.math.sigmoid(self._outlier_log_odds())

    def outlier_rate_posterior(self) -> Tuple[tf.Tensor, tf.Tensor]:
        """(a, b) of the posterior Beta(a, b) of the outlier rate ρ."""
        return self._rate_posterior(
            tf.convert_to_tensor(self.rate_site_a), tf.convert_to_tensor(self.rate_site_b)
        )

    def derived_assignments(
        self, state: EPState, new_sites: Sequence[tf.Tensor]
    ) -> List[Tuple[Parameter, tf.Tensor]]:
        """The predictive's outlier rate: the posterior mean of ρ under the new sites."""
        a, b = self._rate_posterior(new_sites[6], new_sites[7])
        return [(self.likelihood.outlier_rate, a / (a + b))]

    def ep_state(self, data: Optional[RegressionData] = None) -> EPState:
        """Every factor's EP computation at the current hyperparameters: the estimate of log p(y)
        with the sites fixed (differentiable in the kernel's parameters) and every site's
        target."""
        X, Y = self.data
        labels, valid = checked_labels(Y, self.num_classes)
        C = self.num_classes
        # The latents are noiseless, and with the inducing inputs at the data their conditional
        # variance is only the jitter's: the factors are exact steps in Q's latents.
        L, A, _ = self._geometry(X)
        site_precision, site_shift = self._whitened_sites(L, A)
        eye = tf.eye(tf.shape(site_precision)[-1], batch_shape=[C], dtype=default_float())
        chol = tf.linalg.cholesky(eye + site_precision)
        mean, variance = whitened_marginals(chol, site_shift, A)  # Q's marginals of f [N, C]
        own = tf.one_hot(labels, C, dtype=default_float())
        others = 1.0 - own
        stored = [tf.convert_to_tensor(p) for p in self.site_parameters]
        (
            label_precision,
            label_shift,
            other_precision,
            other_shift,
            factor_odds,
            prior_odds,
            site_a,
            site_b,
        ) = stored
        outlier_odds = self._outlier_log_odds()  # q_i [N]
        a, b = self._rate_posterior(site_a, site_b)

        # The likelihood factors: each removes its own Gaussian and Bernoulli sites.
        label_mean = tf.reduce_sum(own * mean, -1, keepdims=True)
        label_variance = tf.reduce_sum(own * variance, -1, keepdims=True)
        label_cavity = rank_one_cavity(label_mean, label_variance, label_precision, label_shift)
        other_cavity = rank_one_cavity(mean, variance, other_precision, other_shift)
        factor_cavity_odds = outlier_odds[:, None] - factor_odds  # [N, C]
        sites = pairwise_probit_sites(
            label_cavity[0],
            label_cavity[1],
            other_cavity[0],
            other_cavity[1],
            tf.zeros_like(mean),
            labels,
            factor_cavity_odds,
        )
        # The tilted outlier odds are log(p c / ((1 − p) Φ(β))): the site is their excess over
        # the cavity's.
        new_factor_odds = others * (-np.log(C) / (C - 1) - sites.log_heaviside)

        # The prior factors at the current Q (for log Z_EP) ...
        prior_cavity_odds = outlier_odds - prior_odds
        cavity_a, cavity_b = a - site_a, b - site_b
        prior_z, _, _ = _prior_factor_moments(prior_cavity_odds, cavity_a, cavity_b)
        # ... and their new sites. They all act on the one ρ: updated together from the same Q,
        # each one's small change of ρ's concentration adds up N times and can leave Beta(a, b)
        # improper, so they are updated one after the other, each from the ρ the previous left
        # (supplement, eq. 12); their Bernoulli parts are independent.
        new_prior_odds, new_site_a, new_site_b = _sequential_rate_sites(
            prior_cavity_odds, prior_odds, site_a, site_b, a, b
        )

        # log Z_EP: Q's normalisers against the priors', and each factor's log Z plus the change
        # of the normalisers its cavity makes (Gaussian, Bernoulli, Beta).
        softplus = tf.nn.softplus
        log_marginal = (
            tf.reduce_sum(log_normaliser_change(site_shift, chol))
            + tf.reduce_sum(softplus(outlier_odds))
            + _log_beta(a, b)
            - _log_beta(*(tf.constant(v, default_float()) for v in self.outlier_prior))
            + _likelihood_factors_log_z(
                sites, others, label_cavity, other_cavity, factor_cavity_odds, outlier_odds
            )
            + _prior_factors_log_z(
                prior_z, prior_cavity_odds, outlier_odds, cavity_a, cavity_b, a, b
            )
        )
        targets = (
            sites.label_precision,
            sites.label_shift,
            sites.other_precision,
            sites.other_shift,
            new_factor_odds,
            new_prior_odds,
            new_site_a,
            new_site_b,
        )
        return EPState(self._valid_or_nan(log_marginal, valid), tuple(stored), targets, L)

    def log_marginal_likelihood(self) -> tf.Tensor:
        """The EP estimate of log p(y) on the model's data, with the sites as they are."""
        return self.ep_state().log_marginal_likelihood

    def maximum_log_likelihood_objective(self) -> tf.Tensor:  # type: ignore[override]
        return self.log_marginal_likelihood()


def _likelihood_factors_log_z(
    sites: Any,
    others: tf.Tensor,
    label_cavity: Tuple[tf.Tensor, ...],
    other_cavity: Tuple[tf.Tensor, ...],
    factor_cavity_odds: tf.Tensor,
    outlier_odds: tf.Tensor,
) -> tf.Tensor:
    """The likelihood factors' part of log Z_EP: each factor's log Z plus the change of the
    Gaussian and Bernoulli normalisers its cavity makes."""
    softplus = tf.nn.softplus
    return tf.reduce_sum(
        sites.log_normaliser
        + others
        * (
            label_cavity[2]
            + other_cavity[2]
            + softplus(factor_cavity_odds)
            - softplus(outlier_odds)[:, None]
        )
    )


def _prior_factors_log_z(
    prior_z: tf.Tensor,
    prior_cavity_odds: tf.Tensor,
    outlier_odds: tf.Tensor,
    cavity_a: tf.Tensor,
    cavity_b: tf.Tensor,
    a: tf.Tensor,
    b: tf.Tensor,
) -> tf.Tensor:
    """The outlier prior factors' part of log Z_EP: each one's log Z plus the change of the
    Bernoulli and Beta normalisers its cavity makes."""
    softplus = tf.nn.softplus
    return tf.reduce_sum(
        tf.math.log(prior_z)
        + softplus(prior_cavity_odds)
        - softplus(outlier_odds)
        + _log_beta(cavity_a, cavity_b)
        - _log_beta(a, b)
    )
