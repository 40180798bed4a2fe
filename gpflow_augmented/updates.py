r"""
The global update of q(u): a step of size ρ in natural parameters towards the conjugate optimum
(the kernel variance's closed-form update beside it is :mod:`~gpflow_augmented.kernel_variance`).

Given the local parameters, the augmented ELBO is quadratic in f: per point and class it contributes
``(y - γ) f/2 - θ f²/2``. In whitened coordinates (u = L v, f = Aᵀ v + residual) with a minibatch
scale s = N / B, the optimal q(v^c) has

    Λ̂^c = I + s A diag(θ^c) Aᵀ,    η̂₁^c = s A (y^c - γ^c) / 2,

and the stochastic-variational step mixes natural parameters, η ← (1 - ρ) η + ρ η̂ (Hoffman et al.
2013). ρ = 1 on the full data is exact coordinate ascent. Because Λ̂ ⪰ I, the precision stays
well-conditioned whatever the kernel.

The exact-bound sites (:mod:`~gpflow_augmented.likelihoods.logistic_softmax`) have coefficients θ
that can be negative, so Λ̂ need not be positive definite away from the fixed point (at a maximum of
the ELBO it is: it is the inverse covariance there). :func:`natural_parameter_step_with_backoff`
halves ρ of each class whose new precision has no Cholesky factor until it has one: (1 - ρ)Λ + ρΛ̂
tends to the current, positive definite Λ as ρ → 0, and the step's fixed points, where Λ̂ = Λ, are
unchanged.

Positive definite is not enough on minibatches. A batch's sites are scaled by N / B, so where some θ
are negative (large latents, as the closed-form kernel variance makes on separable classes) one
batch can bring Λ̂'s smallest eigenvalue near zero, and q(v)'s second moment grows by orders of
magnitude in one step (measured on shuttle: ×5·10⁵ at ρ = 0.09). There is no ELBO to check a
minibatch step against, so a minibatch step with negative sites also halves ρ until Λ_new ⪰ κ Λ
(:data:`MIN_PRECISION_RATIO`): q(v)'s covariance at most doubles per step. Sites that are all θ ≥ 0
cannot run away (Λ̂ ⪰ I, so Λ_new ⪰ (1 - ρ) Λ) and are not tested; the full batch has the line
search; Λ_new = Λ at a fixed point, so the fixed points are again unchanged.
"""

from typing import Any, NamedTuple, Optional, Tuple, Union

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes
from gpflow.config import default_float
from gpflow.kullback_leiblers import gauss_kl

from .class_subsets import subset_scale
from .distributed import replica_sum
from .projection import BatchGeometry, unwhitened_q
from .strata import LabelStrata, StrataEstimate

__all__ = [
    "BatchStatistics",
    "batch_elbo",
    "batch_size",
    "batch_statistics",
    "conjugate_statistics",
    "mean_and_sqrt",
    "minibatch_scale",
    "natural_parameter_step",
    "natural_parameter_step_with_backoff",
    "natural_step",
    "own_class_statistics",
    "MIN_PRECISION_RATIO",
    "OWN_CLASS_OUTER_PRODUCT_LIMIT",
    "OWN_CLASS_OUTER_PRODUCTS_FROM",
    "class_weight_exposure",
    "class_weight_step",
    "is_full_batch",
    "update_class_weights",
]

_MAX_BACKOFFS = 12

#: κ of a minibatch step's trust region, Λ_new ⪰ κ Λ (module docstring).
MIN_PRECISION_RATIO = 0.5


