r"""
Scalable expectation propagation for the Heaviside likelihood (Villacampa-Calvo & Hernández-Lobato,
ICML 2017): the UAI paper's "HS"/SEP baseline, as a GPflow model trained on the same minibatches.

The model (paper, section 2.2). q(ū) = Π_c N(ū^c) over the inducing values approximates
p(ū) Π_i Π_{k≠y_i} φ_ik(ū), where φ_ik = Φ((m_i^y − m_i^k)/√(s_i^y + s_i^k)) is the probability
that latent y_i beats latent k given ū (eq. 6: the FITC conditional N(m_i^c, s_i^c) of each latent,
plus the noise σ² of :class:`~gpflow_augmented.comparison.heaviside.HeavisideLikelihood` in s).
Every factor depends on ū^c through one projection, so its Gaussian site is rank one.

Stochastic EP (section 2.3.1). The sites are tied: the model stores their product, per class, and
a factor's cavity removes the average site of its class, the product's 1/n_c power, n_c the number
of factors that touch class c (N + N_c(C − 2), with the class counts N_c estimated from the batch).
So memory is O(C M²) whatever N. A step computes every factor's new site on the batch from that
cavity (closed form: :func:`~gpflow_augmented.comparison.heaviside.pairwise_probit_sites`), scales
their sum by N/B, and moves the tied site towards it by a damping ρ, as stochastic variational
inference moves natural parameters.

The sites live in the whitened coordinates v = L⁻¹ū of the Cholesky factor L at which they were
computed, and are held fixed in ū between EP steps: with new hyperparameters, L' , they read
Tᵀ Λ̃ T, Tᵀ η̃ in the new whitened coordinates, T = L⁻¹L'. That is what "the sites fixed while the
hyperparameters move" means in the paper's gradient (eq. 10), and with it the hyperparameters
follow the gradient of the EP estimate of log p(y) (eq. 9) with the sites held fixed, the
"EP-inner-exact" scheme of the paper's figure 1.

:class:`HeavisideEP` is the untied original (the paper's "EP" column): one site per factor, for a
training set held by the model, memory O(N C). It is the reference SEP approximates, and the one
that is close to the exact posterior on problems small enough to integrate.
"""

from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import InputData, MeanAndVariance, Parameter, RegressionData
from gpflow.conditionals import conditional
from gpflow.config import default_float
from gpflow.inducing_variables import InducingVariables
from gpflow.kernels import Kernel
from gpflow.models import GPModel
from gpflow.models.training_mixins import (
    ExternalDataTrainingLossMixin,
    InternalDataTrainingLossMixin,
)
from gpflow.models.util import inducingpoint_wrapper

from ..projection import (
    canonical_kernel_and_inducing,
    inducing_inputs,
    kuu_cholesky,
    whitened_projection,
)
from ..updates import conjugate_statistics, mean_and_sqrt, minibatch_scale
from ..schedules import ConstantStepSize, StepSizeSchedule
from ..validation import check_data, check_integer, check_positive_number, checked_labels
from .heaviside import ArgMaxLikelihood, HeavisideLikelihood, pairwise_probit_sites, site_totals

__all__ = [
    "EPState",
    "ExpectationPropagation",
    "ExpectationPropagationModel",
    "HeavisideEP",
    "HeavisideSEP",
    "log_normaliser_change",
    "rank_one_cavity",
    "untied_whitened_sites",
    "whitened_marginals",
]


class EPState(NamedTuple):
    """What a batch's EP computation gives, at the current hyperparameters."""

    log_marginal_likelihood: tf.Tensor  # [] the EP estimate of log p(y) (eq. 9)
    sites: Tuple[tf.Tensor, ...]  # the sites as stored, in the model's site_parameters order
    targets: Tuple[tf.Tensor, ...]  # what an undamped step would store
    cholesky: tf.Tensor  # [P, M, M] the current L (P = 1 for one kernel shared by the classes)


def log_normaliser_change(shift: tf.Tensor, chol: tf.Tensor) -> tf.Tensor:
    """g(Λ, η) − g(I, 0) per class [C] for whitened q: ½ηᵀΛ⁻¹η − ½ log|Λ|, with R Rᵀ = Λ."""
    mean = tf.linalg.cholesky_solve(chol, tf.transpose(shift)[:, :, None])[:, :, 0]
    half_quadratic = 0.5 * tf.reduce_sum(tf.transpose(shift) * mean, axis=-1)
    return half_quadratic - tf.reduce_sum(tf.math.log(tf.linalg.diag_part(chol)), axis=-1)


