r"""
Gibbs sampling from the exact posterior of an augmented GP classifier (paper §4.3). The complete
conditionals are the likelihood's own: :meth:`~gpflow_augmented.likelihoods.AugmentedLikelihood.
draw_auxiliaries` draws the auxiliaries given f, and f's Gaussian conditional comes from
:meth:`~gpflow_augmented.likelihoods.AugmentedLikelihood.conjugate_coefficients`, the same
coefficients CAVI takes in expectation. This module draws f and runs the chain, for any augmented
likelihood with Gibbs conditionals: the logistic-softmax
(:class:`~gpflow_augmented.LogisticSoftmax`) and the binary logistic
(:class:`~gpflow_augmented.likelihoods.BinaryLogistic`).

For the logistic-softmax the augmented joint of one data point i (labels one-hot y_ic) is

    σ(f_{y_i}) Π_c Po(n_ic | λ_i) σ(-f_ic)^{n_ic},    flat prior on λ_i ≥ 0,

because 1 / Σ_c σ(f_c) = ∫ exp(-λ Σ_c σ(f_c)) dλ and exp(-λσ(f)) = e^{-λ} e^{λ σ(-f)}
= Σ_n Po(n | λ) σ(-f)^n. With σ(z)^b = 2^{-b} e^{bz/2} E_{PG(ω | b, 0)}[e^{-ω z²/2}] every complete
conditional is a known distribution:

* n_ic | f, λ ~ Po(λ_i σ(-f_ic))   (ω integrated out; the paper prints σ(f), see the tests)
* λ_i | n ~ Ga(1 + Σ_c n_ic, rate C)
* ω_ic | n, f ~ PG(y_ic + n_ic, |f_ic|)
* f_c | ω, n ~ N(Σ_c κ_c, Σ_c),  κ_c = (y_c - n_c)/2,  Σ_c = (diag(ω_c) + K_c⁻¹)⁻¹.

Two scans are offered; both leave the exact posterior invariant:

* ``"blocked"`` (default) draws (λ, n, ω) as one block given f: λ | f ~ Exp(rate Σ_c σ(f_c))
  (n integrated out), then n | λ, f, then ω | n, f; then f | ω, n.
* ``"systematic"`` is the paper's and the reference implementation's sweep: n | f, λ with the
  previous λ, then λ | n, then ω, then f.

The systematic scan carries λ from one sweep to the next through n, which slows the mixing of the
direction that shifts all classes' latents together (the likelihood barely sees it); the measured
effect on the effective sample size is in docs/ground-truth.md. The binary likelihood has one
block, ω | f ~ PG(1, |f|), whatever the scan.

The Gaussian block is drawn in whitened coordinates f = Aᵀv (A = L⁻¹K_zx, v ~ N(0, I) a priori):
v | ω, n ~ N(B⁻¹Aκ, B⁻¹) with B = I + A diag(ω) Aᵀ = R Rᵀ, so v = R⁻ᵀ(R⁻¹Aκ + ε). B ⪰ I, so its
Cholesky never needs jitter and no inverse of K is formed. With a prior mean m = μ(X) (a fixed
``mean_function``), f = m + Aᵀv, and the block is the same with κ - ω m in place of κ. With
Z = X (the default) this is the full GP; with inducing inputs it is the exact posterior of the
projected-process model f = K_xz K_zz⁻¹ u. The Gaussian block runs compiled in TensorFlow; the
Pólya-Gamma draws use the exact samplers of the ``polyagamma`` package on the host, which is why
one sweep is not a single compiled step.
"""

from typing import Optional, Tuple

import numpy as np
import tensorflow as tf
from gpflow.config import default_float
from gpflow.kernels import Kernel
from gpflow.mean_functions import MeanFunction
from tqdm.auto import tqdm

from ..likelihoods import AugmentedLikelihood
from ..likelihoods.polya_gamma import LocalParameters
from .posterior import LatentSampler, PosteriorSamples, check_counts
from ..validation import check_integer

__all__ = ["GibbsSampler", "SCANS"]

SCANS = ("blocked", "systematic")


