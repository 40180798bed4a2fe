"""
The command-line tool: ``gpflow-augmented`` or ``python -m gpflow_augmented``; what each command
does is the parser's description (:mod:`.arguments`), and this module runs it.
"""

import argparse
import contextlib
import dataclasses
import datetime
import sys
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence, cast

from .._interrupts import noting_interrupts, raised_by_interrupt

__all__ = ["main"]
from .arguments import COMMANDS, build_parser
from .ci_utils import DATA_DIR_VARIABLE
from .options import RunOptions
from .runs import (
    PROG,
    check_run,
    machine,
    prepare_output,
    read_json,
    release_output,
    run_comparison,
    summary_table,
    write_atomically,
    write_json,
)


def _load(args: argparse.Namespace, seed: int) -> Any:
    from .. import datasets
    from .files import load_file

    if Path(args.data).is_file() or args.test_file is not None:
        return load_file(
            args.data,
            args.test_file,
            test_fraction=args.test_fraction,
            seed=seed,
            zero_based=args.zero_based,
            label_column=args.label_column,
            header=args.header,
        )
    if args.data in datasets.BUNDLED:
        return datasets.load_dataset(args.data, test_fraction=args.test_fraction, seed=seed)
    raise FileNotFoundError(
        f"{args.data!r} is neither a file nor a bundled dataset ({', '.join(datasets.BUNDLED)})"
    )


def _run_ground_truth(args: argparse.Namespace) -> str:
    """Sample the exact posterior, compare, write results.json and figures/ground_truth.png."""
    import numpy as np

    from ..sampling.ground_truth import compare_with_gibbs
    from .plots import ground_truth_figure, save_figure

    dataset = _load(args, args.seed)
    output = Path(args.output or Path("gpflow-augmented-results") / f"ground-truth-{dataset.name}")
    print(
        f"{dataset.name}: {len(dataset.X_train)} train / {len(dataset.X_test)} test points, "
        f"full GP, fixed SE-ARD kernel (variance 1, median-distance lengthscales)",
        flush=True,
    )
    if dataset.description is not None:
        print(f"  read: {dataset.description}", flush=True)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    comparison = compare_with_gibbs(
        dataset,
        num_samples=args.samples,
        num_burnin=args.burnin,
        num_nuts_samples=args.nuts_samples,
        num_chains=args.chains,
        seed=args.seed,
        progress=progress,
    )
    payload = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": [PROG, *sys.argv[1:]],
        "machine": machine(),
        "dataset": dataset.name,
        "kernel": {
            "variance": float(comparison.kernel.variance.numpy()),
            "lengthscales": np.atleast_1d(comparison.kernel.lengthscales.numpy()).tolist(),
        },
        "discrepancies": {
            method: {
                quantity: {"mean": mean, "max": largest}
                for quantity, (mean, largest) in table.items()
            }
            for method, table in comparison.discrepancies().items()
        },
        "diagnostics": {
            name: {
                "max_split_rhat": d.max_rhat,
                "min_ess": d.min_ess,
                "min_predictive_ess": float(d.probability_ess.min()),
                "min_latent_ess": float(d.latent_ess.min()),
            }
            for name, d in comparison.diagnostics.items()
        },
        "summaries": {
            name: {q: v.tolist() for q, v in summary._asdict().items()}
            for name, summary in comparison.summaries.items()
        },
    }
    write_json(output / "results.json", payload)
    save_figure(ground_truth_figure(comparison.summaries), output / "figures" / "ground_truth.png")
    return f"{comparison.report()}\nwritten to {output}/ (results.json, figures/ground_truth.png)"


def _predict(args: argparse.Namespace) -> int:
    """``predict MODEL DATA``: one CSV row of class probabilities per input row."""
    import csv
    import io

    import numpy as np

    from ..export import METADATA, load_model, read_metadata
    from ..validation import InvalidDataError
    from .files import read_features

    metadata = read_metadata(args.model)
    X = read_features(args.data, args.label_column, header=args.header)
    if X.shape[1] != metadata["input_dim"]:
        raise ValueError(
            f"{args.data} has {X.shape[1]} feature columns, the model takes {metadata['input_dim']}"
        )
    exported = load_model(args.model)  # held: its variables must outlive the call
    probabilities = exported.predict_y(X)["mean"].numpy()
    if probabilities.shape[1] == 1:  # a binary model predicts p(y = 1)
        probabilities = np.hstack([1.0 - probabilities, probabilities])
    names = metadata["class_names"] or [f"p_{k}" for k in range(probabilities.shape[1])]
    if len(names) != probabilities.shape[1]:
        raise InvalidDataError(
            f"{args.model}: {METADATA} names {len(names)} classes, the saved "
            f"model predicts {probabilities.shape[1]}; export the model again"
        )
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(names)
    writer.writerows([[repr(float(p)) for p in row] for row in probabilities])
    if args.output is None:
        sys.stdout.write(text.getvalue())
    else:
        write_atomically(Path(args.output), lambda handle: handle.write(text.getvalue()))
    return 0


