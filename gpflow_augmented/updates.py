r"""
The global update of q(u): a step of size ρ in natural parameters towards the conjugate optimum,
and the kernel variance's update beside it.

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

The kernel variance σ² moves beside the step, in closed form too (:func:`variance_update`). The
logistic-softmax likelihood is confident only where the latents are large, so on cleanly
separated classes the ELBO wants σ² in the hundreds. Adam on a softplus-transformed σ² moves it
by about its learning rate per step, and the variance is still climbing when training stops. This
update moves it with q(u), in closed form, at every step.

For a kernel K = σ² K̃ (a stationary kernel: K̃ does not depend on σ²), expand the parameters: scale
the unwhitened q(u^c) = N(μ_c, S_c) by α (u → α u) and write σ² = α² w. The KL term then depends
only on w, and the expected log-likelihood on both, through the marginals: the mean m + α f̄ (m the
prior mean, f̄ what q(u) adds) and the variance α² (v + w r̃), v the variance q(u) explains and r̃ =
k̃_ii - k̃_iᵀ K̃⁻¹ k̃_i the residual per unit σ². With n classes sharing the kernel, M inducing
points and T = Σ_c tr(K̃⁻¹ S_c) + μ_cᵀ K̃⁻¹ μ_c, and the expected log-likelihood replaced by the
step's sites' quadratic model Σ_ic s (ℓ_ic f_ic - θ_ic f_ic² / 2) (s = N / B; on the exact bound the
sites are its derivatives, so the model has the same gradient at the current q), the stationary
conditions are

    ∂/∂w = 0:   g α² w² + n M w - T = 0,                   g = Σ_ic s θ_ic r̃_i,
    ∂/∂α = 0:   α = Σ_ic s (ℓ_ic - θ_ic m_ic) f̄_ic / (Σ_ic s θ_ic (f̄_ic² + v_ic) + w g).

The first is the EM step T / (n M) corrected for the residual; its root is w = 2T / (n M +
√((n M)² + 4 g α² T)). The second is a Newton step along the direction that scales the latent
functions, which is the one that grows σ² quickly on separable data (holding u fixed, as EM does,
moves σ² only as fast as q(u) follows). One pass solves w at α = 1, then α, then w again. α is taken
as α^ρ with the step's ρ (its estimate is as noisy as the batch, as q(u)'s statistics are) and
within a factor of 2 (the sites' model is local). At a fixed point α = 1 and both conditions hold,
so the ELBO's gradient with respect to σ² is zero there.

In whitened coordinates v = L⁻¹u with L = σ L̃, T = σ² Σ_c (‖v̄_c‖² + ‖S_v^{1/2}‖²_F), and the new
q(v) is the old times σ_old / √w (α cancels), at the cost of reading q(v). GPflow's jitter ε I added
to K_mm is not scaled by σ²; the update treats it as part of σ² K̃, which is exact where ε is small
against σ² times K̃'s smallest eigenvalue and approximate in the directions it dominates (which the
data do not inform).
"""

from typing import List, NamedTuple, Optional, Tuple, Union

import tensorflow as tf
from check_shapes import check_shapes
from gpflow import Parameter
from gpflow.config import default_float
from gpflow.kernels import Kernel, SeparateIndependent, SharedIndependent, Stationary
from gpflow.kullback_leiblers import gauss_kl

from .class_subsets import subset_scale
from .distributed import replica_sum
from .projection import BatchGeometry, unwhitened_q, whitened_q

__all__ = [
    "batch_elbo",
    "batch_size",
    "conjugate_statistics",
    "mean_and_sqrt",
    "minibatch_scale",
    "natural_parameter_step",
    "natural_parameter_step_with_backoff",
    "natural_step",
    "variance_parameters",
    "variance_step",
    "variance_update",
]

MAX_BACKOFFS = 12

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
    max_backoffs: int = MAX_BACKOFFS,
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


