"""The default lsm Trainer's first step (tracing and one run) with and without AutoGraph, on
vehicle at M = 100, B = 200; one process per measurement, as a user's script pays it once.

    for i in 1 2 3; do for a in 1 0; do python tools/first_step_time.py $a; done; done
"""

import sys
import time

import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.datasets import load_dataset


def main(autograph: bool) -> None:
    d = load_dataset("vehicle")
    model = ga.LogisticSoftmaxSVGP(
        ga.initial_kernel(d.X_train),
        ga.inducing_points(d.X_train, 100, seed=0),
        d.num_classes,
        num_data=len(d.X_train),
    )
    trainer = ga.Trainer(model)
    # The package traces without AutoGraph; the other arm rebuilds the same step with it.
    trainer._iteration = tf.function(trainer._iteration_eager, autograph=autograph)
    batch = (d.X_train[:200], d.Y_train[:200])
    started = time.perf_counter()
    trainer.step(batch)
    first = time.perf_counter() - started
    started = time.perf_counter()
    trainer.step(batch)
    print(
        f"autograph={autograph}: first step {first:.2f} s, "
        f"second {1e3 * (time.perf_counter() - started):.1f} ms"
    )


if __name__ == "__main__":
    main(sys.argv[1] == "1")
