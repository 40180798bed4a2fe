r"""
Gibbs sampling from the exact posterior of the augmented logistic-softmax model (paper §4.3). The
complete conditionals are the likelihood's own
(:class:`~gpflow_augmented.LogisticSoftmax`: ``rate_given_latents``, ``count_means``,
``rate_given_counts``, ``polya_gamma_parameters`` and, for f, ``conjugate_coefficients``, the same
coefficients CAVI takes in expectation); this module draws from them.

The augmented joint of one data point i (labels one-hot y_ic) is

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
effect on the effective sample size is in docs/ground-truth.md.

The Gaussian block is drawn in whitened coordinates f = Aᵀv (A = L⁻¹K_zx, v ~ N(0, I) a priori):
v | ω, n ~ N(B⁻¹Aκ, B⁻¹) with B = I + A diag(ω) Aᵀ = R Rᵀ, so v = R⁻ᵀ(R⁻¹Aκ + ε). B ⪰ I, so its
Cholesky never needs jitter and no inverse of K is formed. With Z = X (the default) this is the
full GP; with inducing inputs it is the exact posterior of the projected-process model
f = K_xz K_zz⁻¹ u. The Gaussian block runs compiled in TensorFlow; the Pólya-Gamma draws use the
exact samplers of the ``polyagamma`` package on the host, which is why one sweep is not a single
compiled step.
"""

from typing import Optional, Tuple

import numpy as np
import tensorflow as tf
from gpflow.config import default_float
from gpflow.kernels import Kernel
from polyagamma import random_polyagamma
from tqdm.auto import tqdm

from ..likelihoods.polya_gamma import LocalParameters, polya_gamma_mean, polya_gamma_variance
from ..likelihoods import LogisticSoftmax
from .posterior import LatentSampler, PosteriorSamples, check_counts
from ..validation import check_integer

__all__ = ["GibbsSampler", "SCANS", "polya_gamma_moments", "sample_polya_gamma"]

SCANS = ("blocked", "systematic")


