"""Time one compiled training iteration of each comparison method at the same (B, M, C), interleaved
so all see the same machine load (docs/stability.md, "What it costs" and "What is left", quote
its rows). The "forward + backward" rows are each iteration without its
update of q(u) (ours: the natural step; softmax: Adam's update). The "without" rows are ``lsm``'s
iteration with one of the exact bound's safeguards switched off (label strata, mean sites, line
search), which says what each costs.

    python tools/iteration_profile.py --classes 6
    python tools/iteration_profile.py --classes 23 --input-dim 41 --ops lsm

``--ops METHOD`` instead profiles 30 of that method's iterations with TensorFlow's profiler (pin it
to one core with ``taskset -c 0``) and prints where their time goes: each operation type's
milliseconds an iteration (the XLA clusters', such as the fused quadrature, as one "XLA" row), the
largest first.

The methods are built by ``baselines.build_method`` exactly as ``compare`` builds them; random data
(D = 36, like satimage); median over 3 rounds of 20 interleaved calls after 3 untimed ones. The
first line gives the machine's speed probe (``comparison.runs.speed_probe_ms``), which says whether
two machines' timings compare.
"""

import argparse
import collections
import contextlib
import glob
import tempfile
import time

import numpy as np
import tensorflow as tf

from gpflow_augmented.likelihoods import expectation
from gpflow_augmented.bounds import EXACT_WARM_START, Bound, ExactBound
from gpflow_augmented.comparison.baselines import build_method
from gpflow_augmented.comparison.methods import AdamMethod
from gpflow_augmented.comparison.runs import speed_probe_ms
from gpflow_augmented.comparison.benchmark import interleaved_medians
from gpflow_augmented.initialisation import initial_kernel
from gpflow_augmented.distributed import loss_and_gradients

METHODS = ("lsm-negative-multinomial", "lsm", "softmax", "lsm-vi")


#: The exact bound's safeguards, each as the class attributes that switch it off.
SAFEGUARDS = {
    "label strata": {"label_strata": False},
    "mean sites": {"mean_sites_differ": False, "mean_sites": Bound.mean_sites},
    "line search": {"line_searched": False},
}


