"""The stability suite: each method left running for thousands of steps at its defaults, over a
grid of datasets, seeds, batch sizes and inducing points, and checked for a silent divergence.

The property, on each run's trace of the test error and NLL (:func:`stability_verdict`): after the
first 10 % of the run the error never rises more than 0.01 above the best error seen so far, and
the final NLL is within 10 % of the best NLL along the run. On the tiny training sets (3–15 points
in separated blobs) a method must also end with training accuracy 1, and ``lsm`` with an exact ELBO
at least that of its first step and that of ``update_variance=False`` (less how far that run's
own ELBO still moves over its last fifth of steps: two runs at one optimum differ by that).

    python -m benchmarks stability --data-dir ../shared/data --output stability-results

Each cell (set, M, B, seed) is written to ``cells/<set>-M<M>-B<B>-s<seed>.json`` as it finishes,
so that ``--resume`` continues an interrupted suite; ``stability.md`` and ``summary.json`` (the
cells' verdicts without their traces, small enough to commit: ``tools/docs_tables.py`` makes the
docs' table from it) are written from the cells.
"""

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, cast

import numpy as np

from gpflow_augmented import datasets
from gpflow_augmented.bounds import ExactBound
from gpflow_augmented.comparison.files import load_file
from gpflow_augmented.comparison.protocol import compare
from gpflow_augmented.comparison.runs import write_atomically, write_json
from gpflow_augmented.datasets import imbalanced_separable_data, separated_blobs

#: After the first ``BURN_IN`` of a run, the test error may rise at most this above its best so far.
MAX_ERROR_RISE = 0.01
#: The final test NLL may be at most this times the best along the run.
MAX_NLL_RATIO = 1.1
BURN_IN = 0.1

#: kddcup's subsamples: rows drawn without replacement (seed 0), whatever the run's seed.
SUBSAMPLES = {"kddcup-10k": ("kddcup", 10_000), "kddcup-100k": ("kddcup", 100_000)}
#: Points a class of the tiny training sets.
TINY = {"tiny-3": 1, "tiny-6": 2, "tiny-9": 3, "tiny-15": 5}
SUITE_SETS = ("kddcup", *SUBSAMPLES, "shuttle", "connect_4", "synthetic", *TINY)
SUITE_METHODS = ("lsm", "softmax", "rm", "sep", "dirichlet")


@dataclasses.dataclass(frozen=True)
class SuiteOptions:
    output: Path
    data_dir: Optional[Path]
    sets: Sequence[str] = SUITE_SETS
    methods: Sequence[str] = ("lsm",)
    seeds: Sequence[int] = (0, 1, 2)
    batch_sizes: Sequence[int] = (200, 1000)
    num_inducing: Sequence[int] = (100, 200)
    iterations: int = 5000
    evaluations: int = 100
    #: The trace's test points: at a test NLL of 0.005 one point of 2,000 at p = 0.1 moves it by
    #: a fifth, so the suite scores up to this many.
    trace_test_points: int = 20_000
    progress: bool = False


