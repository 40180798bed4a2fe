"""Which noise keeps the default model's test NLL moving late in a run: q(u)'s step or Adam's?

Trains ``lsm`` at its defaults on one of the stability suite's sets (M = 100, B = 200) and, from
step ``--change-at`` on, changes one thing per variant: Adam's rate (constant, 0.01, 0), ρ (a
quarter, or κ = 1), or nothing but the rate's default decay. Scores the test NLL every 50 steps
from there:

    python tools/nll_noise.py synthetic --seed 0 --data-dir ../shared/data

Prints one Markdown row per variant: the mean test NLL over the last four fifths of the scored
steps, its coefficient of variation, the final and the largest reading ÷ the lowest, and the final
test error.
"""

import argparse
import math
import sys
from pathlib import Path

# The benchmark studies (benchmarks/) sit beside tools/ at the repository's root, outside the wheel.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpflow
import numpy as np
import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.schedules import StepSizeSchedule
from benchmarks.stability import suite_dataset

#: variant: (Adam's decay steps, the change at --change-at: what it sets and to what)
VARIANTS = {
    "constant rate": (math.inf, None),
    "default (decaying rate)": (None, None),
    "constant, then rate 0.01": (math.inf, ("rate", 0.01)),
    "constant, then rate 0": (math.inf, ("rate", 0.0)),
    "constant, then ρ ÷ 4": (math.inf, ("factor", 0.25)),
    "constant, then κ = 1": (math.inf, ("kappa", 1.0)),
}


class ChangingRobbinsMonro(StepSizeSchedule):
    """The default ρ_t = (t + 1)^-0.51 until ``start``, then ``factor`` ρ_start ((t + 1) /
    (start + 1))^-``kappa``; all three are variables, so they change without a new trace."""

    def __init__(self) -> None:
        dtype = gpflow.default_float()
        self.start = tf.Variable(math.inf, dtype=dtype, trainable=False)
        self.factor = tf.Variable(1.0, dtype=dtype, trainable=False)
        self.kappa = tf.Variable(0.51, dtype=dtype, trainable=False)

    def __call__(self, iteration: tf.Tensor) -> tf.Tensor:
        t = tf.cast(iteration, gpflow.default_float()) + 1.0
        start = tf.minimum(self.start + 1.0, t)
        return tf.pow(start, -0.51) * tf.where(
            t >= start, self.factor * tf.pow(t / start, -self.kappa), 1.0
        )


def run(dataset, seed: int, variant: str, change_at: int, iterations: int, every: int) -> str:
    decay_steps, change = VARIANTS[variant]
    X, Y = dataset.X_train, dataset.Y_train
    tf.random.set_seed(seed)
    schedule = ChangingRobbinsMonro()
    model = ga.LogisticSoftmaxSVGP(
        ga.initial_kernel(X),
        ga.inducing_points(X, min(100, len(X)), seed=seed),
        dataset.num_classes,
        num_data=len(X),
        mean_function=gpflow.mean_functions.Constant(),
    )
    trainer = ga.Trainer(model, step_size=schedule, learning_rate_decay_steps=decay_steps)
    batches = iter(ga.minibatches(X, Y, min(200, len(X)), seed))
    nlls, errors = [], []
    for step in range(iterations):
        if step == change_at and change is not None:
            what, value = change
            schedule.start.assign(float(change_at))
            (trainer.learning_rate if what == "rate" else getattr(schedule, what)).assign(value)
        trainer.step(next(batches))
        if step + 1 >= change_at and (step + 1) % every == 0:
            probabilities, _ = model.predict_y(dataset.X_test)
            log_density = model.predict_log_density((dataset.X_test, dataset.Y_test))
            nlls.append(-float(np.mean(log_density)))
            errors.append(float(np.mean(np.argmax(probabilities, 1) != dataset.Y_test[:, 0])))
    nll = np.array(nlls)
    late = nll[len(nll) // 5 :]
    return (
        f"| {variant} | {late.mean():.5f} | {late.std() / late.mean():.3f} | "
        f"{nll[-1] / nll.min():.3f} | {late.max() / nll.min():.3f} | {errors[-1]:.4f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("set", help="a set of the stability suite, e.g. synthetic, kddcup-100k")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--change-at", type=int, default=2500)
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument(
        "--variants", default=None, help="indices into the variants, comma-separated (default: all)"
    )
    args = parser.parse_args()
    data_dir = None if args.data_dir is None else Path(args.data_dir)
    dataset = suite_dataset(args.set, data_dir, args.seed)
    print(
        f"{args.set}, seed {args.seed}: {len(dataset.X_train)} training points; change at step "
        f"{args.change_at} of {args.iterations}, test NLL every {args.every} steps from there\n"
    )
    print("| variant | mean NLL | CV | final ÷ lowest | largest ÷ lowest | final error |")
    print("|---|---|---|---|---|---|")
    names = list(VARIANTS)
    chosen = range(len(names)) if args.variants is None else map(int, args.variants.split(","))
    for index in chosen:
        print(
            run(dataset, args.seed, names[index], args.change_at, args.iterations, args.every),
            flush=True,
        )


if __name__ == "__main__":
    main()
