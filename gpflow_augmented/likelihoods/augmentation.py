r"""
The augmentation
================
The augmentation of the logistic-softmax likelihood and its two variational families, named after
the distributions of their auxiliary counts:

* :class:`NegativeMultinomial` (``scheme="negative-multinomial"``): λ integrated out exactly, so
  q(n_i) is negative-multinomial; closed form, no inner loop, the tighter of the two bounds.
* :class:`MeanFieldGammaPoisson` (``scheme="gamma-poisson"``): the paper's mean-field
  q(λ_i) = Gamma, q(n_ic) = Poisson, the fixed point of γ and α found by Newton steps.

Both leave q(ω | n) = PG(y + n, c). A :class:`~gpflow_augmented.LogisticSoftmax` likelihood owns
one.

The augmentation's functions are pure functions of tensors (no variables, no assignment), so
they are testable in eager mode and compile unchanged under ``tf.function(jit_compile=True)``.

Notation (per data point i and class c): ``m`` and ``v`` are the mean and variance of q(f_ic),
``c = sqrt(m² + v)`` is the Pólya-Gamma tilt, ``y`` is the one-hot label y'_ic, C the number of
classes.

Derivation (checked by the tests, which is where the paper's appendix A.2 typos are caught):

* Augmentation. 1/Σ_c σ(f_c) = ∫ exp(-λ Σ_c σ(f_c)) dλ (flat prior on λ ≥ 0);
  exp(-λσ(f)) = Σ_n Po(n|λ) σ(-f)^n; σ(z)^b = 2^{-b} e^{bz/2} E_{PG(ω|b,0)}[e^{-ωz²/2}]. Per (i, c)
  the augmented likelihood is 2^{-(y+n)} exp((y-n) f/2 - ω f²/2) with ω | n ~ PG(y + n, 0).
* Pólya-Gamma block. The optimal q(ω | n) is PG(y + n, c) with c² = E[f²]. Integrating it against
  the prior leaves, per (i, c),
  ``E_aug - KL_PG = -(y+γ) log 2 + (y-γ) m/2 - θ (m² + v)/2 - (y+γ) log cosh(c/2) + θ c²/2``
  with γ = E[n] and θ = E[ω] = (y + γ) tanh(c/2) / (2c).
  It depends on q(u) only through ``(y-γ) m/2 - θ (m²+v)/2``, which is what makes the global update
  conjugate.
* Integrating ω out of the n-dependence gives each n_ic the weight σ̃_ic^n with
  σ̃ = e^{-m/2} / (2 cosh(c/2)) (note the factor ½ that eq. (12) of the paper drops).
* Gamma–Poisson family, the paper's mean-field q(n) q(λ): q(n_ic) = Po(γ_ic),
  q(λ_i) = Ga(α_i, C) and ``γ_ic = exp(ψ(α_i) - log C) σ̃_ic``, ``α_i = 1 + Σ_c γ_ic``. The
  Poisson–Gamma part of the ELBO is
  ``Σ_c γ_c (ψ(α) - log C - log γ_c + 1) - log C + log Γ(α) + (1 - α) ψ(α)``
  (E log p(n|λ) - E log q(n), minus E[λ] summed over classes, plus the entropy of q(λ)).
* Negative-multinomial family. With λ integrated out exactly the prior of n_i is the improper
  negative-multinomial weight π(n) = (1/C) (Σn)!/Πn_c! C^{-Σn}. The optimal q(n_i) is
  NM(1, p) with p_c = σ̃_c / C, p_0 = 1 - Σ_c p_c and mean γ_c = p_c / p_0, and
  ``E[log π(n) - log q(n)] = -log C - log p_0 - Σ_c γ_c log(C p_c)``.
  At the optimum the whole local ELBO of point i collapses to
  ``s(m_y, c_y) - log Σ_c (1 - σ̃_c)``, with ``s(m, c) = m/2 - log(2 cosh(c/2))``:
  a Jaakkola–Jordan bound on E log σ(f_y) minus a Jensen bound on E log Σ_c σ(f_c), hence below the
  non-augmented ELBO. 1 - σ̃ is computed in log space without cancellation
  (``log_one_minus_sigma_tilde``).
* Class weights, p(y = k | f) = θ_k σ(f_k) / Σ_c θ_c σ(f_c). The same steps give n_c | λ ~ Po(λθ_c)
  and, with λ integrated out, π(n) = (1/Θ) (Σn)!/Πn_c! Π_c (θ_c/Θ)^{n_c}, Θ = Σ_c θ_c. So
  p_c = θ_c σ̃_c / Θ, γ_c = θ_c σ̃_c / Σ_j θ_j (1 - σ̃_j), and the negative-multinomial local ELBO
  becomes
  ``log θ_y + s(m_y, c_y) - log Σ_c θ_c (1 - σ̃_c)``; θ = 1 gives back the unweighted terms.
* Class subsets (paper, appendix A.3). Both families couple the classes of point i only through
  S_i = Σ_c σ̃_ic / C: negative-multinomial γ_c = σ̃_c / (C (1 - S)), Gamma–Poisson
  γ_c = e^{ψ(α)} σ̃_c / C with
  α - 1 = e^{ψ(α)} S. Given S, every per-class term is independent of the other classes. When the
  last axis holds only a subset K of the ``num_classes`` classes, S is estimated by the subset mean
  (unbiased), α by eq. (17), α = 1 + (C/|K|) Σ_{c∈K} γ_c, and sums over classes by C/|K| times the
  subset sum (unbiased given S). The estimate of S enters nonlinearly, so the subset's γ carries an
  O(1/|K|) bias; it vanishes at K = all classes, where every function here is the exact one.
"""

