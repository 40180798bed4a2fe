"""
One comparison run and its output folder: the folder checked before any training (kept, resumed or
replaced), each method's result written atomically as it finishes, ``results.json``, the figures and
the TensorBoard logs. Shared by the ``compare`` and ``benchmark`` commands (:mod:`.cli`,
:mod:`.benchmark`).
"""

import contextlib
import dataclasses
import datetime
import errno
import functools
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .options import RunOptions

__all__ = [
    "PROG",
    "LOCK_FILE",
    "machine",
    "speed_probe_ms",
    "PROBE_RATIO_LIMIT",
    "write_atomically",
    "write_json",
    "read_json",
    "prepare_output",
    "release_output",
    "check_run",
    "run_comparison",
    "summary_table",
]

PROG = "gpflow-augmented"


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in value]
    return value


def _cpuinfo() -> Dict[str, str]:
    """The first processor's fields in Linux's /proc/cpuinfo; empty elsewhere."""
    fields: Dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


#: The widest vector instructions first: TensorFlow's kernels run at the widest the CPU has.
_VECTOR_UNITS = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"))


def _cpu_model() -> Optional[str]:
    """The CPU's model name, family, model and widest vector unit where the system says them.
    A virtual machine may name every generation alike ("AMD EPYC"); the family, model and vector
    unit tell them apart."""
    info = _cpuinfo()
    name = info.get("model name")
    if name is None:
        return None
    flags = set(info.get("flags", "").split())
    unit = next((text for flag, text in _VECTOR_UNITS if flag in flags), None)
    detail = [f"family {info['cpu family']}, model {info['model']}"] if "cpu family" in info else []
    detail += [unit] if unit else []
    return f"{name} ({'; '.join(detail)})" if detail else name


#: How far apart two runs' probes may be before their report warns that the time budgets bought
#: different work: on one machine the probe ranged 1.4x from process to process on one core
#: (12.7 to 17.5 ms), on a shared one 2.5x within one run (7.9 to 19.5 ms).
PROBE_RATIO_LIMIT = 2.0


def speed_probe_ms(repeats: int = 25) -> float:
    """Milliseconds of a fixed compiled workload, the fastest of ``repeats`` calls (the least
    disturbed by other work): the large
    operations of a step (batched Cholesky factorisations, triangular solves, products and
    exponentials at M = 100, B = 200, C = 10) and 300 rounds of small ones (a step at few classes
    is mostly the cost of launching operations). Runs with a time budget compare only on machines
    of one speed, and a virtual machine's CPU name alone does not say it."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    A = rng.standard_normal((10, 100, 100))
    K = tf.constant(A @ np.swapaxes(A, 1, 2) + 100.0 * np.eye(100))
    X = tf.constant(rng.standard_normal((10, 100, 200)))
    x = tf.constant(rng.standard_normal((200, 3)))

    def small_round(i: tf.Tensor, y: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        return i + 1, tf.math.softplus(0.5 * y + tf.reduce_mean(y, axis=0)) - 1.0

    @tf.function(autograph=False)
    def workload() -> tf.Tensor:
        L = tf.linalg.cholesky(K)
        F = tf.matmul(tf.linalg.triangular_solve(L, X), X, transpose_a=True)
        large = tf.reduce_sum(tf.math.log1p(tf.exp(-tf.abs(F))))
        small = tf.while_loop(lambda i, _: i < 300, small_round, (tf.constant(0), x))[1]
        return large + tf.reduce_sum(small)

    workload()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        workload().numpy()
        times.append(1e3 * (time.perf_counter() - start))
    return float(min(times))


def _usable_cores() -> Optional[int]:
    # A run pinned with ``taskset`` is timed on its own cores, not on the machine's.
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count()


@functools.lru_cache(maxsize=None)
def _process_probe_ms() -> float:
    # One process is one machine: its runs share one probe, and pay for it once.
    return round(speed_probe_ms(), 2)


def machine() -> Dict[str, Any]:
    import gpflow
    import tensorflow as tf

    from .. import __version__

    return {
        "platform": platform.platform(),
        "processor": _cpu_model() or platform.processor() or platform.machine(),
        "cpu_count": _usable_cores(),
        "probe_ms": _process_probe_ms(),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "gpflow": gpflow.__version__,
        "gpflow_augmented": __version__,
    }


def write_atomically(path: Path, write: Callable[[IO], Any], mode: str = "w") -> None:
    """Write ``path`` through ``write(handle)`` atomically: a reader, or a run interrupted
    mid-write, sees the old file or the new one, never half of one. A write that fails (a full
    disk, a read-only file system, a folder in the way) leaves no partial file behind."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder is in the way", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.partial")
    try:
        with open(temporary, mode) as handle:
            write(handle)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_json(path: Path, payload: Dict[str, Any]) -> None:
    """``payload`` as strict JSON, written atomically."""
    text = json.dumps(_finite_or_none(payload), indent=1, allow_nan=False)
    write_atomically(path, lambda handle: handle.write(text))