@contextlib.contextmanager
def exact_bound_with(switches):
    """ExactBound with the class attributes ``switches`` while a method is built and traced."""
    saved = {name: ExactBound.__dict__[name] for name in switches}
    for name, value in switches.items():
        setattr(ExactBound, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(ExactBound, name, value)


def past_warm_start(method, X, Y):
    """``method``, traced and stepped past the warm start, so that the exact steps are timed."""
    for _ in range(EXACT_WARM_START):
        method.step(X, Y)
    return method


def without(safeguards, build, X, Y):
    """The lsm method ``build()`` makes with ``safeguards`` off, traced and past its warm start."""
    switches = {key: value for name in safeguards for key, value in SAFEGUARDS[name].items()}
    with exact_bound_with(switches):
        return past_warm_start(build(), X, Y)


def forward_and_backward(cavi, X, Y):
    """The exact bound's pass of a step (sites and the hyperparameters' gradient), without the
    natural step and its assignment."""
    model = cavi.model
    return model.bound.evaluate(
        model.likelihood,
        lambda: model.batch_geometry(X, None, Y),
        Y,
        in_warm_start=None,
        hyperparameters=list(model.trainable_variables),
        log_weights=[],
        training_loss=lambda geometry: cavi._training_loss(X, Y, model.bound, geometry),
        scale=cavi._batch_scale(X),
    )


def operation_times(step, iterations=30):
    """{operation type: ms an iteration} of ``step()``, from the profiler's trace of the host's
    operations; XLA clusters are one type."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(iterations):
            step()
        tf.profiler.experimental.stop()
        (path,) = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
        space = xplane_pb2.XSpace.FromString(open(path, "rb").read())
    times = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if name.startswith("CpuExecutable::ExecuteAsyncOnStream"):
                    times["XLA"] += event.duration_ps / 1e9 / iterations
                elif ":" in name and "::" not in name and " " not in name:  # "scope/op:OpType"
                    times[name.rsplit(":", 1)[1]] += event.duration_ps / 1e9 / iterations
    return times


def print_operation_times(name, X_array, X, Y, Z, C):
    method = build_method(name, initial_kernel(X_array), Z, C, 20 * len(X_array))
    if name == "lsm":
        past_warm_start(method, X, Y)
    for _ in range(5):
        method.step(X, Y)
    started = time.perf_counter()
    for _ in range(30):
        method.step(X, Y)
    whole = 1e3 * (time.perf_counter() - started) / 30
    times = operation_times(lambda: method.step(X, Y))
    print(f"{name}: {whole:.1f} ms an iteration (unprofiled); by operation type:")
    for op, ms in times.most_common(15):
        print(f"  {op:28s} {ms:7.2f} ms  {100 * ms / whole:5.1f} %")
    print(f"  {'between operations':28s} {whole - sum(times.values()):7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--num-inducing", type=int, default=100)
    parser.add_argument("--classes", type=int, default=6)
    parser.add_argument("--input-dim", type=int, default=36)
    parser.add_argument("--ops", choices=METHODS, help="profile this method's operations instead")
    args = parser.parse_args()
    B, M, C, D = args.batch_size, args.num_inducing, args.classes, args.input_dim
    rng = np.random.default_rng(0)
    X_array = rng.standard_normal((B, D))
    X, Y = tf.constant(X_array), tf.constant(rng.integers(0, C, (B, 1)))
    Z = rng.standard_normal((M, D))
    if args.ops is not None:
        print_operation_times(args.ops, X_array, X, Y, Z, C)
        return

    steps = {}
    for name in METHODS:
        method = build_method(name, initial_kernel(X_array), Z, C, 20 * B)
        steps[f"{name}: iteration"] = lambda method=method: method.step(X, Y)
        if name == "softmax":  # the peer's whole step under XLA too, for a like-for-like view
            model = build_method(name, initial_kernel(X_array), Z, C, 20 * B).model
            xla = AdamMethod(name, model, learning_rate=0.01, jit_compile=True)
            steps["softmax: iteration, XLA"] = lambda method=xla: method.step(X, Y)
        if name == "lsm":
            past_warm_start(method, X, Y)

            def build(name=name):  # a kernel of its own for each variant
                return build_method(name, initial_kernel(X_array), Z, C, 20 * B)

            for off in [[safeguard] for safeguard in SAFEGUARDS] + [list(SAFEGUARDS)]:
                variant = without(off, build, X, Y)
                label = "all three" if len(off) > 1 else off[0]
                steps[f"lsm: iteration without {label}"] = lambda v=variant: v.step(X, Y)
            xla = tf.function(method.iteration_function(), jit_compile=True, autograph=False)
            steps["lsm: iteration, XLA"] = lambda xla=xla: xla(X, Y)
            steps["lsm: CAVI step alone"] = lambda method=method: method.trainer.cavi.step((X, Y))
            # The iteration without its natural step and assignment.
            steps["lsm: forward + backward"] = tf.function(
                lambda cavi=method.trainer.cavi: forward_and_backward(cavi, X, Y)
            )
        if name == "softmax":  # the iteration without Adam's update
            steps["softmax: forward + backward"] = tf.function(
                lambda model=method.model: loss_and_gradients(
                    lambda: model.training_loss((X, Y)), model.trainable_variables
                )
            )
    Fmu = tf.constant(rng.normal(-1, 2, (B, C)))
    Fvar = tf.constant(rng.uniform(0.1, 2, (B, C)))
    onehot = tf.one_hot(Y[:, 0], C, dtype=tf.float64)
    steps["exact sites alone"] = tf.function(lambda: expectation.exact_sites(Fmu, Fvar, onehot))
    steps["expectation, forward only"] = tf.function(
        lambda: expectation.expected_log_logistic_softmax(Fmu, Fvar, onehot)
    )

    rounds = [interleaved_medians(steps, repeats=20) for _ in range(3)]
    print(f"B={B} M={M} C={C}, graph mode; this machine's speed probe {speed_probe_ms():.1f} ms")
    for name in steps:
        print(f"  {name:28s} {1e3 * np.median([r[name] for r in rounds]):7.2f} ms")


if __name__ == "__main__":
    main()
