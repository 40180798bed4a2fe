r"""
The logistic-softmax likelihood p(y = k | f) = σ(f_k) / Σ_c σ(f_c) as a GPflow likelihood, with
everything computed from it: its exact Gaussian expectation, the exact-bound sites, and its
augmentation. Every formula of the likelihood's side of the default method's step is in this
module, but the Pólya-Gamma distribution's mean and tilt, which :mod:`.polya_gamma` shares with
the binary likelihood; q(f) is in :mod:`~gpflow_augmented.projection` and the step in
:mod:`~gpflow_augmented.updates`.

It is a complete, stand-alone GPflow likelihood: inside stock :class:`gpflow.models.SVGP` it gives
the non-augmented ("VI") model, trained by gradients. It also owns its Gamma–Poisson–Pólya-Gamma
augmentation (below) and implements the augmented-likelihood contract
(:class:`~gpflow_augmented.likelihoods.AugmentedLikelihood`), through which
:class:`~gpflow_augmented.LogisticSoftmaxSVGP` is trained in closed form; both models predict with
exactly the same code.

The variational expectation E log p(y | f) is the accurate, deterministic quadrature below (a
smooth objective that Scipy can optimise, and the one the exact-bound CAVI step converges to).
Predictions are taken with randomised quasi-Monte Carlo: a Sobol sequence with a seeded random
shift, mapped through the normal quantile function.

The exact expectation
=====================
For independent f_c ~ N(m_c, v_c) (the marginals of a mean-field q(u)) the expected log-likelihood
is ``E log σ(f_y) - E log Z`` with Z = Σ_c σ(f_c). The first term is one-dimensional and
Gauss–Hermite integrates it. The second is C-dimensional, but it factorises once the logarithm is
written as a Laplace transform (Frullani's integral, with t = eˢ):

    log x = ∫ (exp(-eˢ) - exp(-x eˢ)) ds        (x > 0, s over the real line)

so with κ = E[Z] (Gauss–Hermite, class by class)

    E log Z = log κ + ∫ (exp(-eˢ) - Π_c φ_c(eˢ / κ)) ds,    φ_c(t) = E exp(-t σ(f_c)),

and every φ_c is again a one-dimensional Gauss–Hermite integral. The s-integral is a smooth
integrand that decays double-exponentially to the right and like e^{2s} to the left (the first
order cancels because Z/κ has mean one), so the trapezoidal rule on a fixed grid is spectrally
accurate. Nothing is random: the expectation is a smooth deterministic function of (m, v), so an
optimiser converges to one point and its derivatives are exact derivatives of one objective.

Its accuracy with the defaults (20 Hermite nodes, grid step 1.0 on [-8, 25]) is measured in
docs/benchmarks.md, "Accuracy of the expectation" (``tools/expectation_accuracy.py``): the Hermite
nodes, not the s-grid, set the error.

The exact-bound sites. By Bonnet's and Price's theorems the gradient of E log p(y|f) with respect to
the marginal mean is g = E[∂ log p/∂f] and with respect to the variance ½E[∂² log p/∂f²]. A
natural-gradient (conjugate-computation, Khan & Lin 2017) step on the exact ELBO is therefore the
conjugate step with the augmented coefficients replaced by

    quadratic = -2 ∂ℓ/∂v,    linear = ∂ℓ/∂m + quadratic · m,

taken here as exact derivatives of the expectation above, so that the fixed point of the step is a
stationary point of that very objective. ``quadratic`` can be negative (log Z is not convex in
f_c where σ(f_c) < ½); the step then backs off its size until the new precision is positive
definite (:mod:`~gpflow_augmented.updates`), which leaves the fixed point where it is.

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

import warnings
from typing import Any, Optional, Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import MeanAndVariance, Parameter, TensorType
from gpflow.config import default_float
from gpflow.quadrature import hermgauss
from gpflow.utilities import positive

from .polya_gamma import (
    LocalParameters,
    log_cosh_half,
    polya_gamma_mean,
    sample_polya_gamma,
    tilt,
)
from ..class_subsets import ClassSubset
from ..validation import (
    InvalidDataError,
    check_integer,
    check_num_classes,
    checked_label_rows,
    is_soft,
)
from .base import AugmentedLikelihood, Marginals

__all__ = [
    "DEFAULT_NUM_HERMITE",
    "LogisticSoftmax",
    "LogisticSoftmaxAugmentation",
    "MeanFieldGammaPoisson",
    "NegativeMultinomial",
    "exact_sites",
    "expected_log_logistic_softmax",
    "expected_log_normaliser",
    "expected_log_sigmoid",
    "gamma_poisson_count_terms",
    "gamma_poisson_local_parameters",
    "log_logistic_softmax",
    "log_one_minus_sigma_tilde",
    "log_sigma_tilde",
    "log_sum_complement",
    "negative_multinomial_local_elbo",
    "negative_multinomial_local_parameters",
    "numpy_sigmoid",
    "polya_gamma_terms",
    "quasi_normal_samples",
    "sites_from_derivatives",
    "sobol_uniforms",
    "subset_site_weights",
]

DEFAULT_NUM_PREDICTIVE_SAMPLES = 1000


def sobol_uniforms(num_samples: int, dim: int) -> np.ndarray:
    """[num_samples, dim] unscrambled Sobol points in [0, 1), skipping the origin."""
    from scipy.stats import qmc

    # Sobol balance holds for powers of two; other counts are still low-discrepancy.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return qmc.Sobol(d=dim, scramble=False).random(num_samples + 1)[1:]


def quasi_normal_samples(num_samples: int, dim: int, seed: int, dtype: Any) -> np.ndarray:
    """[num_samples, dim] standard normal points: randomly shifted Sobol points through Φ⁻¹."""
    from scipy.special import ndtri

    shift = np.random.default_rng(seed).uniform(size=dim)
    uniform = np.mod(sobol_uniforms(num_samples, dim) + shift, 1.0)
    eps = np.finfo(np.float64).eps
    return ndtri(np.clip(uniform, eps, 1 - eps)).astype(dtype)


def quasi_latent_samples(
    Fmu: TensorType, Fvar: TensorType, num_samples: int, seed: int
) -> tf.Tensor:
    """[S, N, C] draws of q(f) = N(Fmu, Fvar) [N, C] at the same ``num_samples`` quasi-normal
    points for every point."""
    Fmu = tf.convert_to_tensor(Fmu)
    eps = tf.constant(
        quasi_normal_samples(num_samples, Fmu.shape[-1], seed, Fmu.dtype.as_numpy_dtype)
    )  # [S, C]
    return Fmu[None] + tf.sqrt(tf.maximum(Fvar, 0.0))[None] * eps[:, None, :]


def log_logistic_softmax(F: tf.Tensor, log_weights: Optional[tf.Tensor] = None) -> tf.Tensor:
    """log p(y = k | f) for every k: log θ_k σ(f_k) - log Σ_c θ_c σ(f_c), stable for any finite f
    (θ = 1 if ``log_weights`` [C] is ``None``). [..., C]"""
    log_weighted = -tf.math.softplus(-F)
    if log_weights is not None:
        log_weighted += log_weights
    return log_weighted - tf.reduce_logsumexp(log_weighted, axis=-1, keepdims=True)


# -- the exact expectation and the exact-bound sites -----------------------------------------------

DEFAULT_NUM_HERMITE = 20
# The s-grid of Frullani's integral: below -8 the integrand is O(e^{2s} Var(Z)/κ²) < 1e-7, above 25
# Z/κ would have to be below e^{-25}·(a few) for exp(-Z eˢ/κ) not to have vanished.
S_MIN, S_MAX, S_STEP = -8.0, 25.0, 1.0


def _hermite(num: int, dtype: tf.DType) -> Tuple[tf.Tensor, tf.Tensor]:
    """Nodes and weights for E over a standard normal: E h(z) ≈ Σ w h(√2 x)."""
    x, w = hermgauss(num)
    return tf.constant(np.sqrt(2.0) * x, dtype), tf.constant(w / np.sqrt(np.pi), dtype)


def _safe_std(Fvar: tf.Tensor) -> tf.Tensor:
    # A floor keeps d sqrt(v)/dv finite at v = 0; below it the expectation is constant in v.
    floor = 1e-12 if Fvar.dtype == tf.float64 else 1e-6
    return tf.sqrt(tf.maximum(Fvar, floor))


@check_shapes("Fmu: [batch...]", "Fvar: [batch...]", "return: [batch...]")
def expected_log_sigmoid(Fmu: tf.Tensor, Fvar: tf.Tensor, num_hermite: int = 40) -> tf.Tensor:
    """E log σ(f) for f ~ N(Fmu, Fvar), by Gauss–Hermite."""
    z, w = _hermite(num_hermite, Fmu.dtype)
    f = Fmu[..., None] + _safe_std(Fvar)[..., None] * z
    return tf.reduce_sum(-tf.math.softplus(-f) * w, axis=-1)


@check_shapes(
    "Fmu: [N, K]",
    "Fvar: [N, K]",
    "log_weights: [K] if log_weights is not None",
    "column_weights: [N, K] if column_weights is not None",
    "return: [N]",
)
def expected_log_normaliser(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    num_hermite: int = DEFAULT_NUM_HERMITE,
    grid_step: float = S_STEP,
    log_weights: Optional[tf.Tensor] = None,
    column_weights: Optional[tf.Tensor] = None,
) -> tf.Tensor:
    """E log Σ_c θ_c σ(f_c) for independent f_c ~ N(Fmu_c, Fvar_c), by Frullani's integral
    (``num_hermite`` nodes per class, trapezoidal rule of step ``grid_step`` on [S_MIN, S_MAX]).
    ``log_weights`` are the classes' log θ_c (θ = 1 if ``None``).

    ``column_weights`` [N, K] make column c of point n stand for that many classes: the class sums
    inside (κ and Σ_c log φ_c) weigh it so. A class subset's estimate is built from them
    (:func:`expected_log_logistic_softmax`)."""
    if (
        tf.executing_eagerly()
        and _grid_size(Fmu.shape, num_hermite, grid_step) <= EAGER_UNFUSED_LIMIT
    ):
        return _log_normaliser(Fmu, Fvar, column_weights, num_hermite, grid_step, log_weights)
    return _fused_log_normaliser(Fmu, Fvar, column_weights, num_hermite, grid_step, log_weights)


# An XLA compile of the quadrature costs 0.7-1.4 s on a CPU, once per shape; evaluated op by op,
# a grid of this many elements costs about 0.07 s. So an eager call up to this size (a certificate
# on a small training set, an eager CAVI step, one prediction) is evaluated unfused: even ten calls
# at one shape cost less than the compile they avoid. Larger ones, and every call inside a
# compiled step, go through XLA.
EAGER_UNFUSED_LIMIT = 2**21


def _s_grid(grid_step: float) -> np.ndarray:
    """The T nodes of the trapezoidal rule on [S_MIN, S_MAX]."""
    return np.arange(S_MIN, S_MAX + grid_step / 2, grid_step)


def _grid_size(shape: tf.TensorShape, num_hermite: int, grid_step: float) -> int:
    """The elements of the [N, K, H, T] tensor that the quadrature reduces."""
    return int(np.prod(shape)) * num_hermite * len(_s_grid(grid_step))


def _log_normaliser(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    column_weights: Optional[tf.Tensor],
    num_hermite: int,
    grid_step: float,
    log_weights: Optional[tf.Tensor],
) -> tf.Tensor:
    dtype = Fmu.dtype
    z, w = _hermite(num_hermite, dtype)
    f = Fmu[..., None] + _safe_std(Fvar)[..., None] * z  # [N, K, H]
    log_sigma = -tf.math.softplus(-f)
    if log_weights is not None:  # θ_c σ(f_c): the weights scale each class's Laplace variable
        log_sigma += log_weights[:, None]
    log_counted = tf.math.log(w) + log_sigma
    if column_weights is not None:  # a zero weight gives -inf: the column adds nothing to κ
        log_counted += tf.math.log(column_weights)[..., None]
    # log κ = log Σ_c Σ_h w_h σ_h, in log space: κ is tiny when every latent is very negative.
    log_kappa = tf.reduce_logsumexp(log_counted, axis=[-2, -1])
    # σ_h / κ ≤ 1 / (W · w_h) is bounded for a column of weight W, so the Laplace variable
    # t σ_h / κ is a product of two finite numbers: one exponential per element of the
    # [N, K, H, T] tensor instead of two. Where the product overflows, exp(-inf) = 0 is the right
    # limit and its derivative is 0. The cap (e^44 in float32) only touches nodes whose weight is
    # below e^-44, where the decay is zero at every grid point anyway, and columns of weight zero,
    # which count for nothing; it keeps the factor, and so its gradient, finite.
    log_ratio_cap = 0.5 * np.log(np.finfo(dtype.as_numpy_dtype).max)
    scaled_sigma = tf.exp(tf.minimum(log_sigma - log_kappa[:, None, None], log_ratio_cap))
    s = tf.constant(_s_grid(grid_step), dtype)  # [T]
    # φ_c(t) = Σ_h w_h exp(-t σ_h) ≤ 1 cannot overflow. Where it underflows, Π_c φ_c is zero
    # anyway: the floor only keeps log and its gradient finite there.
    decay = tf.exp(-scaled_sigma[..., None] * tf.exp(s))  # [N, K, H, T]
    phi = tf.einsum("h,nkht->nkt", w, decay)  # [N, K, T]
    log_phi = tf.math.log(tf.maximum(phi, np.finfo(dtype.as_numpy_dtype).tiny))
    if column_weights is not None:
        log_phi *= column_weights[..., None]
    log_product = tf.reduce_sum(log_phi, axis=-2)  # [N, T]
    integrand = tf.exp(-tf.exp(s)) - tf.exp(log_product)
    return log_kappa + grid_step * tf.reduce_sum(integrand, axis=-1)


# The quadrature is a chain of elementwise maps and reductions over an [N, K, H, T] tensor: XLA
# fuses them (forward and backward) into loops that never store that tensor (docs/benchmarks.md,
# "The iteration at the cost of a softmax iteration"). It is compiled on its own, so the step around
# it keeps TensorFlow's faster CPU Cholesky. One trace per shape, never a trace generalised to
# unknown shapes (``reduce_retracing``): inside an XLA-compiled step such a trace made XLA take
# q(u)'s values as compile-time constants, so that step recompiled at every call.
_fused_log_normaliser = tf.function(_log_normaliser, jit_compile=True, autograph=False)


@check_shapes(
    "Fmu: [N, K]",
    "Fvar: [N, K]",
    "Y_onehot: [N, K]",
    "log_weights: [K] if log_weights is not None",
    "label_marginals[0]: [N] if label_marginals is not None",
    "label_marginals[1]: [N] if label_marginals is not None",
    "return: [N]",
)
def expected_log_logistic_softmax(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y_onehot: tf.Tensor,
    num_classes: Optional[int] = None,
    num_hermite: int = DEFAULT_NUM_HERMITE,
    grid_step: float = S_STEP,
    log_weights: Optional[tf.Tensor] = None,
    label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    soft_labels: bool = False,
) -> tf.Tensor:
    """E log p(y | f) = log θ_y + E log σ(f_y) - E log Σ_c θ_c σ(f_c) for each point (θ = 1 if
    ``log_weights`` is ``None``). With ``soft_labels`` the rows of ``Y_onehot`` may be any class
    probabilities y, and the expectation is Σ_c y_c (log θ_c + E log σ(f_c)) - E log Σ_c θ_c σ(f_c).

    On a class subset (``num_classes`` > the last axis, ``Y_onehot`` zero where the label is not
    in it) ``label_marginals`` = (mean [N], variance [N]) of each point's observed class are
    needed: the estimate keeps that class exact, observed term and normaliser alike, and counts
    each other column of the subset for (C - 1)/k classes, k the point's other columns. Each sum
    inside the normaliser is then unbiased, and unlike a C/|K| weight on every column, the class
    that dominates a trained model's normaliser is never missed or counted C/|K| times."""
    if num_classes is not None:
        if soft_labels:
            raise ValueError("class subsets need integer labels, not soft labels")
        if label_marginals is None:
            raise ValueError("a class subset's expectation needs the observed classes' marginals")
        if log_weights is not None:
            raise ValueError("class weights are not estimated on class subsets")
        columns_mu, columns_var, column_weights = _label_anchored_columns(
            Fmu, Fvar, Y_onehot, num_classes, *label_marginals
        )
        observed = expected_log_sigmoid(columns_mu[:, -1], columns_var[:, -1])
        return observed - expected_log_normaliser(
            columns_mu, columns_var, num_hermite, grid_step, column_weights=column_weights
        )
    if soft_labels:
        # Σ_c y_c E log σ(f_c): the expected log-likelihood is linear in y.
        observed = tf.reduce_sum(Y_onehot * expected_log_sigmoid(Fmu, Fvar), axis=-1)
    else:  # one class per point: gather its marginals, one 1-D quadrature per point
        m_y = tf.reduce_sum(Y_onehot * Fmu, axis=-1)
        v_y = tf.reduce_sum(Y_onehot * Fvar, axis=-1)
        observed = expected_log_sigmoid(m_y, v_y)
    if log_weights is not None:
        observed += tf.reduce_sum(Y_onehot * log_weights, axis=-1)
    return observed - expected_log_normaliser(Fmu, Fvar, num_hermite, grid_step, log_weights)