@check_shapes(
    "local_elbo: [N]",
    "linear: [N, K]",
    "quadratic: [N, K]",
    "scale: []",
    "step_size: []",
    "return[0]: [M, K]",
    "return[1]: [K, M, M]",
    "return[2]: []",
)
def natural_step(
    geometry: BatchGeometry,
    local_elbo: tf.Tensor,
    linear: tf.Tensor,
    quadratic: tf.Tensor,
    *,
    scale: tf.Tensor,
    step_size: tf.Tensor,
    whiten: bool,
    trust_region: bool = True,
    mean_sites: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(q_mu, q_sqrt) as stored after a step of size ρ from the batch's sites, and the batch ELBO
    before it. Given ``mean_sites`` (linear, quadratic), the new mean is their step's, at the ρ
    the covariance's step took (:meth:`~gpflow_augmented.bounds.Bound.mean_sites`). Under a
    ``tf.distribute`` strategy the sums over the batch (the statistics and the local ELBO) are
    all-reduced first, so every replica returns the same.

    ``geometry`` is the batch's :class:`~gpflow_augmented.projection.BatchGeometry` (its class
    subset weighs the KL by C/|K|); ``scale`` is N / B, B the global batch size. The sites are
    coefficients of f, and q(u) is over f minus the prior mean μ:
    linear·f - quadratic·f²/2 = (linear - quadratic·μ)·(f - μ) - quadratic·(f - μ)²/2 + const.

    ``trust_region=False`` (at trace time) says the minibatch trust region can never apply: the
    sites are never negative (an augmented bound's θ is an expectation of a positive variable) or
    the batch is the full data; the step then leaves its factorisation out."""

    def centred_statistics(linear: tf.Tensor, quadratic: tf.Tensor) -> tuple:
        return conjugate_statistics(geometry.A, linear - quadratic * geometry.prior_mean, quadratic)

    negative_sites = tf.reduce_sum(tf.cast(quadratic < 0.0, local_elbo.dtype))
    sums = [tf.reduce_sum(local_elbo), negative_sites, centred_statistics(linear, quadratic)]
    if mean_sites is not None:
        sums.append(centred_statistics(*mean_sites))
    local_sum, negative_sites, statistics, *mean_statistics = replica_sum(tuple(sums))
    elbo = batch_elbo(geometry, local_sum, scale)
    min_precision_ratio: Union[float, tf.Tensor] = 0.0
    if trust_region:
        applies = (scale > 1.0) & (negative_sites > 0.0)
        min_precision_ratio = tf.where(applies, MIN_PRECISION_RATIO, 0.0)
    new_mu, new_sqrt, _ = natural_parameter_step_with_backoff(
        geometry.q_mu,
        geometry.q_sqrt,
        statistics,
        scale=scale,
        step_size=step_size,
        min_precision_ratio=min_precision_ratio,
        mean_statistics=mean_statistics[0] if mean_statistics else None,
    )
    new_mu, new_sqrt = unwhitened_q(geometry.L, new_mu, new_sqrt, whiten)
    return new_mu, new_sqrt, elbo


def variance_parameters(kernel: Kernel) -> Optional[List[Parameter]]:
    """The variance σ² of each prior of a model's kernel (one for a kernel shared by all classes,
    one per class for :class:`gpflow.kernels.SeparateIndependent`), when every one of them scales
    a stationary kernel and has no prior of its own; ``None`` otherwise (the update does not apply:
    Adam trains the variance with the other hyperparameters)."""
    if isinstance(kernel, SharedIndependent):
        kernel = kernel.kernel
    kernels = kernel.kernels if isinstance(kernel, SeparateIndependent) else [kernel]
    if not all(isinstance(k, Stationary) for k in kernels):
        return None
    variances = [k.variance for k in kernels]
    if any(v.prior is not None or v.shape.rank != 0 for v in variances):
        return None
    return variances


# The scaling step's trust region: its quadratic model of the likelihood (the sites) is local, so
# one step scales the latent functions by at most a factor of 2 either way.
MAX_LOG_SCALING = 0.6931471805599453


@check_shapes(
    "variance: [P]",
    "whitened_second_moment: [P]",
    "residual_precision: [P]",
    "alignment: [P]",
    "curvature: [P]",
    "step_size: []",
    "return[0]: [P]",
    "return[1]: [P]",
    "return[2]: [P]",
)
def variance_update(
    variance: tf.Tensor,
    whitened_second_moment: tf.Tensor,
    residual_precision: tf.Tensor,
    alignment: tf.Tensor,
    curvature: tf.Tensor,
    num_inducing: tf.Tensor,
    classes_per_prior: int,
    step_size: tf.Tensor,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(σ², w, α) [P] of the update (module docstring), for P priors, each shared by
    ``classes_per_prior`` classes.

    :param variance: the current σ².
    :param whitened_second_moment: Σ_c ‖v̄_c‖² + ‖S_v^{1/2}‖²_F of the new q(v), per prior.
    :param residual_precision: g = Σ_ic s θ_ic r̃_i.
    :param alignment: Σ_ic s (ℓ_ic - θ_ic m_ic) f̄_ic.
    :param curvature: Σ_ic s θ_ic (f̄_ic² + v_ic).
    :param num_inducing: M.
    :param step_size: ρ, to which α is raised.
    """
    T = variance * whitened_second_moment
    nM = tf.cast(num_inducing * classes_per_prior, variance.dtype)

    def ratio(scaling: tf.Tensor) -> tf.Tensor:
        discriminant = nM**2 + 4.0 * residual_precision * tf.square(scaling) * T
        # A negative g (sites that are not all log-concave) can leave no root: the two have merged
        # at 2T / (nM), where the gradient is smallest.
        return 2.0 * T / (nM + tf.sqrt(tf.maximum(discriminant, 0.0)))

    scaling = alignment / (curvature + ratio(tf.ones_like(T)) * residual_precision)
    # A model with no curvature or no alignment (q(u) at its prior) says nothing about the scale.
    scaling = tf.where(tf.math.is_finite(scaling) & (scaling > 0.0), scaling, 1.0)
    log_scaling = tf.clip_by_value(tf.math.log(scaling), -MAX_LOG_SCALING, MAX_LOG_SCALING)
    scaling = tf.exp(tf.cast(step_size, variance.dtype) * log_scaling)
    w = ratio(scaling)
    return tf.square(scaling) * w, w, scaling


