"""
The benchmark of docs/benchmarks.md: ``gpflow-augmented benchmark --data-dir ../shared/data``.

For each dataset it runs :func:`~gpflow_augmented.comparison.compare` under one time budget per
method and records the final error, NLL, both ECEs, the Brier score, the training time to come
within 0.01 nats of the method's own best test NLL and the mean time per step. It then times
isolated compiled steps — a CAVI step against a ``NaturalGradient`` step, and each followed by the
same Adam step — at equal (batch, M, C), interleaved so both see the same machine load. Everything
is written to ``<output>/benchmark.md`` (and per-dataset ``results.json`` and figures).
"""

import datetime
import functools
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
import tensorflow as tf

from .options import RunOptions
from .report import date_span, machine_name, machines_of, measured_line

__all__ = [
    "BINARY_TASKS",
    "DEFAULT_DATASETS",
    "interleaved_medians",
    "run_benchmark",
    "run_binary_benchmark",
    "step_times",
]

DEFAULT_DATASETS = ("shuttle", "satimage", "segment", "letter", "vehicle", "waveform", "pendigits")
# ../shared/data has no binary dataset: one class against the rest, "name:class".
BINARY_TASKS = ("shuttle:0", "satimage:0", "waveform:0")
_STEP_TIME_SIZES = ((200, 100, 3), (200, 100, 10), (200, 200, 10), (200, 100, 26))


def step_times(
    batch_size: int,
    num_inducing: int,
    num_classes: int,
    input_dim: int = 10,
    repeats: int = 30,
    seed: int = 0,
) -> Dict[str, float]:
    """Median seconds of compiled steps at (B, M, C) on random data: ``cavi`` and ``natgrad``
    alone, and ``cavi+adam`` (this package's iteration) and ``natgrad+adam`` (RM's)."""
    from .baselines import build_method
    from .methods import AugmentedMethod, NaturalGradientMethod
    from ..initialisation import initial_kernel

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((batch_size, input_dim))
    Y = rng.integers(0, num_classes, (batch_size, 1))
    Z = rng.standard_normal((num_inducing, input_dim))
    lsm = cast(
        AugmentedMethod, build_method("lsm", initial_kernel(X), Z, num_classes, 10 * batch_size)
    )
    lsm.trainer.cavi.iteration.assign(lsm.trainer.cavi.warm_start_iterations)  # the exact steps
    rm = cast(
        NaturalGradientMethod,
        build_method("rm", initial_kernel(X), Z, num_classes, 10 * batch_size),
    )
    Xt, Yt = tf.constant(X), tf.constant(Y)
    steps = {
        "cavi": lambda: lsm.trainer.cavi.step((Xt, Yt)),
        "natgrad": lambda: rm.natural_step(Xt, Yt),
        "cavi+adam": lambda: lsm.step(Xt, Yt),
        "natgrad+adam": lambda: float(rm.step(Xt, Yt)),
    }
    return interleaved_medians(steps, repeats)


def interleaved_medians(
    steps: Dict[str, Callable[[], object]], repeats: int = 30, warmup: int = 3
) -> Dict[str, float]:
    """Median seconds of each step, called in turn (so all see the same machine load) after
    ``warmup`` untimed rounds that trace and warm them up."""
    times: Dict[str, List[float]] = {name: [] for name in steps}
    for _ in range(warmup):
        for step in steps.values():
            step()
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(values)) for name, values in times.items()}


def _dataset_rows(name: str, methods: List[Dict[str, Any]]) -> List[str]:
    from .tuning import settings_text

    rows = []
    for m in methods:
        final = m["final"]
        converged = m["time_to_converge"]
        per_step = 1e3 * final["time"] / max(m["iterations"] - 1, 1)
        settings = settings_text(m["options"]) if m.get("options") else "–"
        rows.append(
            f"| {name} | {m['name']} | {settings} | {final['error']:.4f} | {final['nll']:.4f} | "
            f"{final['ece']:.4f} | {final['classwise_ece']:.4f} | {final['brier']:.4f} | "
            f"{'–' if converged is None else f'{converged:.2f}'} | {m['iterations']} | "
            f"{per_step:.1f} | {m['failed_steps']} |"
        )
    return rows


