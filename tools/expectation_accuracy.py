"""The error of the default quadrature of E log Σ_c σ(f_c) (20 Hermite nodes, grid step 1 on
[S_MIN, S_MAX]) against the same rule refined to 60 nodes and step 0.25 on [-12, 40] (which agrees
with 80 nodes and step 0.1 to 5e-6), by the marginals' standard deviation; and the s-grid's share of
it: the default against its own 20 nodes on the fine grid (docs/method.md, "An accurate,
deterministic expectation").

    python tools/expectation_accuracy.py [--grid-step 2]

Latent means N(-2, 2.5²) and N(-10, 3²) (the regime a learned constant mean moves to); standard
deviations uniform in each band; 500 points per cell (``--points``).
"""

import argparse

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
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=500, help="points per cell")
    parser.add_argument(
        "--grid-step", type=float, default=expectation.S_STEP, help="the rule's s-grid step"
    )
    args = parser.parse_args()
    nodes = expectation.DEFAULT_NUM_HERMITE
    rng = np.random.default_rng(0)
    print("| C | latent means | sd | rms / max error | s-grid's alone: rms / max |")
    print("|---|---|---|---|---|")
    for num_classes in (6, 10, 26):
        for mean, spread in ((-2.0, 2.5), (-10.0, 3.0)):
            for low, high in ((0.05, 1.0), (1.0, 2.0), (2.0, 4.0)):
                mu = rng.normal(mean, spread, (args.points, num_classes))
                var = rng.uniform(low, high, (args.points, num_classes)) ** 2
                default = log_normaliser(mu, var, nodes, args.grid_step)
                error = np.abs(default - log_normaliser(mu, var, 60, 0.25, (-12.0, 40.0)))
                grid = np.abs(default - log_normaliser(mu, var, nodes, 0.25, (-12.0, 40.0)))
                print(
                    f"| {num_classes} | N({mean:g}, {spread:g}²) | {low:g}–{high:g} | "
                    f"{_rms_max(error)} | {_rms_max(grid)} |",
                    flush=True,
                )


def _rms_max(error: np.ndarray) -> str:
    return f"{np.sqrt(np.mean(error**2)):.1e} / {error.max():.1e}"


if __name__ == "__main__":
    main()
