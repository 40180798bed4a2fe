"""Time one compiled training iteration of each method at the same (B, M, C), interleaved, so all
see the same machine load (README, "The fused iteration").

    python tools/iteration_profile.py --classes 6 [--jit]

Random data (D = 36, like satimage); median ms over 3 rounds of 20 timed calls after 3 untimed ones.
"""
import argparse
import time

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflow_augmented as ga
from gpflow_augmented import expectations


def median_ms(step, calls: int = 20) -> float:
    for _ in range(3):
        step()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--num-inducing", type=int, default=100)
    parser.add_argument("--classes", type=int, default=6)
    parser.add_argument("--jit", action="store_true", help="compile every step with XLA")
    args = parser.parse_args()
    B, M, C, D = args.batch_size, args.num_inducing, args.classes, 36
    rng = np.random.default_rng(0)
    X = tf.constant(rng.standard_normal((B, D)))
    Y = tf.constant(rng.integers(0, C, (B, 1)))
    Z = rng.standard_normal((M, D))

    steps = {}
    for label, scheme in (("lsm (collapsed): CAVI + Adam", "collapsed"),
                          ("lsm-exact: fused iteration", "exact")):
        model = ga.LogisticSoftmaxSVGP(ga.initial_kernel(X.numpy()), Z, C, num_data=4000,
                                       scheme=scheme)
        trainer = ga.Trainer(model, ga.RobbinsMonro(), 0.01, jit_compile=args.jit)
        steps[label] = lambda trainer=trainer: trainer.step((X, Y))
        if scheme == "exact":
            steps["lsm-exact: CAVI step alone"] = lambda trainer=trainer: trainer.cavi.step((X, Y))
    for name, likelihood in (("softmax", gpflow.likelihoods.Softmax(C)),
                             ("lsm-vi", ga.LogisticSoftmax(C))):
        svgp = gpflow.models.SVGP(ga.initial_kernel(X.numpy()), likelihood, Z, num_latent_gps=C,
                                  num_data=4000, whiten=True)
        gpflow.set_trainable(svgp.inducing_variable, False)
        adam = tf_keras.optimizers.Adam(0.01)
        loss = svgp.training_loss_closure((X, Y), compile=False)
        steps[f"{name}: Adam iteration"] = tf.function(
            lambda adam=adam, loss=loss, svgp=svgp: adam.minimize(loss, svgp.trainable_variables),
            jit_compile=args.jit)
    Fmu = tf.constant(rng.normal(-1, 2, (B, C)))
    Fvar = tf.constant(rng.uniform(0.1, 2, (B, C)))
    onehot = tf.one_hot(Y[:, 0], C, dtype=tf.float64)
    steps["exact sites alone"] = tf.function(
        lambda: expectations.exact_sites(Fmu, Fvar, onehot), jit_compile=args.jit)
    steps["expectation, forward only"] = tf.function(
        lambda: expectations.expected_log_logistic_softmax(Fmu, Fvar, onehot),
        jit_compile=args.jit)

    rounds = {name: [] for name in steps}
    for _ in range(3):
        for name, step in steps.items():
            rounds[name].append(median_ms(step))
    print(f"B={B} M={M} C={C} {'XLA' if args.jit else 'graph mode'}")
    for name, values in rounds.items():
        print(f"  {name:32s} {np.median(values):7.2f} ms")


if __name__ == "__main__":
    main()