def _ratio(numerator: Any, denominator: Any) -> str:
    if numerator is None:
        return "∞ (RM never reached it)"
    if not denominator:
        return "–"
    return f"{numerator / denominator:.1f}×"


def _speedups(name: str, methods: List[Dict[str, Any]]) -> str:
    """t(RM)/t(LSM) to each one's own best NLL (+0.01), and to a common target: the worse of
    the two best NLLs + 0.01, which both reached."""
    from .results import time_to_common_nll

    by_name = {m["name"]: m for m in methods}
    if "rm" not in by_name:
        return ""
    rm = by_name["rm"]
    parts = []
    for lsm_name in ("lsm", "lsm-negative-multinomial", "lsm-gamma-poisson"):
        if lsm_name not in by_name:
            continue
        lsm = by_name[lsm_name]
        target, t_rm, t_lsm = time_to_common_nll(rm["trace"], lsm["trace"])
        common = _ratio(t_rm, t_lsm)
        own = _ratio(rm["time_to_converge"], lsm["time_to_converge"])
        d_nll = lsm["final"]["nll"] - rm["final"]["nll"]
        d_ece = lsm["final"]["ece"] - rm["final"]["ece"]
        d_error = lsm["final"]["error"] - rm["final"]["error"]
        parts.append(
            f"{lsm_name}: own best {own}, to NLL {target:.3f} {common}; "
            f"Δerror {d_error:+.4f}, ΔNLL {d_nll:+.3f}, ΔECE {d_ece:+.3f}"
        )
    return f"- **{name}**: " + "; ".join(parts) if parts else ""


# The models a user would otherwise pick: SVGP with GPflow's likelihoods, or with ours but trained
# by Adam (no augmentation, no closed-form step), and the published peers (Dirichlet, SEP).
_PEERS = ("rm", "softmax", "lsm-vi", "dirichlet", "sep")
# The method the package recommends, fixed in advance (never picked per dataset from test results).
_PACKAGE_METHOD = "lsm"
# A peer's final NLL relaxed by this factor is the common target both must reach.
_TARGET_SLACK = 1.02


def _against_best_peer(
    name: str, methods: List[Dict[str, Any]], package_method: str = _PACKAGE_METHOD
) -> str:
    """The package's method against the best peer (lowest final test NLL): its final
    differences, and how much sooner it reached the common target, the best peer's final NLL
    × :data:`_TARGET_SLACK`, than each peer did (t(peer) / t(ours)). Times and the target are read
    from the traces, which every method evaluated on the same test points."""
    from .results import time_to_reach

    by_name = {m["name"]: m for m in methods}
    # A diverged run's NLL is stored as None; it cannot be the best peer.
    peers = [by_name[p] for p in _PEERS if p in by_name and by_name[p]["final"]["nll"] is not None]
    if package_method not in by_name or not peers:
        return ""
    ours = by_name[package_method]
    best = min(peers, key=lambda m: m["final"]["nll"])
    ours_error, ours_nll = ours["final"]["error"], ours["final"]["nll"]
    d_error = "–" if ours_error is None else f"{ours_error - best['final']['error']:+.4f}"
    d_nll = "–" if ours_nll is None else f"{100 * (ours_nll / best['final']['nll'] - 1):+.1f} %"
    last_traced = best["trace"][-1]["nll"]
    target = _TARGET_SLACK * (best["final"]["nll"] if last_traced is None else last_traced)
    t_ours = time_to_reach(ours["trace"], target)
    speedups = []
    for peer in peers:
        t_peer = time_to_reach(peer["trace"], target)
        if t_ours is None:
            ratio = "–"
        elif t_peer is None:
            ratio = "∞"
        else:
            ratio = f"{t_peer / max(t_ours, 1e-9):.1f}×"
        speedups.append(f"{peer['name']} {ratio}")
    reached = "never" if t_ours is None else f"{t_ours:.2f} s"
    return (
        f"| {name} | {best['name']} | {d_error} | {d_nll} | {target:.4f} | "
        f"{reached} | {', '.join(speedups)} |"
    )


def _output_folder(options: RunOptions) -> Path:
    if options.output is None:
        raise ValueError("a benchmark needs an output folder (--output)")
    return Path(options.output)


def _datasets(options: RunOptions) -> Tuple[str, ...]:
    """The benchmark's datasets: those given, else its defaults for the kind of labels."""
    return options.datasets or (BINARY_TASKS if options.binary else DEFAULT_DATASETS)