# What a run writes into its output folder; an earlier run's are replaced only when asked.
_RUN_FILES = ("results.json", "run.json", "tuning.json", "methods", "figures", "tensorboard")


# Held in an output folder by the process writing a run into it: its process id.
LOCK_FILE = ".run.lock"
# A lock file still empty this long after it was made lost its writer between create and write.
_UNWRITTEN_LOCK_SECONDS = 60.0


def _lock_holder(lock: Path) -> Optional[int]:
    """The id of the live process that holds ``lock`` (0 while its holder is still writing it), or
    None if the lock is stale: its process is gone."""
    try:
        text = lock.read_text().strip()
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return None
    if not text:
        return 0 if age < _UNWRITTEN_LOCK_SECONDS else None
    try:
        pid = int(text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return None
    except PermissionError:  # another user's live process
        return pid
    return pid


def _claim(folder: Path) -> Optional[int]:
    """Claim ``folder`` for this process by an exclusive create of its lock file, so that of two
    runs started at once into one folder only one goes on. Returns None once claimed, else the
    holder's process id (0: unknown yet)."""
    lock = folder / LOCK_FILE
    for _ in range(3):
        try:
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            holder = _lock_holder(lock)
            if holder is not None:
                return holder
            with contextlib.suppress(FileNotFoundError):  # a killed run's lock
                lock.unlink()
            continue
        with os.fdopen(descriptor, "w") as handle:
            handle.write(str(os.getpid()))
        return None
    return 0


def release_output(output: Path) -> None:
    """Give up the claim :func:`prepare_output` made on ``output``."""
    lock = output / LOCK_FILE
    with contextlib.suppress(FileNotFoundError, ValueError):
        if int(lock.read_text().strip() or -1) == os.getpid():
            lock.unlink()


def prepare_output(
    output: Path,
    *,
    resume: bool,
    overwrite: bool,
    explicit: bool,
    names: Sequence[str] = _RUN_FILES,
) -> Path:
    """Check, before any training, that results can be written to ``output``, and claim it; return
    the folder to use, which the caller gives up with :func:`release_output`. An earlier run's
    results there are kept (``resume``), replaced (``overwrite``) or, for a folder the user named,
    refused; the default folder moves on to ``<name>-2``, … instead, as it does past a folder
    another running process has claimed."""
    import shutil

    if resume and overwrite:
        raise ValueError("--resume and --overwrite contradict each other; give one")
    while True:
        for folder in (output, *output.parents):
            if folder.exists() and not folder.is_dir():
                raise ValueError(f"--output {output}: {folder} is a file, not a folder")
        try:
            output.mkdir(parents=True, exist_ok=True)
            holder = _claim(output)
        except OSError as error:
            raise ValueError(
                f"--output {output} cannot be written ({error.strerror or error})"
            ) from None
        if holder is None:
            earlier = [name for name in names if (output / name).exists()]
            if not earlier or resume or overwrite or explicit:
                break
            release_output(output)
        elif explicit or resume or overwrite:
            process = f"process {holder}" if holder else "a process"
            raise ValueError(
                f"--output {output} is being written by another run ({process}); wait for it or "
                f"choose another folder (if no run is using it, delete {output / LOCK_FILE})"
            )
        stem, _, number = output.name.rpartition("-")
        output = output.with_name(
            f"{stem}-{int(number) + 1}" if stem and number.isdigit() else f"{output.name}-2"
        )
    if earlier and not (resume or overwrite):
        release_output(output)
        raise ValueError(
            f"--output {output} already holds an earlier run ({', '.join(earlier)}); pass "
            "--resume to continue it, --overwrite to replace it, or choose another folder"
        )
    try:
        if overwrite:
            for name in earlier:
                target = output / name
                shutil.rmtree(target) if target.is_dir() else target.unlink()
        probe = output / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        release_output(output)
        raise ValueError(
            f"--output {output} cannot be written ({error.strerror or error})"
        ) from None
    return output


def _run_settings(dataset: Any, options: RunOptions) -> Dict[str, Any]:
    """What a resumed run must share with the run it continues."""
    keys = (
        "methods",
        "num_inducing",
        "batch_size",
        "time_budget",
        "max_iterations",
        "learning_rate",
        "positive_bijector",
        "tune",
        "tune_budget",
        "class_subset_size",
        "alpha_epsilon",
        "train_inducing_points",
        "per_class_kernels",
        "trace_test_points",
        "seed",
        "test_fraction",
    )
    return {
        "dataset": dataset.name,
        "num_train": len(dataset.X_train),
        **{key: getattr(options, key) for key in keys},
        # Same name, same size, other contents would otherwise resume into one results.json.
        "training_data_digest": _digest(dataset.X_train, dataset.Y_train),
        "test_data_digest": _digest(dataset.X_test, dataset.Y_test),
    }


def _digest(*arrays: Any) -> str:
    import hashlib

    import numpy as np

    digest = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def read_json(path: Path) -> Any:
    """A JSON file this package wrote, or an error that names it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{path} is not readable JSON ({error}); it was not written whole by "
            "this package: delete it, or pass --overwrite"
        ) from None


def _data_file(options: RunOptions, test: bool) -> str:
    """The file a run's training or test data came from, as the user named it."""
    if test and options.test_file:
        return options.test_file
    if options.data:
        return options.data
    return str(Path(options.data_dir or ".") / "<dataset>.npz")


def _finished_methods(
    output: Path, settings: Dict[str, Any], options: RunOptions
) -> Dict[str, Any]:
    """The methods an interrupted run in ``output`` finished, after checking that it was the
    same run on the same data."""
    from .results import MethodResult

    run_file = output / "run.json"
    if not run_file.exists():
        return {}
    earlier = read_json(run_file)
    if not isinstance(earlier, dict):
        raise ValueError(f"{run_file} does not hold a run's settings; pass --overwrite")
    differing = [key for key in settings if earlier.get(key) != _finite_or_none(settings[key])]
    if differing:
        key = differing[0]
        if key.endswith("_data_digest"):
            test = key.startswith("test")
            file = _data_file(options, test).replace("<dataset>", settings["dataset"])
            raise ValueError(
                f"--resume: {file} has changed since the run in {output} began (its "
                f"{'test' if test else 'training'} data differ); pass --overwrite to start again"
            )
        raise ValueError(
            f"--resume: the run in {output} had {key} = {earlier.get(key)!r}, this one has "
            f"{settings[key]!r}; resume with the same options, or pass --overwrite"
        )
    finished = {}
    for name in settings["methods"] or []:
        payload_file = output / "methods" / f"{name}.json"
        if payload_file.exists():
            finished[name] = MethodResult.from_json(
                read_json(payload_file), _read_probabilities(output / "methods" / f"{name}.npy")
            )
    return finished


def _read_probabilities(path: Path) -> Any:
    """A finished method's test probabilities as ``_save_method`` wrote them, or an error that
    names the file."""
    import numpy as np

    from ..validation import first_line

    try:
        probabilities = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        raise ValueError(
            f"{path} is not a readable .npy file ({first_line(error)}); it was not "
            "written whole by this package: delete it, or pass --overwrite"
        ) from None
    if probabilities.ndim != 2 or probabilities.dtype.kind != "f":
        raise ValueError(
            f"{path} holds a {probabilities.dtype} array of shape "
            f"{probabilities.shape}, not a method's test probabilities; delete it, "
            "or pass --overwrite"
        )
    return probabilities


def _save_method(output: Path, result: Any) -> None:
    """One finished method's result, written atomically as soon as it is done."""
    import numpy as np

    folder = output / "methods"
    write_atomically(
        folder / f"{result.name}.npy",
        lambda handle: np.save(handle, result.probabilities),
        mode="wb",
    )
    write_json(folder / f"{result.name}.json", result.to_json())


def summary_table(result: Any) -> str:
    from .results import time_to_converge

    header = (
        f"{'method':<10} {'Adam lr':>7} {'bijector':>8} {'iters':>6} {'train s':>8} "
        f"{'error':>7} {'NLL':>7} {'ECE':>7} {'cw-ECE':>7} {'Brier':>7} {'t(NLL) s':>9} "
        f"{'failed':>6}"
    )
    lines = [header, "-" * len(header)]
    diverged = []
    for m in result.methods:
        final = m.final()
        name = f"{m.name}!" if m.diverged() else m.name
        if m.diverged():
            diverged.append(m.name)
        converged = time_to_converge(m.trace)
        rate = (m.options or {}).get("learning_rate")
        bijector = (m.options or {}).get("positive_bijector") or "–"
        lines.append(
            f"{name:<10} {'–' if rate is None else format(rate, 'g'):>7} {bijector:>8} "
            f"{m.iterations:>6d} "
            f"{final['time']:>8.1f} {final['error']:>7.4f} "
            f"{final['nll']:>7.4f} {final['ece']:>7.4f} {final['classwise_ece']:>7.4f} "
            f"{final['brier']:>7.4f} {converged if converged is not None else float('nan'):>9.2f} "
            f"{m.failed_steps:>6d}"
        )
    if diverged:
        lines.append(
            f"! may have diverged ({', '.join(diverged)}): its bound collapsed, or a tenth of its "
            "steps failed or were kept; see results.json, 'stability'"
        )
    return "\n".join(lines)


def _fixed_options(options: RunOptions) -> Dict[str, Dict[str, Any]]:
    """The methods' options the command line sets and tuning does not choose."""
    fixed: Dict[str, Dict[str, Any]] = {}
    if options.class_subset_size is not None:
        fixed["lsm-subsets"] = {"class_subset_size": options.class_subset_size}
    if options.alpha_epsilon is not None:
        fixed["dirichlet"] = {"alpha_epsilon": options.alpha_epsilon}
    return fixed


def check_run(dataset: Any, options: RunOptions) -> None:
    """Refuse what the comparison of ``dataset`` would refuse, before its output folder is touched
    and before any tuning or training (:func:`~gpflow_augmented.comparison.protocol.check_methods`
    on the whole training set)."""
    from .baselines import default_methods
    from .protocol import check_methods

    methods = options.methods or list(default_methods(dataset.num_classes))
    check_methods(
        methods,
        len(dataset.X_train),
        batch_size=options.batch_size,
        learning_rate=options.learning_rate,
        positive_bijector=options.positive_bijector,
        method_options=_fixed_options(options),
        train_inducing_points=options.train_inducing_points,
        per_class_kernels=options.per_class_kernels,
    )


def run_comparison(
    dataset: Any, options: RunOptions, output: Path, tensorboard: bool = True
) -> Any:
    """Compare on ``dataset`` and write ``output``/results.json, figures/ and tensorboard/; each
    method's result is also written to methods/ as it finishes, which ``options.resume`` reads back
    (``output`` has passed :func:`prepare_output`, and the run :func:`check_run`)."""
    import shutil

    from .baselines import default_methods
    from .protocol import compare

    methods = options.methods or default_methods(dataset.num_classes)
    options = dataclasses.replace(options, methods=methods)
    settings = _run_settings(dataset, options)
    finished = _finished_methods(output, settings, options) if options.resume else {}
    if finished:
        print(f"  resuming: {', '.join(finished)} finished earlier", flush=True)
    for name in methods:  # an unfinished method's partial logs would mix with the new ones
        if name not in finished and (output / "tensorboard" / name).exists():
            shutil.rmtree(output / "tensorboard" / name)
    write_json(output / "run.json", settings)
    log, monitors = _tensorboard_logger(output, dataset)
    progress = sys.stderr.isatty() if options.progress is None else options.progress
    shared: Dict[str, Any] = dict(
        num_inducing=options.num_inducing,
        batch_size=options.batch_size,
        time_budget=options.time_budget,
        max_iterations=options.max_iterations,
        train_inducing_points=options.train_inducing_points,
        per_class_kernels=options.per_class_kernels,
        seed=options.seed,
        trace_test_points=options.trace_test_points,
        progress=progress,
    )
    fixed_options = _fixed_options(options)
    tuning = _tuning(dataset, options, output, fixed_options, shared) if options.tune else None
    result = compare(
        dataset,
        methods,
        learning_rate=options.learning_rate,
        positive_bijector=options.positive_bijector,
        method_options=fixed_options if tuning is None else tuning["chosen"],
        callback=log if tensorboard else None,
        completed=finished,
        on_method_done=lambda method_result: _save_method(output, method_result),
        **shared,
    )
    if tensorboard:  # the final reliability diagram, whatever evaluation it fell on
        for m in result.methods:
            if m.name in monitors:
                monitors[m.name][1](m.iterations)
    _write_results(output, dataset, result, tuning)
    return result


def _tensorboard_logger(output: Path, dataset: Any) -> Tuple[Callable[..., None], Dict[str, Any]]:
    """The comparison's callback that logs each evaluation to ``output``/tensorboard/<method>
    (the scalars every time, the reliability diagram every 8th), and its monitors by method."""
    from gpflow.monitor import Monitor, MonitorTaskGroup

    from ..monitoring import tensorboard_tasks

    monitors: Dict[str, Tuple[Monitor, Monitor, List[int]]] = {}
    image_every = 8  # evaluations; matplotlib is slow next to a training step

    def log(method: Any, entry: Dict[str, float], evaluator: Any) -> None:
        if method.name not in monitors:
            tasks = tensorboard_tasks(
                str(output / "tensorboard" / method.name),
                method.model,
                method,
                test_data=(dataset.X_test, dataset.Y_test),
            )
            assert tasks.test_metrics is not None and tasks.reliability is not None  # test data
            monitors[method.name] = (
                Monitor(MonitorTaskGroup([*tasks.every_step, tasks.test_metrics])),
                Monitor(MonitorTaskGroup(tasks.reliability)),
                [0],
            )
        scalars, image, count = monitors[method.name]
        step = int(entry["iteration"])
        elbo = entry["elbo"] if math.isfinite(entry["elbo"]) else None
        scalars(
            step,
            elbo=elbo,
            metrics=entry,
            probabilities=evaluator.latest_probabilities,
            labels=evaluator.Y,
        )
        if count[0] % image_every == 0:
            image(step)
        count[0] += 1

    return log, monitors


def _tuning(
    dataset: Any,
    options: RunOptions,
    output: Path,
    fixed_options: Dict[str, Dict[str, Any]],
    shared: Dict[str, Any],
) -> Dict[str, Any]:
    """The settings chosen on the validation split (``tuning.json``, with the grid and the
    candidates' budget). Each candidate is written there as it finishes, so that a resumed run
    keeps an interrupted tuning's candidates."""
    from .tuning import candidate_settings, settings_text, tune

    tuning_file = output / "tuning.json"
    budget = {
        "time_budget": options.tune_budget or shared["time_budget"],
        "max_iterations": shared["max_iterations"],
    }
    plan = {"grid": candidate_settings(), "budget": budget}
    earlier = read_json(tuning_file) if options.resume and tuning_file.exists() else {}
    if any(earlier.get(key) != value for key, value in plan.items()):
        earlier = {}  # another version's grid: its candidates are not this tuning's
    if "chosen" in earlier:
        tuning = earlier
    else:
        ran: List[Dict[str, Any]] = list(earlier.get("candidates", []))

        def save(candidate: Dict[str, Any]) -> None:
            ran.append(candidate)
            write_json(tuning_file, {**plan, "candidates": ran})

        found = tune(
            dataset,
            options.methods,
            method_options=fixed_options,
            finished=ran[:],
            on_candidate=save,
            **{**shared, **budget},
        )
        tuning = {**plan, **found.to_json()}
        write_json(tuning_file, tuning)
    print(
        "  chosen on the validation split: "
        + "; ".join(f"{name} {settings_text(chosen)}" for name, chosen in tuning["chosen"].items()),
        flush=True,
    )
    return tuning


def _write_results(output: Path, dataset: Any, result: Any, tuning: Optional[Dict]) -> None:
    """results.json and the figures of the traces and of the calibration."""
    from .plots import calibration_figure, save_figure, traces_figure

    payload = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": [PROG, *sys.argv[1:]],
        "machine": machine(),
        **result.to_json(),
        "tuning": tuning,
    }
    write_json(output / "results.json", payload)
    traces = {m.name: m.trace for m in result.methods}
    save_figure(
        traces_figure(traces, ("error", "nll"), title=dataset.name),
        output / "figures" / "traces.png",
    )
    save_figure(
        calibration_figure({m.name: m.probabilities for m in result.methods}, dataset.Y_test),
        output / "figures" / "calibration.png",
    )