class GibbsSampler(LatentSampler):
    """Gibbs sampler for an augmented GP classifier with fixed hyperparameters.

    The arguments are those of :class:`~gpflow_augmented.sampling.posterior.LatentSampler` (the
    likelihood must have Gibbs conditionals), and
    :param scan: ``"blocked"`` (default) or ``"systematic"``; see the module docstring.
    """

    def __init__(
        self,
        data: Tuple[np.ndarray, np.ndarray],
        kernel: Kernel,
        num_classes: int,
        inducing_variable: Optional[object] = None,
        likelihood: Optional[AugmentedLikelihood] = None,
        *,
        mean_function: Optional[MeanFunction] = None,
        scan: str = "blocked",
    ) -> None:
        if scan not in SCANS:
            raise ValueError(f"scan must be one of {SCANS}, got {scan!r}")
        super().__init__(data, kernel, num_classes, inducing_variable, likelihood, mean_function)
        if not self.likelihood.has_gibbs_conditionals:
            raise NotImplementedError(
                f"{type(self.likelihood).__name__} has no Gibbs conditionals here"
                + (" (class weights)" if self.likelihood.learns_class_weights else "")
            )
        self.scan = scan

    def draw_whitened(
        self, auxiliaries: LocalParameters, rng: np.random.Generator
    ) -> Tuple[np.ndarray, np.ndarray]:
        """v | ω (the auxiliaries, [S, K, N]) and the latent values f = Aᵀv it implies, [S, K, M]
        and [S, K, N]."""
        shape = np.shape(auxiliaries.theta)
        noise = rng.standard_normal(shape[:2] + (self.num_latent,))
        labels = np.broadcast_to(self.label_rows, shape)
        kappa, omega = self.likelihood.conjugate_coefficients(labels, auxiliaries)
        # exp(κ f - ω f² / 2) with f = m + Aᵀv is exp((κ - ω m) Aᵀv - ω (Aᵀv)² / 2) in v, up to
        # a constant
        kappa = kappa - omega * self.prior_mean
        dtype = default_float()
        v, f = _gaussian_block(
            self.projection,
            tf.constant(omega, dtype=dtype),
            tf.constant(kappa, dtype=dtype),
            tf.constant(noise, dtype=dtype),
        )
        return v.numpy(), self.prior_mean + f.numpy()

    # -- the chain ------------------------------------------------------------------------------

    def sample(
        self,
        num_samples: int,
        *,
        num_chains: int = 4,
        num_burnin: int = 500,
        thinning: int = 1,
        seed: Optional[int] = None,
        progress: bool = False,
        initial_whitened: Optional[np.ndarray] = None,
    ) -> PosteriorSamples:
        """Run ``num_chains`` chains; keep every ``thinning``-th sweep after ``num_burnin`` sweeps.

        Each chain starts from an independent prior draw of f (over-dispersed starts, as split
        R-hat assumes), or from ``initial_whitened``, and the likelihood's chain state (λ, for the
        logistic-softmax) from its conditional given f.

        :param progress: show a tqdm progress bar over the sweeps.
        :param initial_whitened: [num_chains, K, M] whitened values v to start each chain from,
            for example draws of a variational q(u) beside prior draws, to see whether chains
            from both ends meet.
        :return: :class:`PosteriorSamples` with [num_chains, num_samples, K, M] whitened draws.
        """
        check_counts(
            num_samples=(num_samples, 1),
            num_chains=(num_chains, 1),
            num_burnin=(num_burnin, 0),
            thinning=(thinning, 1),
        )
        if seed is not None:
            seed = check_integer(seed, "seed", minimum=0)
        rng = np.random.default_rng(seed)
        A = self.projection.numpy()
        v = rng.standard_normal((num_chains, self.num_latent_gps, self.num_latent))
        if initial_whitened is not None:
            v = self._checked_start(initial_whitened, v.shape)
        f = self.prior_mean + np.einsum("cmn,scm->scn", A, v)
        likelihood = self.likelihood
        state = likelihood.initial_gibbs_state(f, rng)
        kept = np.empty((num_chains, num_samples, self.num_latent_gps, self.num_latent))
        total = num_burnin + num_samples * thinning
        for sweep in tqdm(range(total), disable=not progress, desc="Gibbs", unit="sweep"):
            auxiliaries, state = likelihood.draw_auxiliaries(
                f, self.label_rows, state, rng, self.scan
            )
            v, f = self.draw_whitened(auxiliaries, rng)
            kept_index, remainder = divmod(sweep - num_burnin, thinning)
            if sweep >= num_burnin and remainder == thinning - 1:
                kept[:, kept_index] = v
        return self.posterior(kept)

    @staticmethod
    def _checked_start(initial_whitened: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
        start = np.asarray(initial_whitened, dtype=np.float64)
        if start.shape != shape:
            raise ValueError(
                f"initial_whitened must be [num_chains, K, M] = {list(shape)}, "
                f"got shape {list(start.shape)}"
            )
        if not np.all(np.isfinite(start)):
            raise ValueError("initial_whitened holds NaN or infinite values")
        return start


@tf.function(autograph=False)
def _gaussian_block(
    A: tf.Tensor, omega: tf.Tensor, kappa: tf.Tensor, noise: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor]:
    """A [C, M, N], ω and κ [S, C, N], ε [S, C, M] → (v, Aᵀv)."""
    weighted = A[None] * omega[:, :, None, :]  # [S, C, M, N]
    identity = tf.eye(tf.shape(A)[1], dtype=A.dtype)
    B = identity + tf.linalg.matmul(weighted, A[None], transpose_b=True)  # [S, C, M, M]
    R = tf.linalg.cholesky(B)
    rhs = tf.linalg.matvec(A[None], kappa)  # [S, C, M]
    w = tf.linalg.triangular_solve(R, rhs[..., None], lower=True)
    v = tf.linalg.triangular_solve(R, w + noise[..., None], lower=True, adjoint=True)[..., 0]
    return v, tf.einsum("cmn,scm->scn", A, v)
