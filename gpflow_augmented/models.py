"""
Sparse variational GP classifiers whose q(u) is updated in closed form by
:class:`~gpflow_augmented.CAVI`: :class:`AugmentedSVGP` with any augmented likelihood
(:mod:`~gpflow_augmented.likelihoods`), as GPflow's ``SVGP(kernel, likelihood, Z)``;
:class:`LogisticSoftmaxSVGP`, the multi-class model with the logistic-softmax likelihood; and
:class:`BinaryLogisticSVGP`, binary classification with the logistic likelihood (X-GPC).

They are shaped like :class:`gpflow.models.SVGP` (``q_mu`` [M, C], ``q_sqrt`` [C, M, M], ``kernel``,
``inducing_variable``, ``num_data``, ``whiten``) so that everything written for SVGP (print_summary,
checkpoints, monitoring, the same predictions) works on it. The model only computes; the CAVI
optimizer is the one place that assigns to ``q_mu`` and ``q_sqrt``.
"""

from typing import Optional

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import InputData, MeanAndVariance, Parameter, RegressionData
from gpflow.conditionals import conditional
from gpflow.config import default_float
from gpflow.inducing_variables import InducingVariables
from gpflow.kernels import Kernel
from gpflow.mean_functions import MeanFunction
from gpflow.kullback_leiblers import gauss_kl
from gpflow.models import GPModel
from gpflow.models.training_mixins import ExternalDataTrainingLossMixin
from gpflow.models.util import inducingpoint_wrapper
from gpflow.utilities import triangular

from .class_subsets import ClassSubset, as_class_subset, subset_classes, variational_parameters
from .likelihoods import (
    AugmentedLikelihood,
    BinaryLogistic,
    LogisticSoftmax,
    LogisticSoftmaxAugmentation,
    Marginals,
    MeanFieldGammaPoisson,
    NegativeMultinomial,
)
from .projection import (
    BatchGeometry,
    canonical_kernel_and_inducing,
    inducing_inputs,
    kuu_cholesky,
    label_marginals,
    marginals,
    whitened_projection,
    whitened_q,
)
from .distributed import replicated_by_first
from .bounds import AugmentedBound, Bound, ExactBound
from .updates import batch_size, minibatch_scale
from .validation import (
    check_data,
    check_finite_inputs,
    check_integer,
    check_num_classes,
    checked_label_rows,
    checked_labels,
    is_soft,
)

__all__ = [
    "AUGMENTED_SCHEMES",
    "AugmentedSVGP",
    "BinaryLogisticSVGP",
    "LogisticSoftmaxSVGP",
    "SCHEMES",
]

# LogisticSoftmaxSVGP's schemes: the exact bound, or an augmented bound of one of the
# likelihood's two variational families.
AUGMENTED_SCHEMES = (NegativeMultinomial.name, MeanFieldGammaPoisson.name)
SCHEMES = AUGMENTED_SCHEMES + ("exact",)
# exact_elbo is the exact bound's, whatever the model steps on (its warm start plays no part).
_EXACT = ExactBound()


def _checked_inducing_inputs(Z: object) -> np.ndarray:
    """Inducing inputs given as an array: [M, D] finite numbers with M ≥ 1 (GPflow would fail
    later, inside a transform or a slice, with a message that does not say which argument)."""
    Z = np.asarray(Z)
    if Z.ndim != 2 or Z.shape[0] < 1 or Z.shape[1] < 1:
        raise ValueError(
            f"inducing points Z must be a 2-D array [M, D] with M ≥ 1, got shape {Z.shape}"
        )
    if not np.issubdtype(Z.dtype, np.number) or not np.all(np.isfinite(Z)):
        raise ValueError("inducing points Z must be finite numbers (found NaN, inf or non-numbers)")
    return Z


def _check_lengthscales(kernel: Kernel, input_dim: Optional[int]) -> None:
    """An ARD kernel's lengthscales [L] must be one per input dimension: L ≠ D would end in
    TensorFlow's "Dimensions must be equal" at the first prediction."""
    if input_dim is None:
        return
    kernels = [kernel]
    while kernels:
        current = kernels.pop()
        kernels += list(getattr(current, "kernels", None) or [])
        inner = getattr(current, "kernel", None)
        if isinstance(inner, Kernel):
            kernels.append(inner)
        lengthscales = getattr(current, "lengthscales", None)
        shape = getattr(lengthscales, "shape", None)
        active = getattr(current, "active_dims", slice(None))
        features = len(range(input_dim)[active]) if isinstance(active, slice) else len(active)
        if shape is not None and shape.rank == 1 and shape[0] not in (1, features):
            raise ValueError(
                f"the {type(current).__name__} kernel has {shape[0]} lengthscales, but the "
                f"inputs have {features} features: give one lengthscale per feature (or one "
                "for all)"
            )