def stability_verdict(trace: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The largest rise of the test error above its best so far after the first ``BURN_IN`` of
    the run's steps, the final NLL ÷ the best along the run, and whether both are within bounds
    (a non-finite NLL anywhere fails)."""
    iterations = np.array([entry["iteration"] for entry in trace], dtype=float)
    errors = np.array([entry["error"] for entry in trace], dtype=float)
    nlls = np.array([np.nan if e["nll"] is None else e["nll"] for e in trace], dtype=float)
    later = iterations >= BURN_IN * iterations[-1]
    rise = float(np.max((errors - np.minimum.accumulate(errors))[later]))
    ratio = float(nlls[-1] / np.min(nlls)) if np.all(np.isfinite(nlls)) else float("inf")
    return {
        "error_rise": rise,
        "nll_ratio": ratio,
        "holds": bool(rise <= MAX_ERROR_RISE and ratio <= MAX_NLL_RATIO),
    }


def subsample(X: np.ndarray, y: np.ndarray, rows: int, seed: int = 0) -> Tuple[np.ndarray, Any]:
    """``rows`` rows drawn without replacement, the classes with fewer than 5 of them dropped (a
    split may leave them no training point) and the rest renumbered 0..C'-1."""
    index = np.random.default_rng(seed).choice(len(y), rows, replace=False)
    X, y = X[index], y[index]
    labels, counts = np.unique(y, return_counts=True)
    keep = np.isin(y, labels[counts >= 5])
    return X[keep], np.unique(y[keep], return_inverse=True)[1]


def suite_dataset(name: str, data_dir: Optional[Path], seed: int) -> datasets.Dataset:
    """One of :data:`SUITE_SETS`: a file of ``data_dir`` (its split, else a seeded 80/20 one), a
    subsample of one, the synthetic set, or a tiny training set with 100 test points a class."""
    if name in TINY:
        X, y = separated_blobs(TINY[name], seed)
        X_test, y_test = separated_blobs(100, seed + 1000)
        is_test = np.r_[np.zeros(len(y), bool), np.ones(len(y_test), bool)]
        return datasets.from_arrays(name, np.r_[X, X_test], np.r_[y, y_test], is_test)
    if name == "synthetic":
        X, y = imbalanced_separable_data(seed=seed)
        return datasets.from_arrays(name, X, y, seed=seed)
    check_sets([name], data_dir)
    source, rows = SUBSAMPLES.get(name, (name, 0))
    path = Path(cast(Path, data_dir)) / f"{source}.npz"
    if not rows:
        return load_file(path, seed=seed)._replace(name=name)
    data = np.load(path, allow_pickle=True)
    X, y = subsample(data["X"], data["y"], rows)
    return datasets.from_arrays(name, X, y, seed=seed)


def check_sets(sets: Sequence[str], data_dir: Optional[Path]) -> None:
    """Refuse, before anything runs, an unknown set or one whose file ``data_dir`` lacks."""
    for name in sets:
        if name not in SUITE_SETS:
            raise ValueError(f"unknown set {name!r} ({', '.join(SUITE_SETS)})")
        if name in TINY or name == "synthetic":
            continue
        source = SUBSAMPLES.get(name, (name, 0))[0]
        if data_dir is None:
            raise ValueError(f"the suite's set {name!r} needs --data-dir")
        if not (Path(data_dir) / f"{source}.npz").is_file():
            raise FileNotFoundError(f"the suite's set {name!r} needs {source}.npz in {data_dir}")


def _cells(options: SuiteOptions) -> List[Tuple[str, int, int, int]]:
    """(set, M, B, seed) for every cell; on a tiny set M and B are capped at its N, so one cell a
    seed."""
    cells = []
    for name in options.sets:
        grid = [(m, b) for m in options.num_inducing for b in options.batch_sizes]
        if name in TINY:
            size = 3 * TINY[name]
            grid = sorted({(min(m, size), min(b, size)) for m, b in grid})
        cells += [(name, m, b, seed) for m, b in grid for seed in options.seeds]
    return cells


def _late_band(trace: Sequence[Mapping[str, Any]]) -> float:
    """How far a full-batch run's ELBO still moves over its last fifth of steps (Adam's steps keep
    the lengthscales moving): the largest minus the smallest."""
    last = trace[-1]["iteration"]
    elbos = [entry["elbo"] for entry in trace if entry["iteration"] >= 0.8 * last]
    return float(np.max(elbos) - np.min(elbos))


def _tiny_checks(
    result: Any,
    dataset: datasets.Dataset,
    first_elbo: Optional[float],
    reference: Optional[Tuple[float, float]],
) -> Dict[str, Any]:
    """Training accuracy for every method; for ``lsm`` its final exact ELBO against its first
    step's and ``update_variance=False``'s (with how far that one's ELBO still moved at its
    end)."""
    model = result.method.model
    # predict_y, not an Evaluator: each Evaluator compiles a function of its own.
    probabilities = model.predict_y(dataset.X_train)[0].numpy()
    correct = probabilities.argmax(axis=1) == dataset.Y_train[:, 0]
    checks: Dict[str, Any] = {"train_accuracy": float(np.mean(correct))}
    if first_elbo is not None and reference is not None:
        final = _exact_elbo(model, dataset)
        checks.update(
            final_elbo=final,
            first_elbo=first_elbo,
            reference_elbo=reference[0],
            reference_band=reference[1],
        )
    return checks


def _exact_elbo(model: Any, dataset: datasets.Dataset) -> float:
    return float(model.elbo((dataset.X_train, dataset.Y_train), None, ExactBound()))


def _run_cell(
    options: SuiteOptions, name: str, num_inducing: int, batch_size: int, seed: int
) -> Dict[str, Any]:
    dataset = suite_dataset(name, options.data_dir, seed)
    tiny = name in TINY
    first: Dict[str, float] = {}

    def first_step(method: Any, entry: Dict[str, float], _: Any) -> None:
        if tiny and method.name == "lsm" and entry["iteration"] == 1:
            first[method.name] = _exact_elbo(method.model, dataset)

    def run(methods: Sequence[str], callback: Optional[Callable] = None, **extra: Any) -> Any:
        return compare(
            dataset,
            methods,
            num_inducing=num_inducing,
            batch_size=batch_size,
            time_budget=None,
            max_iterations=options.iterations,
            seed=seed,
            evaluation_every=max(1, options.iterations // options.evaluations),
            trace_test_points=options.trace_test_points,
            callback=callback,
            progress=options.progress,
            **extra,
        )

    comparison = run(options.methods, first_step)
    reference = None
    if tiny and "lsm" in options.methods:
        fixed = run(["lsm"], method_options={"lsm": {"update_variance": False}}).methods[0]
        reference = (_exact_elbo(fixed.method.model, dataset), _late_band(fixed.trace))
    methods = {}
    for result in comparison.methods:
        record = {
            "trace": [
                {k: e[k] for k in ("iteration", "time", "error", "nll")} for e in result.trace
            ],
            "iterations": result.iterations,
            "failed_steps": result.failed_steps,
            "stability": result.stability,
            "marked": result.diverged(),
            **stability_verdict(result.trace),
        }
        if tiny:
            record.update(_tiny_checks(result, dataset, first.get(result.name), reference))
            record["holds"] = record["holds"] and _tiny_holds(record)
        methods[result.name] = record
    return {
        "set": name,
        "num_inducing": num_inducing,
        "batch_size": batch_size,
        "seed": seed,
        "settings": comparison.settings,
        "methods": methods,
    }


def _tiny_holds(record: Mapping[str, Any]) -> bool:
    if record["train_accuracy"] < 1.0:
        return False
    if "final_elbo" not in record:
        return True
    final = record["final_elbo"]
    # Two runs at one optimum differ by how far Adam still moves each: the reference's own band.
    tolerance = max(1e-6 * abs(final), record["reference_band"])
    return bool(final >= record["first_elbo"] and final >= record["reference_elbo"] - tolerance)


def _cell_path(output: Path, cell: Tuple[str, int, int, int]) -> Path:
    name, m, b, seed = cell
    return output / "cells" / f"{name}-M{m}-B{b}-s{seed}.json"


def run_suite(options: SuiteOptions, resume: bool = False) -> str:
    """Run every cell not already in ``options.output`` (all of them unless ``resume``), then
    write ``summary.json`` and ``stability.md`` of every cell in the folder and return the
    latter: a grid grown over several resumed commands (more sets, more seeds) is reported
    whole."""
    for cell in _cells(options):
        path = _cell_path(options.output, cell)
        if resume and path.exists():
            continue
        print(f"{path.stem}: {', '.join(options.methods)}", flush=True)
        write_json(path, _run_cell(options, *cell))
    cells = sorted(
        (
            summarised(json.loads(path.read_text()))
            for path in (options.output / "cells").glob("*.json")
        ),
        key=_suite_order,
    )
    write_json(options.output / "summary.json", {"cells": cells})
    report = stability_report(cells)
    write_atomically(options.output / "stability.md", lambda handle: handle.write(report))
    return report


def _suite_order(cell: Mapping[str, Any]) -> Tuple[int, str, int, int, int]:
    """Cells by the suite's order of sets (:data:`SUITE_SETS`, others after them), then M, B,
    seed."""
    name = cell["set"]
    rank = SUITE_SETS.index(name) if name in SUITE_SETS else len(SUITE_SETS)
    return rank, name, cell["num_inducing"], cell["batch_size"], cell["seed"]


def summarised(cell: Mapping[str, Any]) -> Dict[str, Any]:
    """The cell without its settings and its methods' traces: what the report reads."""
    methods = {
        name: {key: value for key, value in record.items() if key != "trace"}
        for name, record in cell["methods"].items()
    }
    keys = ("set", "num_inducing", "batch_size", "seed")
    return {**{key: cell[key] for key in keys}, "methods": methods}


def stability_report(cells: Sequence[Mapping[str, Any]]) -> str:
    """The property in words and :func:`stability_table`."""
    return (
        f"Property: after the first {BURN_IN:.0%} of the steps the test error never rises more "
        f"than {MAX_ERROR_RISE} above its best so far, and the final NLL is at most "
        f"{MAX_NLL_RATIO}× the best along the run (tiny sets: training accuracy 1 as well; lsm "
        "an exact ELBO at least its first step's and update_variance=False's).\n\n"
        + stability_table(cells)
    )


def stability_table(cells: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table, a row a set and method: the cells that hold, the largest error rise, the
    largest final ÷ best NLL and the failed steps over its cells, and the cells that fail."""
    rows: Dict[Tuple[str, str], List[Tuple[str, Mapping[str, Any]]]] = {}
    for cell in cells:
        label = f"M={cell['num_inducing']} B={cell['batch_size']} s{cell['seed']}"
        for method, record in cell["methods"].items():
            rows.setdefault((cell["set"], method), []).append((label, record))
    lines = [
        "| set | method | holds | largest error rise | largest final ÷ best NLL | failed steps "
        "| failing cells |",
        "|---|---|---|---|---|---|---|",
    ]
    for (name, method), records in rows.items():
        held = sum(record["holds"] for _, record in records)
        failing = ", ".join(label for label, record in records if not record["holds"]) or "-"
        lines.append(
            f"| {name} | {method} | {held}/{len(records)} "
            f"| {max(r['error_rise'] for _, r in records):.4f} "
            f"| {max(r['nll_ratio'] for _, r in records):.3f} "
            f"| {sum(r['failed_steps'] for _, r in records)} | {failing} |"
        )
    return "\n".join(lines) + "\n"
