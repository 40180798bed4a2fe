"""Train one model with several worker processes under MultiWorkerMirroredStrategy.

On one machine, start N workers on 127.0.0.1 (free ports) and wait for them:

    python examples/multi_worker.py --workers 2

On several machines, give each machine its ``TF_CONFIG`` (the same cluster list, its own task index;
see ``gpflow_augmented.distributed.check_tf_config``) and start the same program there with
``--worker``; the chief (the ``chief`` job's task, else worker 0) prints the result:

    TF_CONFIG='{"cluster": {"worker": ["hostA:2222", "hostB:2222"]},
                "task": {"type": "worker", "index": 0}}' python examples/multi_worker.py --worker

Each worker reads its own half of every minibatch (tf.data shards ``fit``'s stream); the conjugate
statistics and the hyperparameters' gradients are all-reduced once per step, so every worker holds
the same q(u) and hyperparameters. ``--workers 1`` runs the same training in one process, without
a strategy, for comparison; each run prints its median seconds per step.

With ``--checkpoint-dir``, every ``--checkpoint-every`` steps the chief writes a checkpoint there
(the other workers into scratch folders inside it); a job started again with the same folder
resumes from the chief's latest checkpoint and continues the same minibatch stream to
``--iterations``.

Each ``--worker`` trains in a child process it watches: SIGTERM or Ctrl-C stops it even while
TensorFlow waits for the other workers, and a worker whose cluster makes no first step within
``--startup-timeout`` seconds gives up. The launcher stops every worker as soon as one fails.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time


def at_least(minimum):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer ≥ {minimum}, got {text!r}")
        return value

    return parse


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workers", type=at_least(1), default=2, help="processes to start (default 2)"
    )
    parser.add_argument("--worker", action="store_true", help="run as one worker of TF_CONFIG")
    parser.add_argument("--dataset", default="vehicle", help="a bundled dataset (default vehicle)")
    parser.add_argument("--iterations", type=at_least(1), default=100)
    parser.add_argument("--batch-size", type=at_least(1), default=200, help="the global batch")
    parser.add_argument("--num-inducing", type=at_least(1), default=50)
    parser.add_argument("--checkpoint-dir", help="save here, and resume from here on a restart")
    parser.add_argument(
        "--checkpoint-every", type=at_least(1), default=50, help="steps (default 50)"
    )
    parser.add_argument("--save-parameters", help="the chief writes the final parameters (.npz)")
    parser.add_argument(
        "--startup-timeout",
        type=at_least(1),
        default=300,
        help="seconds a worker waits for the cluster's first step before it gives up (default 300)",
    )
    # The supervised child's: the file it creates once the cluster made its first step.
    parser.add_argument("--started-file", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def supervise(args):
    """Run this worker's training in a child process and watch it. A process blocked in
    TensorFlow's C++ code (waiting for the other workers, or in a collective) never runs Python's
    signal handlers and answers no SIGTERM or SIGINT; this one does, and stops the child (SIGKILL
    if it must). A child whose cluster has made no first step within ``--startup-timeout`` seconds
    is stopped too."""
    import tempfile

    received = []

    def note(number, _frame):
        received.append(number)

    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, note)
    with tempfile.TemporaryDirectory() as folder:
        marker = os.path.join(folder, "started")
        argv = [sys.executable, __file__, *sys.argv[1:], "--started-file", marker]
        child = subprocess.Popen(argv, start_new_session=True, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + args.startup_timeout
        while child.poll() is None:
            late = not os.path.exists(marker) and time.monotonic() > deadline
            if received or late:
                stop([child], grace=3.0)
                if received:
                    name = signal.Signals(received[0]).name
                    print(f"{sys.argv[0]}: worker stopped by {name}", file=sys.stderr)
                    return 128 + received[0]
                print(
                    f"{sys.argv[0]}: the cluster made no first step within "
                    f"{args.startup_timeout} s; is every worker of TF_CONFIG started, and can each "
                    "reach the others' host:port?",
                    file=sys.stderr,
                )
                return 1
            time.sleep(0.2)
        return child.returncode


def _die_with_parent():
    """In the child, before it starts: SIGKILL when the supervisor dies, even by SIGKILL (Linux's
    PR_SET_PDEATHSIG; elsewhere the child may outlive a killed supervisor)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def train(args, distributed, started=None):
    """One worker of TF_CONFIG's cluster (``distributed``; refused without a TF_CONFIG), or the
    same training in this one process."""
    import gpflow
    import numpy as np
    import tensorflow as tf

    import gpflow_augmented as ga

    strategy = ga.distributed.multi_worker_strategy() if distributed else None
    config = ga.distributed.check_tf_config(os.environ.get("TF_CONFIG")) if distributed else None
    # The chief job's task where the cluster has one, else worker 0: exactly one process.
    chief = ga.distributed.is_chief(config) if config else True
    task = f"{config['task']['type']}-{config['task']['index']}" if config else "worker-0"
    data = ga.datasets.load_dataset(args.dataset)
    X, Y = data.X_train, data.Y_train
    with strategy.scope() if strategy else tf.distribute.get_strategy().scope():
        model = ga.LogisticSoftmaxSVGP(
            ga.initial_kernel(X),
            ga.inducing_points(X, args.num_inducing, seed=0),
            data.num_classes,
            num_data=len(X),
        )
        trainer = ga.Trainer(model, ga.RobbinsMonro(), strategy=strategy)
    checkpoint = tf.train.Checkpoint(model=model, trainer=trainer)
    manager = None
    if args.checkpoint_dir:
        # Every worker saves (the variables are mirrored), the chief into the folder itself and the
        # others into their own scratch folders; a restart reads the chief's latest.
        # ga.latest_checkpoint, not TensorFlow's: a damaged state file is not "no checkpoint"
        # (it warns, and resumes from the newest complete checkpoint).
        if ga.latest_checkpoint(args.checkpoint_dir):
            ga.restore_checkpoint(args.checkpoint_dir, model=model, trainer=trainer)
        folder = args.checkpoint_dir if chief else os.path.join(args.checkpoint_dir, f".{task}")
        manager = tf.train.CheckpointManager(checkpoint, folder, max_to_keep=2)
    done = int(trainer.iteration.numpy())
    if done >= args.iterations:  # every worker restored the same step: all stop here
        if chief:
            print(
                f"the job in {args.checkpoint_dir} is finished: {done} steps done, --iterations "
                f"{args.iterations}; give more --iterations to train on",
                flush=True,
            )
        return
    if done and chief:
        print(f"resumed at step {done}", flush=True)
    reduced = count_all_reduced_bytes() if distributed else []
    step_times = []

    def after_step(step, **_):
        if started is not None and not os.path.exists(started):
            open(started, "w").close()  # the first step: the cluster is up
        step_times.append(time.perf_counter())
        if manager is not None and step % args.checkpoint_every == 0:
            manager.save(checkpoint_number=step)

    ga.fit(
        model,
        (X, Y),
        iterations=args.iterations - done,
        batch_size=args.batch_size,
        progress=False,
        strategy=strategy,
        trainer=trainer,
        callback=after_step,
    )
    if not chief:
        return
    if args.save_parameters:
        parameters = {k: np.asarray(v) for k, v in gpflow.utilities.parameter_dict(model).items()}
        np.savez(args.save_parameters, iteration=trainer.iteration.numpy(), **parameters)
    metrics = ga.metrics.Evaluator(data.X_test, data.Y_test)(model)
    workers = strategy.num_replicas_in_sync if strategy else 1
    # The first steps trace and compile; the median of the rest is the step's cost.
    timed = np.diff(step_times[5:])
    per_step = f"{1e3 * float(np.median(timed)):.1f} ms per step" if len(timed) else "untimed"
    print(
        f"{args.dataset}: {workers} worker(s), {args.iterations} steps of a global batch of "
        f"{args.batch_size}: {per_step}; test error {metrics['error']:.4f}, "
        f"NLL {metrics['nll']:.4f}",
        flush=True,
    )
    if reduced:
        C, M = data.num_classes, args.num_inducing
        print(
            f"all-reduced per step: {sum(reduced)} bytes in {len(reduced)} tensors "
            f"(C M² = {C * M * M} numbers, {8 * C * M * M} bytes in float64)",
            flush=True,
        )