def _other_columns_weight(Y_onehot: tf.Tensor, num_classes: int) -> tf.Tensor:
    """(C - 1)/k [N]: how many of a point's other classes each of its k other columns stands for."""
    subset_size = tf.cast(tf.shape(Y_onehot)[-1], Y_onehot.dtype)
    others = subset_size - tf.reduce_sum(Y_onehot, axis=-1)
    return (tf.cast(num_classes, Y_onehot.dtype) - 1) / others


def _label_anchored_columns(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y_onehot: tf.Tensor,
    num_classes: int,
    label_mean: tf.Tensor,
    label_var: tf.Tensor,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The subset's columns with the observed class's appended last, and their weights: 1 for
    that class, 0 for its own column in the subset, (C - 1)/k for the others."""
    in_subset = tf.reduce_sum(Y_onehot, axis=-1) > 0
    # Taken from the subset's column when the label is in it, so that its derivative reaches it.
    m_y = tf.where(in_subset, tf.reduce_sum(Y_onehot * Fmu, axis=-1), label_mean)
    v_y = tf.where(in_subset, tf.reduce_sum(Y_onehot * Fvar, axis=-1), label_var)
    others = (1 - Y_onehot) * _other_columns_weight(Y_onehot, num_classes)[:, None]
    ones = tf.ones_like(m_y)[:, None]
    return (
        tf.concat([Fmu, m_y[:, None]], axis=-1),
        tf.concat([Fvar, v_y[:, None]], axis=-1),
        tf.concat([others, ones], axis=-1),
    )


@check_shapes("Y_onehot: [N, K]", "return: [N, K]")
def subset_site_weights(Y_onehot: tf.Tensor, num_classes: int) -> tf.Tensor:
    """How many classes each column of a subset's expectation stands for (1 for the observed
    class): a class's site is its own derivative, so the step divides this weight out."""
    others = _other_columns_weight(Y_onehot, num_classes)[:, None]
    return tf.where(Y_onehot > 0, tf.ones_like(Y_onehot), others)


