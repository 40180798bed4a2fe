r"""
:class:`PosteriorSamples`: draws from a sampler's posterior over the latent GPs, with GPflow-style
predictions and convergence diagnostics.

Both samplers (:class:`~gpflow_augmented.sampling.gibbs.GibbsSampler` on the augmented model and
:class:`~gpflow_augmented.sampling.nuts.NutsSampler` on the original one) draw the whitened values
v = L⁻¹u ~ N(0, I) at the inputs Z (the training inputs for the full GP), so one class turns both
into predictions: given a draw v, the latent values at new inputs are
f* | v ~ N(μ(x*) + A*ᵀv, diag(K** - A*ᵀA*)) with A* = L⁻¹K_z* and μ the prior mean (zero unless
a ``mean_function`` is given), the same conditional SVGP predicts with.

Diagnostics are computed on what a user reads off the posterior, the latent conditional means and
the predictive probabilities at chosen inputs: split R-hat (``tfp.mcmc.potential_scale_reduction``)
and the effective sample size summed over chains (``tfp.mcmc.effective_sample_size`` with Geyer's
initial positive sequence).
"""

from typing import Callable, List, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from scipy.special import ndtri
from check_shapes import check_shapes
from gpflow.config import default_float
from gpflow.inducing_variables import InducingVariables
from gpflow.kernels import Kernel
from gpflow.mean_functions import MeanFunction
from gpflow.models.util import inducingpoint_wrapper

from ..likelihoods import AugmentedLikelihood, LogisticSoftmax, sobol_uniforms
from ..projection import canonical_kernel_and_inducing, whitened_projection
from ..validation import check_data, check_num_classes

__all__ = [
    "ConvergenceDiagnostics",
    "LatentSampler",
    "PosteriorSamples",
    "monte_carlo_standard_error",
    "check_counts",
]

# Elements of the [chains, draws, N, inner points, C] tensor of one predictive chunk: ~80 MB.
_PREDICTIVE_CHUNK_ELEMENTS = 10_000_000
# Draws of the series one diagnostic block holds. The FFT behind the effective sample size needs
# about 200 bytes a draw (measured: 4.9 GB for 1,000 draws of 20,800 series), so ~1 GB a block
# instead of 13 GB for letter's 4 chains x 3,000 draws x 200 points x 26 classes at once.
_DIAGNOSTIC_CHUNK_ELEMENTS = 5_000_000
_EPS = np.finfo(np.float64).eps


class ConvergenceDiagnostics(NamedTuple):
    """Split R-hat and effective sample size (summed over chains), each [N, C]."""

    latent_rhat: np.ndarray
    latent_ess: np.ndarray
    probability_rhat: np.ndarray
    probability_ess: np.ndarray

    @property
    def max_rhat(self) -> float:
        return float(max(np.max(self.latent_rhat), np.max(self.probability_rhat)))

    @property
    def min_ess(self) -> float:
        return float(min(np.min(self.latent_ess), np.min(self.probability_ess)))


def monte_carlo_standard_error(draws: np.ndarray) -> np.ndarray:
    """Standard error of the mean over chains and draws, from the effective sample size.

    :param draws: [chains, draws, ...] values of one quantity per draw.
    """
    draws = np.asarray(draws)
    ess = _effective_sample_size(draws)
    return np.std(draws.reshape((-1,) + draws.shape[2:]), axis=0, ddof=1) / np.sqrt(ess)


