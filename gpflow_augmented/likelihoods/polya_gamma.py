r"""
The Pólya-Gamma pieces every augmented likelihood here shares: σ(z)^b = 2^{-b} e^{bz/2}
E_{PG(ω|b,0)}[e^{-ωz²/2}], so given ω the likelihood is Gaussian in f; the optimal q(ω) is
PG(b, c) with the tilt c = sqrt(E[f²]), and the conjugate step needs its mean E[ω].

Pure functions of tensors: they compile unchanged under ``tf.function(jit_compile=True)``.
"""

from typing import NamedTuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

__all__ = ["LocalParameters", "log_cosh_half", "polya_gamma_mean", "polya_gamma_variance", "tilt"]


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