@check_shapes(
    "old_variance: [P]",
    "new_mu: [M, C]",
    "new_sqrt: [C, M, M]",
    "linear: [N, C]",
    "quadratic: [N, C]",
    "return[0]: [M, C]",
    "return[1]: [C, M, M]",
    "return[2]: [P]",
)
def variance_step(
    geometry: BatchGeometry,
    old_variance: tf.Tensor,
    new_mu: tf.Tensor,
    new_sqrt: tf.Tensor,
    linear: tf.Tensor,
    quadratic: tf.Tensor,
    scale: tf.Tensor,
    step_size: tf.Tensor,
    whiten: bool,
    fraction: Union[float, tf.Tensor] = 1.0,
    running_statistics: Optional[tf.Tensor] = None,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """(q_mu, q_sqrt as stored, σ² [P], the statistics [3, P]) after :func:`variance_update`
    beside the proposed q(u) (``new_mu``, ``new_sqrt``): the update's statistics (g, the
    alignment, the curvature) from the batch's ``geometry`` and the step's sites ``linear``,
    ``quadratic`` (scaled by ``scale`` = N / B and summed over the replicas), for P priors of
    variance ``old_variance`` (P = 1: one shared by all C classes).

    ``running_statistics`` are the statistics of the steps before: the batch's are mixed into
    them by ρ, as q(u)'s natural parameters are (all zeros: none yet, the batch's are taken). Each
    batch's sums estimate the full data's N / B times over, and g moves w in full at every step,
    so without the average a minibatch's noise moves σ² by tens of per cent a step whatever ρ
    (measured on kddcup); with it the noise shrinks with ρ, and at the fixed point the average is
    the full data's.

    ``fraction`` t ∈ (0, 1] takes that part of the EM ratio's move in log space, w ← σ²(w /
    σ²)^t, as a line search that halves ρ does (α already moves as α^ρ): at t → 0 the update
    vanishes, so a short enough step always ascends."""
    num_latent_gps = new_sqrt.shape[0]
    mean, sqrt = whitened_q(geometry.L, new_mu, new_sqrt, whiten)
    moment = tf.reduce_sum(tf.square(mean), axis=0) + tf.reduce_sum(tf.square(sqrt), [-2, -1])
    residual = tf.broadcast_to(geometry.residual, tf.shape(quadratic))  # [N, C]
    unit_residual = residual / old_variance
    centred = geometry.marginals.mean - geometry.prior_mean
    centred_linear = linear - quadratic * geometry.prior_mean
    sums = replica_sum(
        scale
        * tf.stack(
            [
                tf.reduce_sum(quadratic * unit_residual, axis=0),
                tf.reduce_sum(centred_linear * centred, axis=0),
                tf.reduce_sum(
                    quadratic * (tf.square(centred) + geometry.marginals.variance - residual),
                    axis=0,
                ),
            ]
        )
    )  # [3, C]
    shared = old_variance.shape[0] == 1
    if shared:
        moment, sums = tf.reduce_sum(moment, keepdims=True), tf.reduce_sum(sums, -1, True)
    if running_statistics is not None:
        rho = _as_dtype_of(step_size, sums)
        first = tf.reduce_all(running_statistics == 0.0)
        sums = tf.where(first, sums, (1.0 - rho) * running_statistics + rho * sums)
    residual_precision, alignment, curvature = tf.unstack(sums)
    new, ratio, scaling = variance_update(
        old_variance,
        moment,
        residual_precision,
        alignment,
        curvature,
        tf.shape(mean)[0],
        num_latent_gps if shared else 1,
        step_size,
    )
    if not (isinstance(fraction, float) and fraction == 1.0):
        ratio = old_variance * tf.exp(
            _as_dtype_of(fraction, ratio) * tf.math.log(ratio / old_variance)
        )
        new = tf.square(scaling) * ratio
    # Whitened, q(v) follows u = α u_q at σ = α √w; unwhitened, u itself scales.
    factor = tf.sqrt(old_variance / ratio) if whiten else scaling
    factor = tf.broadcast_to(factor, [num_latent_gps])
    return new_mu * factor, new_sqrt * factor[:, None, None], new, sums