@check_shapes(
    "Fmu: [N, K]",
    "Fvar: [N, K]",
    "Y_onehot: [N, K]",
    "log_weights: [K] if log_weights is not None",
    "label_marginals[0]: [N] if label_marginals is not None",
    "label_marginals[1]: [N] if label_marginals is not None",
    "return[0]: [N]",
    "return[1]: [N, K]",
    "return[2]: [N, K]",
)
def exact_sites(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y_onehot: tf.Tensor,
    num_classes: Optional[int] = None,
    num_hermite: int = DEFAULT_NUM_HERMITE,
    log_weights: Optional[tf.Tensor] = None,
    label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    soft_labels: bool = False,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(E log p(y|f) [N], linear [N, K], quadratic [N, K]): the exact expected log-likelihood and
    the coefficients of f and -f²/2 of its natural-gradient site (module docstring). On a class
    subset these are derivatives of its estimate; :func:`subset_site_weights` turns them into
    each class's own.

    The marginals are treated as constants (the sites are what the natural step consumes); use
    :func:`expected_log_logistic_softmax` where the expectation must be differentiated."""
    Fmu, Fvar = tf.stop_gradient(Fmu), tf.stop_gradient(Fvar)
    if label_marginals is not None:
        label_marginals = tuple(tf.stop_gradient(m) for m in label_marginals)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch([Fmu, Fvar])
        expected = expected_log_logistic_softmax(
            Fmu,
            Fvar,
            Y_onehot,
            num_classes,
            num_hermite,
            log_weights=log_weights,
            label_marginals=label_marginals,
            soft_labels=soft_labels,
        )
        # Points are independent, so the gradient of the sum holds each point's own derivatives.
        total = tf.reduce_sum(expected)
    d_mean, d_var = tape.gradient(total, [Fmu, Fvar])
    return (expected, *sites_from_derivatives(Fmu, d_mean, d_var))


@check_shapes(
    "Fmu: [N, K]",
    "d_mean: [N, K]",
    "d_var: [N, K]",
    "return[0]: [N, K]",
    "return[1]: [N, K]",
)
def sites_from_derivatives(
    Fmu: tf.Tensor, d_mean: tf.Tensor, d_var: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor]:
    """(linear, quadratic) of the natural-gradient site from the derivatives of a point's expected
    log-likelihood with respect to its marginal mean and variance (module docstring)."""
    quadratic = -2.0 * d_var
    return d_mean + quadratic * Fmu, quadratic


# -- the augmentation and its two variational families ---------------------------------------------


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


def classes_and_subset_scale(
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
    _, weight = classes_and_subset_scale(m, num_classes)
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
    num_classes, weight = classes_and_subset_scale(Fmu, num_classes)
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
    return classes_and_subset_scale(Fmu, num_classes)[1] * tf.reduce_sum(per_class, axis=-1)


@check_shapes("local.gamma: [N, C]", "local.alpha: [N]", "return: [N]")
def gamma_poisson_count_terms(
    local: LocalParameters, num_classes: Optional[int] = None
) -> tf.Tensor:
    """E[log p(n|λ) - log q(n)] - E[Σ_c λ] + H[q(λ)] for q(n) = Po(γ), q(λ) = Ga(α, C)."""
    gamma, alpha = local.gamma, local.alpha
    num_classes, weight = classes_and_subset_scale(gamma, num_classes)
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
    _, weight = classes_and_subset_scale(Fmu, num_classes)
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


class LogisticSoftmax(AugmentedLikelihood):
    """The logistic-softmax multi-class likelihood for integer labels ``Y`` [N, 1] in 0..C-1,
    p(y = k | f) = θ_k σ(f_k) / Σ_c θ_c σ(f_c). Training also takes rows ``Y`` [N, C] of class
    probabilities (one-hot or soft labels), for which log p(y | f) = Σ_k y_k log p(k | f);
    ``predict_log_density`` needs integer labels.

    :param num_classes: C ≥ 2.
    :param num_hermite: Gauss–Hermite nodes per class of ``variational_expectations``.
    :param num_predictive_samples: quasi-Monte Carlo points for ``predict_mean_and_var`` and
        ``predict_log_density`` (default 1000).
    :param seed: the seed of the random shift of the quasi-Monte Carlo points.
    :param class_weights: learn per-class weights θ (a ``Parameter`` [C], initially 1; θ = 1 and
        no parameter if false). They lift the likelihood's confidence cap: with θ = 1 and latents
        ±4 over 10 classes, max p is 0.858. Inside a stock ``SVGP`` they are trained with the
        hyperparameters; :class:`~gpflow_augmented.LogisticSoftmaxSVGP` updates them in closed form
        (:class:`~gpflow_augmented.CAVI`). Only the ratios of the weights matter.
    :param augmentation: the variational family of the augmented model,
        :class:`~gpflow_augmented.likelihoods.NegativeMultinomial` (default) or
        :class:`~gpflow_augmented.likelihoods.MeanFieldGammaPoisson`.
    """

    def __init__(
        self,
        num_classes: int,
        num_hermite: int = DEFAULT_NUM_HERMITE,
        num_predictive_samples: int = DEFAULT_NUM_PREDICTIVE_SAMPLES,
        seed: int = 0,
        class_weights: bool = False,
        augmentation: Optional[LogisticSoftmaxAugmentation] = None,
        **kwargs: Any,
    ) -> None:
        num_classes = check_num_classes(num_classes)
        super().__init__(input_dim=None, latent_dim=num_classes, observation_dim=None, **kwargs)
        self._num_classes = num_classes
        self.num_hermite = check_integer(num_hermite, "num_hermite")
        self.num_predictive_samples = check_integer(
            num_predictive_samples, "num_predictive_samples"
        )
        self.seed = check_integer(seed, "seed", minimum=0)
        # The exp bijector makes the unconstrained variable log θ: the closed-form update's
        # statistic is the gradient with respect to it.
        self.class_weights: Optional[Parameter] = (
            Parameter(
                np.ones(self.num_classes),
                transform=positive(lower=0.0, base="exp"),
                name="class_weights",
            )
            if class_weights
            else None
        )
        self.augmentation = NegativeMultinomial() if augmentation is None else augmentation

    @property
    def augmentation(self) -> LogisticSoftmaxAugmentation:
        """The variational family of the augmented bound: :class:`NegativeMultinomial` (the
        default) or :class:`MeanFieldGammaPoisson` (the paper's)."""
        return self._augmentation

    @augmentation.setter
    def augmentation(self, augmentation: LogisticSoftmaxAugmentation) -> None:
        if not isinstance(augmentation, LogisticSoftmaxAugmentation):
            raise TypeError(
                f"augmentation must be NegativeMultinomial() or "
                f"MeanFieldGammaPoisson(), got {augmentation!r}"
            )
        if self.class_weights is not None and not augmentation.supports_class_weights:
            raise ValueError(
                f"class weights need the NegativeMultinomial augmentation (the "
                f"mean-field q(λ) of {augmentation!r} does not carry them)"
            )
        self._augmentation = augmentation

    @property
    def num_classes(self) -> int:
        return self._num_classes

    @property
    def num_latent_gps(self) -> int:
        return self._num_classes

    @property
    def accepts_soft_labels(self) -> bool:
        # y enters the exact expectation linearly, and the augmented bounds through linear terms
        # and the Pólya-Gamma shape y + n, which need not be an integer.
        return True

    @property
    def has_exact_sites(self) -> bool:
        return True

    @property
    def learns_class_weights(self) -> bool:
        return self.class_weights is not None

    def log_class_weights(self, subset: Optional[ClassSubset] = None) -> Optional[tf.Tensor]:
        """log θ [C] (or of the subset's classes), or ``None`` when the likelihood has no class
        weights."""
        if self.class_weights is None:
            return None
        log_weights = tf.math.log(self.class_weights)
        return log_weights if subset is None else tf.gather(log_weights, subset.classes)

    def _latent_samples(self, Fmu: TensorType, Fvar: TensorType, num_samples: int) -> tf.Tensor:
        return quasi_latent_samples(Fmu, Fvar, num_samples, self.seed)

    def _one_hot(self, Y: TensorType, dtype: tf.DType, allow_soft: bool = True) -> tf.Tensor:
        # Every method that takes labels reads them here: an invalid label is refused (eagerly
        # and in a tf.function), and under XLA, which drops the assertion, its row is NaN rather
        # than the zero row tf.one_hot would give (log p = 0: a perfect score).
        return checked_label_rows(Y, self.num_classes, dtype, allow_soft)

    @inherit_check_shapes
    def _log_prob(self, X: TensorType, F: TensorType, Y: TensorType) -> tf.Tensor:
        log_p = log_logistic_softmax(F, self.log_class_weights())
        return tf.reduce_sum(self._one_hot(Y, log_p.dtype) * log_p, axis=-1)

    @inherit_check_shapes
    def _variational_expectations(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType, Y: TensorType
    ) -> tf.Tensor:
        # Deterministic and accurate (the module docstring): Gauss–Hermite for E log σ(f_y), and
        # Frullani's integral, which factorises over classes, for E log Σ_c σ(f_c).
        Fmu = tf.convert_to_tensor(Fmu)
        return expected_log_logistic_softmax(
            Fmu,
            tf.convert_to_tensor(Fvar),
            self._one_hot(Y, Fmu.dtype),
            num_hermite=self.num_hermite,
            log_weights=self.log_class_weights(),
            soft_labels=is_soft(Y, self.num_classes),
        )

    @inherit_check_shapes
    def _predict_mean_and_var(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType
    ) -> MeanAndVariance:
        F = self._latent_samples(Fmu, Fvar, self.num_predictive_samples)
        p = tf.reduce_mean(tf.exp(log_logistic_softmax(F, self.log_class_weights())), axis=0)
        return p, p - tf.square(p)

    @inherit_check_shapes
    def _predict_log_density(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType, Y: TensorType
    ) -> tf.Tensor:
        F = self._latent_samples(Fmu, Fvar, self.num_predictive_samples)
        # The predictive density of an observed class: integer labels only.
        log_p = tf.reduce_sum(  # [S, N]
            self._one_hot(Y, F.dtype, allow_soft=False)
            * log_logistic_softmax(F, self.log_class_weights()),
            axis=-1,
        )
        num = tf.cast(self.num_predictive_samples, log_p.dtype)
        return tf.reduce_logsumexp(log_p, axis=0) - tf.math.log(num)

    @inherit_check_shapes
    def _conditional_mean(self, X: TensorType, F: TensorType) -> tf.Tensor:
        return tf.exp(log_logistic_softmax(F, self.log_class_weights()))

    @inherit_check_shapes
    def _conditional_variance(self, X: TensorType, F: TensorType) -> tf.Tensor:
        p = self._conditional_mean(X, F)
        return p - tf.square(p)

    # -- the augmented-likelihood contract -----------------------------------------------------

    @inherit_check_shapes
    def label_rows(self, Y: tf.Tensor, subset: Optional[ClassSubset] = None) -> tf.Tensor:
        # One-hot rows of integer labels [N, 1] (the columns of the subset's classes), or the given
        # rows [N, C] of class probabilities. Unchecked: the compiled step's status refuses bad
        # labels with a clear error before anything is assigned.
        if is_soft(Y, self.num_classes):
            if subset is not None:
                raise InvalidDataError(
                    "class subsets need integer labels [N, 1], not rows of class probabilities"
                )
            return tf.cast(Y, default_float())
        if subset is None:
            return tf.one_hot(tf.cast(Y[:, 0], tf.int32), self.num_classes, dtype=default_float())
        labels = tf.cast(Y, tf.int64)
        return tf.cast(
            tf.equal(labels, tf.cast(subset.classes, tf.int64)[None, :]), default_float()
        )

    @inherit_check_shapes
    def local_parameters(self, marginals: Marginals, Y_rows: tf.Tensor) -> LocalParameters:
        return self.augmentation.local_parameters(
            marginals.mean,
            marginals.variance,
            Y_rows,
            self.num_classes,
            self.log_class_weights(marginals.subset),
        )

    @inherit_check_shapes
    def conjugate_coefficients(
        self, Y_rows: tf.Tensor, local: LocalParameters
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        # Given n and ω, each (point, class) contributes 2^{-(y+n)} exp((y - n) f/2 - ω f²/2).
        return (Y_rows - local.gamma) / 2, local.theta

    @inherit_check_shapes
    def augmented_local_elbo(
        self, marginals: Marginals, Y: tf.Tensor, local: Optional[LocalParameters] = None
    ) -> tf.Tensor:
        return self.augmentation.local_elbo(
            marginals.mean,
            marginals.variance,
            self.label_rows(Y, marginals.subset),
            self.num_classes,
            local,
            self.log_class_weights(marginals.subset),
            is_soft(Y, self.num_classes),
        )

    @inherit_check_shapes
    def exact_local_elbo(self, marginals: Marginals, Y: tf.Tensor) -> tf.Tensor:
        return expected_log_logistic_softmax(
            marginals.mean,
            marginals.variance,
            self.label_rows(Y, marginals.subset),
            _estimated_from(marginals.subset),
            self.num_hermite,
            log_weights=self.log_class_weights(marginals.subset),
            label_marginals=marginals.label_marginals,
            soft_labels=is_soft(Y, self.num_classes),
        )

    @inherit_check_shapes
    def refined_exact_local_elbo(self, marginals: Marginals, Y: tf.Tensor) -> tf.Tensor:
        # Twice the Hermite nodes and half the grid step of the normaliser's quadrature.
        _all_classes(marginals, "the refined expectation")
        return expected_log_logistic_softmax(
            marginals.mean,
            marginals.variance,
            self.label_rows(Y),
            num_hermite=2 * self.num_hermite,
            grid_step=S_STEP / 2,
            log_weights=self.log_class_weights(),
            soft_labels=is_soft(Y, self.num_classes),
        )

    @inherit_check_shapes
    def exact_sites(
        self, marginals: Marginals, Y: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        Y_rows = self.label_rows(Y, marginals.subset)
        expected, linear, quadratic = exact_sites(
            marginals.mean,
            marginals.variance,
            Y_rows,
            _estimated_from(marginals.subset),
            self.num_hermite,
            log_weights=self.log_class_weights(marginals.subset),
            label_marginals=marginals.label_marginals,
            soft_labels=is_soft(Y, self.num_classes),
        )
        return (expected, *_per_class_sites(Y_rows, (linear, quadratic), marginals.subset))

    @inherit_check_shapes
    def sites_from_derivatives(
        self, marginals: Marginals, d_mean: tf.Tensor, d_var: tf.Tensor, Y: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        sites = sites_from_derivatives(marginals.mean, d_mean, d_var)
        if marginals.subset is None:
            return sites
        return _per_class_sites(self.label_rows(Y, marginals.subset), sites, marginals.subset)

    @check_shapes("Y: [N, L]", "log_weight_gradient: [C]", "return[0]: [C]", "return[1]: [C]")
    def class_weight_statistics(
        self, Y: tf.Tensor, log_weight_gradient: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """(n, e) of the batch: the class counts n_k and the exposures e_k, where
        ``log_weight_gradient`` = ∂(Σ_i local ELBO_i)/∂log θ_k = n_k - θ_k e_k. On the exact bound
        e_k = Σ_i E_q[σ(f_ik) / Σ_c θ_c σ(f_ic)]; on the negative-multinomial bound the same with
        σ(f) replaced by 1 - σ̃. Only the observed class's numerator and the normaliser depend on
        θ."""
        counts = tf.reduce_sum(self.label_rows(Y), axis=0)
        expected = tf.maximum(counts - log_weight_gradient, 0.0)
        return counts, expected / self.class_weights

    @property
    def has_gibbs_conditionals(self) -> bool:
        return self.class_weights is None

    @inherit_check_shapes
    def log_class_probabilities(self, F: tf.Tensor) -> tf.Tensor:
        return log_logistic_softmax(F, self.log_class_weights())

    # -- complete conditionals of the augmented model, for Gibbs sampling --------------------------
    # The augmented joint of point i is σ(f_y) Π_c Po(n_c | λ) σ(-f_c)^{n_c} under a flat prior on
    # λ ≥ 0, with σ(z)^b = 2^{-b} e^{bz/2} E_{PG(ω|b,0)}[e^{-ωz²/2}]. Draws live on the host, in the
    # samplers' layout [S, C, N]:
    #   λ | f ~ Exp(rate Σ_c σ(f_c))   (n integrated out)
    #   n | f, λ ~ Po(λ σ(-f))         (ω integrated out; the paper prints σ(f), see the tests)
    #   λ | n ~ Ga(1 + Σ_c n_c, rate C)
    #   ω | n, f ~ PG(y + n, |f|)

    def initial_gibbs_state(self, F: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """λ [S, N], drawn given f: the systematic scan draws n given the previous sweep's λ."""
        return self._draw_rates_given_latents(F, rng)

    def draw_auxiliaries(
        self,
        F: np.ndarray,
        Y_rows: np.ndarray,
        state: Any,
        rng: np.random.Generator,
        scan: str = "blocked",
    ) -> Tuple[LocalParameters, np.ndarray]:
        """(n, ω) and λ. ``"blocked"`` draws (λ, n, ω) as one block given f: λ | f, n | λ, f,
        ω | n, f. ``"systematic"`` (the paper's sweep) draws n | f with the previous sweep's λ
        (``state``), then λ | n, then ω | n, f."""
        if not self.has_gibbs_conditionals:
            raise NotImplementedError("Gibbs sampling with class weights is not implemented")
        if scan == "blocked":
            rates = self._draw_rates_given_latents(F, rng)
            counts = rng.poisson(self._count_means(F, rates[:, None, :])).astype(np.float64)
        else:
            counts = rng.poisson(self._count_means(F, state[:, None, :])).astype(np.float64)
            rates = rng.gamma(1.0 + counts.sum(axis=1), 1.0 / float(self.num_classes))
        c = np.abs(F)
        omega = sample_polya_gamma(Y_rows + counts, c, rng)
        return LocalParameters(gamma=counts, theta=omega, c=c), rates

    def _draw_rates_given_latents(self, F: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return rng.exponential(1.0 / numpy_sigmoid(F).sum(axis=1))

    def _count_means(self, F: np.ndarray, rates: np.ndarray) -> np.ndarray:
        """The mean λσ(-f) of n | f, λ ~ Po(mean)."""
        return rates * numpy_sigmoid(-F)


def _estimated_from(subset: Optional[ClassSubset]) -> Optional[int]:
    """C when the columns are a subset of the classes (the expectations then estimate)."""
    return None if subset is None else subset.num_classes


def _per_class_sites(
    Y_rows: tf.Tensor, sites: Tuple[tf.Tensor, tf.Tensor], subset: Optional[ClassSubset]
) -> Tuple[tf.Tensor, tf.Tensor]:
    """In a subset's estimate a column stands for several classes; a site is one class's own
    derivative."""
    if subset is None:
        return sites
    weights = subset_site_weights(Y_rows, subset.num_classes)
    return (sites[0] / weights, sites[1] / weights)


def _all_classes(marginals: Marginals, what: str) -> None:
    if marginals.subset is not None:
        raise ValueError(f"{what} is of all classes, not of a class subset's marginals")


def numpy_sigmoid(x: np.ndarray) -> np.ndarray:
    """σ(x) in NumPy, stable for any finite x."""
    return np.exp(-np.logaddexp(0.0, -x))