class AugmentedSVGP(GPModel, ExternalDataTrainingLossMixin):
    r"""A sparse variational GP classifier whose q(u) :class:`~gpflow_augmented.CAVI` updates in
    closed form, shaped like GPflow's ``SVGP(kernel, likelihood, inducing_variable)``.

    :param kernel: the kernel (one shared by all latent GPs, or a
        :class:`gpflow.kernels.SeparateIndependent`).
    :param likelihood: an :class:`~gpflow_augmented.likelihoods.AugmentedLikelihood`, e.g.
        :class:`~gpflow_augmented.LogisticSoftmax` (multi-class) or
        :class:`~gpflow_augmented.likelihoods.BinaryLogistic`; it owns the augmentation.
    :param inducing_variable: inducing inputs Z [M, D] (array or ``InducingPoints``), or
        :class:`gpflow.inducing_variables.SeparateIndependentInducingVariables`.
    :param num_data: the training-set size N, which scales minibatch ELBOs and updates.
    :param bound: what CAVI steps on (:mod:`~gpflow_augmented.bounds`): an
        :class:`~gpflow_augmented.AugmentedBound` (default; CAVI is exact coordinate ascent on the
        likelihood's augmented bound) or an :class:`~gpflow_augmented.ExactBound` (likelihoods
        with exact sites: closed-form natural-gradient steps on the exact ELBO, whose fixed point
        is the exact variational optimum).
    :param whiten: parametrise q(u) through v = L⁻¹u, as GPflow's SVGP does (default True).
    :param mean_function: the prior mean of every latent, as in GPflow's SVGP (default zero).

    It holds q(u) (``q_mu`` [M, L], ``q_sqrt`` [L, M, M], L latent GPs) and, as GPflow's SVGP,
    computes ``elbo``, ``prior_kl`` and ``predict_f``; ``batch_geometry`` gives the batch's
    sparse-GP quantities that :class:`~gpflow_augmented.CAVI` steps from. The likelihood
    supplies each point's local ELBO and the coefficients of f and -f²/2.
    """

    def __init__(
        self,
        kernel: Kernel,
        likelihood: AugmentedLikelihood,
        inducing_variable: object,
        *,
        num_data: Optional[int] = None,
        bound: Optional[Bound] = None,
        whiten: bool = True,
        q_mu: Optional[np.ndarray] = None,
        q_sqrt: Optional[np.ndarray] = None,
        mean_function: Optional[MeanFunction] = None,
    ) -> None:
        if not isinstance(likelihood, AugmentedLikelihood):
            raise TypeError(
                f"likelihood must be an augmented likelihood (LogisticSoftmax, BinaryLogistic, "
                f"or an AugmentedLikelihood of your own), got {type(likelihood).__name__}"
            )
        if bound is None:
            bound = AugmentedBound()
        if not isinstance(bound, Bound):
            raise TypeError(
                f"bound must be a Bound (AugmentedBound() or ExactBound()), got {bound!r}"
            )
        bound.check(likelihood)
        if num_data is not None:
            num_data = check_integer(num_data, "num_data")
        if not isinstance(inducing_variable, InducingVariables):
            inducing_variable = _checked_inducing_inputs(inducing_variable)
        num_latent_gps = likelihood.num_latent_gps
        kernel, inducing_variable = canonical_kernel_and_inducing(
            kernel, inducingpoint_wrapper(inducing_variable), num_latent_gps
        )
        _check_lengthscales(kernel, inducing_inputs(inducing_variable).shape[-1])
        super().__init__(kernel, likelihood, mean_function, num_latent_gps=num_latent_gps)
        self.num_classes = likelihood.num_classes
        self.bound = bound
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
    def learns_class_weights(self) -> bool:
        """Whether the likelihood has class weights θ that :class:`~gpflow_augmented.CAVI`
        updates."""
        return self.likelihood.learns_class_weights

    @property
    def accepts_soft_labels(self) -> bool:
        """Whether training takes rows [N, C] of class probabilities as well as labels [N, 1]."""
        return self.likelihood.accepts_soft_labels

    @property
    def input_dim(self) -> Optional[int]:
        """D, the inputs' dimension (the inducing inputs')."""
        Z = inducing_inputs(self.inducing_variable)
        return Z.shape[-1]

    @check_shapes(
        "X: [N, D]",
        "return.L: [broadcast K, M, M]",
        "return.q_mu: [M, K]",
        "return.q_sqrt: [K, M, M]",
        "return.marginals.mean: [N, K]",
        "return.marginals.variance: [N, K]",
        "return.A: [broadcast K, M, N]",
        "return.prior_mean: [N, broadcast K]",
        "return.residual: [N, broadcast K]",
        "Y: [N, L]",
    )
    def batch_geometry(
        self, X: tf.Tensor, subset: Optional[ClassSubset] = None, Y: Optional[tf.Tensor] = None
    ) -> BatchGeometry:
        """The batch's sparse-GP quantities, for all classes or a :class:`ClassSubset`: the
        Cholesky factor L of K_mm, whitened q(v), the marginals q(f) (the prior mean included),
        the whitened projection A and the prior mean; on a subset, given the labels ``Y``, the
        marginals also carry each point's observed class's."""
        subset = as_class_subset(subset, self.num_classes)
        classes = subset_classes(subset)
        L, A, residual = whitened_projection(
            self.kernel, self.inducing_variable, X, self.num_latent_gps, broadcast=False
        )
        prior_mean = self.mean_function(X)
        own_class = None
        if subset is not None and Y is not None:
            labels = tf.cast(Y[:, 0], tf.int32)
            mean, variance = label_marginals(
                L,
                A,
                residual,
                *variational_parameters(self.q_mu, self.q_sqrt, labels),
                labels,
                self.whiten,
            )
            own_prior_mean = (
                prior_mean[:, 0]
                if prior_mean.shape[-1] == 1
                else tf.gather(prior_mean, labels[:, None], batch_dims=1)[:, 0]
            )
            own_class = (mean + own_prior_mean, variance)
        if classes is not None and L.shape[0] != 1:
            # One prior per class: gather the subset's (the projection itself still costs C).
            L, A = tf.gather(L, classes), tf.gather(A, classes)
            residual = tf.gather(residual, classes, axis=1)
        q_mu, q_sqrt = whitened_q(
            L, *variational_parameters(self.q_mu, self.q_sqrt, classes), self.whiten
        )
        if classes is not None and prior_mean.shape[-1] != 1:
            prior_mean = tf.gather(prior_mean, classes, axis=1)
        Fmu, Fvar = marginals(A, residual, q_mu, q_sqrt, prior_mean)
        return BatchGeometry(
            L,
            q_mu,
            q_sqrt,
            Marginals(Fmu, Fvar, subset, own_class),
            A,
            prior_mean,
            residual,
        )

    @check_shapes("return: []")
    def prior_kl(self) -> tf.Tensor:
        """KL[q(u) ‖ p(u)], summed over the latent GPs."""
        L = kuu_cholesky(self.kernel, self.inducing_variable)
        return gauss_kl(*whitened_q(L, self.q_mu, self.q_sqrt, self.whiten))

    @inherit_check_shapes
    def maximum_log_likelihood_objective(self, data: RegressionData) -> tf.Tensor:  # type: ignore[override]
        return self.elbo(data)

    @check_shapes("return: []")
    def elbo(
        self,
        data: RegressionData,
        subset: Optional[ClassSubset] = None,
        bound: Optional[Bound] = None,
    ) -> tf.Tensor:
        """The model's evidence lower bound estimated from the batch, scaled by num_data: its
        ``bound`` (default the model's own: the augmented bound at the optimal local parameters,
        or the exact ELBO for a model on the exact bound).

        With a :class:`ClassSubset` K it is the class-subsampled estimate: per-class sums and the
        KL count C/``|K|`` times (see :mod:`~gpflow_augmented.likelihoods.logistic_softmax`). It
        means the same in any context, a ``tf.distribute`` replica included: the estimate from the
        data it is given. Combining replicas is the training loop's work
        (:class:`~gpflow_augmented.Trainer`).
        """
        X, Y = data
        subset = as_class_subset(subset, self.num_classes)
        if tf.executing_eagerly():
            check_data(X, Y, self.num_classes, self.input_dim, self.accepts_soft_labels)
        X = tf.convert_to_tensor(X, dtype=default_float())
        all_valid = tf.constant(True)
        if not tf.executing_eagerly():
            if self.accepts_soft_labels and is_soft(Y, self.num_classes):
                rows = checked_label_rows(Y, self.num_classes, default_float())
                all_valid = tf.reduce_all(tf.math.is_finite(rows))
            else:
                all_valid = tf.reduce_all(checked_labels(Y, self.num_classes)[1])
            X = check_finite_inputs(X)
        _, elbo = (self.bound if bound is None else bound).batch_bound(
            self.likelihood,
            self.batch_geometry(X, subset, Y),
            Y,
            minibatch_scale(self.num_data, batch_size(X)),
        )
        # Under XLA, which drops the assertion, a bad label makes the bound NaN, not a number.
        return tf.where(all_valid, elbo, tf.constant(np.nan, elbo.dtype))

    @check_shapes("return: []")
    def exact_elbo(self, data: RegressionData, subset: Optional[ClassSubset] = None) -> tf.Tensor:
        """The exact (non-augmented) ELBO, E_q log p(y | f) - KL, with the accurate expectation of
        :mod:`~gpflow_augmented.likelihoods.logistic_softmax`; otherwise as :meth:`elbo`. It is
        never below the augmented bound."""
        return self.elbo(data, subset, _EXACT)

    # -- predictions --------------------------------------------------------------------------

    @inherit_check_shapes
    def predict_f(
        self, Xnew: InputData, full_cov: bool = False, full_output_cov: bool = False
    ) -> MeanAndVariance:
        """q(f) at ``Xnew`` [N, D]: its mean [N, L] and variance ([N, L], or the covariances that
        ``full_cov`` and ``full_output_cov`` ask for, as GPflow's ``SVGP.predict_f``), L the latent
        GPs (C for a multi-class model). Non-finite inputs are refused with an
        :class:`~gpflow_augmented.InvalidDataError`."""
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