def _benchmark_output(options: RunOptions, names: Sequence[str]) -> Path:
    """The benchmark's folder, checked (and an earlier run's kept or cleared) before any
    training."""
    from .runs import prepare_output

    if options.report_only:
        output = _output_folder(options)
        if not any(output.glob("*/results.json")):
            raise ValueError(
                f"--report-only: {output} holds no benchmark results (no <dataset>/results.json); "
                "run the benchmark into it first"
            )
        return output
    return prepare_output(
        _output_folder(options),
        resume=options.resume,
        overwrite=options.overwrite,
        explicit=True,
        names=("benchmark.md", "binary.md", "step_times.json", *names),
    )


def _compare_apart(dataset: Any, options: RunOptions, folder: Path) -> Optional[str]:
    """:func:`~.runs.run_comparison` into ``folder``, in a process of its own; ``None`` when it
    ran, else why it could not. What TensorFlow keeps of each method's traced functions after the
    method is gone grows one process by gigabytes over a benchmark's hours; a process a dataset
    frees it all. This process interrupted (Ctrl-C, or a signal to it alone) stops that one too,
    whose finished methods are already written. Each dataset picks its own default methods."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # a fork would share TensorFlow's threads
    receive, send = context.Pipe(duplex=False)
    process = context.Process(
        target=_compare,
        args=(send, dataset, options, folder),
        name=f"gpflow-augmented-{folder.name}",
        daemon=True,
    )
    process.start()
    send.close()
    try:
        process.join()
    except BaseException:
        process.join(timeout=10)  # Ctrl-C reaches it too, and it ends by itself
        if process.is_alive():
            process.terminate()
            process.join()
        raise
    try:
        return cast(Optional[str], receive.recv())
    except EOFError:  # it ended without a word
        pass
    code = process.exitcode
    how = f"was killed by signal {-code}" if code is not None and code < 0 else f"ended ({code})"
    return f"its process {how} before it finished"


def _compare(send: Any, dataset: Any, options: RunOptions, folder: Path) -> None:
    """:func:`_compare_apart`'s work in its process: sends ``None``, or why the dataset could not
    run (the errors a dataset is skipped for); what the run returns (models) stays here."""
    from .runs import run_comparison
    from .._interrupts import noting_interrupts, raised_by_interrupt
    from ..validation import InvalidDataError, NumericalError

    _end_with_parent()
    with noting_interrupts():
        try:
            run_comparison(dataset, options, folder, tensorboard=False)
        except BaseException as error:
            if raised_by_interrupt(error):  # the benchmark reports the interruption, in one line
                raise SystemExit(130) from None
            if not isinstance(error, (InvalidDataError, NumericalError, ValueError)):
                raise
            send.send(str(error))
            return
    send.send(None)


def _end_with_parent() -> None:
    """End this process when the benchmark's ends, however it ended: a benchmark killed (not by
    Ctrl-C, which reaches both) must not leave its dataset training on."""
    import multiprocessing
    import os
    import threading

    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="end-with-parent").start()


def _run_dataset(
    load: Callable[[], Any],
    options: RunOptions,
    output: Path,
    describe: Callable[[Any], str],
    label: str,
    failed: List[Tuple[str, str]],
) -> Optional[Tuple[str, Dict[str, Any]]]:
    """Run one dataset's comparison into ``output``/<its name> (or, re-reading or resuming, read
    it); returns its name and its methods' results. One unusable dataset is reported, added to
    ``failed`` under ``label`` with the reason, and skipped, so it cannot sink the benchmark."""
    from .runs import check_run, prepare_output, read_json, release_output
    from ..validation import InvalidDataError, NumericalError

    def not_run(reason: str) -> None:
        print(f"{label}: not run: {reason}", flush=True)
        failed.append((label, reason))

    try:
        dataset = load()
    except (FileNotFoundError, InvalidDataError, ValueError) as error:
        not_run(str(error))
        return None
    folder = output / dataset.name
    resumed = options.resume and (folder / "results.json").exists()
    if resumed:
        print(f"{dataset.name}: finished earlier, kept", flush=True)
    elif not options.report_only:
        print(describe(dataset), flush=True)
        try:
            check_run(dataset, options)
            folder = prepare_output(folder, resume=options.resume, overwrite=False, explicit=True)
            try:
                reason = _compare_apart(dataset, options, folder)
            finally:
                release_output(folder)
        except (InvalidDataError, NumericalError, ValueError) as error:
            not_run(str(error))
            return None
        if reason is not None:
            not_run(reason)
            return None
    results_file = folder / "results.json"
    if not results_file.exists():
        not_run(f"no results in {folder}")
        return None
    return dataset.name, read_json(results_file)


def _not_run(failed: List[Tuple[str, str]]) -> List[str]:
    if not failed:
        return []
    return ["Not run:", "", *[f"- **{name}**: {reason}" for name, reason in failed], ""]


def run_benchmark(options: RunOptions) -> Tuple[str, List[Tuple[str, str]]]:
    """Run (or, with ``options.report_only``, re-read) every dataset's comparison and the step-time
    measurements, and write ``benchmark.md``; returns it and the datasets that could not be run,
    with the reason."""
    output = _benchmark_output(options, _datasets(options))
    started = time.perf_counter()
    ran, failed = _run_datasets(options, output)
    payloads = [payload for _, payload in ran]
    step_rows = _step_time_rows(options, output)
    lines = [
        _measured(options, started, payloads),
        _settings_line(options, payloads),
        "",
        "| dataset | method | settings | error | NLL | ECE | cw-ECE | Brier | t(NLL) s | steps | "
        "ms/step | failed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *[row for name, payload in ran for row in _dataset_rows(name, payload["methods"])],
        "",
        *_against_peers_lines(ran),
        "Isolated compiled steps (median ms over 30, interleaved; random data, D=10):",
        "",
        "| B | M | C | CAVI | NatGrad | NatGrad/CAVI | CAVI+Adam | NatGrad+Adam | ratio |",
        "|---|---|---|---|---|---|---|---|---|",
        *step_rows,
        "",
        *_not_run(failed),
    ]
    return _write_report(output / "benchmark.md", lines), failed


def _run_datasets(
    options: RunOptions, output: Path
) -> Tuple[List[Tuple[str, Dict[str, Any]]], List[Tuple[str, str]]]:
    """Each dataset's comparison (run, resumed or re-read): (name, results) of those that ran, and
    the datasets that could not be run, with the reason."""
    from ..datasets import load_dataset

    failed: List[Tuple[str, str]] = []
    ran: List[Tuple[str, Dict[str, Any]]] = []
    for name in _datasets(options):
        result = _run_dataset(
            functools.partial(
                load_dataset,
                name,
                options.data_dir,
                test_fraction=options.test_fraction,
                seed=options.seed,
            ),
            options,
            output,
            lambda dataset: (
                f"{dataset.name}: {len(dataset.X_train)} train / "
                f"{len(dataset.X_test)} test, C={dataset.num_classes}"
            ),
            name,
            failed,
        )
        if result is not None:
            ran.append((name, result[1]))
    return ran, failed


def _step_time_rows(options: RunOptions, output: Path) -> List[str]:
    """The isolated compiled steps' table rows, measured now or re-read: with ``report_only``
    this run's, with ``step_times_from`` an earlier seed's."""
    import json

    from .runs import read_json

    step_file = output / "step_times.json"
    if options.report_only and step_file.exists():
        measured = read_json(step_file)
    elif options.step_times_from is not None:
        measured = read_json(Path(options.step_times_from))
        output.mkdir(parents=True, exist_ok=True)
        step_file.write_text(json.dumps(measured, indent=1))
    else:
        measured = [
            {"size": [B, M, C], "seconds": step_times(B, M, C, seed=options.seed)}
            for B, M, C in _STEP_TIME_SIZES
        ]
        output.mkdir(parents=True, exist_ok=True)
        step_file.write_text(json.dumps(measured, indent=1))
    step_rows = []
    for entry in measured:
        (B, M, C), t = entry["size"], entry["seconds"]
        step_rows.append(
            f"| {B} | {M} | {C} | {1e3 * t['cavi']:.2f} | {1e3 * t['natgrad']:.2f} | "
            f"{t['natgrad'] / t['cavi']:.2f} | {1e3 * t['cavi+adam']:.2f} | "
            f"{1e3 * t['natgrad+adam']:.2f} | {t['natgrad+adam'] / t['cavi+adam']:.2f} |"
        )
    return step_rows


def _settings_line(options: RunOptions, payloads: List[Dict[str, Any]]) -> str:
    return (
        f"Settings: M={options.num_inducing}, B={options.batch_size}, {_budget(options)} of "
        f"training per method, "
        + (
            "learning rate and positive bijector of each method chosen on a "
            "validation split of the training data (column 'settings')"
            if options.tune
            else _option_text("Adam rate", options.learning_rate, "learning_rate", payloads)
            + ", "
            + _option_text(
                "positive bijector", options.positive_bijector, "positive_bijector", payloads
            )
        )
        + f", inducing points {'trained' if options.train_inducing_points else 'fixed'}, "
        + ("a kernel per class, " if options.per_class_kernels else "")
        + f"seed {options.seed}."
    )


def _against_peers_lines(ran: List[Tuple[str, Dict[str, Any]]]) -> List[str]:
    """The speed-ups over RM and the package's method against the best peer, where measured."""
    speedups = [_speedups(name, payload["methods"]) for name, payload in ran]
    targets = [_against_best_peer(name, payload["methods"]) for name, payload in ran]
    peers_run = [
        p for p in _PEERS if any(m["name"] == p for _, payload in ran for m in payload["methods"])
    ]
    lines: List[str] = []
    if any(speedups):
        lines += [
            "Speed-up over RM, t(RM)/t(LSM): to come within 0.01 nats of each one's own best "
            "test NLL, and to reach a common NLL (the worse of the two bests + "
            "0.01); then final differences LSM − RM (negative: LSM better):",
            "",
            *[s for s in speedups if s],
            "",
        ]
    if any(targets):
        lines += [
            f"{_PACKAGE_METHOD} against the best peer ({', '.join(peers_run)}; lowest final "
            "test NLL): final differences (ours − peer; NLL in %), and the time to reach the "
            f"common target, the best peer's final trace NLL × {_TARGET_SLACK:g}, with each "
            "peer's time divided by ours (∞: the peer never reached it; –: ours did not):",
            "",
            "| dataset | best peer | Δerror | ΔNLL | target NLL | ours reached it at | "
            "sooner than |",
            "|---|---|---|---|---|---|---|",
            *[t for t in targets if t],
            "",
        ]
    return lines


