"""Run in a subprocess by test_distributed.py: the devices must be split into two logical CPUs
before TensorFlow initialises them, which a pytest process that already ran TF cannot do.

Trains the same model for a few steps on one device and under MirroredStrategy on two logical CPU
devices, and prints the largest relative difference of every variable as JSON."""

import json
import sys

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import gpflow  # noqa: E402
import numpy as np  # noqa: E402

import gpflow_augmented as ga  # noqa: E402


def problem(strategy, scheme, dtype):
    gpflow.config.set_default_float(dtype)
    rng = np.random.default_rng(0)
    num_classes, num_data = 6, 240
    centres = rng.normal(scale=2.0, size=(num_classes, 3))
    y = rng.integers(0, num_classes, num_data)
    X = centres[y] + rng.normal(size=(num_data, 3))
    with strategy.scope() if strategy else tf.distribute.get_strategy().scope():
        kernel = gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.5, 2.0])
        model = ga.LogisticSoftmaxSVGP(
            kernel, X[:20].copy(), num_classes, num_data=num_data, scheme=scheme
        )
    return model, (X, y[:, None])


def run(strategy, steps, batch_size, class_subset_size, scheme, dtype, averaging=None):
    model, data = problem(strategy, scheme, dtype)
    result = ga.fit(
        model,
        data,
        iterations=steps,
        batch_size=batch_size,
        learning_rate=0.05,
        class_subset_size=class_subset_size,
        seed=3,
        progress=False,
        strategy=strategy,
        averaging=averaging,
    )
    return model, result


def compare(strategy, config):
    dtype = {"float64": np.float64, "float32": np.float32}[config.pop("dtype", "float64")]
    single, single_result = run(None, dtype=dtype, **config)
    replicated, replicated_result = run(strategy, dtype=dtype, **config)
    differences = {
        "elbo": float(
            np.max(np.abs(single_result.elbo - replicated_result.elbo) / np.abs(single_result.elbo))
        )
    }
    for a, b in zip(single.variables, replicated.variables):
        a, b = a.numpy(), b.numpy()
        differences[a.dtype.name + ":" + str(a.shape)] = float(
            np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-300)
        )
    moved = float(np.max(np.abs(single.q_mu.numpy())))
    return {
        "replicas": strategy.num_replicas_in_sync,
        "differences": differences,
        "moved": moved,
        "iteration": int(replicated_result.trainer.iteration.numpy()),
        "closed_form_variance": bool(replicated_result.trainer.cavi.variances),
    }


def elbo_in_replica(strategy):
    """The largest relative difference between ``model.elbo`` of a batch computed in each replica
    and outside any: the model's ELBO means the same in any context."""
    gpflow.config.set_default_float(np.float64)
    model, (X, Y) = problem(strategy, "negative-multinomial", np.float64)
    ga.CAVI(model, 0.5).step((X, Y))  # away from the prior, so the KL term is not zero
    batch = (tf.constant(X[:40]), tf.constant(Y[:40]))
    outside = float(model.elbo(batch))
    inside = strategy.experimental_local_results(
        strategy.run(tf.function(lambda X, Y: model.elbo((X, Y))), args=batch)
    )
    return max(abs(float(value) - outside) / abs(outside) for value in inside)


def searched(strategy, iterations=40):
    """The line search's halvings under a strategy: ``fit`` at ρ = 1 with no warm start on kddcup
    in small, the mean on its exact sites (whose steps overshoot), on one device and replicated
    (the step taken again with ρ halved, :meth:`ga.CAVI.update`). Returns the largest relative
    difference of q(u) and the kernel variance, and each run's count of shortened steps."""
    from gpflow_augmented.bounds import ExactBound
    from helpers import lsm_model

    gpflow.config.set_default_float(np.float64)
    ExactBound.mean_sites = lambda self, *args: None
    X, y = ga.datasets.imbalanced_separable_data(num_rows=1200)
    runs = []
    for replicas in (None, strategy):
        with replicas.scope() if replicas else tf.distribute.get_strategy().scope():
            model = lsm_model(X, 5, 10)
        result = ga.fit(
            model,
            (X, y[:, None]),
            iterations=iterations,
            batch_size=50,
            step_size=1.0,
            warm_start_iterations=0,
            seed=3,
            progress=False,
            strategy=replicas,
        )
        runs.append((model, int(result.trainer.cavi.shortened_steps.numpy())))
    (single, single_shortened), (replicated, replicated_shortened) = runs
    difference = max(
        float(np.max(np.abs(a.numpy() - b.numpy())) / np.max(np.abs(a.numpy())))
        for a, b in zip(
            (single.q_mu, single.q_sqrt, single.kernel.variance),
            (replicated.q_mu, replicated.q_sqrt, replicated.kernel.variance),
        )
    )
    return {"difference": difference, "shortened": [single_shortened, replicated_shortened]}


if __name__ == "__main__":
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    if sys.argv[1] == "line-search":
        print(json.dumps(searched(strategy)))
        sys.exit()
    runs = [compare(strategy, config) for config in json.loads(sys.argv[1])]
    print(json.dumps({"runs": runs, "elbo_in_replica": elbo_in_replica(strategy)}))
