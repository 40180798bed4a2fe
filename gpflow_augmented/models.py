"""
Sparse variational GP classifiers whose q(u) is updated in closed form by
:class:`~gpflow_augmented.CAVI`: :class:`LogisticSoftmaxSVGP` (multi-class) on the shared
:class:`AugmentedSVGP`.

They are shaped like :class:`gpflow.models.SVGP` (``q_mu`` [M, C], ``q_sqrt`` [C, M, M], ``kernel``,
``inducing_variable``, ``num_data``, ``whiten``) so that everything written for SVGP (print_summary,
checkpoints, monitoring, the same predictions) works on it. The model only computes; the CAVI
optimizer is the one place that assigns to ``q_mu`` and ``q_sqrt``.
"""
from typing import Callable, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import InputData, MeanAndVariance, Parameter, RegressionData
from gpflow.conditionals import conditional
from gpflow.config import default_float
from gpflow.inducing_variables import InducingVariables
from gpflow.kernels import Kernel
from gpflow.likelihoods import Likelihood
from gpflow.mean_functions import MeanFunction
from gpflow.kullback_leiblers import gauss_kl
from gpflow.models import GPModel
from gpflow.models.training_mixins import ExternalDataTrainingLossMixin
from gpflow.models.util import inducingpoint_wrapper
from gpflow.utilities import triangular

from . import augmentation
from .expectations import exact_sites, expected_log_logistic_softmax, subset_site_weights
from .likelihoods import LogisticSoftmax
from .projection import (
    canonical_kernel_and_inducing,
    inducing_inputs,
    kuu_cholesky,
    whitened_projection,
)
from .distributed import num_replicas, replica_sum, replicated_by_first, set_trainable
from .updates import conjugate_statistics, natural_parameter_step_with_backoff
from .validation import (
    InvalidDataError,
    check_data,
    check_finite_inputs,
    check_integer,
    check_num_classes,
    checked_label_rows,
    checked_labels,
    is_soft,
)

__all__ = ["AUGMENTED_SCHEMES", "AugmentedSVGP", "BatchGeometry", "LogisticSoftmaxSVGP", "SCHEMES"]

# The schemes whose step is exact coordinate ascent on a conjugate (augmented) bound, and the
# natural-gradient step on the exact, non-augmented ELBO.
AUGMENTED_SCHEMES = ("collapsed", "paper")
SCHEMES = AUGMENTED_SCHEMES + ("exact",)


class BatchGeometry(NamedTuple):
    """A batch's sparse-GP quantities (:meth:`AugmentedSVGP.batch_geometry`)."""

    L: tf.Tensor  # Cholesky factor of K_mm + jitter [P, M, M], P = 1 if the classes share it
    q_mu: tf.Tensor  # whitened q(v) mean [M, K]
    q_sqrt: tf.Tensor  # whitened q(v) square root [K, M, M]
    Fmu: tf.Tensor  # marginal means of q(f) [N, K]
    Fvar: tf.Tensor  # marginal variances of q(f) [N, K]
    A: tf.Tensor  # whitened projection L⁻¹ K_mn [P, M, N]
    prior_mean: tf.Tensor  # the mean function at the batch [N, 1] (shared) or [N, K], in Fmu
    # On a class subset, given the labels: each point's observed class's marginals (mean [N],
    # variance [N]), which the exact bound's subset estimate keeps exact.
    label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None


def _checked_inducing_inputs(Z: object) -> np.ndarray:
    """Inducing inputs given as an array: [M, D] finite numbers with M ≥ 1 (GPflow would fail
    later, inside a transform or a slice, with a message that does not say which argument)."""
    Z = np.asarray(Z)
    if Z.ndim != 2 or Z.shape[0] < 1 or Z.shape[1] < 1:
        raise ValueError(f"inducing points Z must be a 2-D array [M, D] with M ≥ 1, got shape "
                         f"{Z.shape}")
    if not np.issubdtype(Z.dtype, np.number) or not np.all(np.isfinite(Z)):
        raise ValueError("inducing points Z must be finite numbers (found NaN, inf or "
                         "non-numbers)")
    return Z