def _measured(options: RunOptions, started: float, payloads: List[dict]) -> str:
    """The report's first line, as a report over seeds stamps its own: when and on what machine
    the results were measured (their own record, which a re-written report keeps); then the total
    time unless re-read, and the datasets that ran on another machine."""
    from .runs import machine

    dates = sorted({payload["created"][:10] for payload in payloads if "created" in payload})
    named = [(p.get("dataset", "?"), p["machine"]) for p in payloads if "machine" in p]
    machines = [m for _, m in named] or [machine()]
    try:
        found, index = machines_of(machines, "these runs", options.time_budget is not None)
        notes = ""
    except ValueError as error:
        found, index, notes = machines[:1], [0] * len(machines), f" Not comparable: {error}."
    for i, other in enumerate(found[1:], start=1):
        datasets = ", ".join(d for (d, _), j in zip(named, index) if j == i)
        notes += f" {datasets} ran on {machine_name(other)}."
        notes += f" Warning: {other['speed_warning']}." if "speed_warning" in other else ""
    when = date_span(dates or [datetime.date.today().isoformat()])
    total = "" if options.report_only else f" Total {time.perf_counter() - started:.0f} s."
    return measured_line(when, found[0]) + total + notes


def _budget(options: RunOptions) -> str:
    parts = ([] if options.time_budget is None else [f"{options.time_budget:g} s"]) + (
        [] if options.max_iterations is None else [f"{options.max_iterations} steps"]
    )
    return " or ".join(parts)


