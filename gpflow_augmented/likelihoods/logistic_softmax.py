r"""
The logistic-softmax likelihood p(y = k | f) = σ(f_k) / Σ_c σ(f_c) as a GPflow likelihood, built on
its exact Gaussian expectation and the exact-bound sites (:mod:`.expectation`) and its augmentation
(:mod:`.augmentation`). These three modules hold every formula of the likelihood's side of the
default method's step, but the Pólya-Gamma distribution's mean and tilt, which
:mod:`.polya_gamma` shares with the binary likelihood; q(f) is in
:mod:`~gpflow_augmented.projection` and the step in :mod:`~gpflow_augmented.updates`.

It is a complete, stand-alone GPflow likelihood: inside stock :class:`gpflow.models.SVGP` it gives
the non-augmented ("VI") model, trained by gradients. It also owns its Gamma–Poisson–Pólya-Gamma
augmentation and implements the augmented-likelihood contract
(:class:`~gpflow_augmented.likelihoods.AugmentedLikelihood`), through which
:class:`~gpflow_augmented.LogisticSoftmaxSVGP` is trained in closed form; both models predict with
exactly the same code.

The variational expectation E log p(y | f) is the accurate, deterministic quadrature of
:mod:`.expectation` (a smooth objective that Scipy can optimise, and the one the exact-bound
CAVI step converges to). Predictions are taken with randomised quasi-Monte Carlo: a Sobol
sequence with a seeded random shift, mapped through the normal quantile function.
"""

import warnings
from typing import Any, Optional, Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes, inherit_check_shapes
from gpflow.base import MeanAndVariance, Parameter, TensorType
from gpflow.config import default_float
from gpflow.utilities import positive

from .polya_gamma import (
    LocalParameters,
    sample_polya_gamma,
)
from ..class_subsets import ClassSubset
from ..validation import (
    InvalidDataError,
    check_integer,
    check_num_classes,
    checked_label_rows,
    is_soft,
)
from .augmentation import LogisticSoftmaxAugmentation, NegativeMultinomial
from .base import AugmentedLikelihood, Marginals
from .expectation import (
    DEFAULT_NUM_HERMITE,
    S_STEP,
    exact_sites,
    expected_log_logistic_softmax,
    expected_log_sigmoid,
    log_logistic_softmax,
    sites_from_derivatives,
    subset_site_weights,
)

__all__ = [
    "LogisticSoftmax",
    "numpy_sigmoid",
    "quasi_normal_samples",
    "sobol_uniforms",
    "DEFAULT_NUM_PREDICTIVE_SAMPLES",
    "PREDICTIVES",
    "quasi_latent_samples",
]

DEFAULT_NUM_PREDICTIVE_SAMPLES = 1000
#: The predictive rules of :class:`LogisticSoftmax`: ``"mean"``, E_q p(y = k | f), and
#: ``"geometric-mean"``, exp E_q log p(y = k | f) normalised over k.
PREDICTIVES = ("mean", "geometric-mean")


def sobol_uniforms(num_samples: int, dim: int) -> np.ndarray:
    """[num_samples, dim] unscrambled Sobol points in [0, 1), skipping the origin."""
    from scipy.stats import qmc

    # Sobol balance holds for powers of two; other counts are still low-discrepancy.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return qmc.Sobol(d=dim, scramble=False).random(num_samples + 1)[1:]


# NumPy and SciPy at trace time: AutoGraph must not convert it (SciPy's special functions are Python
# wrappers that AutoGraph cannot transform where SciPy's array API is on, SCIPY_ARRAY_API=1).
@tf.autograph.experimental.do_not_convert
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