def count_all_reduced_bytes():
    """A list that collects the size in bytes of every tensor the step all-reduces, as the step is
    traced (once: its minibatches have one static shape)."""
    import numpy as np
    import tensorflow as tf

    sizes = []
    all_reduce = tf.distribute.ReplicaContext.all_reduce

    def counted(self, reduce_op, value, options=None):
        for tensor in tf.nest.flatten(value):
            sizes.append(int(np.prod(tensor.shape)) * tensor.dtype.size)
        return all_reduce(self, reduce_op, value, options)

    tf.distribute.ReplicaContext.all_reduce = counted
    return sizes


def launch(args):
    command = [sys.executable, __file__, "--worker", "--dataset", args.dataset]
    for option in (
        "iterations",
        "batch_size",
        "num_inducing",
        "checkpoint_dir",
        "checkpoint_every",
        "save_parameters",
        "startup_timeout",
    ):
        if getattr(args, option) is not None:
            command += [f"--{option.replace('_', '-')}", str(getattr(args, option))]
    if args.workers == 1:
        train(args, distributed=False)
        return 0
    from gpflow_augmented.distributed import free_local_ports

    ports = free_local_ports(args.workers)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    workers = []
    # Each worker in a session of its own: Ctrl-C reaches the launcher, which stops them all.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        for index in range(args.workers):
            config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
            environment = dict(os.environ, TF_CONFIG=json.dumps(config))
            workers.append(subprocess.Popen(command, env=environment, start_new_session=True))
        return wait_for(workers, args.checkpoint_dir)
    except KeyboardInterrupt:
        stop(workers)
        print(f"{sys.argv[0]}: interrupted; the workers were stopped", file=sys.stderr)
        return 130