@check_shapes(
    "A: [broadcast C, M, N]",
    "linear: [N, C]",
    "quadratic: [N, C]",
    "return[0]: [C, M, M]",
    "return[1]: [M, C]",
)
def conjugate_statistics(A: tf.Tensor, linear: tf.Tensor, quadratic: tf.Tensor) -> tuple:
    """The batch's sums that the update needs, (A diag(θ^c) Aᵀ, A linear^c) per class: sums over
    points, so replicas holding shards of a batch add theirs (:mod:`~gpflow_augmented.distributed`).

    :param A: the whitened projection L⁻¹ K_mn, one per class or one shared by all.
    :param linear: the coefficient of f in the augmented log-likelihood, (y - γ) / 2.
    :param quadratic: the coefficient of -f²/2, θ = E[ω].
    """
    weighted_A = A * tf.transpose(quadratic)[:, None, :]  # [C, M, N]
    precision = tf.linalg.matmul(weighted_A, A, transpose_b=True)  # [C, M, M]
    nat1 = tf.transpose(tf.linalg.matvec(A, tf.transpose(linear)))  # [M, C]
    return precision, nat1


#: :func:`own_class_statistics` sums the points' outer products by class (N M² operations, but
#: memory-bound) from this many classes on; below it, a masked product per class (C N M², as
#: :func:`conjugate_statistics`) is the faster on a CPU (one core, N = 200, M = 100: 0.4 ms against
#: 1.9 ms at C = 3, 2.4 ms against 2.1 ms at C = 23).
OWN_CLASS_OUTER_PRODUCTS_FROM = 16
#: Up to this many elements of the [N, M, M] outer products (64 MiB in float64); above it, the
#: masked product keeps the memory at C M N.
OWN_CLASS_OUTER_PRODUCT_LIMIT = 2**23


@check_shapes(
    "A: [broadcast C, M, N]",
    "linear: [N, C]",
    "quadratic: [N, C]",
    "labels: [N, C]",
    "return[0]: [C, M, M]",
    "return[1]: [M, C]",
)
def own_class_statistics(
    A: tf.Tensor, linear: tf.Tensor, quadratic: tf.Tensor, labels: tf.Tensor
) -> tuple:
    """:func:`conjugate_statistics` of each class's own points alone: class k's sums over the
    points whose one-hot ``labels`` say k. Each point adds to one class, so the precision's sum
    is a sum of the points' outer products by class."""
    num_classes = labels.shape[-1]
    points, inducing = A.shape[-1], A.shape[-2]
    if (
        num_classes < OWN_CLASS_OUTER_PRODUCTS_FROM
        or points is None
        or inducing is None
        or points * inducing**2 > OWN_CLASS_OUTER_PRODUCT_LIMIT
    ):
        return conjugate_statistics(A, linear * labels, quadratic * labels)
    label = tf.argmax(labels, axis=-1, output_type=tf.int32)  # [N]
    own_quadratic = tf.reduce_sum(quadratic * labels, axis=-1)  # [N]
    own_linear = tf.reduce_sum(linear * labels, axis=-1)
    if A.shape[0] == 1:
        columns = tf.transpose(A[0])  # [N, M]
    else:  # each point's column of its own class's projection
        columns = tf.gather(tf.transpose(A, [2, 0, 1]), label, axis=1, batch_dims=1)
    outer = own_quadratic[:, None, None] * columns[:, :, None] * columns[:, None, :]
    precision = tf.math.unsorted_segment_sum(outer, label, num_classes)  # [C, M, M]
    nat1 = tf.math.unsorted_segment_sum(own_linear[:, None] * columns, label, num_classes)
    return precision, tf.transpose(nat1)


class _NaturalParameters(NamedTuple):
    """q(v)'s natural parameters, one per class: Λ [C, M, M] and η₁ = Λ μ [C, M]."""

    precision: tf.Tensor
    nat1: tf.Tensor


def _natural_parameters(q_mu: tf.Tensor, q_sqrt: tf.Tensor) -> _NaturalParameters:
    # Λ = S⁻¹ = L⁻ᵀ L⁻¹ with L = q_sqrt.
    eye = tf.eye(tf.shape(q_mu)[0], batch_shape=tf.shape(q_sqrt)[:1], dtype=q_mu.dtype)
    sqrt_inverse = tf.linalg.triangular_solve(q_sqrt, eye, lower=True)
    precision = tf.linalg.matmul(sqrt_inverse, sqrt_inverse, transpose_a=True)
    return _NaturalParameters(precision, tf.linalg.matvec(precision, tf.transpose(q_mu)))


