"""The benchmark studies' command, run from the repository's root: ``python -m benchmarks``.

``stability`` leaves each method running for thousands of steps over a grid and checks the trace
(:mod:`benchmarks.stability`); ``scale`` times one step against C, N, M and the precision
(:mod:`benchmarks.scaling`); ``large-data`` measures a large dataset's time per epoch and peak
memory against N, and the step against M and C (:mod:`benchmarks.large_data`); ``matched`` sets
`lsm` beside its peers at swapped kernels on validation splits (:mod:`benchmarks.matched`);
``confidence`` scores `lsm` with and without the latent variance its inducing points cannot
explain (:mod:`benchmarks.confidence`); ``export-hlo`` writes each method's compiled step as XLA
HLO for another XLA client, such as a GPU machine without TensorFlow (:mod:`benchmarks.hlo_export`).
"""

import argparse
import os
import sys
from pathlib import Path
from typing import Any, List, NoReturn, Optional, Sequence, Tuple


def _load_tensorflow_quietly() -> None:
    """TensorFlow's C++ log lines would fill a study's log: those it writes while it loads, before
    any level applies (standard error is muted then), and its warnings after (XLA's "Not handling
    type DT_DOUBLE"), and the CUDA driver's error on a machine without a GPU. A level the user set
    is kept, and then everything shows."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        import tensorflow

        # The first enumeration of devices looks for CUDA, and on a machine without a GPU logs an
        # error line (cuInit) that would otherwise arrive with the study's first step.
        tensorflow.config.list_physical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


_load_tensorflow_quietly()

from gpflow_augmented.comparison.baselines import (  # noqa: E402
    FULL_GP_METHODS,
    MULTICLASS_METHODS,
    check_method_names,
)
from gpflow_augmented.comparison.ci_utils import DATA_DIR_VARIABLE  # noqa: E402
from gpflow_augmented.comparison.runs import prepare_output, release_output  # noqa: E402
from gpflow_augmented.training import raised_by_interrupt  # noqa: E402

PROG = "python -m benchmarks"


class _Parser(argparse.ArgumentParser):
    """Errors in one line, ``python -m benchmarks: error: …``, exit status 2."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        print(f"{PROG}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _names(text: str) -> List[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _integers(minimum: int) -> Any:
    def parse(text: str) -> List[int]:
        try:
            values = [int(part) for part in text.split(",")]
        except ValueError:
            values = []
        if not values or min(values) < minimum:
            raise argparse.ArgumentTypeError(
                f"takes comma-separated integers ≥ {minimum}, got {text!r}"
            )
        return values

    parse.__name__ = f"integers ≥ {minimum}"
    return parse


def _integer(minimum: int) -> Any:
    several = _integers(minimum)

    def parse(text: str) -> int:
        values = several(text)
        if len(values) != 1:
            raise argparse.ArgumentTypeError(f"takes one integer ≥ {minimum}, got {text!r}")
        return values[0]

    parse.__name__ = f"integer ≥ {minimum}"
    return parse


def build_parser() -> argparse.ArgumentParser:
    from .hlo_export import DEFAULT_METHODS
    from . import confidence
    from .matched import DEFAULT_DATASETS, DEFAULT_PEERS
    from .stability import SUITE_METHODS, SUITE_SETS

    parser = _Parser(prog=PROG, description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    suite = commands.add_parser(
        "stability",
        help="leave each method running for thousands of steps over a grid; check the trace",
    )
    suite.add_argument(
        "--data-dir",
        default=os.environ.get(DATA_DIR_VARIABLE) or None,
        help=f"folder of .npz datasets (default: ${DATA_DIR_VARIABLE}); the synthetic and tiny "
        "sets need none",
    )
    suite.add_argument("--output", default="stability-results")
    suite.add_argument("--sets", type=_names, default=list(SUITE_SETS))
    suite.add_argument(
        "--methods", type=_names, default=["lsm"], help=f"of {','.join(SUITE_METHODS)}"
    )
    suite.add_argument("--seeds", type=_integers(0), default=[0, 1, 2])
    suite.add_argument("--batch-sizes", type=_integers(1), default=[200, 1000])
    suite.add_argument("--num-inducing", type=_integers(1), default=[100, 200])
    suite.add_argument("--iterations", type=_integer(10), default=5000)
    suite.add_argument(
        "--evaluations", type=_integer(10), default=100, help="regular trace points a run"
    )
    suite.add_argument("--resume", action="store_true", help="keep the cells already written")
    suite.add_argument("--overwrite", action="store_true", help="replace an earlier suite's cells")
    suite.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=False, help="a bar a cell"
    )

    scale = commands.add_parser("scale", help="step time against C, N, M and the precision")
    scale.add_argument("--output", default="scale-results", help="folder for scale.json, scale.md")
    scale.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")

    large = commands.add_parser(
        "large-data", help="a large dataset's time per epoch and peak memory against N; M and C"
    )
    large.add_argument("data", help="the .npz file (e.g. ../shared/data/kddcup.npz)")
    large.add_argument("--output", default="large-data", help="folder for large_data.json, .md")
    large.add_argument(
        "--sizes",
        type=_integers(1),
        default=None,
        help="training rows of each subsample, the whole training set last (default "
        "10000,50000,100000,250000 and all)",
    )
    large.add_argument("--methods", type=_names, default=["lsm", "softmax"])
    large.add_argument("--inducing", type=_integers(1), default=[50, 100, 200])
    large.add_argument(
        "--classes",
        type=_integers(2),
        default=[],
        help="numbers of classes to fold the labels into at the whole set (k mod C), for the "
        "step against C (default: none)",
    )
    large.add_argument("--batch-size", type=_integer(1), default=200)
    large.add_argument("--steps", type=_integer(1), default=30, help="timed steps of each")

    matched = commands.add_parser(
        "matched", help="lsm and its peers at swapped kernels, on validation splits"
    )
    matched.add_argument(
        "--data-dir",
        default=os.environ.get(DATA_DIR_VARIABLE) or None,
        help=f"folder of .npz datasets (default: ${DATA_DIR_VARIABLE}, else the bundled sets)",
    )
    matched.add_argument("--datasets", type=_names, default=list(DEFAULT_DATASETS))
    matched.add_argument("--peers", type=_names, default=list(DEFAULT_PEERS))
    matched.add_argument("--seeds", type=_integers(0), default=[0])
    matched.add_argument("--time-budget", type=float, default=40.0, help="seconds a method")
    matched.add_argument("--output", default="matched", help="folder for matched.json, .md")
    matched.add_argument(
        "--exact-draws",
        type=_integer(0),
        default=0,
        help="draws a chain of the exact posterior at lsm's kernel (Gibbs); 0: none",
    )
    matched.add_argument(
        "--train-points",
        type=_integer(1),
        default=None,
        help="a seeded subsample of this many training points for the whole study (default: all)",
    )

    sources = commands.add_parser(
        "confidence",
        help="lsm's validation NLL and confidence with and without the Nyström residual, at each M",
    )
    sources.add_argument(
        "--data-dir",
        default=os.environ.get(DATA_DIR_VARIABLE) or None,
        help=f"folder of .npz datasets (default: ${DATA_DIR_VARIABLE}, else the bundled sets)",
    )
    sources.add_argument("--datasets", type=_names, default=list(confidence.DEFAULT_DATASETS))
    sources.add_argument("--seeds", type=_integers(0), default=[0])
    sources.add_argument(
        "--num-inducing", type=_integers(1), default=list(confidence.DEFAULT_NUM_INDUCING)
    )
    sources.add_argument("--time-budget", type=float, default=40.0, help="seconds a run")
    sources.add_argument("--output", default="confidence", help="folder for confidence.json, .md")

    export = commands.add_parser("export-hlo", help="each method's step as an XLA HLO module")
    export.add_argument("output", help="folder for the modules and manifest.json")
    export.add_argument(
        "--sizes",
        nargs="+",
        type=_integers(1),
        metavar="B,M,C,D",
        default=None,
        help="batch size, inducing points, classes and input dimension of each module "
        "(default: hlo_export.DEFAULT_SIZES)",
    )
    export.add_argument("--methods", type=_names, default=list(DEFAULT_METHODS))
    export.add_argument("--dtypes", type=_names, default=["float64", "float32"])
    return parser


def _run_stability(args: argparse.Namespace) -> int:
    from .stability import SuiteOptions, check_sets, run_suite

    check_method_names(args.methods)
    check_sets(args.sets, args.data_dir)
    output = prepare_output(
        Path(args.output),
        resume=args.resume,
        overwrite=args.overwrite,
        explicit=True,
        names=("cells", "stability.md", "summary.json"),
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
        progress=args.progress,
    )
    try:
        print(run_suite(options, resume=args.resume))
    except BaseException as error:
        if raised_by_interrupt(error):
            print(f"{PROG}: interrupted; continue with --resume", file=sys.stderr)
        raise
    finally:
        release_output(output)
    print(f"written to {output}/ (cells/, stability.md, summary.json)")
    return 0


def _export_hlo(args: argparse.Namespace) -> int:
    from .hlo_export import DEFAULT_SIZES, export_steps, module_key

    sizes: Tuple[Tuple[int, ...], ...] = DEFAULT_SIZES
    if args.sizes is not None:
        sizes = tuple(tuple(size) for size in args.sizes)
        if any(len(size) != 4 for size in sizes):
            raise ValueError(
                "--sizes takes B,M,C,D groups of four positive integers, got "
                + " ".join(",".join(map(str, size)) for size in sizes)
            )
    # Minibatch methods for C classes: a full GP's step holds its training set, not a batch.
    exportable = [name for name in MULTICLASS_METHODS if name not in FULL_GP_METHODS]
    check_method_names(args.methods, exportable)
    if not args.dtypes or any(dtype not in ("float64", "float32") for dtype in args.dtypes):
        raise ValueError(f"--dtypes takes float64 and/or float32, got {','.join(args.dtypes)}")
    if Path(args.output).exists() and not Path(args.output).is_dir():
        raise ValueError(f"{args.output} is a file; export-hlo writes a folder")
    manifest = export_steps(args.output, sizes, args.methods, args.dtypes)
    # The manifest keeps an earlier run's entries of other keys: report this run's only.
    keys = [module_key(m, size, d) for size in sizes for d in args.dtypes for m in args.methods]
    failed = {key: manifest[key]["error"] for key in keys if "error" in manifest[key]}
    for key, error in failed.items():
        print(f"{PROG}: {key} not exported: {error.splitlines()[0]}", file=sys.stderr)
    print(
        f"written to {args.output}/: {len(keys) - len(failed)} modules "
        f"({len(manifest)} in manifest.json)"
    )
    return 1 if failed else 0


def _run_large_data(args: argparse.Namespace) -> int:
    from .large_data import DEFAULT_SIZES, large_data_report, run_large_data

    if not Path(args.data).is_file():
        raise FileNotFoundError(f"no such file: {args.data}")
    check_method_names(args.methods)
    sizes = DEFAULT_SIZES if args.sizes is None else (*args.sizes, None)
    results = run_large_data(
        args.data,
        args.output,
        sizes=sizes,
        methods=args.methods,
        inducing=args.inducing,
        classes=args.classes,
        batch_size=args.batch_size,
        steps=args.steps,
    )
    print(large_data_report(results))
    print(f"written to {args.output}/ (large_data.json, large_data.md)")
    return 0


def _run_matched(args: argparse.Namespace) -> int:
    from .matched import matched_tables, run_matched

    check_method_names(args.peers)
    if "lsm" in args.peers or not args.peers:
        raise ValueError("--peers takes the methods set beside lsm, not lsm itself")
    if not args.time_budget > 0:
        raise ValueError(f"--time-budget must be > 0, got {args.time_budget}")
    rows = run_matched(
        args.output,
        args.data_dir,
        args.datasets,
        args.peers,
        args.seeds,
        args.time_budget,
        args.exact_draws,
        args.train_points,
    )
    print(matched_tables(rows))
    print(f"written to {args.output}/ (matched.json, matched.md)")
    return 0


def _run_confidence(args: argparse.Namespace) -> int:
    from .confidence import confidence_report, run_confidence

    if not args.time_budget > 0:
        raise ValueError(f"--time-budget must be > 0, got {args.time_budget}")
    rows = run_confidence(
        args.output, args.data_dir, args.datasets, args.seeds, args.time_budget, args.num_inducing
    )
    print(confidence_report(rows))
    print(f"written to {args.output}/ (confidence.json, confidence.md)")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, or a bad option already reported in one line
        return int(stop.code or 0)
    try:
        if args.command == "stability":
            return _run_stability(args)
        if args.command == "export-hlo":
            return _export_hlo(args)
        if args.command == "large-data":
            return _run_large_data(args)
        if args.command == "matched":
            return _run_matched(args)
        if args.command == "confidence":
            return _run_confidence(args)
        from .scaling import run_scaling, scaling_report

        print(scaling_report(run_scaling(args.output, quick=args.quick)))
        print(f"written to {args.output}/ (scale.json, scale.md)")
        return 0
    except (FileNotFoundError, ValueError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