class AugmentedSVGP(GPModel, ExternalDataTrainingLossMixin):
    r"""What every conditionally conjugate sparse GP classifier here shares.

    It holds q(u) (``q_mu`` [M, L], ``q_sqrt`` [L, M, M], L latent GPs) and the sparse-GP algebra,
    assembles the ELBO, and computes the closed-form natural-parameter step. A subclass supplies
    the likelihood's part through :meth:`conjugate_terms`: each point's local ELBO at its optimal
    local parameters, and the coefficients of f and -f²/2 in its augmented log-likelihood.
    """

    def __init__(
        self,
        kernel: Kernel,
        inducing_variable: object,
        likelihood: Likelihood,
        num_latent_gps: int,
        num_classes: int,
        num_data: Optional[int],
        whiten: bool,
        q_mu: Optional[np.ndarray],
        q_sqrt: Optional[np.ndarray],
        mean_function: Optional[MeanFunction] = None,
    ) -> None:
        if num_data is not None:
            num_data = check_integer(num_data, "num_data")
        if not isinstance(inducing_variable, InducingVariables):
            inducing_variable = _checked_inducing_inputs(inducing_variable)
        kernel, inducing_variable = canonical_kernel_and_inducing(
            kernel, inducingpoint_wrapper(inducing_variable), num_latent_gps
        )
        super().__init__(kernel, likelihood, mean_function, num_latent_gps=num_latent_gps)
        self.num_classes = num_classes
        self.inducing_variable: InducingVariables = inducing_variable
        self.num_data = None if num_data is None else int(num_data)
        self.whiten = bool(whiten)

        num_inducing = self.inducing_variable.num_inducing
        if q_mu is None:
            q_mu = np.zeros((num_inducing, num_latent_gps))
        if q_sqrt is None:
            q_sqrt = np.tile(np.eye(num_inducing)[None], (num_latent_gps, 1, 1))
        # CAVI owns q(u); keeping it out of trainable_variables keeps Adam off it. Every replica
        # computes the same update from all-reduced statistics.
        with replicated_by_first():
            self.q_mu = Parameter(q_mu, dtype=default_float(), trainable=False)  # [M, L]
            self.q_sqrt = Parameter(
                q_sqrt, dtype=default_float(), transform=triangular(), trainable=False
            )  # [L, M, M]

    @property
    def on_exact_bound(self) -> bool:
        """Whether CAVI steps on the exact ELBO (exact-bound sites) rather than on an augmented
        bound."""
        return False

    @property
    def learns_class_weights(self) -> bool:
        """Whether the likelihood has class weights θ that :class:`~gpflow_augmented.CAVI` updates."""
        return False

    @property
    def accepts_soft_labels(self) -> bool:
        """Whether training takes rows [N, C] of class probabilities as well as labels [N, 1]."""
        return False

    @property
    def input_dim(self) -> Optional[int]:
        Z = inducing_inputs(self.inducing_variable)
        return Z.shape[-1]

    # -- the sparse-GP algebra shared by the ELBO and the update -----------------------------------

    @check_shapes(
        "X: [N, D]",
        "return[0]: [P, M, M]",
        "return[1]: [P, M, N]",
        "return[2]: [N, P]",
    )
    def whitened_projection(self, X: InputData) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(L, A, r): L L^T = K_mm + jitter, A = L⁻¹ K_mn and r = diag(K_nn - A^T A), for each of
        the P priors: P = 1 when all classes share one (nothing is copied per class), else P = C."""
        return whitened_projection(
            self.kernel, self.inducing_variable, X, self.num_latent_gps, broadcast=False
        )

    def kuu_cholesky(self) -> tf.Tensor:
        """Cholesky factor of K_mm + jitter: [1, M, M] if shared by all classes, else [C, M, M]."""
        return kuu_cholesky(self.kernel, self.inducing_variable)

    @check_shapes("classes: [K]", "return[0]: [M, K]", "return[1]: [K, M, M]")
    def variational_parameters(self, classes: Optional[tf.Tensor] = None) -> Tuple[tf.Tensor, tf.Tensor]:
        """(q_mu, q_sqrt) as stored, of all latent GPs or of the ``classes`` given.

        A subset is gathered from the unconstrained storage before the triangular transform, so its
        cost does not grow with the number of classes."""
        if classes is None:
            return tf.convert_to_tensor(self.q_mu), tf.convert_to_tensor(self.q_sqrt)
        q_mu = tf.gather(self.q_mu.unconstrained_variable, classes, axis=1)
        packed_sqrt = tf.gather(self.q_sqrt.unconstrained_variable, classes)
        return q_mu, self.q_sqrt.transform.forward(packed_sqrt)

    @check_shapes("q_mu: [M, K]", "q_sqrt: [K, M, M]", "classes: [K]")
    def assign_variational_parameters(
        self, q_mu: tf.Tensor, q_sqrt: tf.Tensor, classes: Optional[tf.Tensor] = None
    ) -> None:
        """Store q(u) of all latent GPs, or scatter that of the ``classes`` given in place."""
        if classes is None:
            self.q_mu.assign(q_mu)
            self.q_sqrt.assign(q_sqrt)
            return
        # q_mu is M·C numbers, a negligible copy; the [C, M(M+1)/2] q_sqrt is scattered in place.
        columns = tf.cast(classes, tf.int32)[:, None]
        self.q_mu.assign(
            tf.transpose(
                tf.tensor_scatter_nd_update(tf.transpose(self.q_mu), columns, tf.transpose(q_mu))
            )
        )
        self.q_sqrt.unconstrained_variable.scatter_update(
            tf.IndexedSlices(self.q_sqrt.transform.inverse(q_sqrt), classes)
        )

    @check_shapes(
        "L: [broadcast K, M, M]",
        "q_mu: [M, K]",
        "q_sqrt: [K, M, M]",
        "return[0]: [M, K]",
        "return[1]: [K, M, M]",
    )
    def whitened_q(
        self, L: tf.Tensor, q_mu: tf.Tensor, q_sqrt: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """q(u) in whitened coordinates v = L⁻¹u (the parameters themselves if ``whiten``)."""
        if self.whiten:
            return q_mu, q_sqrt
        L = tf.broadcast_to(L, tf.shape(q_sqrt))
        mu = tf.linalg.triangular_solve(L, tf.transpose(q_mu)[:, :, None])[:, :, 0]
        return tf.transpose(mu), tf.linalg.triangular_solve(L, q_sqrt)

    @check_shapes(
        "L: [broadcast K, M, M]",
        "q_mu: [M, K]",
        "q_sqrt: [K, M, M]",
        "return[0]: [M, K]",
        "return[1]: [K, M, M]",
    )
    def unwhitened_q(
        self, L: tf.Tensor, q_mu: tf.Tensor, q_sqrt: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """The inverse of :meth:`whitened_q`: parameters to store, from whitened ones."""
        if self.whiten:
            return q_mu, q_sqrt
        mu = tf.linalg.matvec(L, tf.transpose(q_mu))
        return tf.transpose(mu), tf.linalg.matmul(L, q_sqrt)

    @staticmethod
    @check_shapes(
        "A: [broadcast K, M, N]",
        "residual: [N, broadcast K]",
        "q_mu: [M, K]",
        "q_sqrt: [K, M, M]",
        "return[0]: [N, K]",
        "return[1]: [N, K]",
    )
    def marginals(
        A: tf.Tensor, residual: tf.Tensor, q_mu: tf.Tensor, q_sqrt: tf.Tensor
    ) -> MeanAndVariance:
        """Mean and variance of q(f_nc) from the whitened projection and whitened q(v)."""
        Fmu = tf.transpose(tf.linalg.matvec(A, tf.transpose(q_mu), transpose_a=True))
        SA = tf.linalg.matmul(q_sqrt, A, transpose_a=True)  # [K, M, N]
        Fvar = residual + tf.transpose(tf.reduce_sum(tf.square(SA), axis=-2))
        return Fmu, Fvar

    @check_shapes(
        "X: [N, D]",
        "classes: [K]",
        "return.L: [broadcast K, M, M]",
        "return.q_mu: [M, K]",
        "return.q_sqrt: [K, M, M]",
        "return.Fmu: [N, K]",
        "return.Fvar: [N, K]",
        "return.A: [broadcast K, M, N]",
        "return.prior_mean: [N, broadcast K]",
        "Y: [N, L]",
    )
    def batch_geometry(
        self, X: tf.Tensor, classes: Optional[tf.Tensor] = None, Y: Optional[tf.Tensor] = None
    ) -> "BatchGeometry":
        """The batch's sparse-GP quantities, for all classes or a subset: the Cholesky factor L
        of K_mm, whitened q(v), the marginals q(f) (the prior mean included), the whitened
        projection A and the prior mean; on a subset, given the labels ``Y``, also each point's
        observed class's marginals."""
        L, A, residual = self.whitened_projection(X)
        label_marginals = None
        if classes is not None and Y is not None:
            label_marginals = self._label_marginals(X, Y, L, A, residual)
        if classes is not None and L.shape[0] != 1:
            # One prior per class: gather the subset's (the projection itself still costs C).
            L, A = tf.gather(L, classes), tf.gather(A, classes)
            residual = tf.gather(residual, classes, axis=1)
        q_mu, q_sqrt = self.whitened_q(L, *self.variational_parameters(classes))
        Fmu, Fvar = self.marginals(A, residual, q_mu, q_sqrt)
        prior_mean = self.mean_function(X)
        if classes is not None and prior_mean.shape[-1] != 1:
            prior_mean = tf.gather(prior_mean, classes, axis=1)
        return BatchGeometry(L, q_mu, q_sqrt, Fmu + prior_mean, Fvar, A, prior_mean,
                             label_marginals)

    def _label_marginals(
        self, X: tf.Tensor, Y: tf.Tensor, L: tf.Tensor, A: tf.Tensor, residual: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """Mean and variance [N] of q(f_n y_n): each point's own class, gathered per point (one
        class's cost, whatever C is)."""
        labels = tf.cast(Y[:, 0], tf.int32)
        q_mu, q_sqrt = self.variational_parameters(labels)  # [M, N], [N, M, M]
        shared = L.shape[0] == 1
        q_mu, q_sqrt = self.whitened_q(L if shared else tf.gather(L, labels), q_mu, q_sqrt)
        A_points = tf.transpose(A, [2, 0, 1])  # [N, P, M]
        a = A_points[:, 0] if shared else tf.gather(A_points, labels, batch_dims=1)  # [N, M]
        r = residual[:, 0] if shared else tf.gather(residual, labels, batch_dims=1)
        mean = tf.reduce_sum(a * tf.transpose(q_mu), axis=-1)
        variance = r + tf.reduce_sum(tf.square(tf.linalg.matvec(q_sqrt, a, transpose_a=True)), -1)
        prior_mean = self.mean_function(X)
        if prior_mean.shape[-1] != 1:
            prior_mean = tf.gather(prior_mean, labels[:, None], batch_dims=1)
        return mean + prior_mean[:, 0], variance

    # -- what the likelihood contributes ------------------------------------------------------

    @check_shapes(
        "Fmu: [N, K]",
        "Fvar: [N, K]",
        "Y: [N, L]",
        "classes: [K]",
        "label_marginals[0]: [N]",
        "label_marginals[1]: [N]",
        "return: [N]",
    )
    def local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> tf.Tensor:
        """Each point's contribution [N] to the ELBO at its optimal local parameters (estimated
        from the columns of ``classes`` when given)."""
        raise NotImplementedError

    @check_shapes(
        "Fmu: [N, K]",
        "Fvar: [N, K]",
        "Y: [N, L]",
        "classes: [K]",
        "label_marginals[0]: [N]",
        "label_marginals[1]: [N]",
        "return: [N]",
    )
    def exact_local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> tf.Tensor:
        """Each point's exact expected log-likelihood E_q log p(y | f) [N]."""
        raise NotImplementedError

    @check_shapes(
        "Fmu: [N, K]",
        "Fvar: [N, K]",
        "Y: [N, L]",
        "classes: [K]",
        "label_marginals[0]: [N]",
        "label_marginals[1]: [N]",
        "return: [N]",
    )
    def augmented_local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> tf.Tensor:
        """Each point's augmented bound [N] at its optimal local parameters (for a model on the
        exact bound, that of the augmentation it would otherwise use)."""
        return self.local_elbo(Fmu, Fvar, Y, classes)

    @check_shapes(
        "Fmu: [N, K]",
        "Fvar: [N, K]",
        "Y: [N, L]",
        "classes: [K]",
        "label_marginals[0]: [N]",
        "label_marginals[1]: [N]",
        "return[0]: [N]",
        "return[1]: [N, K]",
        "return[2]: [N, K]",
    )
    def conjugate_terms(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        augmented_sites: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(local ELBO [N], linear [N, L], quadratic [N, L]) at the optimal local parameters:
        given them, the augmented log-likelihood of f is ``linear·f - quadratic·f²/2`` + const.
        With ``classes`` the marginals hold only those columns, and ``label_marginals``
        (:attr:`BatchGeometry.label_marginals`) those of each point's observed class."""
        raise NotImplementedError

    @check_shapes("X: [N, D]", "return: []")
    def minibatch_scale(self, X: tf.Tensor) -> tf.Tensor:
        """N / B, B the global batch size (the sum of the replicas' shards under a strategy)."""
        if self.num_data is None:
            return tf.constant(1.0, dtype=default_float())
        batch_size = replica_sum(tf.cast(tf.shape(X)[0], default_float()))
        return tf.cast(self.num_data, default_float()) / batch_size

    def class_weight(self, classes: Optional[tf.Tensor]) -> tf.Tensor:
        """C / |K|: the weight that makes a sum over the class subset estimate the sum over all."""
        if classes is None:
            return tf.constant(1.0, dtype=default_float())
        return self.num_latent_gps / tf.cast(tf.shape(classes)[0], default_float())

    @check_shapes("return: []")
    def prior_kl(self) -> tf.Tensor:
        q_mu, q_sqrt = self.whitened_q(self.kuu_cholesky(), *self.variational_parameters())
        return gauss_kl(q_mu, q_sqrt)

    @inherit_check_shapes
    def maximum_log_likelihood_objective(self, data: RegressionData) -> tf.Tensor:  # type: ignore[override]
        return self.elbo(data)

    @check_shapes("classes: [K]", "return: []")
    def elbo(self, data: RegressionData, classes: Optional[tf.Tensor] = None) -> tf.Tensor:
        """The model's evidence lower bound, scaled by num_data: the augmented bound at the optimal
        local parameters, or the exact ELBO for a model on the exact bound.

        With ``classes`` (a subset K of the class indices) it is the class-subsampled estimate:
        per-class sums and the KL count C/|K| times (see :mod:`~gpflow_augmented.augmentation`).
        Inside a replica of a ``tf.distribute`` strategy it is this replica's share: the replicas'
        values add up to the ELBO of the global batch.
        """
        return self._elbo(data, classes, self.local_elbo)

    @check_shapes("classes: [K]", "return: []")
    def exact_elbo(self, data: RegressionData, classes: Optional[tf.Tensor] = None) -> tf.Tensor:
        """The exact (non-augmented) ELBO, E_q log p(y | f) - KL, with the accurate expectation of
        :mod:`~gpflow_augmented.expectations`; otherwise as :meth:`elbo`. It is never below the
        augmented bound."""
        return self._elbo(data, classes, self.exact_local_elbo)

    def _elbo(
        self,
        data: RegressionData,
        classes: Optional[tf.Tensor],
        local_elbo_fn: Callable[..., tf.Tensor],
        validate: bool = True,
    ) -> tf.Tensor:
        """``validate=False`` only where the caller has checked the batch itself (a training step
        whose status refuses bad labels: an assertion here would pre-empt that clear error)."""
        X, Y = data
        if tf.executing_eagerly():
            check_data(X, Y, self.num_classes, self.input_dim, self.accepts_soft_labels)
        X = tf.convert_to_tensor(X, dtype=default_float())
        all_valid = tf.constant(True)
        if validate and not tf.executing_eagerly():
            if self.accepts_soft_labels and is_soft(Y, self.num_classes):
                rows = checked_label_rows(Y, self.num_classes, default_float())
                all_valid = tf.reduce_all(tf.math.is_finite(rows))
            else:
                all_valid = tf.reduce_all(checked_labels(Y, self.num_classes)[1])
            X = check_finite_inputs(X)
        geometry = self.batch_geometry(X, classes, Y)
        local_elbo = local_elbo_fn(geometry.Fmu, geometry.Fvar, Y, classes,
                                   geometry.label_marginals)
        elbo = self.assemble_elbo(geometry, local_elbo, self.minibatch_scale(X), classes)
        # Under XLA, which drops the assertion, a bad label makes the bound NaN, not a number.
        return tf.where(all_valid, elbo, tf.constant(np.nan, elbo.dtype))

    @check_shapes("local_elbo: [N]", "scale: []", "classes: [K]", "return: []")
    def assemble_elbo(
        self,
        geometry: BatchGeometry,
        local_elbo: tf.Tensor,
        scale: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
    ) -> tf.Tensor:
        """The ELBO from the batch's local terms: their sum times ``scale`` (N / B), minus the
        KL (C/|K| times on a class subset); in a replica, this replica's share."""
        kl = self.class_weight(classes) * gauss_kl(geometry.q_mu, geometry.q_sqrt)
        return tf.reduce_sum(local_elbo) * scale - kl / num_replicas()

    # -- the closed-form update (computed here, assigned by CAVI) --------------------------------

    @check_shapes(
        "X: [N, D]",
        "Y: [N, L]",
        "step_size: []",
        "classes: [K]",
        "return[0]: [M, K]",
        "return[1]: [K, M, M]",
        "return[2]: []",
    )
    def natural_update(
        self,
        X: tf.Tensor,
        Y: tf.Tensor,
        step_size: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        augmented_sites: Optional[tf.Tensor] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(q_mu, q_sqrt) after one CAVI/SVI step on the batch, and the batch ELBO before it.

        With ``classes`` only those latent GPs are updated (paper, Algorithm 2), and the results
        are their columns. ``augmented_sites`` (a boolean tensor) makes a model on the exact bound
        take this step with its augmented bound's sites instead. Under a ``tf.distribute``
        strategy the batch's statistics are summed over the replicas' shards first, so every
        replica returns the same. Nothing is assigned: :class:`~gpflow_augmented.CAVI` does that
        once the result is checked.
        """
        X = tf.convert_to_tensor(X, dtype=default_float())
        geometry = self.batch_geometry(X, classes, Y)
        local_elbo, linear, quadratic = self.conjugate_terms(
            geometry.Fmu, geometry.Fvar, Y, classes, augmented_sites, geometry.label_marginals
        )
        return self.natural_step(X, geometry, local_elbo, linear, quadratic, step_size, classes)

    @check_shapes(
        "X: [N, D]",
        "local_elbo: [N]",
        "linear: [N, K]",
        "quadratic: [N, K]",
        "step_size: []",
        "classes: [K]",
        "return[0]: [M, K]",
        "return[1]: [K, M, M]",
        "return[2]: []",
    )
    def natural_step(
        self,
        X: tf.Tensor,
        geometry: "BatchGeometry",
        local_elbo: tf.Tensor,
        linear: tf.Tensor,
        quadratic: tf.Tensor,
        step_size: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The second half of :meth:`natural_update`, from the batch's sites onwards:
        (q_mu, q_sqrt) after the step and the batch ELBO before it.

        The sites are coefficients of f; q(u) is over f minus the prior mean μ, and
        linear·f - quadratic·f²/2 = (linear - quadratic·μ)·(f - μ) - quadratic·(f - μ)²/2 + const."""
        linear = linear - quadratic * geometry.prior_mean
        local_sum, statistics = replica_sum(
            (tf.reduce_sum(local_elbo), conjugate_statistics(geometry.A, linear, quadratic))
        )
        scale = self.minibatch_scale(X)
        kl = self.class_weight(classes) * gauss_kl(geometry.q_mu, geometry.q_sqrt)
        elbo = local_sum * scale - kl
        new_mu, new_sqrt, _ = natural_parameter_step_with_backoff(
            geometry.q_mu,
            geometry.q_sqrt,
            statistics,
            scale=scale,
            step_size=step_size,
        )
        new_mu, new_sqrt = self.unwhitened_q(geometry.L, new_mu, new_sqrt)
        return new_mu, new_sqrt, elbo

    # -- predictions --------------------------------------------------------------------------

    @inherit_check_shapes
    def predict_f(
        self, Xnew: InputData, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        # The model's dtype, so the mean function adds up with the conditional (as data for CAVI).
        Xnew = check_finite_inputs(tf.cast(Xnew, default_float()))
        mu, var = conditional(
            Xnew,
            self.inducing_variable,
            self.kernel,
            self.q_mu,
            q_sqrt=self.q_sqrt,
            full_cov=full_cov,
            white=self.whiten,
            full_output_cov=full_output_cov,
        )
        return mu + self.mean_function(Xnew), var


class LogisticSoftmaxSVGP(AugmentedSVGP):
    r"""Multi-class GP classification with the logistic-softmax likelihood, made conjugate.

    :param kernel: one kernel shared by all classes (the paper's default), or a
        :class:`gpflow.kernels.SeparateIndependent` with one kernel per class.
    :param inducing_variable: inducing inputs Z [M, D] (array or ``InducingPoints``), shared by all
        classes, or a :class:`gpflow.inducing_variables.SeparateIndependentInducingVariables`.
    :param num_classes: C ≥ 2; labels are integers 0..C-1 in a column ``Y`` [N, 1].
    :param num_data: the training-set size N, which scales minibatch ELBOs and updates.
    :param scheme: ``"exact"`` (default): no augmentation, the ELBO is the exact one
        (:mod:`~gpflow_augmented.expectations`) and :class:`~gpflow_augmented.CAVI` takes
        closed-form natural-gradient steps on it, whose fixed point is the exact variational
        optimum; ``"collapsed"``: the augmented bound with λ integrated out exactly (q(n)
        negative-multinomial, no inner loop), whose fixed point is biased towards large latents;
        or ``"paper"``: the paper's mean-field q(λ) q(n, ω), γ and α alternated
        ``inner_iterations`` times.
    :param inner_iterations: γ ↔ α alternations of the paper scheme (default 5, as in the paper).
    :param whiten: parametrise q(u) through v = L⁻¹u, as GPflow's SVGP does (default True).
    :param likelihood: the :class:`LogisticSoftmax` used for predictions (built if not given).
    :param mean_function: the prior mean of every latent, as in GPflow's SVGP (default zero).
        ``gpflow.mean_functions.Constant()``, learned with the hyperparameters, lets the model move
        towards the regime where every σ(f_c) is small and the logistic-softmax approaches the
        softmax.
    """

    @check_shapes(
        "q_mu: [M, C] if q_mu is not None",
        "q_sqrt: [C, M, M] if q_sqrt is not None",
    )
    def __init__(
        self,
        kernel: Kernel,
        inducing_variable: object,
        num_classes: int,
        num_data: Optional[int] = None,
        *,
        scheme: str = "exact",
        inner_iterations: int = 5,
        whiten: bool = True,
        likelihood: Optional[LogisticSoftmax] = None,
        q_mu: Optional[np.ndarray] = None,
        q_sqrt: Optional[np.ndarray] = None,
        mean_function: Optional[MeanFunction] = None,
    ) -> None:
        num_classes = check_num_classes(num_classes)
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        if int(inner_iterations) < 1:
            raise ValueError(f"inner_iterations must be ≥ 1, got {inner_iterations!r}")
        if likelihood is None:
            likelihood = LogisticSoftmax(num_classes)
        if not isinstance(likelihood, LogisticSoftmax) or likelihood.num_classes != num_classes:
            raise ValueError(f"likelihood must be a LogisticSoftmax({num_classes})")
        if likelihood.class_weights is not None:
            if scheme == "paper":
                raise ValueError("class weights need scheme 'collapsed' or 'exact' (the paper "
                                 "scheme's mean-field q(λ) does not carry them)")
            # CAVI updates them in closed form; keeping them out of trainable_variables keeps Adam off.
            set_trainable(likelihood.class_weights, False)
        super().__init__(
            kernel, inducing_variable, likelihood, num_classes, num_classes, num_data, whiten,
            q_mu, q_sqrt, mean_function,
        )
        self.scheme = scheme
        self.inner_iterations = int(inner_iterations)

    @property
    def on_exact_bound(self) -> bool:
        return self.scheme == "exact"

    @property
    def learns_class_weights(self) -> bool:
        return self.likelihood.class_weights is not None

    @property
    def accepts_soft_labels(self) -> bool:
        # y enters the exact expectation linearly, and the augmented bounds through linear terms
        # and the Pólya-Gamma shape y + n, which need not be an integer.
        return True

    @check_shapes("Y: [N, L]", "log_weight_gradient: [C]", "return[0]: [C]", "return[1]: [C]")
    def class_weight_statistics(
        self, Y: tf.Tensor, log_weight_gradient: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """(n, e) of the batch: the class counts n_k and the exposures e_k, where
        ``log_weight_gradient`` = ∂(Σ_i local ELBO_i)/∂log θ_k = n_k - θ_k e_k. On the exact bound
        e_k = Σ_i E_q[σ(f_ik) / Σ_c θ_c σ(f_ic)]; on the collapsed bound the same with σ(f) replaced by
        1 - σ̃. Only the observed class's numerator and the normaliser depend on θ."""
        counts = tf.reduce_sum(self.one_hot(Y), axis=0)
        expected = tf.maximum(counts - log_weight_gradient, 0.0)
        return counts, expected / self.likelihood.class_weights

    @check_shapes("classes: [K]", "return: [K] if return is not None")
    def log_class_weights(self, classes: Optional[tf.Tensor] = None) -> Optional[tf.Tensor]:
        """log θ of every class, or of ``classes``; ``None`` without class weights."""
        log_weights = self.likelihood.log_class_weights()
        if log_weights is None or classes is None:
            return log_weights
        return tf.gather(log_weights, classes)

    # -- local parameters and the ELBO ----------------------------------------------------------

    @check_shapes("Y: [N, L]", "classes: [K]", "return: [N, K]")
    def one_hot(self, Y: tf.Tensor, classes: Optional[tf.Tensor] = None) -> tf.Tensor:
        """y'_ic for all classes, or for the columns ``classes``: one-hot rows of integer labels
        [N, 1], or the given rows of class probabilities [N, C]."""
        if is_soft(Y, self.num_classes):
            if classes is not None:
                raise InvalidDataError("class subsets need integer labels [N, 1], not rows of "
                                       "class probabilities")
            return tf.cast(Y, default_float())
        if classes is None:
            return tf.one_hot(tf.cast(Y[:, 0], tf.int32), self.num_classes, dtype=default_float())
        labels = tf.cast(Y, tf.int64)
        return tf.cast(tf.equal(labels, tf.cast(classes, tf.int64)[None, :]), default_float())

    @check_shapes(
        "Fmu: [N, K]", "Fvar: [N, K]", "Y_onehot: [N, K]", "log_weights: [K] if log_weights is not None"
    )
    def local_parameters(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y_onehot: tf.Tensor,
        log_weights: Optional[tf.Tensor] = None,
    ) -> augmentation.LocalParameters:
        """The optimal local parameters (paper scheme: after ``inner_iterations`` alternations);
        if the columns are a subset of the classes, the class coupling is estimated from it.
        ``log_weights``: the columns' log θ (collapsed scheme only)."""
        if self.scheme == "collapsed":
            return augmentation.collapsed_local_parameters(
                Fmu, Fvar, Y_onehot, self.num_classes, log_weights
            )
        return augmentation.paper_local_parameters(
            Fmu, Fvar, Y_onehot, self.inner_iterations, self.num_classes
        )

    @inherit_check_shapes
    def local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> tf.Tensor:
        if self.on_exact_bound:
            return self.exact_local_elbo(Fmu, Fvar, Y, classes, label_marginals)
        return self._local_elbo(
            Fmu, Fvar, self.one_hot(Y, classes), log_weights=self.log_class_weights(classes),
            soft_labels=is_soft(Y, self.num_classes),
        )

    @inherit_check_shapes
    def augmented_local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> tf.Tensor:
        if not self.on_exact_bound:
            return self.local_elbo(Fmu, Fvar, Y, classes)
        return augmentation.collapsed_local_elbo(
            Fmu, Fvar, self.one_hot(Y, classes), self.num_classes, self.log_class_weights(classes),
            soft_labels=is_soft(Y, self.num_classes),
        )

    @inherit_check_shapes
    def exact_local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> tf.Tensor:
        return expected_log_logistic_softmax(
            Fmu, Fvar, self.one_hot(Y, classes), self._subset_classes(classes),
            log_weights=self.log_class_weights(classes), label_marginals=label_marginals,
            soft_labels=is_soft(Y, self.num_classes),
        )

    def _subset_classes(self, classes: Optional[tf.Tensor]) -> Optional[int]:
        """C when the columns are a subset of the classes (the expectations then estimate)."""
        return None if classes is None else self.num_classes

    @inherit_check_shapes
    def conjugate_terms(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        augmented_sites: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """With ``scheme="exact"``: the exact expected log-likelihood and the natural-gradient
        sites of :func:`~gpflow_augmented.expectations.exact_sites`; if ``augmented_sites`` is
        true, the collapsed bound's coefficients with the exact expected log-likelihood."""
        Y_onehot = self.one_hot(Y, classes)
        log_weights = self.log_class_weights(classes)
        if self.on_exact_bound:
            # The exact expectation and its derivatives outside any tf.cond: a gradient (for the
            # class weights) taken through a cond whose branch differentiates the XLA-compiled
            # expectation comes back as zero.
            expected, linear, quadratic = exact_sites(
                Fmu, Fvar, Y_onehot, self._subset_classes(classes), log_weights=log_weights,
                label_marginals=label_marginals, soft_labels=is_soft(Y, self.num_classes),
            )
            return (expected, *self.step_sites(Fmu, Fvar, Y_onehot, (linear, quadratic),
                                               augmented_sites, log_weights, classes))
        local = self.local_parameters(Fmu, Fvar, Y_onehot, log_weights)
        local_elbo = self._local_elbo(Fmu, Fvar, Y_onehot, local, log_weights,
                                      soft_labels=is_soft(Y, self.num_classes))
        return local_elbo, (Y_onehot - local.gamma) / 2, local.theta

    @check_shapes(
        "Fmu: [N, K]",
        "Fvar: [N, K]",
        "Y_onehot: [N, K]",
        "exact[0]: [N, K]",
        "exact[1]: [N, K]",
        "log_weights: [K] if log_weights is not None",
        "classes: [K] if classes is not None",
        "return[0]: [N, K]",
        "return[1]: [N, K]",
    )
    def step_sites(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y_onehot: tf.Tensor,
        exact: Tuple[tf.Tensor, tf.Tensor],
        augmented_sites: Optional[tf.Tensor],
        log_weights: Optional[tf.Tensor] = None,
        classes: Optional[tf.Tensor] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """The (linear, quadratic) sites a step on the exact bound takes: the ``exact`` ones
        (derivatives of the batch's expected log-likelihood), or the collapsed bound's while
        ``augmented_sites`` (a warm-start step) is true."""
        if classes is not None:
            # In a subset's estimate a column stands for several classes; a site is one class's
            # own derivative.
            weights = subset_site_weights(Y_onehot, self.num_classes)
            exact = tuple(site / weights for site in exact)
        if augmented_sites is None:
            return exact
        return tf.cond(
            augmented_sites,
            lambda: self.collapsed_sites(Fmu, Fvar, Y_onehot, log_weights),
            lambda: exact,
        )

    @check_shapes(
        "Fmu: [N, K]",
        "Fvar: [N, K]",
        "Y_onehot: [N, K]",
        "log_weights: [K] if log_weights is not None",
        "return[0]: [N, K]",
        "return[1]: [N, K]",
    )
    def collapsed_sites(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y_onehot: tf.Tensor,
        log_weights: Optional[tf.Tensor] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """(linear, quadratic) of the collapsed augmented bound at its optimal local parameters:
        the warm-start sites of a model on the exact bound."""
        local = augmentation.collapsed_local_parameters(
            Fmu, Fvar, Y_onehot, self.num_classes, log_weights
        )
        return (Y_onehot - local.gamma) / 2, local.theta

    def _local_elbo(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y_onehot: tf.Tensor,
        local: Optional[augmentation.LocalParameters] = None,
        log_weights: Optional[tf.Tensor] = None,
        soft_labels: bool = False,
    ) -> tf.Tensor:
        """Each point's contribution to the augmented ELBO at its local parameters.

        The local parameters are treated as constants when differentiating (they are at their
        optimum, so by the envelope theorem this gives the gradient of the optimised bound; for
        the collapsed scheme the closed form is differentiated directly).
        """
        if self.scheme == "collapsed":
            return augmentation.collapsed_local_elbo(
                Fmu, Fvar, Y_onehot, self.num_classes, log_weights, soft_labels
            )
        if local is None:
            local = self.local_parameters(Fmu, Fvar, Y_onehot)
        local = tf.nest.map_structure(tf.stop_gradient, local)
        return augmentation.polya_gamma_terms(
            Fmu, Fvar, Y_onehot, local, self.num_classes
        ) + augmentation.paper_count_terms(local, self.num_classes)
