"""The Pólya-Gamma moments against their closed form, its limit and the series representation."""

import numpy as np
import tensorflow as tf

from gpflow_augmented.likelihoods import polya_gamma as pg


def test_polya_gamma_mean_matches_closed_form_and_limit():
    c = np.array([0.0, 1e-6, 1e-3, 0.1, 1.0, 10.0, 1e3])
    b = np.array([1.0, 2.0, 5.0, 1.0, 2.0, 5.0, 1.0])
    got = pg.polya_gamma_mean(b, c).numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        exact = np.where(c > 0, b * np.tanh(c / 2) / (2 * c), b / 4)
    np.testing.assert_allclose(got, exact, rtol=1e-12)
    with tf.GradientTape() as tape:
        cc = tf.constant(c)
        tape.watch(cc)
        value = pg.polya_gamma_mean(tf.constant(b), cc)
    assert np.all(np.isfinite(tape.gradient(value, cc).numpy()))


def test_polya_gamma_mean_matches_series_sampler():
    # PG(b, c) = (1/2π²) Σ_k g_k / ((k - ½)² + c²/(4π²)), g_k ~ Ga(b, 1): its mean, summed exactly
    # to a million terms, must equal the closed form.
    k = np.arange(1, 1_000_001)
    for b, c in [(1.0, 0.5), (2.0, 3.0), (5.0, 10.0)]:
        series = np.sum(b / ((k - 0.5) ** 2 + c**2 / (4 * np.pi**2))) / (2 * np.pi**2)
        np.testing.assert_allclose(pg.polya_gamma_mean(b, c).numpy(), series, rtol=1e-6)
