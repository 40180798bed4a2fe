r"""
Data-parallel CAVI on ``tf.distribute``.

The conjugate update needs the batch only through sums over its points: the statistics
Σ_i θ_i a_i a_iᵀ and Σ_i (y_i - γ_i)/2 a_i (a_i: the i-th column of the whitened projection), the
local ELBO and the batch size. Under a ``tf.distribute`` strategy (``MirroredStrategy`` on one
machine's devices, ``MultiWorkerMirroredStrategy`` across machines) each replica computes these
sums on its shard of the global batch and :func:`replica_sum` all-reduces them before the M×M
solves, which every replica then repeats identically. Without a strategy every function here is the
identity, so the single-device code path is the same code.

q(u) and the CAVI counter are created with ``ONLY_FIRST_REPLICA`` aggregation (see
:func:`replicated_by_first`): every replica computes the same new value from the same all-reduced
statistics, and the first replica's is stored.

The model's ``elbo`` means the same in a replica as outside one: the estimate from the data it is
given. The training loop combines the replicas: each replica's loss is its estimate times its share
B_r / B of the global batch (:func:`replica_share`), and the losses and gradients are summed over
the replicas, which gives the global batch's: Σ_r (B_r/B)(N/B_r S_r - KL) = N/B Σ_r S_r - KL.
"""

import contextlib
import json
import os
import socket
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import tensorflow as tf
from gpflow.config import default_float
from gpflow.utilities import set_trainable as gpflow_set_trainable

__all__ = [
    "check_tf_config",
    "free_local_ports",
    "loss_and_gradients",
    "multi_worker_strategy",
    "replica_share",
    "replica_sum",
    "replica_max_code",
    "replicated_by_first",
    "set_trainable",
    "is_chief",
]


def _replica_context() -> "tf.distribute.ReplicaContext | None":
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return None
    return context


def replica_sum(value: tf.Tensor) -> tf.Tensor:
    """The sum of ``value`` over the replicas (``value`` itself without a strategy)."""
    context = _replica_context()
    return value if context is None else context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def loss_and_gradients(
    loss_fn: Callable[[], tf.Tensor], variables: Sequence[tf.Variable]
) -> Tuple[tf.Tensor, List[tf.Tensor]]:
    """The loss and its gradients, summed over the replicas under a ``tf.distribute`` strategy
    (where ``loss_fn`` gives each replica's share)."""
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(variables)
        loss = loss_fn()
    return replica_sum((loss, tape.gradient(loss, variables)))


def replica_share(X: tf.Tensor) -> tf.Tensor:
    """B_r / B: this replica's share of the global batch, B_r the points in its shard ``X``
    (1 without a strategy)."""
    if _replica_context() is None:
        return tf.constant(1.0, dtype=default_float())
    batch_size = tf.cast(tf.shape(X)[0], default_float())
    return batch_size / replica_sum(batch_size)


def replica_max_code(code: tf.Tensor, num_codes: int) -> tf.Tensor:
    """The largest of the replicas' status codes (0..num_codes-1), so that they all accept or all
    refuse a step. (All-reduce offers only sums and means: the codes are counted, one-hot.)"""
    context = _replica_context()
    if context is None:
        return code
    counts = replica_sum(tf.one_hot(code, num_codes, dtype=tf.float32))
    present = tf.where(counts > 0, tf.range(num_codes, dtype=code.dtype), tf.zeros_like(code))
    return tf.reduce_max(present)


