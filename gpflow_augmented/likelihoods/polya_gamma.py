r"""
The Pólya-Gamma pieces every augmented likelihood here shares: σ(z)^b = 2^{-b} e^{bz/2}
E_{PG(ω|b,0)}[e^{-ωz²/2}], so given ω the likelihood is Gaussian in f; the optimal q(ω) is
PG(b, c) with the tilt c = sqrt(E[f²]), and the conjugate step needs its mean E[ω].

The tensor functions compile unchanged under ``tf.function(jit_compile=True)``; the Gibbs
conditionals' exact draws (:func:`sample_polya_gamma`) run on the host in NumPy.
"""

from typing import NamedTuple, Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

__all__ = [
    "LocalParameters",
    "log_cosh_half",
    "polya_gamma_mean",
    "polya_gamma_moments",
    "polya_gamma_variance",
    "sample_polya_gamma",
    "tilt",
]


class LocalParameters(NamedTuple):
    """The local variational parameters of one batch, and the statistics the global update needs.

    ``gamma`` [N, C]: E[n_ic]; ``theta`` [N, C]: E[ω_ic]; ``c`` [N, C]: the Pólya-Gamma tilt;
    ``alpha`` [N]: the Gamma shape of q(λ_i) (the Gamma–Poisson family only, else ``None``).
    """

    gamma: tf.Tensor
    theta: tf.Tensor
    c: tf.Tensor
    alpha: tf.Tensor = None


@check_shapes("c: [batch...]", "return: [batch...]")
def log_cosh_half(c: tf.Tensor) -> tf.Tensor:
    """log cosh(c/2), finite for any finite c (cosh itself overflows beyond |c| ≈ 1420)."""
    a = tf.abs(c) / 2
    return a + tf.math.softplus(-2 * a) - np.log(2.0)


@check_shapes("b: [broadcast batch...]", "c: [broadcast batch...]", "return: [batch...]")
def polya_gamma_mean(b: tf.Tensor, c: tf.Tensor) -> tf.Tensor:
    """E[ω] for ω ~ PG(b, c): b tanh(c/2) / (2c), with its limit b/4 at c → 0.

    The removable singularity is handled with the safe-value-then-where idiom so that the value and
    its gradient stay finite.
    """
    c = tf.abs(c)
    small = c < 1e-4
    safe_c = tf.where(small, tf.ones_like(c), c)
    # Taylor series of tanh(c/2)/(2c) = 1/4 - c²/48 + ... ; the next term is O(c⁴) < 1e-17.
    series = 0.25 - tf.square(c) / 48.0
    return b * tf.where(small, series, tf.tanh(safe_c / 2) / (2 * safe_c))


@check_shapes("b: [broadcast batch...]", "c: [broadcast batch...]", "return: [batch...]")
def polya_gamma_variance(b: tf.Tensor, c: tf.Tensor) -> tf.Tensor:
    """Var[ω] for ω ~ PG(b, c): b (sinh c - c) / (4c³ cosh²(c/2)), with its limit b/24 at c → 0.

    Written as b (2 tanh(c/2) - c sech²(c/2)) / (4c³), which does not overflow for large c. The
    difference cancels for small c (relative error ~7e-16/c²), so below |c| = 1e-2 the Taylor
    series b (1/24 - c²/120 + 17c⁴/13440) is used (relative error < 5e-15 there).
    """
    c = tf.abs(c)
    small = c < 1e-2
    safe_c = tf.where(small, tf.ones_like(c), c)
    series = 1.0 / 24 - tf.square(c) / 120.0 + 17.0 * c**4 / 13440.0
    sech_squared = 1.0 / tf.square(tf.cosh(tf.minimum(safe_c / 2, 300.0)))
    direct = (2 * tf.tanh(safe_c / 2) - safe_c * sech_squared) / (4 * safe_c**3)
    return b * tf.where(small, series, direct)


@check_shapes("Fmu: [batch...]", "Fvar: [batch...]", "return: [batch...]")
def tilt(Fmu: tf.Tensor, Fvar: tf.Tensor) -> tf.Tensor:
    """The optimal Pólya-Gamma tilt c = sqrt(E[f²])."""
    return tf.sqrt(tf.square(Fmu) + tf.maximum(Fvar, 0.0))


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
    # Imported here: only the Gibbs sampler draws, and ``import gpflow_augmented`` stays free of it.
    from polyagamma import random_polyagamma

    omega = np.zeros(b.shape)
    positive = b > 0
    if np.any(positive):
        omega[positive] = random_polyagamma(
            b[positive], c[positive], method="devroye", random_state=rng
        )
    return omega


def polya_gamma_moments(b: np.ndarray, c: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Mean and variance of PG(b, c) (:func:`polya_gamma_mean`, :func:`polya_gamma_variance`), as
    NumPy arrays."""
    b, c = np.broadcast_arrays(np.asarray(b, dtype=np.float64), np.asarray(c, dtype=np.float64))
    return polya_gamma_mean(b, c).numpy(), polya_gamma_variance(b, c).numpy()
