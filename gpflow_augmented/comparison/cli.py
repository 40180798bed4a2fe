"""
The command-line tool: ``gpflow-augmented`` or ``python -m gpflow_augmented``.

``compare`` (the default) trains several methods side by side on one dataset and writes a JSON
trace, the figures and TensorBoard logs, then prints a summary table. With no arguments it runs on
the bundled ``vehicle`` dataset. ``benchmark`` runs ``compare`` over a folder of datasets and writes
the table in docs/benchmarks.md (:mod:`gpflow_augmented.comparison.benchmark`). ``ground-truth``
samples the exact posterior of a small dataset (wine by default) by Gibbs and NUTS and draws how far
each variational method is from it (:mod:`gpflow_augmented.sampling.ground_truth`, the paper's
Figure 5).
"""

import argparse
import contextlib
import dataclasses
import datetime
import math
import os
import sys
from pathlib import Path
from typing import Any, Iterator, List, NoReturn, Optional, Sequence, Tuple

from ..training import raised_by_interrupt
from .ci_utils import DATA_DIR_VARIABLE
from .options import RunOptions
from .runs import (
    PROG,
    check_run,
    machine,
    prepare_output,
    release_output,
    run_comparison,
    summary_table,
    write_atomically,
    write_json,
)

COMMANDS = ("compare", "benchmark", "stability", "ground-truth", "scale", "predict")