class LogisticSoftmax(AugmentedLikelihood):
    """The logistic-softmax multi-class likelihood for integer labels ``Y`` [N, 1] in 0..C-1,
    p(y = k | f) = θ_k σ(f_k) / Σ_c θ_c σ(f_c). Training also takes rows ``Y`` [N, C] of class
    probabilities (one-hot or soft labels), for which log p(y | f) = Σ_k y_k log p(k | f);
    ``predict_log_density`` needs integer labels.

    :param num_classes: C ≥ 2.
    :param num_hermite: Gauss–Hermite nodes per class of ``variational_expectations``.
    :param num_predictive_samples: quasi-Monte Carlo points for ``predict_mean_and_var`` and
        ``predict_log_density`` with ``predictive="mean"`` (default 1000).
    :param seed: the seed of the random shift of the quasi-Monte Carlo points.
    :param class_weights: learn per-class weights θ (a ``Parameter`` [C], initially 1; θ = 1 and
        no parameter if false). They lift the likelihood's confidence cap: with θ = 1 and latents
        ±4 over 10 classes, max p is 0.858. Inside a stock ``SVGP`` they are trained with the
        hyperparameters; :class:`~gpflow_augmented.LogisticSoftmaxSVGP` updates them in closed form
        (:class:`~gpflow_augmented.CAVI`). Only the ratios of the weights matter.
    :param augmentation: the variational family of the augmented model,
        :class:`~gpflow_augmented.likelihoods.NegativeMultinomial` (default) or
        :class:`~gpflow_augmented.likelihoods.MeanFieldGammaPoisson`.
    :param predictive: what ``predict_mean_and_var`` and ``predict_log_density`` give for
        q(f) = N(Fmu, Fvar). ``"mean"`` (default): the posterior predictive E_q p(y | f), by
        quasi-Monte Carlo. ``"geometric-mean"``: exp E_q log p(y = k | f) normalised over k, which
        is ∝ θ_k exp E_q log σ(f_k) (one Gauss–Hermite integral a class, deterministic): the
        per-point likelihood the ELBO fits. Far below 0, E log σ(f) ≈ E f whatever Var f, where
        E σ(f) ≈ exp(E f + Var f / 2), so a class whose latent the data leave uncertain there
        does not lift the normaliser: more confident, with a lower NLL where the mean rule is
        under-confident, and a far higher one on test points unlike the training data, whose
        hedging it leaves out (docs/benchmarks.md, "Where lsm's under-confidence comes from").
    """

    def __init__(
        self,
        num_classes: int,
        num_hermite: int = DEFAULT_NUM_HERMITE,
        num_predictive_samples: int = DEFAULT_NUM_PREDICTIVE_SAMPLES,
        seed: int = 0,
        class_weights: bool = False,
        augmentation: Optional[LogisticSoftmaxAugmentation] = None,
        predictive: str = "mean",
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
        if predictive not in PREDICTIVES:
            raise ValueError(f"predictive must be one of {PREDICTIVES}, got {predictive!r}")
        self.predictive = predictive
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

    def _log_geometric_mean(self, Fmu: TensorType, Fvar: TensorType) -> tf.Tensor:
        """log of exp E log p(y = k | f) normalised over k [N, C]: the normaliser Σ_c θ_c σ(f_c)
        is the same for every k, so only θ_k exp E log σ(f_k) is left to normalise."""
        Fmu = tf.convert_to_tensor(Fmu)
        log_weighted = expected_log_sigmoid(Fmu, tf.convert_to_tensor(Fvar, Fmu.dtype))
        if self.class_weights is not None:
            log_weighted += self.log_class_weights()
        return tf.nn.log_softmax(log_weighted, axis=-1)

    def _log_predictive(self, Fmu: TensorType, Fvar: TensorType) -> tf.Tensor:
        """log p(y = k) [N, C] under the ``predictive`` rule; the mean rule's average over the
        quasi-Monte Carlo draws is taken in log space, so a class's tiny probability stays finite
        as a log density."""
        if self.predictive == "geometric-mean":
            return self._log_geometric_mean(Fmu, Fvar)
        F = self._latent_samples(Fmu, Fvar, self.num_predictive_samples)
        log_p = log_logistic_softmax(F, self.log_class_weights())  # [S, N, C]
        num = tf.cast(self.num_predictive_samples, log_p.dtype)
        return tf.reduce_logsumexp(log_p, axis=0) - tf.math.log(num)

    def _label_log_density(self, log_p: tf.Tensor, Y: TensorType) -> tf.Tensor:
        # The predictive density of an observed class: integer labels only.
        return tf.reduce_sum(self._one_hot(Y, log_p.dtype, allow_soft=False) * log_p, axis=-1)

    @inherit_check_shapes
    def _predict_mean_and_var(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType
    ) -> MeanAndVariance:
        p = tf.exp(self._log_predictive(Fmu, Fvar))
        return p, p - tf.square(p)

    @inherit_check_shapes
    def _predict_log_density(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType, Y: TensorType
    ) -> tf.Tensor:
        return self._label_log_density(self._log_predictive(Fmu, Fvar), Y)

    @check_shapes("Fmu: [N, C]", "Fvar: [N, C]", "Y: [N, 1]", "return[0]: [N, C]", "return[1]: [N]")
    def predict_mean_and_log_density(
        self, X: TensorType, Fmu: TensorType, Fvar: TensorType, Y: TensorType
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """``predict_mean_and_var``'s class probabilities and ``predict_log_density``'s values
        from one evaluation of the predictive (the mean rule's draws are the cost of each), for a
        caller that needs both (:class:`~gpflow_augmented.metrics.Evaluator`)."""
        log_p = self._log_predictive(Fmu, Fvar)
        return tf.exp(log_p), self._label_log_density(log_p, Y)

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
