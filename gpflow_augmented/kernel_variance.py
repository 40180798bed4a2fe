r"""
The kernel variance σ² of a stationary kernel, moved in closed form beside q(u)'s step.

The kernel variance σ² moves beside q(u)'s step (:mod:`~gpflow_augmented.updates`), in closed form
too (:func:`variance_update`). The
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

from typing import List, Optional, Tuple, Union

import tensorflow as tf
from check_shapes import check_shapes
from gpflow import Parameter
from gpflow.kernels import Kernel, SeparateIndependent, SharedIndependent, Stationary

from .distributed import replica_sum
from .projection import BatchGeometry, whitened_q
from .updates import _as_dtype_of

__all__ = ["updated_variances", "variance_parameters", "variance_step", "variance_update"]


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
_MAX_LOG_SCALING = 0.6931471805599453


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
    log_scaling = tf.clip_by_value(tf.math.log(scaling), -_MAX_LOG_SCALING, _MAX_LOG_SCALING)
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


def updated_variances(
    kernel: Kernel, update_variance: Optional[bool], class_subsets: bool
) -> List[Parameter]:
    """The kernel variances to update in closed form: ``update_variance=False`` none; ``True``
    those of :func:`variance_parameters`, or a clear error where the update cannot apply; ``None``
    those wherever it applies (every variance trainable, all classes updated at each step)."""
    variances = variance_parameters(kernel)
    if update_variance is None:
        return (
            variances
            if variances is not None and not class_subsets and all(v.trainable for v in variances)
            else []
        )
    if not update_variance:
        return []
    if variances is None:
        raise ValueError(
            "update_variance=True needs a kernel K = σ² K̃ whose variance σ² has no prior: a "
            "gpflow.kernels.Stationary kernel, shared or one per class (SeparateIndependent); "
            f"got {type(kernel).__name__}. Leave update_variance=None to let Adam "
            "train the variance"
        )
    if class_subsets:
        raise ValueError(
            "update_variance=True cannot be combined with class_subset_size: the "
            "variance's update needs every class's q(u)"
        )
    return variances
