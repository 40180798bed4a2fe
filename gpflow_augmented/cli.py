"""
The command-line tool: ``gpflow-augmented`` or ``python -m gpflow_augmented``.

``compare`` (the default) trains several methods side by side on one dataset and writes a JSON
trace, the figures and TensorBoard logs, then prints a summary table. With no arguments it runs on
the bundled ``vehicle`` dataset. ``benchmark`` runs ``compare`` over a folder of datasets and writes
the table in docs/benchmarks.md (:mod:`gpflow_augmented.benchmark`). ``ground-truth`` samples the exact
posterior of a small dataset (wine by default) by Gibbs and NUTS and draws how far each variational
method is from it (:mod:`gpflow_augmented.ground_truth`, the paper's Figure 5).
"""
import argparse
import datetime
import json
import math
import os
import platform
import sys
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple

PROG = "gpflow-augmented"
COMMANDS = ("compare", "benchmark", "ground-truth", "scale", "predict")


def _methods(text: str) -> List[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _integer(minimum: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be an integer ≥ {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer ≥ {minimum}, got {text!r}")
        return value

    parse.__name__ = f"integer ≥ {minimum}"
    return parse


def _number(minimum: float, *, inclusive: bool, maximum: Optional[float] = None) -> Any:
    """A finite float in [minimum, maximum) or (minimum, maximum): NaN and inf are refused, so a
    NaN budget never stops and a NaN learning rate never trains."""
    lower = "≥" if inclusive else ">"
    upper = "" if maximum is None else f" and < {maximum:g}"
    wanted = f"a finite number {lower} {minimum:g}{upper}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}") from None
        if not math.isfinite(value) or value < minimum or (value == minimum and not inclusive) or (
            maximum is not None and value >= maximum
        ):
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
        return value

    parse.__name__ = wanted
    return parse


class _Parser(argparse.ArgumentParser):
    """Errors in the tool's one-line form, ``gpflow-augmented: error: …``, exit status 2."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        print(f"{PROG}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _add_training_options(parser: argparse.ArgumentParser, time_budget: float) -> None:
    from .baselines import DEFAULT_MULTICLASS_METHODS, METHODS

    parser.add_argument("--methods", type=_methods, default=None,
                        help=f"comma-separated, from {', '.join(METHODS)}, described below (default: xgpc and "
                             f"bernoulli for binary labels, {', '.join(DEFAULT_MULTICLASS_METHODS)} "
                             "for more classes)")
    parser.add_argument("--num-inducing", type=_integer(1), default=100,
                        help="M (default 100; at most the number of training points)")
    parser.add_argument("--batch-size", type=_integer(1), default=200, help="B (default 200)")
    parser.add_argument("--time-budget", type=_number(0, inclusive=True), default=time_budget,
                        help=f"training seconds per method (default {time_budget:g}; 0: no "
                             "limit, with --max-iterations)")
    parser.add_argument("--max-iterations", type=_integer(1), default=None,
                        help="stop each method after this many steps as well")
    parser.add_argument("--learning-rate", type=_number(0, inclusive=False), default=0.01,
                        help="Adam's learning rate for every method (default 0.01)")
    parser.add_argument("--tune", action="store_true",
                        help="first choose each method's learning rate (and a CAVI method's ρ "
                             "schedule) on a validation split of the training data, each candidate "
                             "under the same budget; then run the chosen settings")
    parser.add_argument("--class-subset-size", type=_integer(1), default=None,
                        help="classes lsm-subsets updates per step (default ⌈C/4⌉, at least 2)")
    parser.add_argument("--train-inducing-points", action="store_true",
                        help="let Adam move the inducing points (of every method)")
    parser.add_argument("--trace-test-points", type=_integer(1), default=2000,
                        help="evaluate the trace on a seeded subset of this many test points "
                             "(the final metrics use all of them; default 2000)")
    parser.add_argument("--seed", type=_integer(0), default=0)
    parser.add_argument("--test-fraction", type=_number(0, inclusive=False, maximum=1),
                        default=0.2, help="test share of a dataset without a test split "
                                          "(default 0.2)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the interrupted run in --output: the methods (and, in a "
                             "benchmark, the datasets) it finished are kept, the rest are run")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the results of an earlier run in --output")
    _add_progress_options(parser)


def _add_progress_options(parser: argparse.ArgumentParser) -> None:
    """--progress / --no-progress; neither means: a progress bar when stderr is a terminal.
    --verbose: TensorFlow's start-up and runtime logs (read before argparse runs, by _quiet)."""
    parser.add_argument("--verbose", action="store_true",
                        help="show TensorFlow's own log lines (hidden by default)")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None)
    progress.add_argument("--no-progress", dest="progress", action="store_false")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    from .baselines import METHODS

    width = max(map(len, METHODS))
    methods_epilog = "methods:\n" + "\n".join(
        f"  {name:<{width}}  {description}" for name, description in METHODS.items())
    compare = commands.add_parser(
        "compare", help="side-by-side comparison on one dataset (the default command)",
        epilog=methods_epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    compare.add_argument("data", nargs="?", default="vehicle",
                         help=".npz, .csv/.tsv or LIBSVM file, or a bundled dataset name "
                              "(default: vehicle)")
    compare.add_argument("--test-file", default=None, help="a separate test file of the same kind")
    compare.add_argument("--label-column", default=None,
                         help="CSV/TSV: the labels' column, a header name or an index (negative "
                              "from the end; default: the last column)")
    compare.add_argument("--zero-based", action="store_true",
                         help="the LIBSVM file's feature indices count from 0 (LIBSVM's own "
                              "count from 1)")
    compare.add_argument("--output", default=None,
                         help="folder for results.json, figures/ and tensorboard/ "
                              "(default: gpflow-augmented-results/<dataset>)")
    compare.add_argument("--no-tensorboard", dest="tensorboard", action="store_false")
    _add_training_options(compare, time_budget=20.0)

    benchmark = commands.add_parser("benchmark", help="compare on many datasets; write the table",
                                    epilog=methods_epilog,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
    benchmark.add_argument("--data-dir", default=str(Path("..") / "shared" / "data"),
                           help="folder of .npz datasets (default ../shared/data)")
    from .benchmark import BINARY_TASKS, DEFAULT_DATASETS

    benchmark.add_argument("--datasets", type=_methods, default=None,
                           help=f"comma-separated (default {','.join(DEFAULT_DATASETS)}; with "
                                f"--binary, name:class tasks, default {','.join(BINARY_TASKS)})")
    benchmark.add_argument("--output", default="benchmark-results")
    benchmark.add_argument("--binary", action="store_true",
                           help="X-GPC against SVGP + Bernoulli on one-vs-rest tasks "
                                "(one class against the rest)")
    benchmark.add_argument("--report-only", action="store_true",
                           help="re-write benchmark.md from the results already in --output")
    _add_training_options(benchmark, time_budget=60.0)

    truth = commands.add_parser(
        "ground-truth", help="exact posterior by Gibbs and NUTS against the variational methods")
    truth.add_argument("data", nargs="?", default="wine",
                       help=".npz or LIBSVM file, or a bundled dataset name (default: wine); "
                            "a full GP is sampled, so keep it small (a few hundred points)")
    truth.add_argument("--test-file", default=None, help="a separate test file of the same kind")
    truth.add_argument("--label-column", default=None,
                       help="CSV/TSV: the labels' column, a header name or an index (default: "
                            "the last column)")
    truth.add_argument("--zero-based", action="store_true",
                       help="the LIBSVM file's feature indices count from 0")
    truth.add_argument("--output", default=None,
                       help="folder for results.json and figures/ "
                            "(default: gpflow-augmented-results/ground-truth-<dataset>)")
    truth.add_argument("--samples", type=_integer(1), default=5000,
                       help="Gibbs draws per chain")
    truth.add_argument("--nuts-samples", type=_integer(1), default=1000,
                       help="NUTS draws per chain")
    truth.add_argument("--chains", type=_integer(2), default=4)
    truth.add_argument("--burnin", type=_integer(0), default=500,
                       help="burn-in steps of both samplers")
    truth.add_argument("--seed", type=_integer(0), default=0)
    truth.add_argument("--test-fraction", type=_number(0, inclusive=False, maximum=1),
                       default=0.2, help="test share of a dataset without a test split "
                                         "(default 0.2)")
    _add_progress_options(truth)

    predict = commands.add_parser(
        "predict", help="class probabilities of an exported model (gpflow_augmented.export_model) "
                        "for the rows of a table")
    predict.add_argument("model", help="the folder export_model wrote")
    predict.add_argument("data", help=".csv/.tsv table of feature rows (or .npz with X)")
    predict.add_argument("--label-column", default=None,
                         help="a column of the table to leave out (e.g. the labels)")
    predict.add_argument("--output", default=None,
                         help="write the probabilities to this CSV file (default: standard output)")
    predict.add_argument("--verbose", action="store_true",
                         help="show TensorFlow's own log lines (hidden by default)")

    scale = commands.add_parser(
        "scale", help="step time against C (class subsets), N (streamed), M, precision; roofline")
    scale.add_argument("--output", default="gpflow-augmented-results/scale",
                       help="folder for scale.json and scale.md")
    scale.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    scale.add_argument("--verbose", action="store_true",
                       help="show TensorFlow's own log lines (hidden by default)")
    return parser


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in value]
    return value


def machine() -> Dict[str, Any]:
    import gpflow
    import tensorflow as tf

    from . import __version__

    return {
        "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "python": platform.python_version(),
        "tensorflow": tf.__version__, "gpflow": gpflow.__version__,
        "gpflow_augmented": __version__,
    }


def write_atomically(path: Path, write: Callable[[IO], Any], mode: str = "w") -> None:
    """Write ``path`` through ``write(handle)`` atomically: a reader, or a run interrupted
    mid-write, sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.partial")
    with open(temporary, mode) as handle:
        write(handle)
    os.replace(temporary, path)


def write_json(path: Path, payload: Dict[str, Any]) -> None:
    """``payload`` as strict JSON, written atomically."""
    text = json.dumps(_finite_or_none(payload), indent=1, allow_nan=False)
    write_atomically(path, lambda handle: handle.write(text))


# What a run writes into its output folder; an earlier run's are replaced only when asked.
RUN_FILES = ("results.json", "run.json", "tuning.json", "methods", "figures", "tensorboard")


def prepare_output(output: Path, *, resume: bool, overwrite: bool, explicit: bool,
                   names: Sequence[str] = RUN_FILES) -> Path:
    """Check, before any training, that results can be written to ``output``; return the folder
    to use. An earlier run's results there are kept (``resume``), replaced (``overwrite``) or,
    for a folder the user named, refused; the default folder moves on to ``<name>-2``, … instead."""
    import shutil

    if resume and overwrite:
        raise ValueError("--resume and --overwrite contradict each other; give one")
    while True:
        for folder in (output, *output.parents):
            if folder.exists() and not folder.is_dir():
                raise ValueError(f"--output {output}: {folder} is a file, not a folder")
        earlier = [name for name in names if (output / name).exists()]
        if not earlier or resume or overwrite or explicit:
            break
        stem, _, number = output.name.rpartition("-")
        output = output.with_name(f"{stem}-{int(number) + 1}" if stem and number.isdigit()
                                  else f"{output.name}-2")
    if earlier and not (resume or overwrite):
        raise ValueError(
            f"--output {output} already holds an earlier run ({', '.join(earlier)}); pass "
            "--resume to continue it, --overwrite to replace it, or choose another folder"
        )
    try:
        output.mkdir(parents=True, exist_ok=True)
        if overwrite:
            for name in earlier:
                target = output / name
                shutil.rmtree(target) if target.is_dir() else target.unlink()
        probe = output / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise ValueError(f"--output {output} cannot be written ({error.strerror or error})") from None
    return output


def _run_settings(dataset: Any, args: argparse.Namespace) -> Dict[str, Any]:
    """What a resumed run must share with the run it continues."""
    keys = ("methods", "num_inducing", "batch_size", "time_budget", "max_iterations",
            "learning_rate", "tune", "class_subset_size", "train_inducing_points",
            "trace_test_points", "seed", "test_fraction")
    return {"dataset": dataset.name, "num_train": len(dataset.X_train),
            **{key: getattr(args, key, None) for key in keys}}


def _finished_methods(output: Path, settings: Dict[str, Any]) -> Dict[str, Any]:
    """The methods an interrupted run in ``output`` finished, after checking that it was the
    same run."""
    import numpy as np

    from .comparison import MethodResult

    run_file = output / "run.json"
    if not run_file.exists():
        return {}
    earlier = json.loads(run_file.read_text())
    differing = [key for key in settings if earlier.get(key) != _finite_or_none(settings[key])]
    if differing:
        key = differing[0]
        raise ValueError(
            f"--resume: the run in {output} had {key} = {earlier.get(key)!r}, this one has "
            f"{settings[key]!r}; resume with the same options, or pass --overwrite"
        )
    finished = {}
    for name in settings["methods"] or []:
        payload_file = output / "methods" / f"{name}.json"
        if payload_file.exists():
            payload = json.loads(payload_file.read_text())
            finished[name] = MethodResult.from_json(
                payload, np.load(output / "methods" / f"{name}.npy"))
    return finished


def _save_method(output: Path, result: Any) -> None:
    """One finished method's result, written atomically as soon as it is done."""
    import numpy as np

    folder = output / "methods"
    write_atomically(folder / f"{result.name}.npy",
                     lambda handle: np.save(handle, result.probabilities), mode="wb")
    write_json(folder / f"{result.name}.json", result.to_json())


def summary_table(result: Any) -> str:
    from .comparison import time_to_converge

    header = (f"{'method':<10} {'iters':>6} {'train s':>8} {'error':>7} {'NLL':>7} {'ECE':>7} "
              f"{'cw-ECE':>7} {'Brier':>7} {'t(NLL) s':>9} {'failed':>6}")
    lines = [header, "-" * len(header)]
    for m in result.methods:
        final = m.final()
        converged = time_to_converge(m.trace)
        lines.append(
            f"{m.name:<10} {m.iterations:>6d} {final['time']:>8.1f} {final['error']:>7.4f} "
            f"{final['nll']:>7.4f} {final['ece']:>7.4f} {final['classwise_ece']:>7.4f} "
            f"{final['brier']:>7.4f} {converged if converged is not None else float('nan'):>9.2f} "
            f"{m.failed_steps:>6d}")
    return "\n".join(lines)


def run_comparison(dataset: Any, args: argparse.Namespace, output: Path,
                   tensorboard: bool = True) -> Any:
    """Compare on ``dataset`` and write ``output``/results.json, figures/ and tensorboard/; each
    method's result is also written to methods/ as it finishes, which ``args.resume`` reads back
    (``output`` has passed :func:`prepare_output`)."""
    import shutil

    from .baselines import default_methods
    from .comparison import compare
    from .monitoring import tensorboard_tasks
    from .plots import calibration_figure, save_figure, traces_figure
    from gpflow.monitor import Monitor, MonitorTaskGroup

    if args.methods is None:
        args.methods = list(default_methods(dataset.num_classes))
    settings = _run_settings(dataset, args)
    finished = _finished_methods(output, settings) if getattr(args, "resume", False) else {}
    if finished:
        print(f"  resuming: {', '.join(finished)} finished earlier", flush=True)
    for name in args.methods:  # an unfinished method's partial logs would mix with the new ones
        if name not in finished and (output / "tensorboard" / name).exists():
            shutil.rmtree(output / "tensorboard" / name)
    write_json(output / "run.json", settings)

    monitors: Dict[str, Tuple[Monitor, Monitor, List[int]]] = {}
    image_every = 8  # evaluations; matplotlib is slow next to a training step

    def log(method: Any, entry: Dict[str, float], evaluator: Any) -> None:
        if method.name not in monitors:
            tasks = tensorboard_tasks(str(output / "tensorboard" / method.name), method.model,
                                      method, test_data=(dataset.X_test, dataset.Y_test))
            monitors[method.name] = (
                Monitor(MonitorTaskGroup([*tasks.every_step, tasks.test_metrics])),
                Monitor(MonitorTaskGroup(tasks.reliability)),
                [0],
            )
        scalars, image, count = monitors[method.name]
        step = int(entry["iteration"])
        elbo = entry["elbo"] if math.isfinite(entry["elbo"]) else None
        scalars(step, elbo=elbo, metrics=entry, probabilities=evaluator.latest_probabilities,
                labels=evaluator.Y)
        if count[0] % image_every == 0:
            image(step)
        count[0] += 1

    progress = sys.stderr.isatty() if args.progress is None else args.progress
    shared = dict(num_inducing=args.num_inducing, batch_size=args.batch_size,
                  time_budget=args.time_budget, max_iterations=args.max_iterations,
                  train_inducing_points=args.train_inducing_points, seed=args.seed,
                  trace_test_points=args.trace_test_points, progress=progress)
    fixed_options = ({} if args.class_subset_size is None
                     else {"lsm-subsets": {"class_subset_size": args.class_subset_size}})
    tuning = None
    if getattr(args, "tune", False):
        from .tuning import settings_text, tune

        tuning_file = output / "tuning.json"
        if getattr(args, "resume", False) and tuning_file.exists():
            tuning = json.loads(tuning_file.read_text())
        else:
            tuning = tune(dataset, args.methods, method_options=fixed_options, **shared).to_json()
            write_json(tuning_file, tuning)
        print("  chosen on the validation split: " + "; ".join(
            f"{name} {settings_text(chosen)}" for name, chosen in tuning["chosen"].items()),
            flush=True)
    result = compare(
        dataset, args.methods, learning_rate=args.learning_rate,
        method_options=fixed_options if tuning is None else tuning["chosen"],
        callback=log if tensorboard else None, completed=finished,
        on_method_done=lambda method_result: _save_method(output, method_result), **shared,
    )
    payload = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": [PROG, *sys.argv[1:]],
        "machine": machine(),
        **result.to_json(),
        "tuning": tuning,
    }
    if tensorboard:  # the final reliability diagram, whatever evaluation it fell on
        for m in result.methods:
            if m.name in monitors:
                monitors[m.name][1](m.iterations)
    write_json(output / "results.json", payload)
    traces = {m.name: m.trace for m in result.methods}
    save_figure(traces_figure(traces, ("error", "nll"), title=dataset.name),
                output / "figures" / "traces.png")
    save_figure(calibration_figure({m.name: m.probabilities for m in result.methods},
                                   dataset.Y_test), output / "figures" / "calibration.png")
    return result


def _load(args: argparse.Namespace) -> Any:
    from . import datasets

    if Path(args.data).is_file() or args.test_file is not None:
        return datasets.load_file(args.data, args.test_file, test_fraction=args.test_fraction,
                                  seed=args.seed, zero_based=args.zero_based,
                                  label_column=args.label_column)
    if args.data in datasets.BUNDLED:
        return datasets.load_dataset(args.data, test_fraction=args.test_fraction, seed=args.seed)
    raise FileNotFoundError(
        f"{args.data!r} is neither a file nor a bundled dataset ({', '.join(datasets.BUNDLED)})")


def run_ground_truth(args: argparse.Namespace) -> str:
    """Sample the exact posterior, compare, write results.json and figures/ground_truth.png."""
    import numpy as np

    from .ground_truth import compare_with_gibbs
    from .plots import ground_truth_figure, save_figure

    dataset = _load(args)
    output = Path(args.output or Path("gpflow-augmented-results") / f"ground-truth-{dataset.name}")
    print(f"{dataset.name}: {len(dataset.X_train)} train / {len(dataset.X_test)} test points, "
          f"full GP, fixed SE-ARD kernel (variance 1, median-distance lengthscales)", flush=True)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    comparison = compare_with_gibbs(
        dataset, num_samples=args.samples, num_burnin=args.burnin,
        num_nuts_samples=args.nuts_samples, num_chains=args.chains, seed=args.seed,
        progress=progress,
    )
    payload = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": [PROG, *sys.argv[1:]],
        "machine": machine(),
        "dataset": dataset.name,
        "kernel": {"variance": float(comparison.kernel.variance.numpy()),
                   "lengthscales": np.atleast_1d(comparison.kernel.lengthscales.numpy()).tolist()},
        "discrepancies": {
            method: {quantity: {"mean": mean, "max": largest}
                     for quantity, (mean, largest) in table.items()}
            for method, table in comparison.discrepancies().items()
        },
        "diagnostics": {
            name: {"max_split_rhat": d.max_rhat, "min_ess": d.min_ess,
                   "min_predictive_ess": float(d.probability_ess.min()),
                   "min_latent_ess": float(d.latent_ess.min())}
            for name, d in comparison.diagnostics.items()
        },
        "summaries": {name: {q: v.tolist() for q, v in summary._asdict().items()}
                      for name, summary in comparison.summaries.items()},
    }
    write_json(output / "results.json", payload)
    save_figure(ground_truth_figure(comparison.summaries), output / "figures" / "ground_truth.png")
    return f"{comparison.report()}\nwritten to {output}/ (results.json, figures/ground_truth.png)"