def _check_options(args: argparse.Namespace) -> None:
    from .baselines import check_method_names

    if args.methods is not None:
        check_method_names(args.methods)
    if args.class_subset_size is not None:
        if args.methods is None or "lsm-subsets" not in args.methods:
            raise ValueError(
                "--class-subset-size is an option of lsm-subsets, which --methods does not name"
                + ("" if args.methods is not None else " (the default methods do not include it)")
            )
    if getattr(args, "alpha_epsilon", None) is not None:
        if args.methods is None or "dirichlet" not in args.methods:
            raise ValueError(
                "--alpha-epsilon is an option of dirichlet, which --methods does not name"
            )
    for option in ("learning_rate", "positive_bijector"):
        if getattr(args, option, None) is not None and getattr(args, "tune", False):
            name = "--" + option.replace("_", "-")
            raise ValueError(f"{name} fixes what --tune would choose; give one of them")
    if getattr(args, "tune_budget", None) is not None and not getattr(args, "tune", False):
        raise ValueError("--tune-budget is the budget of --tune's candidates; add --tune")
    if getattr(args, "command", None) == "benchmark" and args.data_dir is None:
        raise ValueError(
            f"benchmark needs a folder of .npz datasets: pass --data-dir or set {DATA_DIR_VARIABLE}"
        )
    if args.time_budget <= 0 and args.max_iterations is None:
        raise ValueError("--time-budget must be positive (or give --max-iterations)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help"):
        argv = ["compare", *argv]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, or a bad option already reported in one line
        return int(stop.code or 0)
    with noting_interrupts():
        try:
            return _run(args)
        except _ReportedInterrupt:
            return 130
        except BaseException as error:
            if not raised_by_interrupt(error):
                raise
            print(f"{PROG}: interrupted", file=sys.stderr)
            return 130


@contextlib.contextmanager
def _results_kept_in(output: Path) -> Iterator[None]:
    """On Ctrl-C inside, say where the finished results are (the folder the run claimed)."""
    try:
        yield
    except BaseException as error:
        if not raised_by_interrupt(error):
            raise
        print(
            f"{PROG}: interrupted; the finished results are in {output}/ (continue with --resume)",
            file=sys.stderr,
        )
        raise _ReportedInterrupt() from None


class _ReportedInterrupt(Exception):
    """Ctrl-C, already reported with where the finished results are."""