def _mixed_step(
    current: _NaturalParameters,
    statistics: tuple,
    scale: tf.Tensor,
    rho: tf.Tensor,
    min_precision_ratio: Union[float, tf.Tensor],
) -> Tuple[tf.Tensor, tf.Tensor]:
    """(mean, sqrt) at η ← (1 - ρ)η + ρη̂ from the current natural parameters, NaN in the classes
    whose new precision has no Cholesky factor or is not ⪰ κ = ``min_precision_ratio`` times the
    current one. A Python 0 for κ leaves the trust region out of the trace; a tensor tests it
    whatever its value (a κ of 0 repeats the factorisation's own test), without a branch: XLA on a
    GPU reads a conditional's predicate on the host."""
    old_precision = current.precision
    precision, nat1 = _mixed_precision(current, statistics, scale, rho)
    mean, sqrt = mean_and_sqrt(precision, tf.transpose(nat1))
    if isinstance(min_precision_ratio, (int, float)) and min_precision_ratio == 0:
        return mean, sqrt
    ratio = _as_dtype_of(min_precision_ratio, old_precision)
    margin = tf.linalg.cholesky(precision - ratio * old_precision)
    failed = (ratio > 0.0) & ~tf.reduce_all(tf.math.is_finite(margin), axis=[-2, -1])
    nan = tf.constant(float("nan"), mean.dtype)
    return tf.where(failed[None, :], nan, mean), tf.where(failed[:, None, None], nan, sqrt)


def _mixed_precision(
    current: _NaturalParameters, statistics: tuple, scale: tf.Tensor, rho: tf.Tensor
) -> _NaturalParameters:
    """η ← (1 - ρ)η + ρη̂, ρ one per class, from the batch's :func:`conjugate_statistics`."""
    precision_sum, nat1_sum = statistics
    eye = tf.eye(tf.shape(current.precision)[-1], dtype=current.precision.dtype)
    rho_matrix = rho[:, None, None]
    return _NaturalParameters(
        (1 - rho_matrix) * current.precision + rho_matrix * (eye + scale * precision_sum),
        (1 - rho[:, None]) * current.nat1 + rho[:, None] * scale * tf.transpose(nat1_sum),
    )


def _mixed_mean(
    current: _NaturalParameters, statistics: tuple, scale: tf.Tensor, rho: tf.Tensor
) -> tf.Tensor:
    """The mean [M, C] alone of :func:`_mixed_precision`'s step: one factorisation and two
    triangular solves of a vector, no inverse."""
    precision, nat1 = _mixed_precision(current, statistics, scale, rho)
    factor = tf.linalg.cholesky(precision)
    return tf.transpose(tf.linalg.cholesky_solve(factor, nat1[..., None])[..., 0])


@check_shapes(
    "q_mu: [M, C]",
    "q_sqrt: [C, M, M]",
    "statistics[0]: [C, M, M]",
    "statistics[1]: [M, C]",
    "scale: []",
    "step_size: [broadcast C]",
    "min_precision_ratio: []",
    "return[0]: [M, C]",
    "return[1]: [C, M, M]",
)
def natural_parameter_step(
    q_mu: tf.Tensor,
    q_sqrt: tf.Tensor,
    statistics: tuple,
    scale: tf.Tensor,
    step_size: tf.Tensor,
    min_precision_ratio: Union[float, tf.Tensor] = 0.0,
) -> tuple:
    """One natural-parameter step of whitened q(v) = N(q_mu, q_sqrt q_sqrtᵀ).

    :param statistics: the batch's :func:`conjugate_statistics`.
    :param scale: num_data / batch size.
    :param step_size: ρ in (0, 1], for all classes or one per class.
    :param min_precision_ratio: κ ≥ 0; a class whose new precision is not ⪰ κ times its current
        one fails (module docstring). 0 tests nothing beyond positive definiteness.
    :return: the new (q_mu, q_sqrt); NaN in the classes whose new precision has no Cholesky factor
        or fails κ.
    """
    q_mu, q_sqrt = tf.convert_to_tensor(q_mu), tf.convert_to_tensor(q_sqrt)
    rho = tf.broadcast_to(_as_dtype_of(step_size, q_mu), tf.shape(q_sqrt)[:1])
    return _mixed_step(
        _natural_parameters(q_mu, q_sqrt), statistics, scale, rho, min_precision_ratio
    )