def _option_text(label: str, given: Any, key: str, payloads: List[Dict[str, Any]]) -> str:
    """How the reported methods ran with one option (Adam's rate, the positive bijector), as the
    settings line gives it: the value given to every method, or each method's own."""

    def text(value: Any) -> str:
        return format(value, "g") if isinstance(value, float) else str(value)

    if given is not None:
        return f"{label} {text(given)} for every method"
    values = {
        m["name"]: (m.get("options") or {}).get(key)
        for payload in payloads
        for m in payload["methods"]
    }
    return (
        f"each method's own {label} ("
        + ", ".join(f"{name} {text(value)}" for name, value in values.items() if value is not None)
        + ")"
    )


def _write_report(path: Path, lines: List[str]) -> str:
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def _binary_row(name: str, methods: List[Dict[str, Any]]) -> str:
    """xgpc's time to reach the baseline's best NLL against the baseline's own time to it; the
    same for a common target both reach, 5 % above the worse of the two best NLLs."""
    from .results import best_nll, time_to_reach

    by_name = {m["name"]: m for m in methods}
    xgpc, baseline = by_name["xgpc"], by_name["bernoulli"]

    def times(target: float) -> List[str]:
        t_baseline = time_to_reach(baseline["trace"], target)
        t_xgpc = time_to_reach(xgpc["trace"], target)
        ratio = "–" if t_xgpc is None or not t_baseline else f"{t_baseline / t_xgpc:.1f}×"
        return [
            f"{target:.4f}",
            f"{t_baseline:.2f}",
            "never" if t_xgpc is None else f"{t_xgpc:.2f}",
            ratio,
        ]

    # Every trace here has at least one evaluation: a best NLL exists.
    target = cast(float, best_nll(baseline["trace"]))
    common = 1.05 * max(target, cast(float, best_nll(xgpc["trace"])))
    cells = times(target) + times(common)
    for m in (xgpc, baseline):
        final = m["final"]
        cells += [
            f"{final['error']:.4f}",
            f"{final['nll']:.4f}",
            f"{final['ece']:.4f}",
            str(m["iterations"]),
        ]
    return f"| {name} | " + " | ".join(cells) + " |"