def whitened_marginals(
    chol: tf.Tensor, shift: tf.Tensor, A: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Mean and variance [N, C] of aᵀv at every point under N(Λ⁻¹η, Λ⁻¹), R Rᵀ = Λ."""
    mean_v = tf.linalg.cholesky_solve(chol, tf.transpose(shift)[:, :, None])  # [C, M, 1]
    mean = tf.transpose(tf.linalg.matmul(A, mean_v, transpose_a=True)[:, :, 0])
    solved = tf.linalg.triangular_solve(chol, A, lower=True)  # [C, M, N]
    return mean, tf.transpose(tf.reduce_sum(tf.square(solved), axis=1))


def rank_one_cavity(
    mean: tf.Tensor, variance: tf.Tensor, precision: tf.Tensor, shift: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Remove a rank-one site exp(−π u²/2 + ν u) of the projection u from a Gaussian whose
    marginal of u is N(mean, variance): the cavity's marginal of u (mean, variance) and the change
    of the log normaliser, g(cavity) − g(q) = ½ log(τ'/τ) + ½(m'²/τ' − m²/τ) (primes: the
    cavity's). Only u's marginal changes: the conditional of the rest given u is the same."""
    cavity_variance = variance / (1.0 - variance * precision)
    cavity_mean = cavity_variance * (mean / variance - shift)
    change = 0.5 * (
        tf.math.log(cavity_variance / variance)
        + tf.square(cavity_mean) / cavity_variance
        - tf.square(mean) / variance
    )
    return cavity_mean, cavity_variance, change


def untied_whitened_sites(
    model: "ExpectationPropagationModel", A: Optional[tf.Tensor] = None
) -> Tuple[tf.Tensor, tf.Tensor]:
    """(Λ̃ [C, M, M], η̃ [M, C]): the product of a model's per-factor Gaussian sites, its first
    four ``site_parameters`` (as :class:`HeavisideEP` stores them), over its training set."""
    if A is None:
        _, A, _ = model._geometry(model.data[0])
    labels, _ = checked_labels(model.data[1], model.num_classes)
    point_precision, point_shift = site_totals(
        labels, *(tf.convert_to_tensor(p) for p in model.site_parameters[:4])
    )
    return conjugate_statistics(A, point_shift, point_precision)


class ExpectationPropagationModel(GPModel):
    """What the EP models of the arg-max likelihoods share: the likelihood, the prior geometry,
    q(v) from the sites, and the predictions. A subclass stores its sites (``site_parameters``),
    gives their product in whitened coordinates (``_whitened_sites``) and computes a step's
    :class:`EPState` (``ep_state``), which :class:`ExpectationPropagation` assigns."""

    def __init__(
        self, kernel: Kernel, inducing_variable: object, likelihood: ArgMaxLikelihood
    ) -> None:
        num_classes = likelihood.num_classes
        if not isinstance(inducing_variable, InducingVariables):
            inducing_variable = np.asarray(inducing_variable, dtype=default_float())
        kernel, inducing_variable = canonical_kernel_and_inducing(
            kernel, inducingpoint_wrapper(inducing_variable), num_classes
        )
        super().__init__(kernel, likelihood, None, num_latent_gps=num_classes)
        self.num_classes = num_classes
        self.inducing_variable = inducing_variable

    @property
    def site_parameters(self) -> Tuple[Parameter, ...]:
        raise NotImplementedError

    def derived_assignments(
        self, state: EPState, new_sites: Sequence[tf.Tensor]
    ) -> List[Tuple[Parameter, tf.Tensor]]:
        """What else an EP step writes, besides the sites: nothing here."""
        return []

    def _whitened_sites(self, L: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        """(Λ̃ [C, M, M], η̃ [M, C]): the sites' product in the whitened coordinates of L."""
        raise NotImplementedError

    def ep_state(self, data: Optional[RegressionData] = None) -> EPState:
        """The EP computation on ``data``, or on the model's own data (full-GP EP) if ``None``."""
        raise NotImplementedError

    def _input_dim(self) -> int:
        return inducing_inputs(self.inducing_variable).shape[-1]

    def _geometry(self, X: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(L [P, M, M], A [C, M, N], s [N, C]): the whitened projection and each latent's factor
        noise, the FITC conditional variance plus σ²."""
        L, A, residual = whitened_projection(
            self.kernel, self.inducing_variable, X, self.num_classes, broadcast=False
        )
        A = tf.broadcast_to(A, [self.num_classes, tf.shape(A)[1], tf.shape(A)[2]])
        noise = residual + self.likelihood.latent_noise(default_float())
        return L, A, tf.broadcast_to(noise, [tf.shape(A)[2], self.num_classes])

    @check_shapes("return[0]: [M, C]", "return[1]: [C, M, M]")
    def whitened_posterior(self) -> Tuple[tf.Tensor, tf.Tensor]:
        """(q_mu, q_sqrt) of q(v) = N(q_mu, q_sqrt q_sqrtᵀ), v = L⁻¹ū, GPflow's whitened form."""
        precision, shift = self._whitened_sites(kuu_cholesky(self.kernel, self.inducing_variable))
        eye = tf.eye(tf.shape(precision)[-1], dtype=precision.dtype)
        return mean_and_sqrt(eye + precision, shift)

    @inherit_check_shapes
    def predict_f(
        self, Xnew: InputData, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        q_mu, q_sqrt = self.whitened_posterior()
        return conditional(
            tf.convert_to_tensor(Xnew, default_float()),
            self.inducing_variable,
            self.kernel,
            q_mu,
            q_sqrt=q_sqrt,
            full_cov=full_cov,
            white=True,
            full_output_cov=full_output_cov,
        )

    @check_shapes("Xnew: [N, D]", "Y: [N, 1]", "return[0]: [N, C]", "return[1]: [N]")
    def predict_y_and_log_density(
        self, Xnew: InputData, Y: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """``predict_y``'s class probabilities and ``predict_log_density``'s values from one
        evaluation of the likelihood's Gauss–Hermite integral ([N, C, C, J] normal CDFs, the cost
        of both), for a caller that needs the two (:class:`~gpflow_augmented.metrics.Evaluator`)."""
        Fmu, Fvar = self.predict_f(Xnew)
        log_p = self.likelihood.log_class_probabilities(Fmu, Fvar)
        return tf.exp(log_p), self.likelihood.label_log_density(log_p, Y)

    def _valid_or_nan(self, value: tf.Tensor, valid: tf.Tensor) -> tf.Tensor:
        # Under XLA, which drops the label assertion, a bad label gives NaN, not a number.
        return tf.where(tf.reduce_all(valid), value, tf.constant(np.nan, value.dtype))


class HeavisideSEP(ExpectationPropagationModel, ExternalDataTrainingLossMixin):
    r"""Multi-class GP classification with the Heaviside likelihood, q(ū) by stochastic EP
    (tied sites, minibatches).

    :param kernel: one kernel shared by the classes, as the other methods of a comparison use, or a
        ``SeparateIndependent``.
    :param inducing_variable: inducing inputs Z [M, D] (array or ``InducingPoints``).
    :param num_classes: C ≥ 2; labels are integers 0..C−1 in a column ``Y`` [N, 1].
    :param num_data: N, which scales a minibatch's sums (the batch is the data if not given).
    :param noise_variance: the initial σ² of :class:`HeavisideLikelihood`.
    :param num_hermite: Gauss–Hermite nodes of the predictive integral.

    ``site_precision`` [C, M, M] and ``site_shift`` [M, C] are the tied site in the whitened
    coordinates of ``site_cholesky`` [P, M, M]; :class:`ExpectationPropagation` updates them (not
    Adam). The hyperparameters (kernel, σ², and Z if trainable) follow ``training_loss``, minus
    the EP estimate of log p(y) with the sites held fixed.
    """

    def __init__(
        self,
        kernel: Kernel,
        inducing_variable: object,
        num_classes: int,
        *,
        num_data: Optional[int] = None,
        noise_variance: float = 0.1,
        num_hermite: int = 64,
    ) -> None:
        super().__init__(
            kernel, inducing_variable, HeavisideLikelihood(num_classes, noise_variance, num_hermite)
        )
        self.num_data = None if num_data is None else check_integer(num_data, "num_data")
        M = self.inducing_variable.num_inducing
        C = self.num_classes
        self.site_precision = Parameter(np.zeros((C, M, M)), dtype=default_float(), trainable=False)
        self.site_shift = Parameter(np.zeros((M, C)), dtype=default_float(), trainable=False)
        num_priors = kuu_cholesky(self.kernel, self.inducing_variable).shape[0]  # 1 or C
        self.site_cholesky = Parameter(
            np.tile(np.eye(M), (num_priors, 1, 1)), dtype=default_float(), trainable=False
        )

    @property
    def site_parameters(self) -> Tuple[Parameter, ...]:
        return self.site_precision, self.site_shift

    def derived_assignments(
        self, state: EPState, new_sites: Sequence[tf.Tensor]
    ) -> List[Tuple[Parameter, tf.Tensor]]:
        """The coordinates the new sites are written in: the current L."""
        return [(self.site_cholesky, state.cholesky)]

    def _whitened_sites(self, L: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        """The tied site, fixed in ū, in the whitened coordinates of L: Tᵀ Λ̃ T, Tᵀ η̃ with
        T = L_site⁻¹ L."""
        change = tf.linalg.triangular_solve(tf.convert_to_tensor(self.site_cholesky), L, lower=True)
        change = tf.broadcast_to(change, tf.shape(self.site_precision))
        precision = tf.linalg.matmul(
            change, tf.linalg.matmul(self.site_precision, change), transpose_a=True
        )
        precision = 0.5 * (precision + tf.linalg.matrix_transpose(precision))
        shift = tf.transpose(
            tf.linalg.matvec(change, tf.transpose(self.site_shift), transpose_a=True)
        )
        return precision, shift

    def ep_state(self, data: Optional[RegressionData] = None) -> EPState:
        """The batch's EP computation at the current hyperparameters: the estimate of log p(y)
        with the sites fixed (differentiable in the hyperparameters) and the sites' target."""
        if data is None:
            raise ValueError("sparse EP needs a batch of data")
        X, Y = data
        X = tf.convert_to_tensor(X, dtype=default_float())
        labels, valid = checked_labels(Y, self.num_classes)
        C = self.num_classes
        batch_size = tf.cast(tf.shape(X)[0], default_float())
        scale = minibatch_scale(self.num_data, batch_size)
        L, A, factor_noise = self._geometry(X)
        site_precision, site_shift = self._whitened_sites(L)
        eye = tf.eye(tf.shape(site_precision)[-1], batch_shape=[C], dtype=default_float())
        precision = eye + site_precision
        chol = tf.linalg.cholesky(precision)

        # A factor's cavity removes its class's average site: 1/n_c of the tied site, n_c the
        # number of factors that touch class c, N_c(C − 1) + (N − N_c).
        class_counts = scale * tf.reduce_sum(tf.one_hot(labels, C, dtype=default_float()), 0)
        num_factors = scale * batch_size + class_counts * (C - 2)  # [C]
        removed = 1.0 / num_factors
        removed_precision = removed[:, None, None] * site_precision
        removed_shift = site_shift * removed
        cavity_chol = tf.linalg.cholesky(precision - removed_precision)
        cavity_mean, cavity_variance = whitened_marginals(
            cavity_chol, site_shift - removed_shift, A
        )
        own = tf.one_hot(labels, C, dtype=default_float())
        label_mean, label_variance = (
            tf.broadcast_to(tf.reduce_sum(own * value, -1, keepdims=True), tf.shape(value))
            for value in (cavity_mean, cavity_variance)
        )
        sites = pairwise_probit_sites(
            label_mean, label_variance, cavity_mean, cavity_variance, factor_noise, labels
        )

        # log Z_q = Σ_c [g(q_c) − g(prior_c)] + Σ_c n_c [g(cavity_c) − g(q_c)] + Σ_ik log Z_ik.
        cavity_terms = _cavity_terms(
            chol, cavity_chol, eye, site_shift, removed_precision, removed_shift, num_factors
        )
        log_marginal = (
            tf.reduce_sum(log_normaliser_change(site_shift, chol))
            + tf.reduce_sum(cavity_terms)
            + scale * tf.reduce_sum(sites.log_normaliser)
        )

        point_precision, point_shift = site_totals(
            labels,
            sites.label_precision,
            sites.label_shift,
            sites.other_precision,
            sites.other_shift,
        )
        target_precision, target_shift = conjugate_statistics(A, point_shift, point_precision)
        return EPState(
            self._valid_or_nan(log_marginal, valid),
            (site_precision, site_shift),
            (scale * target_precision, scale * target_shift),
            L,
        )

    @check_shapes("return: []")
    def log_marginal_likelihood(self, data: RegressionData) -> tf.Tensor:
        """The EP estimate of log p(y) (eq. 9) from the batch, scaled by N/B, with the sites as
        they are."""
        if tf.executing_eagerly():
            check_data(data[0], data[1], self.num_classes, self._input_dim())
        return self.ep_state(data).log_marginal_likelihood

    @inherit_check_shapes
    def maximum_log_likelihood_objective(self, data: RegressionData) -> tf.Tensor:  # type: ignore[override]
        return self.log_marginal_likelihood(data)


class HeavisideEP(ExpectationPropagationModel, InternalDataTrainingLossMixin):
    r"""The untied original: one rank-one site per factor and latent, for the training set
    ``data = (X, Y)`` the model holds (GPflow's internal-data models, as ``VGP``); the paper's
    "EP". Arguments otherwise as :class:`HeavisideSEP`.

    ``label_site_precision``, ``label_site_shift`` [N, C] are factor (i, k)'s site on f_{y_i} in
    column k, ``other_site_precision``, ``other_site_shift`` [N, C] its site on f_k (zero in the
    label's column).
    """

    def __init__(
        self,
        data: RegressionData,
        kernel: Kernel,
        inducing_variable: object,
        num_classes: int,
        *,
        noise_variance: float = 0.1,
        num_hermite: int = 64,
    ) -> None:
        super().__init__(
            kernel, inducing_variable, HeavisideLikelihood(num_classes, noise_variance, num_hermite)
        )
        X, Y = data
        check_data(X, Y, self.num_classes, self._input_dim())
        self.data = (tf.convert_to_tensor(X, dtype=default_float()), tf.convert_to_tensor(Y))
        shape = (len(X), self.num_classes)
        (
            self.label_site_precision,
            self.label_site_shift,
            self.other_site_precision,
            self.other_site_shift,
        ) = (Parameter(np.zeros(shape), dtype=default_float(), trainable=False) for _ in range(4))

    @property
    def site_parameters(self) -> Tuple[Parameter, ...]:
        return (
            self.label_site_precision,
            self.label_site_shift,
            self.other_site_precision,
            self.other_site_shift,
        )

    def _whitened_sites(
        self, L: tf.Tensor, A: Optional[tf.Tensor] = None
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        return untied_whitened_sites(self, A)

    def ep_state(self, data: Optional[RegressionData] = None) -> EPState:
        """Every factor's EP computation at the current hyperparameters: the estimate of log p(y)
        with the sites fixed (differentiable in the hyperparameters) and every site's target."""
        X, Y = self.data
        labels, valid = checked_labels(Y, self.num_classes)
        L, A, factor_noise = self._geometry(X)
        site_precision, site_shift = self._whitened_sites(L, A)
        eye = tf.eye(
            tf.shape(site_precision)[-1], batch_shape=[self.num_classes], dtype=default_float()
        )
        chol = tf.linalg.cholesky(eye + site_precision)
        mean, variance = whitened_marginals(chol, site_shift, A)  # q's marginals [N, C]
        own = tf.one_hot(labels, self.num_classes, dtype=default_float())
        label_mean = tf.reduce_sum(own * mean, -1, keepdims=True)
        label_variance = tf.reduce_sum(own * variance, -1, keepdims=True)

        stored = [tf.convert_to_tensor(p) for p in self.site_parameters]
        label_cavity_mean, label_cavity_variance, label_change = rank_one_cavity(
            label_mean, label_variance, stored[0], stored[1]
        )
        other_cavity_mean, other_cavity_variance, other_change = rank_one_cavity(
            mean, variance, stored[2], stored[3]
        )
        sites = pairwise_probit_sites(
            label_cavity_mean,
            label_cavity_variance,
            other_cavity_mean,
            other_cavity_variance,
            factor_noise,
            labels,
        )
        others = 1.0 - own
        log_marginal = (
            tf.reduce_sum(log_normaliser_change(site_shift, chol))
            + tf.reduce_sum(sites.log_normaliser)
            + tf.reduce_sum(others * (label_change + other_change))
        )
        return EPState(
            self._valid_or_nan(log_marginal, valid),
            tuple(stored),
            (sites.label_precision, sites.label_shift, sites.other_precision, sites.other_shift),
            L,
        )

    @check_shapes("return: []")
    def log_marginal_likelihood(self) -> tf.Tensor:
        """The EP estimate of log p(y) (eq. 9) on the model's data, with the sites as they
        are."""
        return self.ep_state().log_marginal_likelihood

    @inherit_check_shapes
    def maximum_log_likelihood_objective(self) -> tf.Tensor:  # type: ignore[override]
        return self.log_marginal_likelihood()


class ExpectationPropagation(tf.Module):
    """Assigns EP steps to a :class:`HeavisideSEP` or :class:`HeavisideEP`: every site moves
    towards its target by the damping ρ in natural parameters, site ← (1 − ρ)·site + ρ·target
    (for the tied site the target is the batch's new sites summed and scaled by N/B, so that this
    is stochastic EP on minibatches). Nothing is written unless every value is finite.

    :param damping: ρ in (0, 1], a constant or a schedule of the step count (minibatches).
    """

    def __init__(
        self, model: ExpectationPropagationModel, damping: Union[float, StepSizeSchedule] = 0.5
    ) -> None:
        super().__init__()
        self.model = model
        self.damping = (
            damping
            if isinstance(damping, StepSizeSchedule)
            else ConstantStepSize(check_positive_number(damping, "damping", maximum=1.0))
        )
        self.iteration = tf.Variable(0, dtype=tf.int64, trainable=False)

    def step(self, data: Optional[RegressionData] = None) -> Tuple[tf.Tensor, tf.Tensor]:
        """(the EP estimate of log p(y) before the step, whether the step was applied)."""
        model = self.model
        state = model.ep_state(data)
        rho = tf.cast(self.damping(self.iteration), default_float())
        new_sites = [
            (1.0 - rho) * site + rho * target for site, target in zip(state.sites, state.targets)
        ]
        derived = model.derived_assignments(state, new_sites)
        finite = tf.reduce_all(
            [
                tf.reduce_all(tf.math.is_finite(value))
                for value in (*new_sites, *(v for _, v in derived), state.log_marginal_likelihood)
            ]
        )

        def assign() -> tf.Tensor:
            for parameter, value in (*zip(model.site_parameters, new_sites), *derived):
                parameter.assign(value)
            self.iteration.assign_add(1)
            return tf.constant(True)

        applied = tf.cond(finite, assign, lambda: tf.constant(False))
        return state.log_marginal_likelihood, applied


def _cavity_terms(
    chol: tf.Tensor,
    cavity_chol: tf.Tensor,
    eye: tf.Tensor,
    site_shift: tf.Tensor,
    removed_precision: tf.Tensor,
    removed_shift: tf.Tensor,
    num_factors: tf.Tensor,
) -> tf.Tensor:
    """n_c [g(cavity_c) − g(q_c)] [C], the change of the normaliser g that each class's factors'
    cavities make, n_c of them."""
    # Written through the removed site δ = (Λ̃, η̃)/n_c, so that n_c times
    # a difference of O(1/n_c) is not a difference of two large numbers:
    # g(cavity) − g(q) = ½[μᵀδΛμ − 2δηᵀμ + eᵀΛ\⁻¹e] − ½ log|I − R⁻¹δΛR⁻ᵀ|, e = δΛμ − δη.
    mean = tf.linalg.cholesky_solve(chol, tf.transpose(site_shift)[:, :, None])  # [C, M, 1]
    delta_shift = tf.transpose(removed_shift)[:, :, None]
    residual_shift = tf.linalg.matmul(removed_precision, mean) - delta_shift
    quadratic = (
        tf.linalg.matmul(mean, tf.linalg.matmul(removed_precision, mean), transpose_a=True)
        - 2.0 * tf.linalg.matmul(delta_shift, mean, transpose_a=True)
        + tf.linalg.matmul(
            residual_shift,
            tf.linalg.cholesky_solve(cavity_chol, residual_shift),
            transpose_a=True,
        )
    )[:, 0, 0]
    whitened_removed = tf.linalg.triangular_solve(
        chol,
        tf.linalg.matrix_transpose(tf.linalg.triangular_solve(chol, removed_precision, lower=True)),
        lower=True,
    )
    log_det_ratio = 2.0 * tf.reduce_sum(
        tf.math.log(tf.linalg.diag_part(tf.linalg.cholesky(eye - whitened_removed))), axis=-1
    )
    cavity_terms = num_factors * (0.5 * quadratic - 0.5 * log_det_ratio)
    return cavity_terms