def _check_scheme_augmentation(
    scheme: str, augmentation: LogisticSoftmaxAugmentation, inner_iterations: Optional[int]
) -> None:
    """A likelihood given to :class:`LogisticSoftmaxSVGP` must already carry its scheme's
    augmentation (negative-multinomial also for the exact scheme's warm start): the model does
    not change an object the user passed."""
    wanted = MeanFieldGammaPoisson if scheme == "gamma-poisson" else NegativeMultinomial
    matches = isinstance(augmentation, wanted) and (
        inner_iterations is None
        or not isinstance(augmentation, MeanFieldGammaPoisson)
        or augmentation.inner_iterations == inner_iterations
    )
    if not matches:
        example = (
            f"MeanFieldGammaPoisson({inner_iterations or 5})"
            if wanted is MeanFieldGammaPoisson
            else "NegativeMultinomial()"
        )
        raise ValueError(
            f"scheme={scheme!r} needs a likelihood with the {example} augmentation, got "
            f"{augmentation!r}: pass LogisticSoftmax(..., augmentation={example}), or no "
            f"likelihood"
        )


class LogisticSoftmaxSVGP(AugmentedSVGP):
    r"""Multi-class GP classification with the logistic-softmax likelihood, made conjugate:
    ``AugmentedSVGP(kernel, LogisticSoftmax(num_classes), inducing_variable, ...)`` with the
    scheme chosen by name.

    :param kernel: one kernel shared by all classes (the paper's default), or a
        :class:`gpflow.kernels.SeparateIndependent` with one kernel per class.
    :param inducing_variable: inducing inputs Z [M, D] (array or ``InducingPoints``), shared by all
        classes, or a :class:`gpflow.inducing_variables.SeparateIndependentInducingVariables`.
    :param num_classes: C ≥ 2; labels are integers 0..C-1 in a column ``Y`` [N, 1].
    :param num_data: the training-set size N, which scales minibatch ELBOs and updates.
    :param scheme: ``"exact"`` (default): no augmentation, the ELBO is the exact one
        (:mod:`~gpflow_augmented.likelihoods.logistic_softmax`) and :class:`~gpflow_augmented.CAVI`
        takes closed-form natural-gradient steps on it, whose fixed point is the exact variational
        optimum; ``"negative-multinomial"``: the augmented bound with λ integrated out exactly (q(n)
        negative-multinomial, no inner loop), whose fixed point is biased towards large
        latents; or ``"gamma-poisson"``: the paper's mean-field q(λ) q(n, ω), γ and α solved by
        ``inner_iterations`` Newton steps. The scheme decides the likelihood's augmentation
        (the exact scheme's warm start takes the negative-multinomial bound's sites).
    :param inner_iterations: Newton steps of the gamma-poisson scheme (default 5, or the given
        likelihood's).
    :param whiten: parametrise q(u) through v = L⁻¹u, as GPflow's SVGP does (default True).
    :param likelihood: the :class:`LogisticSoftmax` (built with the scheme's augmentation if not
        given; pass one for class weights or other predictive settings, with the scheme's
        augmentation: the model never changes the likelihood it is given).
    :param mean_function: the prior mean of every latent, as in GPflow's SVGP (default zero).
        ``gpflow.mean_functions.Constant()``, learned with the hyperparameters, lets the model move
        towards the regime where every σ(f_c) is small and the logistic-softmax approaches the
        softmax.

    The model of the comparison's ``lsm``, on data ``X`` [N, D] and labels ``Y`` [N, 1]::

        model = ga.LogisticSoftmaxSVGP(
            ga.initial_kernel(X),  # SE-ARD, median-distance lengthscales
            ga.inducing_points(X, 100),
            num_classes=int(Y.max()) + 1,
            num_data=len(X),
            mean_function=gpflow.mean_functions.Constant(),
        )
        result = ga.fit(model, (X, Y), iterations=1000, batch_size=200)
        probabilities, _ = model.predict_y(X_test)
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
        inner_iterations: Optional[int] = None,
        whiten: bool = True,
        likelihood: Optional[LogisticSoftmax] = None,
        q_mu: Optional[np.ndarray] = None,
        q_sqrt: Optional[np.ndarray] = None,
        mean_function: Optional[MeanFunction] = None,
    ) -> None:
        num_classes = check_num_classes(num_classes)
        if inner_iterations is not None:
            inner_iterations = check_integer(inner_iterations, "inner_iterations")
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        if likelihood is None:
            if scheme == "gamma-poisson":
                augmentation: LogisticSoftmaxAugmentation = MeanFieldGammaPoisson(
                    5 if inner_iterations is None else inner_iterations
                )
            else:
                augmentation = NegativeMultinomial()
            likelihood = LogisticSoftmax(num_classes, augmentation=augmentation)
        if not isinstance(likelihood, LogisticSoftmax) or likelihood.num_classes != num_classes:
            raise ValueError(f"likelihood must be a LogisticSoftmax({num_classes})")
        _check_scheme_augmentation(scheme, likelihood.augmentation, inner_iterations)
        super().__init__(
            kernel,
            likelihood,
            inducing_variable,
            num_data=num_data,
            bound=ExactBound() if scheme == "exact" else AugmentedBound(),
            whiten=whiten,
            q_mu=q_mu,
            q_sqrt=q_sqrt,
            mean_function=mean_function,
        )
        self.scheme = scheme


class BinaryLogisticSVGP(AugmentedSVGP):
    """Binary GP classification with the logistic link σ(y'f), made conjugate by one Pólya-Gamma
    variable per point (X-GPC, Wenzel et al. 2019) and trained by closed-form CAVI:
    ``AugmentedSVGP(kernel, BinaryLogistic(), inducing_variable, ...)``.

    This is not :class:`LogisticSoftmaxSVGP` with C = 2. That model has two independent latent GPs
    and p(y = 1 | f) = σ(f₁) / (σ(f₀) + σ(f₁)); this one has a single GP and p(y = 1 | f) = σ(f),
    the likelihood of GPflow's ``Bernoulli(invlink=tf.sigmoid)``. The two put different priors on
    the class probability (at f = 0 draws, σ(f₁)/(σ(f₀) + σ(f₁)) is far more concentrated around ½
    than σ(f)), so their posteriors differ.

    :param kernel: the GP's kernel.
    :param inducing_variable: inducing inputs Z [M, D] (array or ``InducingPoints``).
    :param num_data: the training-set size N, which scales minibatch ELBOs and updates.
    :param whiten: parametrise q(u) through v = L⁻¹u, as GPflow's SVGP does (default True).
    :param mean_function: the prior mean of f, as in GPflow's SVGP (default zero).

    Labels are ``Y`` [N, 1] in {0, 1}. ``q_mu`` is [M, 1] and ``q_sqrt`` [1, M, M], as in a
    single-output GPflow ``SVGP``. Predictions are those of ``Bernoulli(invlink=tf.sigmoid)``,
    whose expectations over the Gaussian marginal of f are exact 1-D Gauss–Hermite quadrature.
    """

    @check_shapes(
        "q_mu: [M, 1] if q_mu is not None",
        "q_sqrt: [1, M, M] if q_sqrt is not None",
    )
    def __init__(
        self,
        kernel: Kernel,
        inducing_variable: object,
        num_data: Optional[int] = None,
        *,
        whiten: bool = True,
        q_mu: Optional[np.ndarray] = None,
        q_sqrt: Optional[np.ndarray] = None,
        mean_function: Optional[MeanFunction] = None,
    ) -> None:
        super().__init__(
            kernel,
            BinaryLogistic(),
            inducing_variable,
            num_data=num_data,
            whiten=whiten,
            q_mu=q_mu,
            q_sqrt=q_sqrt,
            mean_function=mean_function,
        )
