"""The error of the default quadrature of E log Σ_c σ(f_c) (20 Hermite nodes, grid step 1 on
[S_MIN, S_MAX]) against the same rule refined to 60 nodes and step 0.25 on [-12, 40] (which agrees
with 80 nodes and step 0.1 to 5e-6), by the marginals' standard deviation (docs/benchmarks.md,
"Accuracy of the expectation").

    python tools/expectation_accuracy.py

Latent means N(-2, 2.5²) and N(-10, 3²) (the regime a learned constant mean moves to); standard
deviations uniform in each band; 500 points per cell.
"""

import numpy as np
import tensorflow as tf

from gpflow_augmented.likelihoods import expectation


def log_normaliser(mu, var, num_hermite, grid_step, s_range=None):
    saved = expectation.S_MIN, expectation.S_MAX
    if s_range is not None:
        expectation.S_MIN, expectation.S_MAX = s_range
    try:
        # the uncompiled rule: the compiled one is traced once, with the default grid
        return np.concatenate(
            [
                expectation._log_normaliser(
                    tf.constant(mu[i : i + 100]),
                    tf.constant(var[i : i + 100]),
                    None,
                    num_hermite,
                    grid_step,
                    None,
                ).numpy()
                for i in range(0, len(mu), 100)
            ]
        )
    finally:
        expectation.S_MIN, expectation.S_MAX = saved


def main() -> None:
    rng = np.random.default_rng(0)
    print("| C | latent means | sd band | rms error | max error |")
    print("|---|---|---|---|---|")
    for num_classes in (6, 10, 26):
        for mean, spread in ((-2.0, 2.5), (-10.0, 3.0)):
            for low, high in ((0.05, 1.0), (1.0, 2.0), (2.0, 4.0)):
                mu = rng.normal(mean, spread, (500, num_classes))
                var = rng.uniform(low, high, (500, num_classes)) ** 2
                reference = log_normaliser(mu, var, 60, 0.25, (-12.0, 40.0))
                error = np.abs(
                    log_normaliser(mu, var, expectation.DEFAULT_NUM_HERMITE, expectation.S_STEP)
                    - reference
                )
                print(
                    f"| {num_classes} | N({mean:g}, {spread:g}²) | {low:g}–{high:g} | "
                    f"{np.sqrt(np.mean(error**2)):.1e} | {error.max():.1e} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