def wait_for(workers, checkpoint_dir):
    """0 once every worker has finished; as soon as one fails or dies, the others (which would
    wait for it for good) are stopped, and its status is returned."""
    while True:
        codes = [worker.poll() for worker in workers]
        failed = [(index, code) for index, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            index, code = failed[0]
            stop(workers)
            how = f"was killed (signal {-code})" if code < 0 else f"failed (exit status {code})"
            resume = (
                f"; run the same command again to resume from {checkpoint_dir}"
                if checkpoint_dir
                else ""
            )
            print(
                f"{sys.argv[0]}: worker {index} {how}; the other workers were stopped{resume}",
                file=sys.stderr,
            )
            return code if code > 0 else 1
        if all(code == 0 for code in codes):
            return 0
        time.sleep(0.2)


def stop(workers, grace=10.0):
    """SIGTERM, then SIGKILL after ``grace`` seconds: a worker blocked in a collective does not
    answer SIGTERM (a supervised worker stops its child within 3 s of it)."""
    for worker in workers:
        if worker.poll() is None:
            worker.terminate()
    deadline = time.monotonic() + grace
    for worker in workers:
        try:
            worker.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


if __name__ == "__main__":
    args = parse(sys.argv[1:])
    try:
        if args.worker and args.started_file is None:
            sys.exit(supervise(args))
        if args.worker:
            sys.exit(train(args, distributed=True, started=args.started_file))
        sys.exit(launch(args))
    except ValueError as error:  # a TF_CONFIG that is missing or wrong, in one line
        print(f"{sys.argv[0]}: error: {error}", file=sys.stderr)
        sys.exit(2)
    except Exception as error:
        # Another worker died mid-step: TensorFlow aborts the collectives of the others.
        lost = ("UnavailableError", "CancelledError", "AbortedError", "InternalError")
        if not (args.worker and type(error).__name__ in lost):
            raise
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        resume = " (run the job again with the same --checkpoint-dir to resume)"
        print(
            f"{sys.argv[0]}: the cluster lost a worker: {first}"
            + (resume if args.checkpoint_dir else ""),
            file=sys.stderr,
        )
        sys.exit(1)
