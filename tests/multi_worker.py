"""Run by test_distributed.py: one process of a MultiWorkerMirroredStrategy cluster on 127.0.0.1,
or (with one worker) the single process it is compared with.

    python multi_worker.py INDEX PORTS OUTPUT

PORTS is a comma-separated list, one per worker; with one port no cluster is made. Each worker
trains, for each scheme, the same model on its own half of every global batch (an explicit shard:
the first or the second half of the batch's rows), then runs ``fit``, whose minibatch stream
tf.data shards across the workers; the single process takes the whole batches. Every parameter,
the iteration counter and fit's ELBO trace are written to OUTPUT (.npz)."""

import json
import os
import sys

import numpy as np

index, ports, output = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3]
if len(ports) > 1:
    os.environ["TF_CONFIG"] = json.dumps(
        {
            "cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
            "task": {"type": "worker", "index": index},
        }
    )

import gpflow  # noqa: E402
import tensorflow as tf  # noqa: E402

import gpflow_augmented as ga  # noqa: E402

SCHEMES = ("exact", "negative-multinomial")
NUM_CLASSES, NUM_DATA, BATCH, STEPS = 4, 120, 60, 5


def train(strategy, scheme, X, y, batches):
    scope = strategy.scope() if strategy else tf.distribute.get_strategy().scope()
    with scope:
        kernel = gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.5, 2.0])
        model = ga.LogisticSoftmaxSVGP(
            kernel, X[:10].copy(), NUM_CLASSES, num_data=NUM_DATA, scheme=scheme
        )
        trainer = ga.Trainer(model, ga.RobbinsMonro(), learning_rate=0.05, strategy=strategy)
    for rows in batches:
        X_batch, Y_batch = X[rows], y[rows][:, None]
        if strategy is None:
            trainer.step((X_batch, Y_batch))
            continue

        def shard(context, X_batch=X_batch, Y_batch=Y_batch):
            size = BATCH // context.num_replicas_in_sync
            own = slice(
                context.replica_id_in_sync_group * size,
                (context.replica_id_in_sync_group + 1) * size,
            )
            return tf.constant(X_batch[own]), tf.constant(Y_batch[own])

        trainer.step(strategy.experimental_distribute_values_from_function(shard))
    return {
        **{
            f"{scheme}/{name}": np.asarray(value)
            for name, value in gpflow.utilities.parameter_dict(model).items()
        },
        f"{scheme}/iteration": trainer.iteration.numpy(),
    }


def cavi_alone(strategy, X, y, batches):
    """CAVI driven directly (no Adam): its traceable update in ``strategy.run``, each worker given
    its own half of every batch, or ``CAVI.step`` on the whole batch in one process."""
    scope = strategy.scope() if strategy else tf.distribute.get_strategy().scope()
    with scope:
        kernel = gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.5, 2.0])
        model = ga.LogisticSoftmaxSVGP(kernel, X[:10].copy(), NUM_CLASSES, num_data=NUM_DATA)
        cavi = ga.CAVI(model, ga.RobbinsMonro())
    update = tf.function(lambda X, Y: strategy.run(cavi.update, args=(X, Y)), autograph=False)
    for rows in batches:
        X_batch, Y_batch = X[rows], y[rows][:, None]
        if strategy is None:
            cavi.step((X_batch, Y_batch))
            continue

        def half(array):
            def own(context):
                size = BATCH // context.num_replicas_in_sync
                start = context.replica_id_in_sync_group * size
                return tf.constant(array[start : start + size])

            return strategy.experimental_distribute_values_from_function(own)

        update(half(X_batch), half(Y_batch))
    parameters = gpflow.utilities.parameter_dict(model)
    return {
        **{f"cavi/{name}": np.asarray(value) for name, value in parameters.items()},
        "cavi/iteration": cavi.iteration.numpy(),
    }


if __name__ == "__main__":
    strategy = ga.distributed.multi_worker_strategy() if len(ports) > 1 else None
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=2.0, size=(NUM_CLASSES, 3))
    y = rng.integers(0, NUM_CLASSES, NUM_DATA)
    X = centres[y] + rng.normal(size=(NUM_DATA, 3))
    batches = [rng.choice(NUM_DATA, BATCH, replace=False) for _ in range(STEPS)]
    results = {}
    for scheme in SCHEMES:
        results.update(train(strategy, scheme, X, y, batches))
    results.update(cavi_alone(strategy, X, y, batches))
    with strategy.scope() if strategy else tf.distribute.get_strategy().scope():
        kernel = gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.5, 2.0])
        model = ga.LogisticSoftmaxSVGP(kernel, X[:10].copy(), NUM_CLASSES, num_data=NUM_DATA)
    fitted = ga.fit(
        model,
        (X, y[:, None]),
        iterations=STEPS,
        batch_size=BATCH,
        progress=False,
        seed=1,
        strategy=strategy,
    )
    parameters = gpflow.utilities.parameter_dict(model)
    results.update({f"fit/{name}": np.asarray(value) for name, value in parameters.items()})
    results["fit/elbo"] = fitted.elbo
    results["fit/iteration"] = fitted.trainer.iteration.numpy()
    # The points of one batch this process reads from the stream fit distributes: tf.data's
    # sharding gives each worker half (equal results alone would not show it: each worker reading
    # the whole batch, with the global batch counted twice, gives the same step).
    stream = ga.training.minibatches(X, y[:, None], BATCH, seed=1)
    if strategy is not None:
        first = next(iter(strategy.experimental_distribute_dataset(stream)))
        local_X = strategy.experimental_local_results(first[0])[0]
    else:
        local_X = next(iter(stream))[0]
    results["local_batch"] = np.asarray(local_X.shape[0])
    np.savez(output, **results)
