"""
The whitened geometry of a GP prior with inducing inputs, shared by the variational model and the
samplers.

With L Lᵀ = K_zz + jitter and v = L⁻¹u ~ N(0, I), the latent values at inputs X are
f = Aᵀv + r with A = L⁻¹K_zx and r ~ N(0, diag(K_xx - AᵀA)) independent of v. Taking Z = X gives
the full GP (A = Lᵀ up to the jitter, r ≈ 0).
"""

from typing import NamedTuple, Optional, Tuple

import tensorflow as tf
from check_shapes import check_shapes
from gpflow import covariances
from gpflow.base import InputData
from gpflow.config import default_jitter
from gpflow.inducing_variables import (
    InducingPoints,
    InducingVariables,
    SeparateIndependentInducingVariables,
    SharedIndependentInducingVariables,
)
from gpflow.kernels import Kernel, MultioutputKernel, SeparateIndependent, SharedIndependent

from .likelihoods.base import Marginals

__all__ = [
    "BatchGeometry",
    "canonical_kernel_and_inducing",
    "inducing_inputs",
    "kuu_cholesky",
    "label_marginals",
    "marginals",
    "unwhitened_q",
    "whitened_projection",
    "whitened_q",
    "geometry_at",
]


class BatchGeometry(NamedTuple):
    """A batch's sparse-GP quantities (:meth:`~gpflow_augmented.AugmentedSVGP.batch_geometry`)."""

    L: tf.Tensor  # Cholesky factor of K_mm + jitter [P, M, M], P = 1 if the classes share it
    q_mu: tf.Tensor  # whitened q(v) mean [M, K]
    q_sqrt: tf.Tensor  # whitened q(v) square root [K, M, M]
    # q(f)'s marginals [N, K] (the prior mean included) and the class subset they are of, with
    # each point's observed class's marginals on a subset given the labels
    marginals: Marginals
    A: tf.Tensor  # whitened projection L⁻¹ K_mn [P, M, N]
    prior_mean: tf.Tensor  # the mean function at the batch [N, 1] (shared) or [N, K], in the mean
    residual: tf.Tensor  # diag(K_nn - Aᵀ A) [N, P], the variance of f that q(u) does not explain


def kuu_cholesky(kernel: Kernel, inducing_variable: InducingVariables) -> tf.Tensor:
    """Cholesky factor of K_zz + jitter: [1, M, M] if shared by all classes, else [C, M, M]."""
    Kmm = covariances.Kuu(inducing_variable, kernel, jitter=default_jitter())
    return tf.linalg.cholesky(Kmm if Kmm.shape.rank == 3 else Kmm[None])


