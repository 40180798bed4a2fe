"""Which η for the averaged q(u) (``ga.EXACT_AVERAGING``), chosen on a validation split: trains
``lsm`` at its defaults with the model holding the last iterate (``averaging=math.inf``) on 80 %
of a dataset's training set, and every ``--every`` steps scores on the other 20 % (the test set is
not read) the iterate and, for each η, the polynomial-decay average of the iterates so far
(:func:`gpflow_augmented.averaging.averaged_gaussians`, taken at every step beside the run):

    python tools/averaging_on_validation.py kddcup --iterations 3000 --every 250 \\
        --data-dir ../shared/data

Prints one Markdown row per reading: the step, then validation error / NLL of the iterate and of
each η's average. Classes with fewer than 5 training rows are dropped, so that each has a point on
both sides of the split.
"""

import argparse
import math

import gpflow
import numpy as np
import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.averaging import averaged_gaussians, averaging_weight


def validation_split(name: str, data_dir: str, seed: int) -> ga.datasets.Dataset:
    """80 % / 20 % of ``name``'s training set, its classes with fewer than 5 rows dropped."""
    dataset = ga.datasets.load_dataset(name, data_dir, seed=seed)
    labels = dataset.Y_train[:, 0]
    keep = np.isin(labels, np.flatnonzero(np.bincount(labels) >= 5))
    relabelled = np.unique(labels[keep], return_inverse=True)[1]
    return ga.datasets.from_arrays("validation", dataset.X_train[keep], relabelled, seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--every", type=int, default=250)
    parser.add_argument("--etas", default="1,3,10")
    parser.add_argument("--validation-points", type=int, default=20000)
    args = parser.parse_args()
    etas = [float(eta) for eta in args.etas.split(",")]
    dataset = validation_split(args.dataset, args.data_dir, args.seed)
    tf.random.set_seed(args.seed)
    model = ga.LogisticSoftmaxSVGP(
        ga.initial_kernel(dataset.X_train),
        ga.inducing_points(dataset.X_train, 100, seed=args.seed),
        dataset.num_classes,
        num_data=len(dataset.X_train),
        mean_function=gpflow.mean_functions.Constant(),
    )
    validation = (
        dataset.X_test[: args.validation_points],
        dataset.Y_test[: args.validation_points],
    )
    averages: dict = {}

    def score() -> list:
        probabilities = model.predict_y(validation[0])[0].numpy()
        error = ga.metrics.error_rate(probabilities, validation[1])
        return [error, ga.metrics.mean_nll(model.predict_log_density(validation).numpy())]

    def callback(step: int, model: ga.LogisticSoftmaxSVGP, elbo: float) -> None:
        iterate = (tf.convert_to_tensor(model.q_mu), tf.convert_to_tensor(model.q_sqrt))
        for eta in etas:
            previous = averages.get(eta, iterate)
            averages[eta] = averaged_gaussians(*previous, *iterate, averaging_weight(step, eta))
        if step % args.every:
            return
        row = [step, *score()]
        for eta in etas:
            model.q_mu.assign(averages[eta][0])
            model.q_sqrt.assign(averages[eta][1])
            row += score()
        model.q_mu.assign(iterate[0])
        model.q_sqrt.assign(iterate[1])
        print("| " + " | ".join(f"{v:.5f}" if isinstance(v, float) else str(v) for v in row) + " |")

    columns = ["the iterate"] + [f"η = {eta:g}" for eta in etas]
    print(f"{args.dataset}: {len(dataset.X_train)} training / {len(dataset.X_test)} validation")
    print("| step | " + " | ".join(f"{c}: error | NLL" for c in columns) + " |")
    print("|---" * (1 + 2 * len(columns)) + "|")
    train = (dataset.X_train, dataset.Y_train)
    ga.fit(
        model,
        train,
        iterations=args.iterations,
        seed=args.seed,
        callback=callback,
        averaging=math.inf,
        progress=False,
    )


if __name__ == "__main__":
    main()
