"""The options of the ``gpflow-augmented`` command (:mod:`.cli`): one parser of each command,
with each option's type checked as it is read, and errors in the tool's one-line form."""

import argparse
import math
import os
import sys
from typing import Any, List, NoReturn, Optional, Tuple

from .ci_utils import DATA_DIR_VARIABLE
from .runs import PROG

__all__ = ["COMMANDS", "DEFAULT_SEEDS", "build_parser"]

COMMANDS = ("compare", "benchmark", "report", "ground-truth", "predict")
#: ``compare`` and ``benchmark`` run these seeds unless told otherwise: five, so that a verdict
#: rests on an interval (comparison.statistics), not on one draw.
DEFAULT_SEEDS = (0, 1, 2, 3, 4)

_DESCRIPTION = """
compare (the default) trains several methods side by side on one dataset, once a seed, and writes
each seed's JSON trace, figures and TensorBoard logs, then the report over seeds (each method's
interval and verdict); with no arguments it runs on the bundled vehicle dataset. benchmark runs
compare over a folder of datasets and writes the tables of docs/benchmarks.md. report writes the
report over seeds of results already run, or of their summaries.json. ground-truth samples the
exact posterior of a small dataset (wine by default) by Gibbs and NUTS and draws how far each
variational method is from it (the paper's Figure 5). predict gives the class probabilities of an
exported model for the rows of a table.
"""


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


def _seeds(text: str) -> Tuple[int, ...]:
    parse = _integer(0)
    seeds = tuple(parse(part.strip()) for part in text.split(",") if part.strip())
    if not seeds:
        raise argparse.ArgumentTypeError(f"takes comma-separated integers ≥ 0, got {text!r}")
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"names a seed twice: {text!r}")
    return seeds


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
    """The options of a comparison's run, shared by ``compare`` and ``benchmark``."""
    from .baselines import DEFAULT_MULTICLASS_METHODS, METHODS

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
    _add_budget_options(parser, time_budget)
    _add_method_settings(parser)
    _add_run_options(parser)


def _add_budget_options(parser: argparse.ArgumentParser, time_budget: float) -> None:
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


def _add_method_settings(parser: argparse.ArgumentParser) -> None:
    """Each method's learning rate and positive bijector, --tune, and the options of one method."""
    from .baselines import (
        DEFAULT_POSITIVE_BIJECTOR,
        METHOD_SPECS,
        POSITIVE_BIJECTORS,
        UNSWEPT_LEARNING_RATE,
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
        help="first choose each method's learning rate and positive bijector, "
        "from the same grid for every method, on a validation split of the "
        "training data, each candidate under the same budget; then run the "
        "chosen settings",
    )
    parser.add_argument(
        "--tune-budget",
        type=_number(0, inclusive=False),
        default=None,
        help="with --tune, each candidate's training seconds (default: --time-budget)",
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
        help="the dirichlet method's α_ε (default 0.01)",
    )
    parser.add_argument(
        "--train-inducing-points",
        action="store_true",
        help="let Adam move the inducing points (of every method)",
    )
    parser.add_argument(
        "--per-class-kernels",
        action="store_true",
        help="give every method a kernel of its own for each class (SeparateIndependent, each "
        "starting where the shared one does) instead of one kernel shared by the classes",
    )


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    """The trace's test points, the seed, the split, resuming and the progress bar."""
    parser.add_argument(
        "--trace-test-points",
        type=_integer(1),
        default=2000,
        help="evaluate the trace on a seeded subset of this many test points "
        "(the final metrics use all of them; default 2000)",
    )
    parser.add_argument(
        "--seeds",
        type=_seeds,
        default=DEFAULT_SEEDS,
        help="comma-separated seeds, each a run into <output>/seed-<s>/ with its own split (where "
        "the data has none), inducing points and minibatches, every method of a seed the same; "
        "the report over seeds is written beside them (default "
        f"{','.join(map(str, DEFAULT_SEEDS))})",
    )
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
    """The ``gpflow-augmented`` command's parser: one subcommand each of :data:`COMMANDS`."""
    parser = _Parser(
        prog=PROG, description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    from .baselines import METHODS

    width = max(map(len, METHODS))
    methods_epilog = "methods:\n" + "\n".join(
        f"  {name:<{width}}  {description}" for name, description in METHODS.items()
    )
    _add_compare_parser(commands, methods_epilog)
    _add_benchmark_parser(commands, methods_epilog)
    _add_report_parser(commands)
    _add_ground_truth_parser(commands)
    _add_predict_parser(commands)
    return parser


def _add_compare_parser(commands: Any, methods_epilog: str) -> None:
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


def _add_benchmark_parser(commands: Any, methods_epilog: str) -> None:
    from .benchmark import BINARY_TASKS, DEFAULT_DATASETS

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


def _add_ground_truth_parser(commands: Any) -> None:
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


def _add_report_parser(commands: Any) -> None:
    report = commands.add_parser(
        "report",
        help="the report over seeds (intervals, verdicts, ranks, time to target, figures) of "
        "results already run, or of their summaries.json",
    )
    report.add_argument(
        "source",
        nargs="+",
        help="compare or benchmark folders (every results.json below each) or summaries.json "
        "files, reported as one: e.g. the large sets' run at their own budget beside the rest",
    )
    report.add_argument(
        "--output",
        default=None,
        help="folder for report.md, summaries.json and figures/ (default: the one source's "
        "folder; several sources need it)",
    )
    report.add_argument(
        "--section",
        default=None,
        help="print only this section's table (nll, error, standings, wins, ranks, time, "
        "calibration) and write nothing: the form docs/ embed",
    )


def _add_predict_parser(commands: Any) -> None:
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
