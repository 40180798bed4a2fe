r"""
The global update of q(u): a step of size ρ in natural parameters towards the conjugate optimum.

Given the local parameters, the augmented ELBO is quadratic in f: per point and class it contributes
``(y - γ) f/2 - θ f²/2``. In whitened coordinates (u = L v, f = Aᵀ v + residual) with a minibatch
scale s = N / B, the optimal q(v^c) has

    Λ̂^c = I + s A diag(θ^c) Aᵀ,    η̂₁^c = s A (y^c - γ^c) / 2,

and the stochastic-variational step mixes natural parameters, η ← (1 - ρ) η + ρ η̂ (Hoffman et al.
2013). ρ = 1 on the full data is exact coordinate ascent. Because Λ̂ ⪰ I, the precision stays
well-conditioned whatever the kernel.
"""
import tensorflow as tf
from check_shapes import check_shapes

__all__ = ["conjugate_statistics", "natural_parameter_step"]


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


@check_shapes(
    "q_mu: [M, C]",
    "q_sqrt: [C, M, M]",
    "statistics[0]: [C, M, M]",
    "statistics[1]: [M, C]",
    "scale: []",
    "step_size: []",
    "return[0]: [M, C]",
    "return[1]: [C, M, M]",
)
def natural_parameter_step(
    q_mu: tf.Tensor,
    q_sqrt: tf.Tensor,
    statistics: tuple,
    scale: tf.Tensor,
    step_size: tf.Tensor,
) -> tuple:
    """One natural-parameter step of whitened q(v) = N(q_mu, q_sqrt q_sqrtᵀ).

    :param statistics: the batch's :func:`conjugate_statistics`.
    :param scale: num_data / batch size.
    :param step_size: ρ in (0, 1].
    :return: the new (q_mu, q_sqrt).
    """
    precision_sum, nat1_sum = statistics
    eye = tf.eye(tf.shape(q_mu)[0], batch_shape=tf.shape(q_sqrt)[:1], dtype=q_mu.dtype)
    # Current natural parameters: Λ = S⁻¹ = L⁻ᵀ L⁻¹ (L = q_sqrt) and η₁ = Λ μ.
    sqrt_inverse = tf.linalg.triangular_solve(q_sqrt, eye, lower=True)
    old_precision = tf.linalg.matmul(sqrt_inverse, sqrt_inverse, transpose_a=True)
    old_nat1 = tf.linalg.matvec(old_precision, tf.transpose(q_mu))  # [C, M]
    precision = (1 - step_size) * old_precision + step_size * (eye + scale * precision_sum)
    nat1 = (1 - step_size) * old_nat1 + step_size * scale * tf.transpose(nat1_sum)
    # The lower-triangular square root of Λ⁻¹ from one Cholesky factorisation (GPflow's
    # natural_to_meanvarsqrt needs two and an M³ product): with P the exchange matrix,
    # PΛP = R Rᵀ gives Λ⁻¹ = (P R⁻ᵀ P)(P R⁻ᵀ P)ᵀ, and P R⁻ᵀ P is lower triangular.
    reversed_factor = tf.linalg.cholesky(tf.reverse(precision, axis=[-2, -1]))
    reversed_inverse = tf.linalg.triangular_solve(reversed_factor, eye, lower=True)
    new_sqrt = tf.reverse(tf.linalg.matrix_transpose(reversed_inverse), axis=[-2, -1])
    new_mu = tf.linalg.matvec(new_sqrt, tf.linalg.matvec(new_sqrt, nat1, transpose_a=True))
    return tf.transpose(new_mu), new_sqrt