def run_binary_benchmark(options: RunOptions) -> Tuple[str, List[Tuple[str, str]]]:
    """X-GPC against SVGP + Bernoulli with natural gradients on one-vs-rest tasks; writes
    ``binary.md``: the time each needs to reach the baseline's best test NLL, and final metrics."""
    from ..datasets import load_dataset, one_vs_rest

    def task_loader(task: str) -> Callable[[], Any]:
        name, _, positive = task.partition(":")
        if positive and not positive.isdigit():
            raise ValueError(f"binary task {task!r}: the positive class must be an integer")
        return lambda: one_vs_rest(
            load_dataset(
                name, options.data_dir, test_fraction=options.test_fraction, seed=options.seed
            ),
            int(positive or 0),
        )

    output = _benchmark_output(
        options,
        [f"{t.partition(':')[0]}-{t.partition(':')[2] or 0}-vs-rest" for t in _datasets(options)],
    )
    started = time.perf_counter()
    rows, failed, payloads = [], [], []
    for task in _datasets(options):
        try:
            load = task_loader(task)
        except ValueError as error:
            failed.append((task, str(error)))
            continue
        ran = _run_dataset(
            load,
            options,
            output,
            lambda dataset: (
                f"{dataset.name}: {len(dataset.X_train)} train / "
                f"{len(dataset.X_test)} test, {dataset.Y_train.mean():.1%} positive"
            ),
            task,
            failed,
        )
        if ran is not None:
            payloads.append(ran[1])
            rows.append(_binary_row(ran[0], ran[1]["methods"]))
    lines = [
        _measured(options, started, payloads),
        f"Settings: M={options.num_inducing}, B={options.batch_size}, {_budget(options)} of "
        f"training per method, "
        f"{_option_text('Adam rate', options.learning_rate, 'learning_rate', payloads)}, "
        f"seed {options.seed}; one class against "
        "the rest of a multi-class dataset (no binary dataset is available here).",
        "",
        "Training seconds to reach a test NLL: the baseline's (SVGP + Bernoulli) best, and a "
        "common target 5 % above the worse of the two best NLLs; speed-up = t(baseline) / "
        "t(xgpc). Then each method's final error, NLL, ECE and number of steps.",
        "",
        "| task | baseline's best NLL | t baseline | t xgpc | speed-up | common target | "
        "t baseline | t xgpc | speed-up | xgpc error | NLL | ECE | steps | baseline error | "
        "NLL | ECE | steps |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        *_not_run(failed),
    ]
    return _write_report(output / "binary.md", lines), failed