def _run(args: argparse.Namespace) -> int:
    from ..validation import InvalidDataError

    try:
        if args.command == "ground-truth":
            print(_run_ground_truth(args))
            return 0
        if args.command == "predict":
            return _predict(args)
        if args.command == "report":
            from .report import read_summaries, report_section, write_report

            if args.section is not None:
                summaries = read_summaries(*map(Path, args.source))
                print(report_section(summaries, args.section), end="")
            else:
                sources = [Path(source) for source in args.source]
                print(write_report(sources, args.output and Path(args.output)))
            return 0
        _check_options(args)
        options = RunOptions.from_arguments(args)
        if args.command == "benchmark":
            return _benchmark(options)
        dataset = _load(args, options.seed)
        check_run(dataset, options)
        output = prepare_output(
            Path(args.output or Path("gpflow-augmented-results") / dataset.name),
            resume=args.resume,
            overwrite=args.overwrite,
            explicit=args.output is not None,
            names=_seed_folder_names(options),
        )
        try:
            with _results_kept_in(output):
                report = _compare_seeds(args, options, dataset, output)
        finally:
            release_output(output)
    except (FileNotFoundError, InvalidDataError, ValueError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a full disk, a read-only file system, a folder in the way
        where = f"{error.filename}: " if error.filename else ""
        print(f"{PROG}: error: {where}{error.strerror or error}", file=sys.stderr)
        return 2
    print(report)
    print(f"written to {output}/ (report.md, summaries.json, figures/, and each seed's folder)")
    return 0


#: What a run over seeds writes beside its seeds' folders.
_REPORT_FILES = ("report.md", "summaries.json", "figures")


def _seed_folder_names(options: RunOptions) -> Sequence[str]:
    return (*_REPORT_FILES, *(f"seed-{seed}" for seed in options.seeds))


def _warn_of_another_machine(output: Path, options: RunOptions) -> None:
    """Warn, before a resumed run trains, where the runs kept in ``output`` come from other
    versions (the new runs would not report with them), another machine (the report names both)
    or another speed (the report says so): see :func:`.report.machines_of`."""
    from .report import machine_name, machines_of

    if not options.resume or options.report_only:
        return
    kept = [read_json(path).get("machine", {}) for path in sorted(output.rglob("results.json"))]
    if not kept:
        return
    where = f"{output}'s runs and this machine"
    try:
        machines, index = machines_of([*kept, machine()], where, options.time_budget is not None)
    except ValueError as error:
        print(
            f"{PROG}: warning: {error}; the runs made now will not report with them",
            file=sys.stderr,
        )
        return
    here = index[-1]
    elsewhere = sorted({i for i in index[:-1] if i != here})
    if elsewhere:
        names = " and ".join(machine_name(machines[i]) for i in elsewhere)
        print(
            f"{PROG}: warning: some of {output}'s runs come from another machine ({names}) than "
            f"this one ({machine_name(machines[here])}): the report names each, and refuses a "
            "seed whose methods ran on two",
            file=sys.stderr,
        )
    for speed in machines:
        if "speed_warning" in speed:
            print(f"{PROG}: warning: {speed['speed_warning']}", file=sys.stderr)


def _compare_seeds(args: argparse.Namespace, options: RunOptions, first: Any, output: Path) -> str:
    """Each seed's comparison into ``output``/seed-<s> (its own split where the data has none),
    then the report over seeds; returns the report."""
    from .report import write_report

    _warn_of_another_machine(output, options)
    for seed in options.seeds:
        dataset = first if seed == options.seed else _load(args, seed)
        folder = prepare_output(
            output / f"seed-{seed}", resume=options.resume, overwrite=False, explicit=True
        )
        try:
            print(f"seed {seed}:", flush=True)
            result = _compare_into(dataset, options.for_seed(seed, str(folder)), folder)
        finally:
            release_output(folder)
        print(summary_table(result))
        print(
            "t(NLL): training seconds until the test NLL is within 0.01 nats of the method's "
            "best\n",
            flush=True,
        )
    return write_report(output)


def _benchmark(options: RunOptions) -> int:
    """Each seed's benchmark into ``--output``/seed-<s>, then the report over seeds; 1 if a
    dataset could not be run."""
    from .benchmark import run_benchmark, run_binary_benchmark
    from .report import write_report

    output = Path(cast(str, options.output))
    if not options.report_only:
        output = prepare_output(
            output,
            resume=options.resume,
            overwrite=options.overwrite,
            explicit=True,
            names=_seed_folder_names(options),
        )
    _warn_of_another_machine(output, options)
    failed = []
    step_times: Optional[Path] = None  # the first seed's, which the others reuse
    try:
        with _results_kept_in(output):
            for seed in options.seeds:
                benchmark = run_binary_benchmark if options.binary else run_benchmark
                seed_options = options.for_seed(seed, str(output / f"seed-{seed}"))
                if step_times is not None and not options.report_only:
                    seed_options = dataclasses.replace(
                        seed_options, step_times_from=str(step_times)
                    )
                try:
                    table, seed_failed = benchmark(
                        dataclasses.replace(seed_options, overwrite=False)
                    )
                finally:  # the seed's folder, claimed by its first step
                    release_output(output / f"seed-{seed}")
                print(f"seed {seed}:\n{table}", flush=True)
                failed += seed_failed
                measured = output / f"seed-{seed}" / "step_times.json"
                if step_times is None and measured.exists():
                    step_times = measured
    finally:
        release_output(output)
    print(write_report(output))
    # The report is written whatever failed; the exit status says whether all ran.
    return 1 if failed else 0


def _compare_into(dataset: Any, options: RunOptions, output: Path) -> Any:
    """The ``compare`` command's run into the claimed folder ``output``."""
    options = dataclasses.replace(options, output=str(output))
    num_inducing = min(options.num_inducing, len(dataset.X_train))
    capped = (
        f" (--num-inducing {options.num_inducing} capped at the training points)"
        if num_inducing < options.num_inducing
        else ""
    )
    print(
        f"{dataset.name}: {len(dataset.X_train)} train / {len(dataset.X_test)} test points, "
        f"{dataset.X_train.shape[1]} features, {dataset.num_classes} classes; "
        f"M={num_inducing}{capped}, batch {min(options.batch_size, len(dataset.X_train))}, "
        f"{options.time_budget or '-'} s per method",
        flush=True,
    )
    if dataset.description is not None:
        print(f"  read: {dataset.description}", flush=True)
    if dataset.class_names is not None:
        shown = ", ".join(f"{i}={name}" for i, name in enumerate(dataset.class_names[:12]))
        more = f", … ({dataset.num_classes} in all)" if dataset.num_classes > 12 else ""
        print(f"  classes: {shown}{more}", flush=True)
    return run_comparison(dataset, options, output, tensorboard=options.tensorboard)


if __name__ == "__main__":
    sys.exit(main())