def _predict(args: argparse.Namespace) -> int:
    """``predict MODEL DATA``: one CSV row of class probabilities per input row."""
    import csv
    import io

    import numpy as np

    from .datasets import read_features
    from .export import METADATA, load_model

    metadata_file = Path(args.model) / METADATA
    if not metadata_file.is_file():
        raise FileNotFoundError(f"{args.model}: not a folder written by export_model (no {METADATA})")
    metadata = json.loads(metadata_file.read_text())
    X = read_features(args.data, args.label_column)
    if X.shape[1] != metadata["input_dim"]:
        raise ValueError(f"{args.data} has {X.shape[1]} feature columns, the model takes "
                         f"{metadata['input_dim']}")
    exported = load_model(args.model)  # held: its variables must outlive the call
    probabilities = exported.predict_y(X)["mean"].numpy()
    if probabilities.shape[1] == 1:  # a binary model predicts p(y = 1)
        probabilities = np.hstack([1.0 - probabilities, probabilities])
    names = metadata["class_names"] or [f"p_{k}" for k in range(probabilities.shape[1])]
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
    from .baselines import METHODS, RENAMED_METHODS

    if args.methods is not None:
        renamed = [m for m in args.methods if m in RENAMED_METHODS]
        if renamed:
            raise ValueError(f"method {renamed[0]!r} is now called "
                             f"{RENAMED_METHODS[renamed[0]]!r}")
        unknown = [m for m in args.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"unknown method {unknown[0]!r}; choose from {', '.join(METHODS)}")
        if not args.methods:
            raise ValueError("--methods is empty")
        repeated = sorted({m for m in args.methods if args.methods.count(m) > 1})
        if repeated:
            raise ValueError(f"--methods names {repeated[0]!r} twice; each method runs once")
    if args.class_subset_size is not None:
        if args.methods is not None and "lsm-subsets" not in args.methods:
            raise ValueError("--class-subset-size is an option of lsm-subsets, which --methods "
                             "does not name")
    if args.time_budget <= 0 and args.max_iterations is None:
        raise ValueError("--time-budget must be positive (or give --max-iterations)")
    if args.time_budget <= 0:
        args.time_budget = None


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help"):
        argv = ["compare", *argv]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, or a bad option already reported in one line
        return int(stop.code or 0)
    try:
        return _run(args)
    except KeyboardInterrupt:
        where = getattr(args, "output", None)
        kept = (f"; the finished results are in {where}/ (continue with --resume)"
                if where and args.command in ("compare", "benchmark") else "")
        print(f"{PROG}: interrupted{kept}", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    from .validation import InvalidDataError

    try:
        if args.command == "ground-truth":
            print(run_ground_truth(args))
            return 0
        if args.command == "predict":
            return _predict(args)
        if args.command == "scale":
            from .scaling import run_scaling, scaling_report

            print(scaling_report(run_scaling(args.output, quick=args.quick)))
            print(f"written to {args.output}/ (scale.json, scale.md)")
            return 0
        _check_options(args)
        if args.command == "benchmark":
            from .benchmark import (
                BINARY_TASKS,
                DEFAULT_DATASETS,
                run_benchmark,
                run_binary_benchmark,
            )

            if args.datasets is None:
                args.datasets = list(BINARY_TASKS if args.binary else DEFAULT_DATASETS)
            report, failed = (run_binary_benchmark if args.binary else run_benchmark)(args)
            print(report)
            # The report is written whatever failed; the exit status says whether all ran.
            return 1 if failed else 0
        dataset = _load(args)
        output = prepare_output(
            Path(args.output or Path("gpflow-augmented-results") / dataset.name),
            resume=args.resume, overwrite=args.overwrite, explicit=args.output is not None)
        args.output = str(output)
        num_inducing = min(args.num_inducing, len(dataset.X_train))
        capped = (f" (--num-inducing {args.num_inducing} capped at the training points)"
                  if num_inducing < args.num_inducing else "")
        print(f"{dataset.name}: {len(dataset.X_train)} train / {len(dataset.X_test)} test points, "
              f"{dataset.X_train.shape[1]} features, {dataset.num_classes} classes; "
              f"M={num_inducing}{capped}, batch {min(args.batch_size, len(dataset.X_train))}, "
              f"{args.time_budget or '-'} s per method", flush=True)
        if dataset.class_names is not None:
            shown = ", ".join(f"{i}={name}" for i, name in enumerate(dataset.class_names[:12]))
            more = f", … ({dataset.num_classes} in all)" if dataset.num_classes > 12 else ""
            print(f"  classes: {shown}{more}", flush=True)
        result = run_comparison(dataset, args, output, tensorboard=args.tensorboard)
    except (FileNotFoundError, InvalidDataError, ValueError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    print(summary_table(result))
    print(f"t(NLL): training seconds until the test NLL is within 0.01 nats of the method's best; "
          f"written to {output}/ (results.json, figures/, tensorboard/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