def _methods(text: str) -> List[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _integer(minimum: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be an integer ≥ {minimum}, got {text!r}"
            ) from None
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
        if (
            not math.isfinite(value)
            or value < minimum
            or (value == minimum and not inclusive)
            or (maximum is not None and value >= maximum)
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
    from .baselines import (
        DEFAULT_MULTICLASS_METHODS,
        DEFAULT_POSITIVE_BIJECTOR,
        METHOD_SPECS,
        METHODS,
        POSITIVE_BIJECTORS,
        UNSWEPT_LEARNING_RATE,
    )

    parser.add_argument(
        "--methods",
        type=_methods,
        default=None,
        help=f"comma-separated, from {', '.join(METHODS)}, described below (default: xgpc and "
        f"bernoulli for binary labels, {', '.join(DEFAULT_MULTICLASS_METHODS)} "
        "for more classes)",
    )
    parser.add_argument(
        "--num-inducing",
        type=_integer(1),
        default=100,
        help="M (default 100; at most the number of training points)",
    )
    parser.add_argument("--batch-size", type=_integer(1), default=200, help="B (default 200)")
    parser.add_argument(
        "--time-budget",
        type=_number(0, inclusive=True),
        default=time_budget,
        help=f"training seconds per method (default {time_budget:g}; 0: no "
        "limit, with --max-iterations)",
    )
    parser.add_argument(
        "--max-iterations",
        type=_integer(1),
        default=None,
        help="stop each method after this many steps as well",
    )
    own_rates = ", ".join(
        f"{name} {spec.learning_rate:g}"
        for name, spec in METHOD_SPECS.items()
        if not spec.binary and spec.learning_rate != UNSWEPT_LEARNING_RATE
    )
    parser.add_argument(
        "--learning-rate",
        type=_number(0, inclusive=False),
        default=None,
        help="Adam's learning rate for every method (default: each method's own, "
        f"chosen by one rule on validation splits: {own_rates}; "
        f"{UNSWEPT_LEARNING_RATE:g} for the others)",
    )
    own_bijectors = "".join(
        f"{name} {spec.positive_bijector}, "
        for name, spec in METHOD_SPECS.items()
        if spec.positive_bijector != DEFAULT_POSITIVE_BIJECTOR
    )
    parser.add_argument(
        "--positive-bijector",
        choices=POSITIVE_BIJECTORS,
        default=None,
        help="how every method keeps its kernel variance, lengthscales and other "
        "positive parameters positive, GPflow's setting (default: each "
        f"method's own, chosen by the same rule: {own_bijectors}GPflow's "
        f"{DEFAULT_POSITIVE_BIJECTOR} for the others; with --tune, chosen "
        f"from {', '.join(POSITIVE_BIJECTORS)})",
    )
    parser.add_argument(
        "--tune",
        action="store_true",
        help="first choose each method's learning rate and positive bijector "
        "(and a CAVI method's ρ schedule) on a validation split of the "
        "training data, each candidate under the same budget; then run the "
        "chosen settings",
    )
    parser.add_argument(
        "--class-subset-size",
        type=_integer(1),
        default=None,
        help="classes lsm-subsets updates per step (default ⌈C/4⌉, at least 2)",
    )
    parser.add_argument(
        "--alpha-epsilon",
        type=_number(0.0, inclusive=False),
        default=None,
        help="the dirichlet method's α_ε (default 0.01; with --tune, chosen from 0.001, 0.01, 0.1)",
    )
    parser.add_argument(
        "--train-inducing-points",
        action="store_true",
        help="let Adam move the inducing points (of every method)",
    )
    parser.add_argument(
        "--trace-test-points",
        type=_integer(1),
        default=2000,
        help="evaluate the trace on a seeded subset of this many test points "
        "(the final metrics use all of them; default 2000)",
    )
    parser.add_argument("--seed", type=_integer(0), default=0)
    parser.add_argument(
        "--test-fraction",
        type=_number(0, inclusive=False, maximum=1),
        default=0.2,
        help="test share of a dataset without a test split (default 0.2)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted run in --output: the methods (and, in a "
        "benchmark, the datasets) it finished are kept, the rest are run",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace the results of an earlier run in --output"
    )
    _add_progress_options(parser)


def _add_progress_options(parser: argparse.ArgumentParser) -> None:
    """--progress / --no-progress; neither means: a progress bar when stderr is a terminal.
    --verbose: TensorFlow's start-up and runtime logs (read before argparse runs, by _quiet)."""
    parser.add_argument(
        "--verbose", action="store_true", help="show TensorFlow's own log lines (hidden by default)"
    )
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None)
    progress.add_argument("--no-progress", dest="progress", action="store_false")


def _add_header_options(parser: argparse.ArgumentParser) -> None:
    """CSV/TSV: override how the first row is read (by default a header when it names the columns
    or numbers them above non-integer data; README, "Tables")."""
    header = parser.add_mutually_exclusive_group()
    header.add_argument(
        "--header",
        dest="header",
        action="store_true",
        default=None,
        help="CSV/TSV: the first row names the columns",
    )
    header.add_argument(
        "--no-header", dest="header", action="store_false", help="CSV/TSV: the first row is data"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    from .baselines import METHODS

    width = max(map(len, METHODS))
    methods_epilog = "methods:\n" + "\n".join(
        f"  {name:<{width}}  {description}" for name, description in METHODS.items()
    )
    compare = commands.add_parser(
        "compare",
        help="side-by-side comparison on one dataset (the default command)",
        epilog=methods_epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument(
        "data",
        nargs="?",
        default="vehicle",
        help=".npz, .csv/.tsv or LIBSVM file, or a bundled dataset name (default: vehicle)",
    )
    compare.add_argument("--test-file", default=None, help="a separate test file of the same kind")
    compare.add_argument(
        "--label-column",
        default=None,
        help="CSV/TSV: the labels' column, a header name or an index (negative "
        "from the end; default: the last column)",
    )
    _add_header_options(compare)
    compare.add_argument(
        "--zero-based",
        action="store_true",
        help="the LIBSVM file's feature indices count from 0 (LIBSVM's own count from 1)",
    )
    compare.add_argument(
        "--output",
        default=None,
        help="folder for results.json, figures/ and tensorboard/ "
        "(default: gpflow-augmented-results/<dataset>)",
    )
    compare.add_argument("--no-tensorboard", dest="tensorboard", action="store_false")
    _add_training_options(compare, time_budget=20.0)

    benchmark = commands.add_parser(
        "benchmark",
        help="compare on many datasets; write the table",
        epilog=methods_epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    benchmark.add_argument(
        "--data-dir",
        default=os.environ.get(DATA_DIR_VARIABLE) or None,
        help=f"folder of .npz datasets (default: ${DATA_DIR_VARIABLE})",
    )
    from .benchmark import BINARY_TASKS, DEFAULT_DATASETS

    benchmark.add_argument(
        "--datasets",
        type=_methods,
        default=None,
        help=f"comma-separated (default {','.join(DEFAULT_DATASETS)}; with "
        f"--binary, name:class tasks, default {','.join(BINARY_TASKS)})",
    )
    benchmark.add_argument("--output", default="benchmark-results")
    benchmark.add_argument(
        "--binary",
        action="store_true",
        help="X-GPC against SVGP + Bernoulli on one-vs-rest tasks (one class against the rest)",
    )
    benchmark.add_argument(
        "--report-only",
        action="store_true",
        help="re-write benchmark.md from the results already in --output",
    )
    _add_training_options(benchmark, time_budget=60.0)

    _add_stability_parser(commands, methods_epilog)

    truth = commands.add_parser(
        "ground-truth", help="exact posterior by Gibbs and NUTS against the variational methods"
    )
    truth.add_argument(
        "data",
        nargs="?",
        default="wine",
        help=".npz or LIBSVM file, or a bundled dataset name (default: wine); "
        "a full GP is sampled, so keep it small (a few hundred points)",
    )
    truth.add_argument("--test-file", default=None, help="a separate test file of the same kind")
    truth.add_argument(
        "--label-column",
        default=None,
        help="CSV/TSV: the labels' column, a header name or an index (default: the last column)",
    )
    _add_header_options(truth)
    truth.add_argument(
        "--zero-based", action="store_true", help="the LIBSVM file's feature indices count from 0"
    )
    truth.add_argument(
        "--output",
        default=None,
        help="folder for results.json and figures/ "
        "(default: gpflow-augmented-results/ground-truth-<dataset>)",
    )
    truth.add_argument("--samples", type=_integer(1), default=5000, help="Gibbs draws per chain")
    truth.add_argument(
        "--nuts-samples", type=_integer(1), default=1000, help="NUTS draws per chain"
    )
    truth.add_argument("--chains", type=_integer(2), default=4)
    truth.add_argument(
        "--burnin", type=_integer(0), default=500, help="burn-in steps of both samplers"
    )
    truth.add_argument("--seed", type=_integer(0), default=0)
    truth.add_argument(
        "--test-fraction",
        type=_number(0, inclusive=False, maximum=1),
        default=0.2,
        help="test share of a dataset without a test split (default 0.2)",
    )
    _add_progress_options(truth)

    predict = commands.add_parser(
        "predict",
        help="class probabilities of an exported model (gpflow_augmented.export_model) "
        "for the rows of a table",
    )
    predict.add_argument("model", help="the folder export_model wrote")
    predict.add_argument("data", help=".csv/.tsv table of feature rows (or .npz with X)")
    predict.add_argument(
        "--label-column", default=None, help="a column of the table to leave out (e.g. the labels)"
    )
    _add_header_options(predict)
    predict.add_argument(
        "--output",
        default=None,
        help="write the probabilities to this CSV file (default: standard output)",
    )
    predict.add_argument(
        "--verbose", action="store_true", help="show TensorFlow's own log lines (hidden by default)"
    )

    scale = commands.add_parser(
        "scale", help="step time against C (class subsets), N (streamed), M, precision; roofline"
    )
    scale.add_argument(
        "--output",
        default="gpflow-augmented-results/scale",
        help="folder for scale.json and scale.md",
    )
    scale.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    scale.add_argument(
        "--export-hlo",
        metavar="DIR",
        default=None,
        help="instead of timing: write each method's whole iteration as an XLA HLO "
        "module with its inputs and TensorFlow's outputs into DIR, for another "
        "XLA client (e.g. ../shared/tools/xla-gpu/run_hlo.py on a GPU)",
    )
    scale.add_argument(
        "--sizes",
        nargs="+",
        metavar="B,M,C,D",
        default=None,
        help="with --export-hlo: batch size, inducing points, classes, input "
        "dimension of each module (default: the five sizes of "
        "hlo_export.DEFAULT_SIZES)",
    )
    scale.add_argument(
        "--methods",
        default=None,
        help="with --export-hlo: comma-separated methods (default "
        "lsm,lsm-negative-multinomial,softmax,rm)",
    )
    scale.add_argument(
        "--dtypes",
        default=None,
        help="with --export-hlo: comma-separated, float64 and/or float32 (default both)",
    )
    scale.add_argument(
        "--verbose", action="store_true", help="show TensorFlow's own log lines (hidden by default)"
    )
    return parser


def _integers(minimum: int) -> Any:
    single = _integer(minimum)

    def parse(text: str) -> List[int]:
        return [single(part) for part in text.split(",")]

    return parse


def _add_stability_parser(commands: Any, methods_epilog: str) -> None:
    from .stability import SUITE_METHODS, SUITE_SETS

    suite = commands.add_parser(
        "stability",
        help="leave each method running for thousands of steps over a grid; check the trace",
        description="The stability suite (gpflow_augmented.comparison.stability): after the "
        "first 10 %% of a run the test error never rises more than 0.01 above its best, and the "
        "final NLL is within 10 %% of the best along the run.",
        epilog=methods_epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    suite.add_argument(
        "--data-dir",
        default=os.environ.get(DATA_DIR_VARIABLE) or None,
        help=f"folder of .npz datasets (default: ${DATA_DIR_VARIABLE}); the synthetic and tiny "
        "sets need none",
    )
    suite.add_argument("--output", default="stability-results")
    suite.add_argument(
        "--sets", type=_methods, default=list(SUITE_SETS), help=f"default {','.join(SUITE_SETS)}"
    )
    suite.add_argument(
        "--methods",
        type=_methods,
        default=["lsm"],
        help=f"default lsm; the suite's peers are {','.join(SUITE_METHODS[1:])}",
    )
    suite.add_argument("--seeds", type=_integers(0), default=[0, 1, 2])
    suite.add_argument("--batch-sizes", type=_integers(1), default=[200, 1000])
    suite.add_argument("--num-inducing", type=_integers(1), default=[100, 200])
    suite.add_argument("--iterations", type=_integer(10), default=5000)
    suite.add_argument(
        "--evaluations", type=_integer(10), default=100, help="regular trace points a run"
    )
    suite.add_argument("--resume", action="store_true", help="keep the cells already written")
    suite.add_argument(
        "--overwrite", action="store_true", help="replace an earlier suite's cells in --output"
    )
    _add_progress_options(suite)


def _run_stability(args: argparse.Namespace) -> int:
    from .baselines import check_method_names
    from .stability import SuiteOptions, check_sets, run_suite

    check_method_names(args.methods)
    check_sets(args.sets, args.data_dir)
    output = prepare_output(
        Path(args.output),
        resume=args.resume,
        overwrite=args.overwrite,
        explicit=True,
        names=("cells", "stability.md"),
    )
    options = SuiteOptions(
        output,
        None if args.data_dir is None else Path(args.data_dir),
        sets=args.sets,
        methods=args.methods,
        seeds=args.seeds,
        batch_sizes=args.batch_sizes,
        num_inducing=args.num_inducing,
        iterations=args.iterations,
        evaluations=args.evaluations,
        progress=sys.stderr.isatty() if args.progress is None else args.progress,
    )
    try:
        with _results_kept_in(output):
            print(run_suite(options, resume=args.resume))
    finally:
        release_output(output)
    print(f"written to {output}/ (cells/, stability.md)")
    return 0


def _export_hlo(args: argparse.Namespace) -> int:
    from .baselines import FULL_GP_METHODS, MULTICLASS_METHODS, check_method_names
    from .hlo_export import DEFAULT_METHODS, DEFAULT_SIZES, export_steps

    sizes: Tuple[Tuple[int, ...], ...] = DEFAULT_SIZES
    if args.sizes is not None:
        try:
            sizes = tuple(tuple(int(n) for n in text.split(",")) for text in args.sizes)
        except ValueError:
            sizes = ()
        if not sizes or any(len(size) != 4 or min(size) < 1 for size in sizes):
            raise ValueError(
                f"--sizes takes B,M,C,D groups of four positive integers, got "
                f"{' '.join(args.sizes)}"
            )
    methods = DEFAULT_METHODS if args.methods is None else tuple(args.methods.split(","))
    # Minibatch methods for C classes: a full GP's step holds its training set, not a batch.
    exportable = [name for name in MULTICLASS_METHODS if name not in FULL_GP_METHODS]
    check_method_names(methods, exportable)
    dtypes = ("float64", "float32") if args.dtypes is None else tuple(args.dtypes.split(","))
    if any(dtype not in ("float64", "float32") for dtype in dtypes):
        raise ValueError(f"--dtypes takes float64 and/or float32, got {args.dtypes}")
    manifest = export_steps(args.export_hlo, sizes, methods, dtypes)
    failed = {key: entry["error"] for key, entry in manifest.items() if "error" in entry}
    for key, error in failed.items():
        print(f"{PROG}: {key} not exported: {error.splitlines()[0]}", file=sys.stderr)
    print(f"written to {args.export_hlo}/: {len(manifest) - len(failed)} modules in manifest.json")
    return 1 if failed else 0


def _load(args: argparse.Namespace) -> Any:
    from .. import datasets

    if Path(args.data).is_file() or args.test_file is not None:
        return datasets.load_file(
            args.data,
            args.test_file,
            test_fraction=args.test_fraction,
            seed=args.seed,
            zero_based=args.zero_based,
            label_column=args.label_column,
            header=args.header,
        )
    if args.data in datasets.BUNDLED:
        return datasets.load_dataset(args.data, test_fraction=args.test_fraction, seed=args.seed)
    raise FileNotFoundError(
        f"{args.data!r} is neither a file nor a bundled dataset ({', '.join(datasets.BUNDLED)})"
    )


def run_ground_truth(args: argparse.Namespace) -> str:
    """Sample the exact posterior, compare, write results.json and figures/ground_truth.png."""
    import numpy as np

    from ..sampling.ground_truth import compare_with_gibbs
    from .plots import ground_truth_figure, save_figure

    dataset = _load(args)
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

    from ..datasets import read_features
    from ..export import METADATA, load_model, read_metadata
    from ..validation import InvalidDataError

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
        if args.methods is not None and "lsm-subsets" not in args.methods:
            raise ValueError(
                "--class-subset-size is an option of lsm-subsets, which --methods does not name"
            )
    if getattr(args, "alpha_epsilon", None) is not None:
        if args.methods is None or "dirichlet" not in args.methods:
            raise ValueError(
                "--alpha-epsilon is an option of dirichlet, which --methods does not name"
            )
        if getattr(args, "tune", False):
            raise ValueError("--alpha-epsilon fixes what --tune would choose; give one of them")
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
            print(run_ground_truth(args))
            return 0
        if args.command == "predict":
            return _predict(args)
        if args.command == "stability":
            return _run_stability(args)
        if args.command == "scale" and args.export_hlo is not None:
            return _export_hlo(args)
        if args.command == "scale" and (args.sizes, args.methods, args.dtypes) != (None,) * 3:
            raise ValueError("--sizes, --methods and --dtypes are options of --export-hlo")
        if args.command == "scale":
            from .scaling import run_scaling, scaling_report

            print(scaling_report(run_scaling(args.output, quick=args.quick)))
            print(f"written to {args.output}/ (scale.json, scale.md)")
            return 0
        _check_options(args)
        options = RunOptions.from_arguments(args)
        if args.command == "benchmark":
            from .benchmark import run_benchmark, run_binary_benchmark

            try:
                with _results_kept_in(Path(args.output)):
                    benchmark = run_binary_benchmark if options.binary else run_benchmark
                    report, failed = benchmark(options)
            finally:  # the benchmark's folder, claimed by its first step
                release_output(Path(args.output))
            print(report)
            # The report is written whatever failed; the exit status says whether all ran.
            return 1 if failed else 0
        dataset = _load(args)
        check_run(dataset, options)
        output = prepare_output(
            Path(args.output or Path("gpflow-augmented-results") / dataset.name),
            resume=args.resume,
            overwrite=args.overwrite,
            explicit=args.output is not None,
        )
        try:
            with _results_kept_in(output):
                result = _compare_into(dataset, options, output)
        finally:
            release_output(output)
    except (FileNotFoundError, InvalidDataError, ValueError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    print(summary_table(result))
    print(
        f"t(NLL): training seconds until the test NLL is within 0.01 nats of the method's best; "
        f"written to {output}/ (results.json, figures/, tensorboard/)"
    )
    return 0


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