def sample_polya_gamma(b: np.ndarray, c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exact draws ω ~ PG(b, c) for integer b ≥ 0, elementwise; PG(0, c) is the point mass at 0.

    Uses Devroye's sampler of Polson, Scott and Windle (2013), a sum of b exact PG(1, c) draws,
    which is all the Gibbs sampler needs (b = y + n is a count). The ``polyagamma`` package's
    other methods are not used: its default "hybrid" switches to saddle-point and normal
    approximations for large b, and its "alternate" method (the only one for non-integer b) was
    measured biased (docs/ground-truth.md).
    """
    b, c = np.broadcast_arrays(np.asarray(b, dtype=np.float64), np.asarray(c, dtype=np.float64))
    if not np.all(np.isfinite(b)) or not np.all(np.isfinite(c)):
        raise ValueError("Pólya-Gamma parameters must be finite")
    if np.any(b < 0) or np.any(b != np.round(b)):
        raise ValueError("the Pólya-Gamma shape b must be an integer ≥ 0 (exact draws need it)")
    omega = np.zeros(b.shape)
    positive = b > 0
    if np.any(positive):
        omega[positive] = random_polyagamma(
            b[positive], c[positive], method="devroye", random_state=rng
        )
    return omega


def polya_gamma_moments(b: np.ndarray, c: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Mean and variance of PG(b, c)
    (:func:`~gpflow_augmented.likelihoods.polya_gamma.polya_gamma_mean`,
    :func:`~gpflow_augmented.likelihoods.polya_gamma.polya_gamma_variance`), as NumPy arrays."""
    b, c = np.broadcast_arrays(np.asarray(b, dtype=np.float64), np.asarray(c, dtype=np.float64))
    return polya_gamma_mean(b, c).numpy(), polya_gamma_variance(b, c).numpy()


class GibbsSampler(LatentSampler):
    """Gibbs sampler for the augmented logistic-softmax GP classifier with fixed hyperparameters.

    The arguments are those of :class:`~gpflow_augmented.sampling.posterior.LatentSampler`, and
    :param scan: ``"blocked"`` (default) or ``"systematic"``; see the module docstring.
    """

    def __init__(
        self,
        data: Tuple[np.ndarray, np.ndarray],
        kernel: Kernel,
        num_classes: int,
        inducing_variable: Optional[object] = None,
        likelihood: Optional[LogisticSoftmax] = None,
        *,
        scan: str = "blocked",
    ) -> None:
        if scan not in SCANS:
            raise ValueError(f"scan must be one of {SCANS}, got {scan!r}")
        super().__init__(data, kernel, num_classes, inducing_variable, likelihood)
        self.scan = scan

    # -- the complete conditionals ----------------------------------------------------------------

    def draw_rate_given_latents(self, f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """λ | f ~ Exp(rate Σ_c σ(f_c)), with n integrated out. [S, C, N] → [S, N]."""
        return rng.exponential(1.0 / self.likelihood.rate_given_latents(f, class_axis=1))

    def draw_counts(self, f: np.ndarray, lam: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """n | f, λ ~ Po(λ σ(-f)), with ω integrated out. f [S, C, N], λ [S, N] → n [S, C, N]."""
        return rng.poisson(self.likelihood.count_means(f, lam[:, None, :])).astype(np.float64)

    def draw_rates(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """λ | n ~ Ga(1 + Σ_c n_c, rate C). [S, C, N] → [S, N]."""
        shape, rate = self.likelihood.rate_given_counts(counts, class_axis=1)
        return rng.gamma(shape, 1.0 / rate)

    def draw_polya_gamma(
        self, f: np.ndarray, counts: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """ω | n, f ~ PG(y + n, |f|). [S, C, N]."""
        return sample_polya_gamma(
            *self.likelihood.polya_gamma_parameters(f, self.labels_onehot, counts), rng
        )

    def draw_whitened(
        self, omega: np.ndarray, counts: np.ndarray, rng: np.random.Generator
    ) -> Tuple[np.ndarray, np.ndarray]:
        """v | ω, n and the latent values f = Aᵀv it implies, [S, C, M] and [S, C, N]."""
        noise = rng.standard_normal(omega.shape[:2] + (self.num_latent,))
        labels = np.broadcast_to(self.labels_onehot, counts.shape)
        kappa, omega = self.likelihood.conjugate_coefficients(
            labels, LocalParameters(gamma=counts, theta=omega, c=np.zeros_like(omega))
        )
        dtype = default_float()
        v, f = _gaussian_block(
            self.projection,
            tf.constant(omega, dtype=dtype),
            tf.constant(kappa, dtype=dtype),
            tf.constant(noise, dtype=dtype),
        )
        return v.numpy(), f.numpy()

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
    ) -> PosteriorSamples:
        """Run ``num_chains`` chains; keep every ``thinning``-th sweep after ``num_burnin`` sweeps.

        Each chain starts from an independent prior draw of f (over-dispersed starts, as split
        R-hat assumes) and λ from its conditional given f.

        :param progress: show a tqdm progress bar over the sweeps.
        :return: :class:`PosteriorSamples` with [num_chains, num_samples, C, M] whitened draws.
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
        v = rng.standard_normal((num_chains, self.num_classes, self.num_latent))
        f = np.einsum("cmn,scm->scn", A, v)
        lam = self.draw_rate_given_latents(f, rng)
        kept = np.empty((num_chains, num_samples, self.num_classes, self.num_latent))
        total = num_burnin + num_samples * thinning
        for sweep in tqdm(range(total), disable=not progress, desc="Gibbs", unit="sweep"):
            if self.scan == "blocked":
                lam = self.draw_rate_given_latents(f, rng)
                counts = self.draw_counts(f, lam, rng)
            else:
                counts = self.draw_counts(f, lam, rng)
                lam = self.draw_rates(counts, rng)
            omega = self.draw_polya_gamma(f, counts, rng)
            v, f = self.draw_whitened(omega, counts, rng)
            kept_index, remainder = divmod(sweep - num_burnin, thinning)
            if sweep >= num_burnin and remainder == thinning - 1:
                kept[:, kept_index] = v
        return self.posterior(kept)


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