@contextlib.contextmanager
def replicated_by_first() -> Iterator[None]:
    """Variables created inside take the first replica's value when assigned in a replica context
    (the value is the same on every replica)."""

    def creator(next_creator, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["aggregation"] = tf.VariableAggregation.ONLY_FIRST_REPLICA
        return next_creator(**kwargs)

    with tf.variable_creator_scope(creator):
        yield


def set_trainable(module: tf.Module, flag: bool) -> None:
    """``gpflow.utilities.set_trainable`` that also reaches variables mirrored by a strategy,
    whose ``trainable`` is their components' (GPflow's sets only the wrapper's)."""
    gpflow_set_trainable(module, flag)
    for variable in module.variables:
        if isinstance(variable, tf.distribute.DistributedValues):
            for component in variable.values:
                component._trainable = flag


_TF_CONFIG_FORM = (
    'each worker\'s TF_CONFIG is JSON like {"cluster": {"worker": ["host0:port", '
    '"host1:port"]}, "task": {"type": "worker", "index": 0}}'
)


def check_tf_config(text: Optional[str]) -> dict:
    """The cluster description of ``TF_CONFIG`` (``text``), or one ValueError that names what is
    wrong with it: TensorFlow itself gives a bad one a long trace or waits forever for a worker
    that does not exist."""
    if not text:
        raise ValueError(f"TF_CONFIG is not set; {_TF_CONFIG_FORM}")
    try:
        config: Any = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not JSON ({error}); {_TF_CONFIG_FORM}") from None
    if not isinstance(config, dict) or not isinstance(config.get("cluster"), dict):
        raise ValueError(f'TF_CONFIG has no "cluster" object; {_TF_CONFIG_FORM}')
    cluster = config["cluster"]
    unknown = sorted(set(cluster) - {"chief", "worker"})
    if unknown:
        raise ValueError(
            f"TF_CONFIG's cluster names a job {unknown[0]!r}; MultiWorkerMirroredStrategy has "
            '"chief" and "worker" jobs only'
        )
    for job, addresses in cluster.items():
        if (
            not isinstance(addresses, list)
            or not addresses
            or not all(isinstance(a, str) and a.rpartition(":")[2].isdigit() for a in addresses)
        ):
            raise ValueError(
                f'TF_CONFIG\'s cluster {job!r} must be a non-empty list of "host:port" '
                f"strings, got {addresses!r}"
            )
    everyone = [a for addresses in cluster.values() for a in addresses]
    repeated = sorted({a for a in everyone if everyone.count(a) > 1})
    if repeated:
        raise ValueError(f"TF_CONFIG's cluster lists {repeated[0]} twice")
    task = config.get("task")
    if not isinstance(task, dict) or task.get("type") not in cluster:
        raise ValueError(
            f"TF_CONFIG's task must name a job of the cluster ({', '.join(cluster)}), got {task!r}"
        )
    index = task.get("index")
    size = len(cluster[task["type"]])
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < size:
        raise ValueError(
            f"TF_CONFIG's task index must be an integer from 0 to {size - 1} (the "
            f"{task['type']!r} job has {size}), got {index!r}"
        )
    return config


def is_chief(config: dict) -> bool:
    """Whether the task of a checked ``TF_CONFIG`` (:func:`check_tf_config`) is the cluster's
    chief, the one process that writes checkpoints and results: the ``chief`` job's task where the
    cluster has one, else worker 0."""
    task = config["task"]
    if "chief" in config["cluster"]:
        return bool(task["type"] == "chief")
    return bool(task["type"] == "worker" and task["index"] == 0)


def multi_worker_strategy() -> tf.distribute.MultiWorkerMirroredStrategy:
    """``tf.distribute.MultiWorkerMirroredStrategy`` for this process's ``TF_CONFIG``, checked
    first (:func:`check_tf_config`). Build the model in its ``scope()`` and pass it to ``fit``
    or ``Trainer``; each worker then reads its own shard of every batch."""
    _check_own_port(check_tf_config(os.environ.get("TF_CONFIG")))
    return tf.distribute.MultiWorkerMirroredStrategy()


_LOCAL_HOSTS = ("127.0.0.1", "localhost", "0.0.0.0", "[::]", "::1")


def _check_own_port(config: dict) -> None:
    """Refuse, naming it, a port of this machine that another process holds: TensorFlow's own
    error is 20 lines of "Could not start gRPC server", and the other workers wait for this one
    for good."""
    task = config["task"]
    address = config["cluster"][task["type"]][task["index"]]
    host, _, port = address.rpartition(":")
    if host not in (*_LOCAL_HOSTS, socket.gethostname()):
        return
    with socket.socket() as probe:
        # As gRPC binds: a port left in TIME_WAIT by an earlier worker is free, a listener not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", int(port)))
        except OSError:
            raise ValueError(
                f"TF_CONFIG's task ({task['type']} {task['index']}) is to listen on {address}, but "
                f"port {port} is in use on this machine; free it or give the cluster another port"
            ) from None


def free_local_ports(count: int) -> List[int]:
    """``count`` distinct ports on 127.0.0.1 that are free now, for the workers of a cluster on one
    machine (a process may still take one before a worker binds it)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