def _by_series_blocks(statistic: Callable[[tf.Tensor], tf.Tensor], draws: np.ndarray) -> np.ndarray:
    """``statistic`` of [chains, draws, ...] draws, computed a block of series (the trailing
    axes, flattened) at a time and handed to it as tfp lays out states, [draws, chains, series]:
    each series' statistic depends on that series alone, and the whole at once can need many
    times the memory of the draws."""
    if draws.shape[0] < 2:
        raise ValueError("diagnostics across chains need at least 2 chains")
    series_shape = draws.shape[2:]
    flat = np.swapaxes(draws.reshape(draws.shape[:2] + (-1,)), 0, 1)
    per_series = flat.shape[0] * flat.shape[1]
    step = max(1, _DIAGNOSTIC_CHUNK_ELEMENTS // per_series)
    blocks = [
        statistic(tf.constant(flat[:, :, start : start + step])).numpy()
        for start in range(0, flat.shape[2], step)
    ]
    return np.concatenate(blocks or [np.empty(0, flat.dtype)]).reshape(series_shape)


def _effective_sample_size(draws: np.ndarray) -> np.ndarray:
    # tfp's FFT autocorrelation casts its complex result to real on purpose and logs a warning
    # each time; keep it off the user's console.
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        return _by_series_blocks(_effective_sample_size_of_block, draws)
    finally:
        logger.setLevel(level)


def _effective_sample_size_of_block(states: tf.Tensor) -> tf.Tensor:
    # Geyer's initial positive sequence (as Stan): the default cut at the first negative
    # autocorrelation reports exactly N for antithetic chains such as NUTS often gives.
    return tfp.mcmc.effective_sample_size(
        states, cross_chain_dims=1, filter_beyond_positive_pairs=True
    )


def _split_rhat(draws: np.ndarray) -> np.ndarray:
    return _by_series_blocks(_split_rhat_of_block, draws)


def _split_rhat_of_block(states: tf.Tensor) -> tf.Tensor:
    return tfp.mcmc.potential_scale_reduction(states, independent_chain_ndims=1, split_chains=True)


class PosteriorSamples:
    """Posterior draws of a GP classifier's whitened latent values (K latent GPs, C classes).

    :param whitened: [chains, draws, K, M] draws of v = L⁻¹u at the inputs Z.
    :param kernel: the (fixed) kernel the sampler used.
    :param inducing_variable: the inputs Z, as GPflow inducing variables.
    :param likelihood: the :class:`~gpflow_augmented.likelihoods.AugmentedLikelihood` that turns
        latent values into class probabilities
        (:meth:`~gpflow_augmented.likelihoods.AugmentedLikelihood.log_class_probabilities`).
    :param num_inner_points: points per draw for the expectation over f* | v in predictions.
    :param seed: seeds the random shifts of those points.
    :param mean_function: the prior mean the sampler used (zero if ``None``).
    """

    def __init__(
        self,
        whitened: np.ndarray,
        kernel: Kernel,
        inducing_variable: InducingVariables,
        likelihood: AugmentedLikelihood,
        *,
        num_inner_points: int = 32,
        seed: int = 0,
        mean_function: Optional[MeanFunction] = None,
    ) -> None:
        whitened = np.asarray(whitened)
        if whitened.ndim != 4 or whitened.shape[2] != likelihood.num_latent_gps:
            raise ValueError(
                f"whitened draws must be [chains, draws, K={likelihood.num_latent_gps}, M], "
                f"got shape {whitened.shape}"
            )
        self.whitened = whitened
        self.kernel = kernel
        self.inducing_variable = inducing_variable
        self.likelihood = likelihood
        self.num_classes = likelihood.num_classes
        self.num_latent_gps = likelihood.num_latent_gps
        self.num_inner_points = int(num_inner_points)
        self.seed = int(seed)
        self.mean_function = mean_function

    @property
    def num_chains(self) -> int:
        return self.whitened.shape[0]

    @property
    def num_draws(self) -> int:
        return self.whitened.shape[1]

    @check_shapes("Xnew: [N, D]", "return[0]: [S, T, N, K]", "return[1]: [N, K]")
    def latent_conditionals(self, Xnew: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Per draw, the mean of f* | v [chains, draws, N, K]; and its variance [N, K], which is
        the same for every draw."""
        Xnew = tf.convert_to_tensor(Xnew, dtype=default_float())
        _, A, residual = whitened_projection(
            self.kernel, self.inducing_variable, Xnew, self.num_latent_gps
        )
        means = tf.einsum("cmn,stcm->stnc", A, tf.constant(self.whitened, dtype=A.dtype))
        means += _prior_mean(self.mean_function, Xnew, self.num_latent_gps)
        return means.numpy(), np.maximum(residual.numpy(), 0.0)

    @check_shapes("Xnew: [N, D]", "return[0]: [N, K]", "return[1]: [N, K]")
    def predict_f(self, Xnew: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of the latent f* (law of total variance over the draws)."""

        def moments(rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
            means, residual = self.latent_conditionals(rows)
            flat = means.reshape((-1,) + means.shape[2:])
            return flat.mean(axis=0), flat.var(axis=0) + residual

        parts = [moments(rows) for rows in self._row_chunks(Xnew)]
        return np.concatenate([m for m, _ in parts]), np.concatenate([v for _, v in parts])

    @check_shapes("Xnew: [N, D]", "return: [S, T, N, C]")
    def predictive_draws(self, Xnew: np.ndarray) -> np.ndarray:
        """Per draw v, an unbiased estimate of E[p(y* = k | f*) | v] [chains, draws, N, C].

        f* | v is Gaussian with the residual variance; its expectation is taken over
        ``num_inner_points`` Sobol points, randomly shifted (seeded) for each draw, so the estimate
        is unbiased and adds far less noise than the posterior draws themselves.
        """
        means, residual = self.latent_conditionals(Xnew)
        num_chains, num_draws, num_points, K = means.shape
        sobol = sobol_uniforms(self.num_inner_points, K)  # [inner points, K]
        shifts = np.random.default_rng(self.seed).uniform(size=(num_chains, num_draws, 1, 1, K))
        per_draw = num_chains * num_points * self.num_inner_points * K
        chunk = max(1, _PREDICTIVE_CHUNK_ELEMENTS // per_draw)
        scale = tf.sqrt(tf.constant(residual))[:, None, :]  # [N, 1, K]
        probabilities = np.empty(means.shape[:3] + (self.num_classes,), means.dtype)
        for start in range(0, num_draws, chunk):
            block = slice(start, start + chunk)
            uniforms = np.mod(sobol + shifts[:, block], 1.0)  # [S, T, 1, inner points, K]
            normals = tf.constant(ndtri(np.clip(uniforms, _EPS, 1 - _EPS)), dtype=means.dtype)
            latent = tf.constant(means[:, block])[:, :, :, None, :] + scale * normals
            log_p = self.likelihood.log_class_probabilities(latent)
            p = tf.reduce_mean(tf.exp(log_p), axis=-2)
            probabilities[:, block] = p.numpy()
        return probabilities

    @check_shapes("Xnew: [N, D]", "return[0]: [N, C]", "return[1]: [N, C]")
    def predict_y(self, Xnew: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Posterior predictive class probabilities p and their Bernoulli variance p(1 - p)."""
        p = np.concatenate(
            [self.predictive_draws(rows).mean(axis=(0, 1)) for rows in self._row_chunks(Xnew)]
        )
        return p, p - np.square(p)

    def _row_chunks(self, Xnew: np.ndarray) -> List[np.ndarray]:
        """Xnew in blocks small enough that one block's per-draw latent means stay ~80 MB."""
        Xnew = np.asarray(Xnew)
        per_row = self.whitened.shape[0] * self.whitened.shape[1] * self.num_classes
        rows = max(1, _PREDICTIVE_CHUNK_ELEMENTS // per_row)
        return [Xnew[start : start + rows] for start in range(0, len(Xnew), rows)]

    @check_shapes("data[0]: [N, D]", "data[1]: [N, 1]", "return: [N]")
    def predict_log_density(self, data: Tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """log p(y* | x*, data) of each point."""
        Xnew, Ynew = data
        p, _ = self.predict_y(Xnew)
        labels = np.asarray(Ynew)[:, 0].astype(int)
        return np.log(p[np.arange(len(labels)), labels])

    @check_shapes("Xnew: [N, D]")
    def diagnostics(self, Xnew: np.ndarray) -> ConvergenceDiagnostics:
        """Split R-hat and ESS of the latent conditional means and predictive probabilities."""
        means, _ = self.latent_conditionals(Xnew)
        probabilities = self.predictive_draws(Xnew)
        return ConvergenceDiagnostics(
            latent_rhat=_split_rhat(means),
            latent_ess=_effective_sample_size(means),
            probability_rhat=_split_rhat(probabilities),
            probability_ess=_effective_sample_size(probabilities),
        )


class LatentSampler:
    """What both samplers share: the checked data, the whitened projection A [K, M, N] of the
    training inputs for the likelihood's K latent GPs, the one-hot labels [C, N] and the
    likelihood's label rows [K, N].

    :param data: (X [N, D], Y [N, 1]) with integer labels 0..C-1.
    :param kernel: one kernel shared by all latent GPs, or a ``SeparateIndependent`` with one per
          latent GP.
    :param num_classes: C ≥ 2.
    :param inducing_variable: inducing inputs Z; ``None`` (default) samples the full GP (Z = X).
    :param likelihood: an :class:`~gpflow_augmented.likelihoods.AugmentedLikelihood` with C
        classes; a :class:`LogisticSoftmax` is built if none is given.
    :param mean_function: a fixed GPflow prior mean μ (e.g. ``Constant``, as the ``lsm`` model
        learns one), so that f = μ(X) + Aᵀv; zero if ``None``.
    """

    def __init__(
        self,
        data: Tuple[np.ndarray, np.ndarray],
        kernel: Kernel,
        num_classes: int,
        inducing_variable: Optional[object] = None,
        likelihood: Optional[AugmentedLikelihood] = None,
        mean_function: Optional[MeanFunction] = None,
    ) -> None:
        self.num_classes = check_num_classes(num_classes)
        if likelihood is None:
            likelihood = LogisticSoftmax(self.num_classes)
        if not isinstance(likelihood, AugmentedLikelihood):
            raise TypeError(
                f"likelihood must be an AugmentedLikelihood, got {type(likelihood).__name__}"
            )
        if likelihood.num_classes != self.num_classes:
            raise ValueError(
                f"the likelihood has {likelihood.num_classes} classes, not num_classes="
                f"{self.num_classes}"
            )
        self.likelihood = likelihood
        self.num_latent_gps = likelihood.num_latent_gps
        X, Y = data
        check_data(X, Y, self.num_classes)
        X = np.asarray(X, dtype=default_float())
        self.kernel, self.inducing_variable = canonical_kernel_and_inducing(
            kernel,
            inducingpoint_wrapper(X if inducing_variable is None else inducing_variable),
            self.num_latent_gps,
        )
        _, self.projection, _ = whitened_projection(
            self.kernel, self.inducing_variable, tf.constant(X), self.num_latent_gps
        )
        self.mean_function = mean_function
        #: m = μ(X) [K, N], the prior mean at the training inputs: f = m + Aᵀv
        self.prior_mean = _prior_mean(mean_function, X, self.num_latent_gps).numpy().T
        labels = np.asarray(Y)[:, 0].astype(int)
        self.labels_onehot = np.eye(self.num_classes)[labels].T  # [C, N]
        rows = likelihood.label_rows(tf.constant(labels[:, None]))
        self.label_rows = np.asarray(rows, dtype=np.float64).T  # [K, N]

    @property
    def num_latent(self) -> int:
        """M: the number of whitened latent values per latent GP."""
        return int(self.projection.shape[1])

    def posterior(self, whitened: np.ndarray) -> PosteriorSamples:
        return PosteriorSamples(
            whitened,
            self.kernel,
            self.inducing_variable,
            self.likelihood,
            mean_function=self.mean_function,
        )


def _prior_mean(
    mean_function: Optional[MeanFunction], X: np.ndarray, num_latent_gps: int
) -> tf.Tensor:
    """μ(X) [N, K] for the K latent GPs (zero without a mean function); a mean of one column is
    every latent GP's."""
    X = tf.convert_to_tensor(X, dtype=default_float())
    if mean_function is None:
        return tf.zeros([tf.shape(X)[0], num_latent_gps], X.dtype)
    if not isinstance(mean_function, MeanFunction):
        raise TypeError(
            f"mean_function must be a gpflow MeanFunction, got {type(mean_function).__name__}"
        )
    mean = tf.cast(mean_function(X), X.dtype)
    if mean.shape.rank != 2 or mean.shape[1] not in (1, num_latent_gps):
        raise ValueError(
            f"mean_function gives shape {mean.shape}; it must give [N, 1] or "
            f"[N, {num_latent_gps}] (one column for each latent GP)"
        )
    return tf.broadcast_to(mean, [tf.shape(X)[0], num_latent_gps])


def check_counts(**counts: Tuple[int, int]) -> None:
    """Raise ValueError unless each ``name=(value, minimum)`` is an integer ≥ its minimum."""
    for name, (value, low) in counts.items():
        if int(value) != value or value < low:
            raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}")