from typing import Optional, Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

from .polya_gamma import (
    LocalParameters,
    log_cosh_half,
    polya_gamma_mean,
    tilt,
)
from ..validation import (
    check_integer,
)

__all__ = [
    "LogisticSoftmaxAugmentation",
    "MeanFieldGammaPoisson",
    "NegativeMultinomial",
    "gamma_poisson_count_terms",
    "gamma_poisson_local_parameters",
    "log_one_minus_sigma_tilde",
    "log_sigma_tilde",
    "log_sum_complement",
    "negative_multinomial_local_elbo",
    "negative_multinomial_local_parameters",
    "polya_gamma_terms",
]


@check_shapes("m: [batch...]", "c: [batch...]", "return: [batch...]")
def log_sigma_tilde(m: tf.Tensor, c: tf.Tensor) -> tf.Tensor:
    """log σ̃ = -m/2 - log(2 cosh(c/2)), the geometric-mean surrogate of log σ(-f)."""
    return -m / 2 - np.log(2.0) - log_cosh_half(c)


@check_shapes("m: [batch...]", "v: [batch...]", "return: [batch...]")
def log_one_minus_sigma_tilde(m: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
    """log(1 - σ̃) at c = sqrt(m² + v), without cancellation.

    With δ = (m + c)/2 ≥ 0: 1 - σ̃ = (e^{-c} - expm1(-δ)) / (1 + e^{-c}); both terms of the
    numerator are non-negative, so nothing cancels even when σ̃ → 1. For m < 0, m + c itself
    cancels (c rounds to |m| once v < eps·m², when the true δ ≈ v / 4|m| may still dominate
    e^{-c}), so δ is taken as v / (2 (c - m)) there.
    """
    v = tf.maximum(v, 0.0)
    c = tilt(m, v)
    tiny = np.finfo(c.dtype.as_numpy_dtype).tiny
    safe_denominator = tf.where(m < 0, c - m, tf.ones_like(c))
    delta = tf.where(m < 0, v / (2 * safe_denominator), (m + c) / 2)
    delta = tf.maximum(delta, tiny)
    log_numerator = tf.math.reduce_logsumexp(
        tf.stack([-c, tf.math.log(-tf.math.expm1(-delta))], axis=0), axis=0
    )
    return log_numerator - tf.math.softplus(-c)


def _classes_and_subset_scale(
    per_class: tf.Tensor, num_classes: Optional[int]
) -> Tuple[tf.Tensor, tf.Tensor]:
    """(C, C/|K|) for a last axis holding |K| of ``num_classes`` classes (all of them if ``None``):
    the number of classes, and the weight that makes a sum over the subset estimate the full sum
    (not the likelihood's class weights θ)."""
    subset_size = tf.cast(tf.shape(per_class)[-1], per_class.dtype)
    if num_classes is None:
        return subset_size, tf.ones([], per_class.dtype)
    num_classes = tf.cast(num_classes, per_class.dtype)
    return num_classes, num_classes / subset_size


@check_shapes(
    "m: [N, K]", "v: [N, K]", "log_weights: [K] if log_weights is not None", "return: [N, 1]"
)
def log_sum_complement(
    m: tf.Tensor,
    v: tf.Tensor,
    num_classes: Optional[int] = None,
    log_weights: Optional[tf.Tensor] = None,
) -> tf.Tensor:
    """log Σ_c θ_c (1 - σ̃_c) (= log(C (1 - S)) for θ = 1) over all classes, estimated from the
    subset given."""
    _, weight = _classes_and_subset_scale(m, num_classes)
    log_terms = log_one_minus_sigma_tilde(m, v)
    if log_weights is not None:
        log_terms += log_weights
    return tf.reduce_logsumexp(log_terms, axis=-1, keepdims=True) + tf.math.log(weight)


@check_shapes(
    "m: [N, K]", "v: [N, K]", "log_weights: [K] if log_weights is not None", "return: [N, K]"
)
def _log_gamma_negative_multinomial(
    m: tf.Tensor, v: tf.Tensor, num_classes: Optional[int], log_weights: Optional[tf.Tensor]
) -> tf.Tensor:
    # log γ_c = log p_c - log p_0 = log θ_c σ̃_c - log Σ_j θ_j (1 - σ̃_j)  (the 1/Σθ factors cancel)
    log_gamma = log_sigma_tilde(m, tilt(m, v)) - log_sum_complement(m, v, num_classes, log_weights)
    return log_gamma if log_weights is None else log_gamma + log_weights


@check_shapes(
    "Fmu: [N, C]",
    "Fvar: [N, C]",
    "Y_onehot: [N, C]",
    "return.gamma: [N, C]",
    "return.theta: [N, C]",
    "return.c: [N, C]",
)
def negative_multinomial_local_parameters(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y_onehot: tf.Tensor,
    num_classes: Optional[int] = None,
    log_weights: Optional[tf.Tensor] = None,
) -> LocalParameters:
    """Optimal local parameters with λ integrated out: q(n_i) negative-multinomial, no inner loop.

    ``num_classes``: the number of classes when the last axis holds only a subset of them.
    ``log_weights``: the classes' log θ (class weights; θ = 1 if ``None``).
    """
    c = tilt(Fmu, Fvar)
    gamma = tf.exp(_log_gamma_negative_multinomial(Fmu, Fvar, num_classes, log_weights))
    theta = polya_gamma_mean(Y_onehot + gamma, c)
    return LocalParameters(gamma=gamma, theta=theta, c=c)


@check_shapes(
    "Fmu: [N, C]",
    "Fvar: [N, C]",
    "Y_onehot: [N, C]",
    "return.gamma: [N, C]",
    "return.theta: [N, C]",
    "return.c: [N, C]",
    "return.alpha: [N]",
)
def gamma_poisson_local_parameters(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y_onehot: tf.Tensor,
    inner_iterations: int,
    num_classes: Optional[int] = None,
) -> LocalParameters:
    """The paper's mean-field local parameters: c, then the joint fixed point of γ and α.

    Eqs. (12)-(13) couple γ_c = e^{ψ(α)} σ̃_c / C and α = 1 + Σ_c γ_c. The paper alternates them
    "until convergence", but that alternation contracts only at rate S = Σ_c σ̃_c / C, close to 1
    when most classes are unlikely, so five alternations from E[λ] = 1 can stop short of the block
    optimum and CAVI is then not monotone (measured: docs/method.md, "The three schemes").
    Eliminating γ leaves one equation,
    g(α) = α - 1 - e^{ψ(α)} S = 0, with g increasing and concave; Newton from the root of its
    large-α asymptote, (1 - S/2) / (1 - S), which lies left of the root, converges monotonically and
    quadratically, so ``inner_iterations`` steps (default 5) reach float64 precision. The loop has a
    Python-int trip count, so it unrolls into a fixed graph.

    On a class subset (``num_classes`` > the last axis) S is the subset mean and α is eq. (17).
    """
    num_classes, weight = _classes_and_subset_scale(Fmu, num_classes)
    c = tilt(Fmu, Fvar)
    log_st = log_sigma_tilde(Fmu, c)  # [N, K]
    S = tf.reduce_mean(tf.exp(log_st), axis=-1)  # [N]
    log_one_minus_S = log_sum_complement(Fmu, Fvar, num_classes)[:, 0] - tf.math.log(num_classes)
    one_minus_S = tf.exp(log_one_minus_S)
    alpha = (1.0 - S / 2) / one_minus_S
    for _ in range(inner_iterations):
        e_psi = tf.exp(tf.math.digamma(alpha))
        g = alpha - 1.0 - e_psi * S
        dg = 1.0 - e_psi * tf.math.polygamma(tf.ones_like(alpha), alpha) * S
        alpha = alpha - g / dg
    gamma = tf.exp((tf.math.digamma(alpha) - tf.math.log(num_classes))[:, None] + log_st)
    # α is finally set to its exact block optimum given γ, so that (γ, α) is a valid CAVI state
    # even if the Newton steps were cut short.
    alpha = 1.0 + weight * tf.reduce_sum(gamma, axis=-1)
    theta = polya_gamma_mean(Y_onehot + gamma, c)
    return LocalParameters(gamma=gamma, theta=theta, c=c, alpha=alpha)


@check_shapes(
    "Fmu: [N, C]",
    "Fvar: [N, C]",
    "Y_onehot: [N, C]",
    "local.gamma: [N, C]",
    "local.theta: [N, C]",
    "local.c: [N, C]",
    "return: [N]",
)
def polya_gamma_terms(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y_onehot: tf.Tensor,
    local: LocalParameters,
    num_classes: Optional[int] = None,
) -> tf.Tensor:
    """E_q[log augmented likelihood] - KL(q(ω|n) || p(ω|n)), summed over classes (estimated from
    a subset of the ``num_classes`` classes if the last axis holds fewer)."""
    b = Y_onehot + local.gamma
    second_moment = tf.square(Fmu) + Fvar
    per_class = (
        -b * (np.log(2.0) + log_cosh_half(local.c))
        + (Y_onehot - local.gamma) * Fmu / 2
        - local.theta * (second_moment - tf.square(local.c)) / 2
    )
    return _classes_and_subset_scale(Fmu, num_classes)[1] * tf.reduce_sum(per_class, axis=-1)


@check_shapes("local.gamma: [N, C]", "local.alpha: [N]", "return: [N]")
def gamma_poisson_count_terms(
    local: LocalParameters, num_classes: Optional[int] = None
) -> tf.Tensor:
    """E[log p(n|λ) - log q(n)] - E[Σ_c λ] + H[q(λ)] for q(n) = Po(γ), q(λ) = Ga(α, C)."""
    gamma, alpha = local.gamma, local.alpha
    num_classes, weight = _classes_and_subset_scale(gamma, num_classes)
    log_C = tf.math.log(num_classes)
    e_log_lambda = tf.math.digamma(alpha) - log_C  # [N]
    # xlogy keeps γ = 0 (underflow at extreme latent means) finite.
    poisson = weight * tf.reduce_sum(
        gamma * (e_log_lambda[:, None] + 1.0) - tf.math.xlogy(gamma, gamma), axis=-1
    )
    # -E[λ]·C + H[Ga(α, C)] = -α + (α - log C + lgamma(α) + (1 - α) ψ(α))
    gamma_part = -log_C + tf.math.lgamma(alpha) + (1.0 - alpha) * tf.math.digamma(alpha)
    return poisson + gamma_part


@check_shapes(
    "Fmu: [N, C]",
    "Fvar: [N, C]",
    "Y_onehot: [N, C]",
    "log_weights: [C] if log_weights is not None",
    "return: [N]",
)
def negative_multinomial_local_elbo(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y_onehot: tf.Tensor,
    num_classes: Optional[int] = None,
    log_weights: Optional[tf.Tensor] = None,
    soft_labels: bool = False,
) -> tf.Tensor:
    """The negative-multinomial family's local ELBO of each point at its optimal q(n, ω), in closed
    form.
    With ``soft_labels`` the rows of ``Y_onehot`` may be any class probabilities y (the
    Pólya-Gamma augmentation holds for the real shape y + n).

    On a class subset the observed class's Jaakkola–Jordan term counts C/|K| times when it is in
    the subset, and log Σ_c (1 - σ̃_c) is :func:`log_sum_complement`'s estimate. The gradient with
    respect to a class's marginals is then that of the full bound with S replaced by its estimate.
    """
    _, weight = _classes_and_subset_scale(Fmu, num_classes)
    if soft_labels:
        # Σ_c y_c (m_c/2 - log 2 - log cosh(c_c/2)): each class's Jaakkola–Jordan term, weighted.
        observed = tf.reduce_sum(
            Y_onehot * (Fmu / 2 - np.log(2.0) - log_cosh_half(tilt(Fmu, Fvar))), axis=-1
        )
    else:
        # The observed class's marginals, gathered by the one-hot row (all zero when it is not in
        # the subset, which zeroes the term): log cosh is then evaluated once per point.
        labelled = tf.reduce_sum(Y_onehot, axis=-1)
        m_y = tf.reduce_sum(Y_onehot * Fmu, axis=-1)
        c_y = tf.reduce_sum(Y_onehot * tilt(Fmu, Fvar), axis=-1)
        observed = labelled * (m_y / 2 - np.log(2.0) - log_cosh_half(c_y))
    if log_weights is not None:
        observed += tf.reduce_sum(Y_onehot * log_weights, axis=-1)
    return weight * observed - log_sum_complement(Fmu, Fvar, num_classes, log_weights)[:, 0]


class LogisticSoftmaxAugmentation:
    """A variational family q(n, λ, ω) of the augmented logistic-softmax likelihood. ``num_classes``
    is C, also when the columns hold a subset of the classes (the coupling is then estimated)."""

    name = ""
    supports_class_weights = False

    def local_parameters(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y_rows: tf.Tensor,
        num_classes: int,
        log_weights: Optional[tf.Tensor] = None,
    ) -> LocalParameters:
        """The optimal local parameters of q(n, λ, ω) at the marginals ``Fmu``, ``Fvar`` [N, K]
        and the label rows ``Y_rows`` [N, K]."""
        raise NotImplementedError

    def local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y_rows: tf.Tensor,
        num_classes: int,
        local: Optional[LocalParameters] = None,
        log_weights: Optional[tf.Tensor] = None,
        soft_labels: bool = False,
    ) -> tf.Tensor:
        """Each point's augmented local ELBO [N] at the local parameters ``local`` (the optimal
        ones if ``None``)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(vars(self).items()))))


class NegativeMultinomial(LogisticSoftmaxAugmentation):
    """λ integrated out: q(n_i) negative-multinomial, whose optimum and bound are closed forms."""

    name = "negative-multinomial"
    supports_class_weights = True

    def local_parameters(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y_rows: tf.Tensor,
        num_classes: int,
        log_weights: Optional[tf.Tensor] = None,
    ) -> LocalParameters:
        return negative_multinomial_local_parameters(Fmu, Fvar, Y_rows, num_classes, log_weights)

    def local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y_rows: tf.Tensor,
        num_classes: int,
        local: Optional[LocalParameters] = None,
        log_weights: Optional[tf.Tensor] = None,
        soft_labels: bool = False,
    ) -> tf.Tensor:
        # The bound at the optimal q(n, ω) in closed form, differentiated as it stands: the
        # local parameters are always at their optimum here.
        return negative_multinomial_local_elbo(
            Fmu, Fvar, Y_rows, num_classes, log_weights, soft_labels
        )


class MeanFieldGammaPoisson(LogisticSoftmaxAugmentation):
    """The paper's q(λ_i) q(n_i): Gamma and Poisson, γ and α solved by ``inner_iterations`` Newton
    steps (default 5, float64 precision). It has no class weights."""

    name = "gamma-poisson"

    def __init__(self, inner_iterations: int = 5) -> None:
        self.inner_iterations = check_integer(inner_iterations, "inner_iterations")

    def local_parameters(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y_rows: tf.Tensor,
        num_classes: int,
        log_weights: Optional[tf.Tensor] = None,
    ) -> LocalParameters:
        return gamma_poisson_local_parameters(Fmu, Fvar, Y_rows, self.inner_iterations, num_classes)

    def local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y_rows: tf.Tensor,
        num_classes: int,
        local: Optional[LocalParameters] = None,
        log_weights: Optional[tf.Tensor] = None,
        soft_labels: bool = False,
    ) -> tf.Tensor:
        if local is None:
            local = self.local_parameters(Fmu, Fvar, Y_rows, num_classes)
        local = tf.nest.map_structure(tf.stop_gradient, local)
        return polya_gamma_terms(Fmu, Fvar, Y_rows, local, num_classes) + gamma_poisson_count_terms(
            local, num_classes
        )

    def __repr__(self) -> str:
        return f"MeanFieldGammaPoisson(inner_iterations={self.inner_iterations})"