@check_shapes(
    "X: [N, D]",
    "return[0]: [P, M, M]",
    "return[1]: [P, M, N]",
    "return[2]: [N, P]",
)
def whitened_projection(
    kernel: Kernel,
    inducing_variable: InducingVariables,
    X: InputData,
    num_classes: int,
    broadcast: bool = True,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(L, A, r): L Lᵀ = K_zz + jitter, A = L⁻¹ K_zx and r = diag(K_xx - AᵀA), per class.

    With ``broadcast=False`` a prior shared by all classes is returned once (P = 1) rather than
    copied C times (P = C), for callers whose operations broadcast."""
    L = kuu_cholesky(kernel, inducing_variable)  # [1 or C, M, M]
    Kmn = covariances.Kuf(inducing_variable, kernel, X)
    if isinstance(kernel, MultioutputKernel):
        Knn = tf.transpose(kernel(X, full_cov=False, full_output_cov=False))  # [C, N]
    else:
        Knn = kernel(X, full_cov=False)[None, :]  # [1, N]
    if Kmn.shape.rank == 2:
        Kmn = Kmn[None]  # [1, M, N]: shared by all classes
    A = tf.linalg.triangular_solve(L, Kmn, lower=True)
    residual = Knn - tf.reduce_sum(tf.square(A), axis=-2)  # [1 or C, N]
    if not broadcast:
        return L, A, tf.transpose(residual)
    M, N = tf.shape(A)[1], tf.shape(A)[2]
    L = tf.broadcast_to(L, [num_classes, M, M])
    A = tf.broadcast_to(A, [num_classes, M, N])
    residual = tf.broadcast_to(tf.transpose(residual), [N, num_classes])
    return L, A, residual


def inducing_inputs(inducing_variable: InducingVariables) -> tf.Tensor:
    """The inducing inputs Z (the first set, for separate inducing variables)."""
    if isinstance(inducing_variable, InducingPoints):
        return inducing_variable.Z
    if isinstance(inducing_variable, SharedIndependentInducingVariables):
        return inducing_variable.inducing_variable.Z
    return inducing_variable.inducing_variable_list[0].Z


def canonical_kernel_and_inducing(
    kernel: Kernel, inducing_variable: InducingVariables, num_classes: int
) -> Tuple[Kernel, InducingVariables]:
    """Pair the kernel and inducing variables so GPflow's multi-output dispatch applies.

    A plain kernel with shared inducing points stays as it is (one GP prior for all classes); the
    other combinations are wrapped into GPflow's multi-output classes.
    """
    if isinstance(kernel, SharedIndependent):
        kernel = kernel.kernel
    if isinstance(kernel, SeparateIndependent):
        if len(kernel.kernels) != num_classes:
            raise ValueError(
                f"SeparateIndependent has {len(kernel.kernels)} kernels, expected one per class "
                f"({num_classes})"
            )
        if isinstance(inducing_variable, InducingPoints):
            inducing_variable = SharedIndependentInducingVariables(inducing_variable)
    elif not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a gpflow Kernel, got {type(kernel).__name__}")
    if isinstance(inducing_variable, SeparateIndependentInducingVariables):
        if len(inducing_variable.inducing_variable_list) != num_classes:
            raise ValueError("SeparateIndependentInducingVariables needs one set per class")
        if not isinstance(kernel, SeparateIndependent):
            kernel = SharedIndependent(kernel, num_classes)
    elif isinstance(inducing_variable, SharedIndependentInducingVariables):
        if not isinstance(kernel, SeparateIndependent):
            inducing_variable = inducing_variable.inducing_variable
    elif not isinstance(inducing_variable, InducingPoints):
        raise TypeError(
            f"unsupported inducing variable {type(inducing_variable).__name__}: use an array, "
            "InducingPoints or SeparateIndependentInducingVariables"
        )
    return kernel, inducing_variable


# q(u) ↔ q(v = L⁻¹u): the same shapes both ways
_Q_CHANGE_OF_COORDINATES = (
    "L: [broadcast K, M, M]",
    "q_mu: [M, K]",
    "q_sqrt: [K, M, M]",
    "return[0]: [M, K]",
    "return[1]: [K, M, M]",
)


@check_shapes(*_Q_CHANGE_OF_COORDINATES)
def whitened_q(
    L: tf.Tensor, q_mu: tf.Tensor, q_sqrt: tf.Tensor, whiten: bool
) -> Tuple[tf.Tensor, tf.Tensor]:
    """q(u) in whitened coordinates v = L⁻¹u (the parameters themselves if ``whiten``)."""
    if whiten:
        return q_mu, q_sqrt
    L = tf.broadcast_to(L, tf.shape(q_sqrt))
    mu = tf.linalg.triangular_solve(L, tf.transpose(q_mu)[:, :, None])[:, :, 0]
    return tf.transpose(mu), tf.linalg.triangular_solve(L, q_sqrt)


@check_shapes(*_Q_CHANGE_OF_COORDINATES)
def unwhitened_q(
    L: tf.Tensor, q_mu: tf.Tensor, q_sqrt: tf.Tensor, whiten: bool
) -> Tuple[tf.Tensor, tf.Tensor]:
    """The inverse of :func:`whitened_q`: parameters to store, from whitened ones."""
    if whiten:
        return q_mu, q_sqrt
    mu = tf.linalg.matvec(L, tf.transpose(q_mu))
    return tf.transpose(mu), tf.linalg.matmul(L, q_sqrt)


@check_shapes(
    "A: [broadcast K, M, N]",
    "residual: [N, broadcast K]",
    "q_mu: [M, K]",
    "q_sqrt: [K, M, M]",
    "prior_mean: [N, broadcast K] if prior_mean is not None",
    "return[0]: [N, K]",
    "return[1]: [N, K]",
)
def marginals(
    A: tf.Tensor,
    residual: tf.Tensor,
    q_mu: tf.Tensor,
    q_sqrt: tf.Tensor,
    prior_mean: Optional[tf.Tensor] = None,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Mean and variance of q(f_nc) from the whitened projection and whitened q(v):
    Fmu = Aᵀμ + m(x) (``prior_mean``, if given) and Fvar = diag(K_xx - AᵀA + AᵀSA)."""
    Fmu = tf.transpose(tf.linalg.matvec(A, tf.transpose(q_mu), transpose_a=True))
    if prior_mean is not None:
        Fmu = Fmu + prior_mean
    SA = tf.linalg.matmul(q_sqrt, A, transpose_a=True)  # [K, M, N]
    Fvar = residual + tf.transpose(tf.reduce_sum(tf.square(SA), axis=-2))
    return Fmu, Fvar


def geometry_at(
    geometry: BatchGeometry,
    q_mu: tf.Tensor,
    q_sqrt: tf.Tensor,
    whiten: bool,
    variance_ratio: Optional[tf.Tensor] = None,
) -> BatchGeometry:
    """The batch's ``geometry`` at another q(u) (``q_mu``, ``q_sqrt`` as stored) and, given
    ``variance_ratio`` σ²_new / σ²_old [P], other kernel variances: K = σ² K̃ scales L and A by
    σ_new / σ_old and the residual by its square, so no new M³ work."""
    if variance_ratio is not None:
        ratio = tf.sqrt(variance_ratio)[:, None, None]
        geometry = geometry._replace(
            L=geometry.L * ratio,
            A=geometry.A * ratio,
            residual=geometry.residual * tf.square(ratio[:, 0, 0]),
        )
    q_mu, q_sqrt = whitened_q(geometry.L, q_mu, q_sqrt, whiten)
    Fmu, Fvar = marginals(geometry.A, geometry.residual, q_mu, q_sqrt, geometry.prior_mean)
    return geometry._replace(
        q_mu=q_mu,
        q_sqrt=q_sqrt,
        marginals=geometry.marginals._replace(mean=Fmu, variance=Fvar),
    )


@check_shapes(
    "L: [broadcast P, M, M]",
    "A: [broadcast P, M, N]",
    "residual: [N, broadcast P]",
    "q_mu: [M, N]",
    "q_sqrt: [N, M, M]",
    "labels: [N]",
    "return[0]: [N]",
    "return[1]: [N]",
)
def label_marginals(
    L: tf.Tensor,
    A: tf.Tensor,
    residual: tf.Tensor,
    q_mu: tf.Tensor,
    q_sqrt: tf.Tensor,
    labels: tf.Tensor,
    whiten: bool,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Mean and variance of q(f_n y_n), each point's own class, without the prior mean: one
    class's cost per point, whatever the number of classes P. ``q_mu``, ``q_sqrt`` are the stored
    parameters gathered per point (column or matrix n of class y_n), ``L``, ``A``, ``residual``
    those of :func:`whitened_projection` with one entry per class or one shared."""
    shared = L.shape[0] == 1
    q_mu, q_sqrt = whitened_q(L if shared else tf.gather(L, labels), q_mu, q_sqrt, whiten)
    A_points = tf.transpose(A, [2, 0, 1])  # [N, P, M]
    a = A_points[:, 0] if shared else tf.gather(A_points, labels, batch_dims=1)  # [N, M]
    r = residual[:, 0] if shared else tf.gather(residual, labels, batch_dims=1)
    mean = tf.reduce_sum(a * tf.transpose(q_mu), axis=-1)
    variance = r + tf.reduce_sum(tf.square(tf.linalg.matvec(q_sqrt, a, transpose_a=True)), -1)
    return mean, variance