@check_shapes(
    "precision: [C, M, M]",
    "shift: [M, C]",
    "return[0]: [M, C]",
    "return[1]: [C, M, M]",
)
def mean_and_sqrt(precision: tf.Tensor, shift: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """(mean [M, C], lower-triangular square root [C, M, M] of the covariance) of the Gaussians
    with natural parameters (Λ, η): Λ⁻¹η and a factor of Λ⁻¹; NaN where Λ has no Cholesky
    factor."""
    # The lower-triangular square root of Λ⁻¹ from one Cholesky factorisation (GPflow's
    # natural_to_meanvarsqrt needs two and an M³ product): with P the exchange matrix,
    # PΛP = R Rᵀ gives Λ⁻¹ = (P R⁻ᵀ P)(P R⁻ᵀ P)ᵀ, and P R⁻ᵀ P is lower triangular.
    eye = tf.eye(
        tf.shape(precision)[-1], batch_shape=tf.shape(precision)[:1], dtype=precision.dtype
    )
    reversed_factor = tf.linalg.cholesky(tf.reverse(precision, axis=[-2, -1]))
    reversed_inverse = tf.linalg.triangular_solve(reversed_factor, eye, lower=True)
    sqrt = tf.reverse(tf.linalg.matrix_transpose(reversed_inverse), axis=[-2, -1])
    mean = tf.linalg.matvec(sqrt, tf.linalg.matvec(sqrt, tf.transpose(shift), transpose_a=True))
    return tf.transpose(mean), sqrt


@check_shapes(
    "q_mu: [M, C]",
    "q_sqrt: [C, M, M]",
    "statistics[0]: [C, M, M]",
    "statistics[1]: [M, C]",
    "scale: []",
    "step_size: []",
    "min_precision_ratio: []",
    "return[0]: [M, C]",
    "return[1]: [C, M, M]",
    "return[2]: [C]",
)
def natural_parameter_step_with_backoff(
    q_mu: tf.Tensor,
    q_sqrt: tf.Tensor,
    statistics: tuple,
    scale: tf.Tensor,
    step_size: tf.Tensor,
    min_precision_ratio: Union[float, tf.Tensor] = 0.0,
    max_backoffs: int = _MAX_BACKOFFS,
    mean_statistics: Optional[tuple] = None,
) -> tuple:
    """:func:`natural_parameter_step`, with ρ halved (up to ``max_backoffs`` times) in each class
    whose new precision is not positive definite (or not ⪰ ``min_precision_ratio`` times the
    current one).

    :param mean_statistics: the :func:`conjugate_statistics` of other sites, whose step at each
        class's ρ as taken gives the new mean instead (their precision must be ⪰ 0).
    :return: the new (q_mu, q_sqrt) and each class's ρ as taken; a class that still fails after
        the last halving is NaN, which the caller refuses.
    """

    def failed(mu: tf.Tensor, sqrt: tf.Tensor) -> tf.Tensor:
        return ~(
            tf.reduce_all(tf.math.is_finite(mu), axis=0)
            & tf.reduce_all(tf.math.is_finite(sqrt), axis=[-2, -1])
        )

    q_mu, q_sqrt = tf.convert_to_tensor(q_mu), tf.convert_to_tensor(q_sqrt)
    rho = tf.broadcast_to(_as_dtype_of(step_size, q_mu), tf.shape(q_sqrt)[:1])
    # The current natural parameters do not depend on ρ: computed once, outside the retries.
    current = _natural_parameters(q_mu, q_sqrt)
    mu, sqrt = _mixed_step(current, statistics, scale, rho, min_precision_ratio)

    def retry(tries, rho, mu, sqrt):  # type: ignore[no-untyped-def]
        retrying = failed(mu, sqrt)
        rho = tf.where(retrying, rho / 2, rho)
        retry_mu, retry_sqrt = _mixed_step(current, statistics, scale, rho, min_precision_ratio)
        mu = tf.where(retrying[None, :], retry_mu, mu)
        sqrt = tf.where(retrying[:, None, None], retry_sqrt, sqrt)
        return tries + 1, rho, mu, sqrt

    _, rho, mu, sqrt = tf.while_loop(
        lambda tries, rho, mu, sqrt: (tries < max_backoffs) & tf.reduce_any(failed(mu, sqrt)),
        retry,
        (tf.constant(0), rho, mu, sqrt),
    )
    if mean_statistics is not None:
        mu = _mixed_mean(current, mean_statistics, scale, rho)
    return mu, sqrt, rho


def _as_dtype_of(step_size: object, like: tf.Tensor) -> tf.Tensor:
    # dtype_hint: a Python float must not pass through float32 on its way to float64.
    return tf.cast(tf.convert_to_tensor(step_size, dtype_hint=like.dtype), like.dtype)


def minibatch_scale(num_data: Optional[int], batch_size: tf.Tensor) -> tf.Tensor:
    """N / B, the weight that makes a batch of ``batch_size`` points' sum estimate the sum over all
    ``num_data`` (1 when num_data is not given: the batch is the data)."""
    if num_data is None:
        return tf.constant(1.0, dtype=default_float())
    return tf.cast(num_data, default_float()) / batch_size


def is_full_batch(num_data: Optional[int], points: Optional[int]) -> Optional[bool]:
    """Whether a batch of ``points`` is the full data, N / B = 1, as known at trace time (the
    static twin of :func:`minibatch_scale`): ``None`` where the batch's size is unknown; without
    ``num_data`` every batch is."""
    if num_data is None:
        return True
    if points is None:
        return None
    dtype = default_float()
    # The run-time test's own arithmetic: N and B cast to the float type, then divided.
    return bool(np.asarray(num_data, dtype) / np.asarray(points, dtype) == 1)


def batch_elbo(geometry: BatchGeometry, local_sum: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
    """The ELBO from a batch's summed local terms: ``local_sum`` times ``scale`` (N / B), minus
    the KL (C/|K| times on the geometry's class subset)."""
    return local_sum * scale - subset_scale(geometry.marginals.subset) * gauss_kl(
        geometry.q_mu, geometry.q_sqrt
    )


def batch_size(X: tf.Tensor) -> tf.Tensor:
    """The number of points in ``X`` (a replica's own shard under a ``tf.distribute`` strategy),
    as a float of the model's dtype."""
    return tf.cast(tf.shape(X)[0], default_float())


class BatchStatistics(NamedTuple):
    """A batch's sums for :func:`natural_step`, summed over the replicas
    (:func:`batch_statistics`)."""

    #: Σ of the points' local ELBO
    local_sum: tf.Tensor
    #: how many of the sites are negative
    negative_sites: tf.Tensor
    #: the estimate of the data's :func:`conjugate_statistics` of the sites (scaled to the data)
    covariance: Tuple[tf.Tensor, tf.Tensor]
    #: the same of the sites that give q(u)'s mean, where they differ; else ``None``
    mean: Optional[Tuple[tf.Tensor, tf.Tensor]]


@check_shapes(
    "local_elbo: [N]",
    "linear: [N, K]",
    "quadratic: [N, K]",
    "scale: []",
    "labels: [N, K] if labels is not None",
)
def batch_statistics(
    geometry: BatchGeometry,
    local_elbo: tf.Tensor,
    linear: tf.Tensor,
    quadratic: tf.Tensor,
    *,
    scale: tf.Tensor,
    mean_sites: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    strata: Optional[LabelStrata] = None,
    labels: Optional[tf.Tensor] = None,
) -> Tuple[BatchStatistics, Tuple[StrataEstimate, ...], Optional[tf.Tensor]]:
    """(the batch's :class:`BatchStatistics`, the strata's estimates of its statistics sets, the
    batch's class counts): the sums over the batch, all-reduced first under a ``tf.distribute``
    strategy so every replica holds the same, and the data's statistics estimated from them: N / B
    times the batch's, or with ``strata`` and the batch's one-hot ``labels``, by
    :func:`~gpflow_augmented.strata.stratified_estimate` (then also the estimates, for
    :meth:`~gpflow_augmented.strata.LabelStrata.step`, and the counts).

    The sites are coefficients of f, and q(u) is over f minus the prior mean μ:
    linear·f - quadratic·f²/2 = (linear - quadratic·μ)·(f - μ) - quadratic·(f - μ)²/2 + const."""

    sets = [(linear, quadratic)] + ([mean_sites] if mean_sites is not None else [])
    centred = [(lin - quad * geometry.prior_mean, quad) for lin, quad in sets]
    negative_sites = tf.reduce_sum(tf.cast(quadratic < 0.0, local_elbo.dtype))
    sums: list = [tf.reduce_sum(local_elbo), negative_sites]
    sums += [conjugate_statistics(geometry.A, *sites) for sites in centred]
    if strata is not None:
        assert labels is not None
        sums += [own_class_statistics(geometry.A, *sites, labels) for sites in centred]
        sums.append(tf.reduce_sum(labels, axis=0))
    local_sum, negative_sites, *summed = replica_sum(tuple(sums))
    totals = summed[: len(sets)]
    if strata is None:
        estimates = [(scale * precision, scale * nat1) for precision, nat1 in totals]
        strata_estimates: Tuple[StrataEstimate, ...] = ()
        counts = None
    else:
        counts = summed[-1]
        owns = summed[len(sets) : 2 * len(sets)]
        strata_estimates = strata.estimates(totals, owns, counts, scale * tf.reduce_sum(counts))
        estimates = [estimate.estimate for estimate in strata_estimates]
    statistics = BatchStatistics(
        local_sum, negative_sites, estimates[0], estimates[1] if mean_sites is not None else None
    )
    return statistics, strata_estimates, counts


@check_shapes(
    "statistics.local_sum: []",
    "scale: []",
    "step_size: []",
    "return[0]: [M, K]",
    "return[1]: [K, M, M]",
    "return[2]: []",
)
def natural_step(
    geometry: BatchGeometry,
    statistics: BatchStatistics,
    *,
    scale: tf.Tensor,
    step_size: tf.Tensor,
    whiten: bool,
    trust_region: bool = True,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(q_mu, q_sqrt) as stored after a step of size ρ from the batch's
    :func:`batch_statistics`, and the batch ELBO before it. Where the statistics have a ``mean``,
    the new mean is their step's, at the ρ the covariance's step took
    (:meth:`~gpflow_augmented.bounds.Bound.mean_sites`).

    ``geometry`` is the batch's :class:`~gpflow_augmented.projection.BatchGeometry` (its class
    subset weighs the KL by C/|K|); ``scale`` is N / B, B the global batch size.

    ``trust_region=False`` (at trace time) says the minibatch trust region can never apply: the
    sites are never negative (an augmented bound's θ is an expectation of a positive variable) or
    the batch is the full data; the step then leaves its factorisation out."""
    elbo = batch_elbo(geometry, statistics.local_sum, scale)
    min_precision_ratio: Union[float, tf.Tensor] = 0.0
    if trust_region:
        applies = (scale > 1.0) & (statistics.negative_sites > 0.0)
        min_precision_ratio = tf.where(applies, MIN_PRECISION_RATIO, 0.0)
    # The statistics are already the data's estimates: their scale is one.
    unit = tf.ones_like(scale)
    new_mu, new_sqrt, _ = natural_parameter_step_with_backoff(
        geometry.q_mu,
        geometry.q_sqrt,
        statistics.covariance,
        scale=unit,
        step_size=step_size,
        min_precision_ratio=min_precision_ratio,
        mean_statistics=statistics.mean,
    )
    new_mu, new_sqrt = unwhitened_q(geometry.L, new_mu, new_sqrt, whiten)
    return new_mu, new_sqrt, elbo


def class_weight_step(
    weights: tf.Tensor,
    running_exposure: tf.Tensor,
    counts: tf.Tensor,
    exposure: tf.Tensor,
    scale: tf.Tensor,
    step_size: tf.Tensor,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(θ, the running exposure, whether both are valid) after a step of size ρ on the class
    weights θ [C], from the batch's counts n and exposures e [C]
    (:meth:`~gpflow_augmented.likelihoods.LogisticSoftmax.class_weight_statistics`, at q(u) before
    the step) and the running exposure b (0 before the first step).

    With q(u) fixed, the ELBO's θ-part Σ_k n_k log θ_k - Σ_i log Σ_c θ_c σ_ic is minorised by the
    Gamma augmentation 1/D = ∫ exp(-λD) dλ at its optimal q(λ), which is linear in θ: Σ_k
    (n_k log θ_k - θ_k e_k). Its maximiser θ_k = n_k / e_k is the MM update (the ELBO cannot
    decrease; θ is stationary exactly when Σ_i E p(y=k) = n_k). On minibatches the two sums are
    SVI statistics averaged with step ρ, as q(u)'s natural parameters are:
    b ← (1-ρ) b + ρ N/B e, a ← (1-ρ) θ b + ρ N/B n, θ ← a / b."""
    rho = tf.cast(step_size, exposure.dtype)
    # The first step starts the running exposure at the batch's, so that it too mixes θ by ρ.
    old = tf.where(tf.reduce_all(running_exposure == 0.0), scale * exposure, running_exposure)
    new_exposure = (1.0 - rho) * old + rho * scale * exposure
    new_weights = ((1.0 - rho) * weights * old + rho * scale * counts) / new_exposure
    # A class absent from the data would drive its θ to 0 (log θ = -inf); 1e-8 of the largest
    # is a class the model already treats as absent.
    new_weights = tf.maximum(new_weights, 1e-8 * tf.reduce_max(new_weights))
    valid = (
        tf.reduce_all(tf.math.is_finite(new_weights))
        & tf.reduce_all(new_weights > 0.0)
        & tf.reduce_all(new_exposure > 0.0)
    )
    return new_weights, new_exposure, valid


def update_class_weights(
    likelihood: Any,
    running_exposure: tf.Variable,
    batch: Tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor],
    accepted: tf.Tensor,
) -> None:
    """Assign the likelihood's class weights θ and their ``running_exposure`` after the step of
    :func:`class_weight_step` from ``batch`` = (labels Y, the gradient of the batch's local ELBO
    with respect to log θ at q(u) before the step, N / B, ρ); a refused step (not ``accepted``)
    or an invalid result assigns nothing."""
    Y, log_weight_gradient, scale, step_size = batch
    weights = likelihood.class_weights
    counts, exposure = likelihood.class_weight_statistics(Y, log_weight_gradient)
    new_weights, new_exposure, valid = class_weight_step(
        weights, running_exposure, counts, exposure, scale, step_size
    )
    valid &= accepted
    weights.assign(tf.where(valid, new_weights, weights))
    running_exposure.assign(tf.where(valid, new_exposure, running_exposure))


def class_weight_exposure(model: Any, class_subset_size: Optional[int]) -> Optional[tf.Variable]:
    """The class weights' SVI state for an optimizer of ``model``: their running exposure (0 until
    the first step) where the model learns them, else ``None``."""
    if not model.learns_class_weights:
        return None
    if class_subset_size is not None:
        raise ValueError(
            "class weights are updated from every class's statistics; they "
            "cannot be learned with class_subset_size"
        )
    return tf.Variable(
        tf.zeros([model.num_classes], default_float()),
        trainable=False,
        name="class_weight_exposure",
    )
