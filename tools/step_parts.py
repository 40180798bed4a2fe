"""The closed-form step's per-class linear algebra as modules of its own, for issue 35's GPU run:
what each part costs on a device, which the whole iteration's time cannot say.

Each part is the package's own function on inputs of a size's shapes (B points, M inducing points,
C classes), written in the layout of ``gpflow-augmented scale --export-hlo`` (``run_hlo.py`` times
and checks them):

* ``statistics``: the batch's Σ A diag(θ^c) Aᵀ and A·linear (:func:`conjugate_statistics`);
* ``precision``: q(v)'s current precision L⁻ᵀL⁻¹ from its square root L, as the step computes it
  (a triangular inverse and a product), and ``precision-by-solves``: the same by two triangular
  solves (``tf.linalg.cholesky_solve``), which is 25 % faster on this CPU;
* ``cholesky``: one factorisation of C precisions (the trust region's test);
* ``mean-and-sqrt``: q(v)'s mean and square root from C precisions (:func:`mean_and_sqrt`);
* ``natural-step``: the step from q(v) and the statistics, trust region included
  (:func:`natural_parameter_step`): the current precision, the mixing, ``mean-and-sqrt`` and
  ``cholesky``;
* ``natural-step-with-backoff``: the same inside the backoff
  (:func:`natural_parameter_step_with_backoff`). Its while loop's body does not run on these
  inputs, so the difference from ``natural-step`` is what the loop's test and the reading of its
  predicate cost.

    python tools/step_parts.py build/hlo/parts --sizes 200,100,6,36 4096,500,10,64
"""

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Callable, Dict, Sequence, Tuple

# The benchmark studies (benchmarks/) sit beside tools/ at the repository's root, outside the wheel.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpflow
import numpy as np
import tensorflow as tf

from benchmarks.hlo_export import export_function, size_seed
from gpflow_augmented.updates import (
    MIN_PRECISION_RATIO,
    _natural_parameters,
    conjugate_statistics,
    mean_and_sqrt,
    natural_parameter_step,
    natural_parameter_step_with_backoff,
)

SCALE = 20.0  # N / B of the exported iterations (num_data = 20 B)
STEP_SIZE = 0.5

# Every input is a standard normal draw that the reader regenerates (the modules stay small); each
# part first makes its inputs of them by elementwise operations (a fusion or two, small against the
# part): well-conditioned factors and precisions and positive sites, so that every factorisation
# succeeds and the backoff's body never runs.


def _lower_factor(draw: tf.Tensor) -> tf.Tensor:
    # A q_sqrt: 0.8 on the diagonal, small below it.
    M = draw.shape[-1]
    below = tf.linalg.band_part(draw, -1, 0) - tf.linalg.band_part(draw, 0, 0)
    return 0.8 * tf.eye(M, dtype=draw.dtype) + (0.1 / np.sqrt(M)) * below


def _precision(draw: tf.Tensor) -> tf.Tensor:
    # 3 I plus a symmetric Gaussian matrix whose spectrum lies within about ±1.5: SPD.
    M = draw.shape[-1]
    symmetric = (draw + tf.linalg.matrix_transpose(draw)) / (2.0 * np.sqrt(M))
    return 3.0 * tf.eye(M, dtype=draw.dtype) + symmetric


def _statistics(A_draw: tf.Tensor, linear: tf.Tensor, quadratic_draw: tf.Tensor) -> tuple:
    A = A_draw / np.sqrt(A_draw.shape[-1])
    return conjugate_statistics(A, linear, 0.25 * tf.abs(quadratic_draw))


def _precision_by_inverse(q_mu: tf.Tensor, sqrt_draw: tf.Tensor) -> tf.Tensor:
    return _natural_parameters(q_mu, _lower_factor(sqrt_draw)).precision


def _precision_by_solves(sqrt_draw: tf.Tensor) -> tf.Tensor:
    q_sqrt = _lower_factor(sqrt_draw)
    eye = tf.eye(q_sqrt.shape[-1], batch_shape=q_sqrt.shape[:1], dtype=q_sqrt.dtype)
    return tf.linalg.cholesky_solve(q_sqrt, eye)


def _cholesky(precision_draw: tf.Tensor) -> tf.Tensor:
    return tf.linalg.cholesky(_precision(precision_draw))


def _mean_and_sqrt(precision_draw: tf.Tensor, shift: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    return mean_and_sqrt(_precision(precision_draw), shift)


def _step(with_backoff: bool) -> Callable[..., Tuple[tf.Tensor, tf.Tensor]]:
    def step(q_mu, sqrt_draw, A_draw, linear, quadratic_draw):  # type: ignore[no-untyped-def]
        statistics = _statistics(A_draw, linear, quadratic_draw)
        dtype = q_mu.dtype
        scale, rho = tf.constant(SCALE, dtype), tf.constant(STEP_SIZE, dtype)
        ratio = tf.constant(MIN_PRECISION_RATIO, dtype)
        q_sqrt = _lower_factor(sqrt_draw)
        if with_backoff:
            step = natural_parameter_step_with_backoff(q_mu, q_sqrt, statistics, scale, rho, ratio)
            return step[:2]
        return natural_parameter_step(q_mu, q_sqrt, statistics, scale, rho, ratio)

    return step


def part_shapes(size: Sequence[int]) -> Dict[str, Tuple[int, ...]]:
    B, M, C, _ = size
    return {
        "q_mu": (M, C),
        "sqrt": (C, M, M),
        "A": (M, B),
        "linear": (B, C),
        "quadratic": (B, C),
        "precision": (C, M, M),
        "shift": (M, C),
    }


# name: (function, the inputs it takes)
PARTS: Dict[str, Tuple[Callable[..., object], Tuple[str, ...]]] = {
    "statistics": (_statistics, ("A", "linear", "quadratic")),
    "precision": (_precision_by_inverse, ("q_mu", "sqrt")),
    "precision-by-solves": (_precision_by_solves, ("sqrt",)),
    "cholesky": (_cholesky, ("precision",)),
    "mean-and-sqrt": (_mean_and_sqrt, ("precision", "shift")),
    "natural-step": (_step(False), ("q_mu", "sqrt", "A", "linear", "quadratic")),
    "natural-step-with-backoff": (_step(True), ("q_mu", "sqrt", "A", "linear", "quadratic")),
}


def export_parts(folder: Path, sizes, dtypes) -> Dict[str, Dict]:
    folder.mkdir(parents=True, exist_ok=True)
    manifest: Dict[str, Dict] = {}
    for size in sizes:
        shapes = part_shapes(size)
        for dtype in dtypes:
            config = dataclasses.replace(gpflow.config.config(), float=np.dtype(dtype).type)
            with gpflow.config.as_context(config):
                for name, (function, needs) in PARTS.items():
                    entry = export_function(
                        name,
                        size,
                        dtype,
                        function,
                        [shapes[n] for n in needs],
                        folder,
                        seed=size_seed(size),
                    )
                    manifest[entry["key"]] = entry
                    print(entry["key"], flush=True)
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument(
        "--sizes", nargs="*", default=["200,100,6,36", "4096,500,10,64", "4096,1000,10,784"]
    )
    parser.add_argument("--dtypes", default="float64,float32")
    args = parser.parse_args()
    sizes = [tuple(int(v) for v in s.split(",")) for s in args.sizes]
    export_parts(args.folder, sizes, args.dtypes.split(","))


if __name__ == "__main__":
    main()
