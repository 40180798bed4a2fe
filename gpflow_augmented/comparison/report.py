"""
The report of a comparison over seeds, generated from its results: each method's test NLL and
error with a 95 % interval and a verdict against the best (:mod:`.statistics`), the package's
method's wins, ties and losses against each peer, the ranks across datasets with Friedman's test
and Nemenyi's critical difference, the time each method takes to reach the best final NLL × 1.02,
and figures of the ranks and of the NLL against training time.

It reads small summaries (:func:`summarise`: a record per dataset, method and seed, the trace cut
to a few dozen points), so a report can be rebuilt from committed summaries without the runs:
``gpflow-augmented report RESULTS_DIR`` reads every ``results.json`` below a folder, and
``gpflow-augmented report summaries.json`` the summaries alone.
"""

import json
import math
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .runs import PROBE_RATIO_LIMIT
from .statistics import BEHIND, BEST, TIED, Verdict, rank_test, verdicts

__all__ = [
    "PACKAGE_METHOD",
    "SECTIONS",
    "TARGET_SLACK",
    "TRACE_POINTS",
    "dataset_verdicts",
    "report_section",
    "standings",
    "times_to_target",
    "win_tie_loss",
    "summarise",
    "read_summaries",
    "measured_line",
    "date_span",
    "one_machine",
    "machines_of",
    "machine_name",
    "report_markdown",
    "write_report",
]

#: The method the report counts wins, ties and losses for.
PACKAGE_METHOD = "lsm"
#: Time to target: until a method's test NLL is within this factor of the best final NLL.
TARGET_SLACK = 1.02
#: Points of each trace a summary keeps (the first, the last, and log-spaced ones between).
TRACE_POINTS = 40
_METRICS = ("nll", "error", "ece", "brier")


def _cut_trace(trace: Sequence[Mapping[str, Any]]) -> List[List[float]]:
    """[time, NLL] at up to :data:`TRACE_POINTS` entries, log-spaced in the entry's index."""
    points = [(e["time"], e["nll"]) for e in trace if e.get("nll") is not None]
    if len(points) > TRACE_POINTS:
        keep = np.unique(np.geomspace(1, len(points), TRACE_POINTS).astype(int) - 1)
        points = [points[0]] + [points[i] for i in keep if i > 0]
    return [[float(t), float(nll)] for t, nll in points]


def _mean_confidence(folder: Optional[Path], method: str) -> Optional[float]:
    """The mean of the largest predicted probability over the test points, from the
    probabilities a run saved (``methods/<name>.npy``), where there are some."""
    path = None if folder is None else folder / "methods" / f"{method}.npy"
    if path is None or not path.exists():
        return None
    return float(np.load(path, allow_pickle=False).max(axis=1).mean())


def summarise(results: Mapping[str, Any], folder: Optional[Path] = None) -> List[Dict[str, Any]]:
    """One comparison's ``results.json`` as summary records, one a method; ``folder`` (the run's)
    adds each method's mean confidence from its saved test probabilities."""
    seed = int(results["settings"]["seed"])
    records = []
    for method in results["methods"]:
        final = method["final"]
        records.append(
            {
                "dataset": results["dataset"],
                "seed": seed,
                "method": method["name"],
                **{metric: final[metric] for metric in _METRICS},
                "iterations": int(method["iterations"]),
                "seconds": float(final["time"]),
                "failed_steps": int(method.get("failed_steps") or 0),
                "confidence": _mean_confidence(folder, method["name"]),
                "trace": _cut_trace(method["trace"]),
            }
        )
    return records


#: What a report's runs of one dataset share; "tuned": the tuning candidates' budget, or None.
_SETTINGS = (
    "num_inducing",
    "batch_size",
    "time_budget",
    "max_iterations",
    "tuned",
    "per_class_kernels",
)
#: What names a machine. A seed's methods of one dataset share one (one clock for all of them);
#: other seeds may have run on other machines, which the stamp names.
_CPU = ("processor", "cpu_count")
#: What must agree between all the runs of one report: its stamp names one version of each.
_VERSIONS = ("tensorflow", "gpflow", "gpflow_augmented")


#: What :func:`one_machine` adds to a machine where its runs' speeds disagree.
_SPEED_NOTES = ("probe_range", "speed_warning")


def _probes(machine: Mapping[str, Any]) -> List[float]:
    if "probe_range" in machine:
        return [float(p) for p in machine["probe_range"]]
    return [] if machine.get("probe_ms") is None else [float(machine["probe_ms"])]


def _refuse_differing(
    machines: Sequence[Mapping[str, Any]], keys: Sequence[str], what: str
) -> None:
    for key in keys:
        found = {str(m.get(key)) for m in machines}
        if len(found) > 1:
            raise ValueError(f"{what} ({key}: {' / '.join(sorted(found))}): report them apart")


def one_machine(
    machines: Sequence[Mapping[str, Any]], where: str, timed: bool = True
) -> Dict[str, Any]:
    """The machine that ran all of ``machines``, its probe the median of theirs; refused where they
    differ in CPU, cores or versions. Their speeds are summarised, not refused (one shared machine's
    probe ranged 2.5x within one run): for ``timed`` runs (on a time budget, which buys the same
    work only at one speed), probes beyond PROBE_RATIO_LIMIT of one another, or runs without one
    beside probed ones, are named in ``speed_warning``, which the stamp line shows."""
    _refuse_differing(
        machines, (*_CPU, *_VERSIONS), f"{where} were run on different machines or versions"
    )
    probes = [_probes(m) for m in machines]
    known = [p for ps in probes for p in ps]
    first = {k: v for k, v in (machines[0] if machines else {}).items() if k not in _SPEED_NOTES}
    if not known:
        return first
    first["probe_ms"] = float(np.median(known))
    warnings = []
    if max(known) > PROBE_RATIO_LIMIT * min(known):
        first["probe_range"] = [min(known), max(known)]
        warnings.append(
            f"{where} ran at speed probes {min(known):g} to {max(known):g} ms, more than "
            f"{PROBE_RATIO_LIMIT:g}x apart: their time budgets bought different work"
        )
    if not all(probes):
        warnings.append(f"some of {where} have no speed probe: their speed is unknown")
    if timed and warnings:
        first["speed_warning"] = "; ".join(warnings)
    return first


def machines_of(
    machines: Sequence[Mapping[str, Any]], where: str, timed: bool = True
) -> Tuple[List[Dict[str, Any]], List[int]]:
    """(the distinct machines among ``machines``, one a CPU and core count, each as
    :func:`one_machine` summarises its runs; the index of each of ``machines`` in them), refused
    where the versions differ."""
    _refuse_differing(machines, _VERSIONS, f"{where} were run with different versions")
    keys = [tuple(str(m.get(key)) for key in _CPU) for m in machines]
    distinct = list(dict.fromkeys(keys)) or [("", "")]
    groups = [[m for m, k in zip(machines, keys) if k == key] for key in distinct]
    summarised = [
        one_machine(
            group, where if len(groups) == 1 else f"{where} on {machine_name(group[0])}", timed
        )
        for group in groups
    ]
    return summarised, [distinct.index(key) for key in keys]


def _stamp_machines(stamp: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The machines a report's ``stamp`` names, in the order a record's ``machine`` indexes them
    (a record without one ran on the first)."""
    return [dict(m) for m in stamp.get("machines", [stamp.get("machine", {})])]


def _with_machines(stamp: Dict[str, Any], machines: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """``stamp`` with its ``machine``, or its ``machines`` where the runs had several, after the
    date (the order a committed ``summaries.json`` keeps)."""
    named = (
        {"machine": dict(machines[0])}
        if len(machines) == 1
        else {"machines": [dict(m) for m in machines]}
    )
    return {"measured": stamp["measured"], **named, **stamp}


def _indexed(record: Dict[str, Any], index: int, several: bool) -> Dict[str, Any]:
    kept = {key: value for key, value in record.items() if key != "machine"}
    return {**kept, "machine": index} if several else kept


def _one_machine_a_seed(summaries: Mapping[str, Any]) -> None:
    """Refuse a dataset's seed whose methods ran on different machines: the verdicts pair methods
    by seed, and a time budget buys the same work only on one machine."""
    machines = _stamp_machines(summaries["stamp"])
    seen: Dict[Tuple[str, int], int] = {}
    for r in summaries["records"]:
        index = r.get("machine", 0)
        first = seen.setdefault((r["dataset"], r["seed"]), index)
        if first != index:
            names = " / ".join(machine_name(machines[i]) for i in (first, index))
            raise ValueError(
                f"the methods of {r['dataset']}'s seed {r['seed']} ran on different machines "
                f"({names}): a seed's methods must share one machine, so report them apart"
            )


def _timed(by_dataset: Mapping[str, Mapping[str, Any]]) -> bool:
    return any(settings.get("time_budget") is not None for settings in by_dataset.values())


def _stamp(payloads: Sequence[Mapping[str, Any]], where: str) -> Tuple[Dict[str, Any], List[int]]:
    """(the stamp of ``payloads``, the index of each's machine in it)."""
    dates = sorted({p["created"][:10] for p in payloads if "created" in p}) or ["an unknown date"]
    by_dataset: Dict[str, Dict[str, Any]] = {}
    for p in payloads:
        _same_settings(by_dataset, p["dataset"], _settings_of(p))
    machines, index = machines_of(
        [p.get("machine", {}) for p in payloads], where, _timed(by_dataset)
    )
    stamp = _settings_stamp(date_span(dates), by_dataset)
    return _with_machines(stamp, machines), index


def _settings_of(results: Mapping[str, Any]) -> Dict[str, Any]:
    """A run's settings (from its ``results.json``) as a report compares them; "tuned" is the
    tuning candidates' budget, or None for a run at each method's defaults."""
    settings = {key: results["settings"].get(key) for key in _SETTINGS}
    # None, not False, for one kernel shared by the classes: what runs that predate the option say
    settings["per_class_kernels"] = settings["per_class_kernels"] or None
    tuning = results.get("tuning")
    settings["tuned"] = None
    if tuning is not None:
        settings["tuned"] = _budget(tuning["budget"]) if "budget" in tuning else "the run's budget"
    return settings


def _same_settings(
    by_dataset: Dict[str, Dict[str, Any]], dataset: str, settings: Dict[str, Any]
) -> None:
    """Record ``settings`` as ``dataset``'s, refusing a second, different one."""
    first = by_dataset.setdefault(dataset, settings)
    if first != settings:
        raise ValueError(
            f"the runs of {dataset} differ in M, B, budget, tuning or kernels "
            f"({_settings_text(first)} / {_settings_text(settings)}): report them apart"
        )


def _settings_stamp(measured: str, by_dataset: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """A stamp whose ``settings`` are the most datasets' and ``settings_by_dataset`` the rest's."""
    groups = [dict(s) for s in {tuple(sorted(s.items())) for s in by_dataset.values()}]
    common = max(groups, key=lambda g: (sum(s == g for s in by_dataset.values()), str(g)))
    stamp = {"measured": measured, "settings": common}
    others = {d: dict(s) for d, s in sorted(by_dataset.items()) if s != common}
    if others:
        stamp["settings_by_dataset"] = others
    return stamp


def _dataset_settings(summaries: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    stamp = summaries["stamp"]
    exceptions = stamp.get("settings_by_dataset", {})
    datasets = {r["dataset"] for r in summaries["records"]}
    settings = {d: exceptions.get(d, stamp.get("settings", {})) for d in datasets}
    return {d: {key: s.get(key) for key in _SETTINGS} for d, s in settings.items()}


def _json_holding(path: Path, keys: Iterable[str], refusal: str) -> Dict[str, Any]:
    """The JSON object in ``path`` if it has ``keys``, else an error: ``path`` then ``refusal``."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        payload = None
    if not (isinstance(payload, dict) and set(keys) <= payload.keys()):
        raise ValueError(f"{path} {refusal}")
    return payload


def _read_summaries_file(path: Path) -> Dict[str, Any]:
    """A ``summaries.json`` that a report wrote, or an error that says what the file is not."""
    if path.name == "results.json":
        raise ValueError(f"{path} is one run's results: give its folder, {path.parent}")
    return _json_holding(
        path,
        ("stamp", "records"),
        "is not a summaries.json that a report wrote: give a results folder (every results.json "
        "below it is read) or a report's summaries.json",
    )


def _read_one(source: Path) -> Dict[str, Any]:
    if not source.exists():
        raise ValueError(f"{source} does not exist: give a results folder or a summaries.json")
    if source.is_file():
        return _read_summaries_file(source)
    paths = sorted(source.rglob("results.json"))
    if not paths:
        raise ValueError(f"{source} holds no results.json: run compare or benchmark into it")
    payloads = [
        _json_holding(
            p,
            ("methods",),
            "is not a run's results as compare or benchmark writes them: run that dataset again "
            "(benchmark --resume), or move the file out of the folder",
        )
        for p in paths
    ]
    stamp, index = _stamp(payloads, f"the runs in {source}")
    several = "machines" in stamp
    records = [
        _indexed(r, i, several)
        for p, payload, i in zip(paths, payloads, index)
        for r in summarise(payload, p.parent)
    ]
    return {"stamp": stamp, "records": records}


def _dates(measured: str) -> List[str]:
    return [part for part in measured.split(" to ") if part != "an unknown date"]


def _merged(parts: Sequence[Mapping[str, Any]], sources: Sequence[Path]) -> Dict[str, Any]:
    by_dataset: Dict[str, Dict[str, Any]] = {}
    for part in parts:
        for dataset, settings in _dataset_settings(part).items():
            _same_settings(by_dataset, dataset, settings)
    named = [_stamp_machines(p["stamp"]) for p in parts]
    offsets = np.cumsum([0] + [len(m) for m in named])
    machines, index = machines_of(
        [m for part in named for m in part], ", ".join(map(str, sources)), _timed(by_dataset)
    )
    dates = sorted(d for p in parts for d in _dates(p["stamp"]["measured"])) or ["an unknown date"]
    stamp = _with_machines(_settings_stamp(date_span(dates), by_dataset), machines)
    records = [
        _indexed(r, index[offset + r.get("machine", 0)], len(machines) > 1)
        for p, offset in zip(parts, offsets)
        for r in p["records"]
    ]
    return {"stamp": stamp, "records": records}


def read_summaries(*sources: Path) -> Dict[str, Any]:
    """The summaries of every ``results.json`` under each folder of ``sources``, or those each
    ``summaries.json`` of them holds, as one: ``{"stamp": …, "records": […]}``. The sources may
    differ in M, B, budget and tuning from dataset to dataset (the stamp says where), not in the
    versions, or within one dataset (tuned and untuned runs of one dataset are refused). Seeds may
    come from different machines (the stamp names each, and a record its ``machine``'s index),
    a seed's methods of one dataset not."""
    if not sources:
        raise ValueError("no source to report: give a results folder or a summaries.json")
    paths = [Path(source) for source in sources]
    parts = [_read_one(path) for path in paths]
    summaries = parts[0] if len(parts) == 1 else _merged(parts, paths)
    seen = set()
    for r in summaries["records"]:
        key = (r["dataset"], r["method"], r["seed"])
        if key in seen:
            raise ValueError(
                f"{', '.join(map(str, paths))} hold two runs of one dataset, method and seed "
                f"({key[0]}, {key[1]}, seed {key[2]}): a folder and its own summaries.json?"
            )
        seen.add(key)
    if not seen:
        raise ValueError(f"{', '.join(map(str, paths))} hold no runs to report")
    _one_machine_a_seed(summaries)
    return summaries


def _by_dataset(records: Iterable[Mapping[str, Any]]) -> Dict[str, Dict[str, Dict[int, Any]]]:
    table: Dict[str, Dict[str, Dict[int, Any]]] = {}
    for r in records:
        table.setdefault(r["dataset"], {}).setdefault(r["method"], {})[r["seed"]] = r
    return table


def _common_seeds(methods: Mapping[str, Mapping[int, Any]]) -> List[int]:
    """The seeds every method ran: verdicts pair methods by seed."""
    return sorted(set.intersection(*(set(seeds) for seeds in methods.values())))


def dataset_verdicts(
    methods: Mapping[str, Mapping[int, Mapping[str, Any]]], metric: str
) -> Dict[str, Verdict]:
    """Each method's verdict on one dataset's ``metric``, over the seeds all of them ran."""
    seeds = _common_seeds(methods)
    return verdicts({name: [runs[s][metric] for s in seeds] for name, runs in methods.items()})


def _cell(verdict: Verdict, digits: int) -> str:
    value = verdict.value
    spread = "" if math.isnan(value.low) else f" ± {(value.high - value.low) / 2:.{digits}f}"
    mark = {BEST: "**", TIED: "", BEHIND: ""}[verdict.verdict]
    tag = {BEST: "best", TIED: "tied", BEHIND: "behind"}[verdict.verdict]
    return f"{mark}{value.mean:.{digits}f}{mark}{spread} {tag}"


def _metric_table(table: Mapping[str, Any], methods: Sequence[str], metric: str) -> List[str]:
    digits = 4
    lines = [
        "| dataset | seeds | " + " | ".join(methods) + " |",
        "|---|---|" + "---|" * len(methods),
    ]
    for dataset, runs in sorted(table.items()):
        present = {m: runs[m] for m in methods if m in runs}
        found = dataset_verdicts(present, metric)
        cells = [_cell(found[m], digits) if m in found else "–" for m in methods]
        seeds = len(_common_seeds(present))
        lines.append(f"| {dataset} | {seeds} | " + " | ".join(cells) + " |")
    return lines


def win_tie_loss(
    table: Mapping[str, Any], method: str, peer: str, metric: str = "nll"
) -> Tuple[int, int, int]:
    """Datasets where ``method`` is ahead of ``peer``, tied with it, or behind it, each decided
    by the pair's own verdict on ``metric``."""
    counts = [0, 0, 0]
    for runs in table.values():
        if method not in runs or peer not in runs:
            continue
        found = dataset_verdicts({method: runs[method], peer: runs[peer]}, metric)
        if found[peer].verdict == BEHIND:
            counts[0] += 1
        elif found[method].verdict == BEHIND:
            counts[2] += 1
        else:
            counts[1] += 1
    return counts[0], counts[1], counts[2]


def standings(table: Mapping[str, Any], metric: str = "nll") -> Dict[str, Tuple[int, int, int]]:
    """Each method's datasets (best, tied, behind) on ``metric``, by the verdicts of the
    datasets' tables (all methods that ran each dataset, over the seeds all of them ran)."""
    counts: Dict[str, List[int]] = {}
    position = {BEST: 0, TIED: 1, BEHIND: 2}
    for runs in table.values():
        for name, verdict in dataset_verdicts(runs, metric).items():
            counts.setdefault(name, [0, 0, 0])[position[verdict.verdict]] += 1
    return {name: (c[0], c[1], c[2]) for name, c in counts.items()}


def _standing_lines(table: Mapping[str, Any], methods: Sequence[str]) -> List[str]:
    by_metric = {metric: standings(table, metric) for metric in ("nll", "error")}
    lines = [
        "| method | datasets | NLL best / tied / behind | error best / tied / behind |",
        "|---|---|---|---|",
    ]
    for m in methods:
        cells = [" / ".join(map(str, by_metric[metric][m])) for metric in ("nll", "error")]
        lines.append(f"| {m} | {sum(by_metric['nll'][m])} | {cells[0]} | {cells[1]} |")
    return lines


def _time_to_target(trace: Sequence[Sequence[float]], target: float) -> float:
    return next((t for t, nll in trace if nll <= target), math.inf)


def times_to_target(methods: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> Dict[str, List]:
    """Each method's seconds, one a seed, until its trace's NLL is within
    :data:`TARGET_SLACK` of that seed's best final trace NLL over the methods (∞: never)."""
    seeds = _common_seeds(methods)
    times: Dict[str, List[float]] = {name: [] for name in methods}
    for s in seeds:
        target = TARGET_SLACK * min(runs[s]["trace"][-1][1] for runs in methods.values())
        for name, runs in methods.items():
            times[name].append(_time_to_target(runs[s]["trace"], target))
    return times


def _seconds(values: Sequence[float]) -> str:
    def text(v: float) -> str:
        return "∞" if math.isinf(v) else f"{v:.1f}"

    median = float(np.median(values))
    return f"{text(median)} [{text(min(values))}, {text(max(values))}]"


def _calibration_table(table: Mapping[str, Any], methods: Sequence[str]) -> List[str]:
    """Each method's mean confidence against its accuracy, means over seeds ("–" where no
    probabilities were saved)."""
    lines = ["| dataset | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for dataset, runs in sorted(table.items()):
        cells = []
        for m in methods:
            records = list(runs.get(m, {}).values())
            confidences = [r.get("confidence") for r in records]
            if not records or any(c is None for c in confidences):
                cells.append("–")
                continue
            accuracy = 1.0 - np.mean([r["error"] for r in records])
            cells.append(f"{np.mean(confidences):.3f} / {accuracy:.3f}")
        lines.append(f"| {dataset} | " + " | ".join(cells) + " |")
    return lines


def _time_table(table: Mapping[str, Any], methods: Sequence[str]) -> List[str]:
    lines = ["| dataset | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for dataset, runs in sorted(table.items()):
        times = times_to_target({m: runs[m] for m in methods if m in runs})
        cells = [_seconds(times[m]) if m in times else "–" for m in methods]
        lines.append(f"| {dataset} | " + " | ".join(cells) + " |")
    return lines


def _rank_lines(table: Mapping[str, Any], methods: Sequence[str]) -> Tuple[List[str], Any]:
    complete = {d: runs for d, runs in table.items() if all(m in runs for m in methods)}
    if len(methods) < 3 or len(complete) < 2:
        return ["(ranks need 3 methods and 2 datasets that all of them ran)"], None
    means = np.array(
        [
            [np.mean([r["nll"] for r in runs[m].values()]) for m in methods]
            for runs in complete.values()
        ]
    )
    test = rank_test(means, methods)
    order = np.argsort(test.average_ranks)
    geometric = np.exp(np.log(means).mean(axis=0))
    lines = [
        "| method | average rank (test NLL) | geometric-mean test NLL |",
        "|---|---|---|",
        *[f"| {methods[i]} | {test.average_ranks[i]:.2f} | {geometric[i]:.4f} |" for i in order],
        "",
        f"Friedman's test over {test.num_datasets} datasets: χ² = {test.friedman_statistic:.2f}, "
        f"p = {test.friedman_p_value:.2g}. Nemenyi's critical difference at α = "
        f"{test.alpha:g}: {test.critical_difference:.2f} (two methods whose average ranks differ "
        "by more differ).",
    ]
    return lines, test


def _budget(settings: Mapping[str, Any]) -> str:
    parts = []
    if settings.get("time_budget") is not None:
        parts.append(f"{settings['time_budget']:g} s")
    if settings.get("max_iterations") is not None:
        parts.append(f"{settings['max_iterations']} steps")
    return " or ".join(parts) or "no budget"


def _methods(table: Mapping[str, Any]) -> List[str]:
    names = {m for runs in table.values() for m in runs}
    return sorted(names, key=lambda m: (m != PACKAGE_METHOD, m))


def _settings_text(settings: Mapping[str, Any]) -> str:
    tuned = settings.get("tuned")
    return (
        f"M = {settings.get('num_inducing')}, B = {settings.get('batch_size')}, "
        f"{_budget(settings)} a method"
        + (", a kernel per class" if settings.get("per_class_kernels") else "")
        + (
            ""
            if tuned is None
            else ", each method's learning rate and positive bijector chosen on a validation "
            f"split of the training data (candidates at {tuned})"
        )
    )


def _cores(count: Any) -> str:
    return "1 core" if count == 1 else f"{'?' if count is None else count} cores"


def date_span(dates: Sequence[str]) -> str:
    """ "DATE", or "FIRST to LAST", of sorted, non-empty ``dates``."""
    return dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"


def machine_name(machine: Mapping[str, Any]) -> str:
    """ "CPU, N cores": what tells machines apart in a report."""
    return f"{machine.get('processor', '?')}, {_cores(machine.get('cpu_count'))}"


def _machine_text(machine: Mapping[str, Any]) -> str:
    probe = machine.get("probe_ms")
    speed = "" if probe is None else f" (speed probe {probe:.1f} ms)"
    return f"{machine.get('processor', '?')}{speed}, {_cores(machine.get('cpu_count'))}"


def measured_line(measured: str, machine: Mapping[str, Any]) -> str:
    """ "Measured DATE on CPU, N cores; gpflow_augmented …, TensorFlow …, GPflow …." for a
    machine as :func:`~gpflow_augmented.comparison.runs.machine` describes it."""
    return _measured_on(measured, [(machine, [])])


def _measured_on(measured: str, ran: Sequence[Tuple[Mapping[str, Any], Sequence[int]]]) -> str:
    """:func:`measured_line` of the machines that ran a report, each with its seeds, which are
    named where there are several machines."""
    where = [
        _machine_text(m) + (f" ({_seed_text(seeds)})" if len(ran) > 1 else "") for m, seeds in ran
    ]
    machine = ran[0][0]
    warnings = "".join(f" Warning: {m['speed_warning']}." for m, _ in ran if "speed_warning" in m)
    return (
        f"Measured {measured} on {' and on '.join(where)}; gpflow_augmented "
        f"{machine.get('gpflow_augmented', '?')}, TensorFlow {machine.get('tensorflow', '?')}, "
        f"GPflow {machine.get('gpflow', '?')}.{warnings}"
    )


def _seed_text(seeds: Sequence[int]) -> str:
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def _stamp_line(stamp: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> str:
    groups: Dict[str, List[str]] = {}
    for dataset, settings in stamp.get("settings_by_dataset", {}).items():
        groups.setdefault(_settings_text(settings), []).append(dataset)
    exceptions = "".join(f"; {', '.join(d)}: {text}" for text, d in groups.items())
    machines = _stamp_machines(stamp)
    seeds = [
        sorted({r["seed"] for r in records if r.get("machine", 0) == i})
        for i in range(len(machines))
    ]
    ran = [(m, s) for m, s in zip(machines, seeds) if s] or [(machines[0], [])]
    return (
        f"{_measured_on(stamp['measured'], ran)} "
        f"{_settings_text(stamp.get('settings', {}))}{exceptions}."
    )


def _win_tie_loss_lines(table: Mapping[str, Any], methods: Sequence[str]) -> List[str]:
    if PACKAGE_METHOD not in methods:
        return [f"({PACKAGE_METHOD} did not run)"]
    lines = ["| peer | won | tied | lost |", "|---|---|---|---|"]
    for peer in methods[1:]:
        won, tied, lost = win_tie_loss(table, PACKAGE_METHOD, peer)
        lines.append(f"| {peer} | {won} | {tied} | {lost} |")
    return lines


#: The report's sections, in order: (name, the sentence before its table).
SECTIONS = (
    (
        "nll",
        "Test NLL, mean ± half the 95 % interval over seeds; **best**, tied (the paired "
        "difference's interval covers 0, or the gap is under 1 %) or behind:",
    ),
    ("error", "Test error, the same way:"),
    (
        "standings",
        "Each method's datasets by its verdict there, on test NLL and on test error (a tie "
        "counts for every method it joins):",
    ),
    ("wins", f"{PACKAGE_METHOD} against each peer on test NLL, datasets won / tied / lost:"),
    (
        "ranks",
        "Average ranks by mean test NLL across the datasets all methods ran, and each method's "
        "geometric mean of its mean test NLLs over them:",
    ),
    (
        "time",
        f"Seconds until the test NLL (on the trace's points) is within {TARGET_SLACK:g}× the "
        "best method's final NLL of the same seed, median [fastest, slowest] over seeds "
        "(∞: not within the budget):",
    ),
    (
        "calibration",
        "Mean confidence (the largest predicted probability) / accuracy on the test set, means "
        "over seeds: a confidence below the accuracy is under-confidence. Each seed's "
        "reliability diagrams are its folder's figures/calibration.png.",
    ),
)


def report_section(summaries: Mapping[str, Any], name: str) -> str:
    """One section of the report (a name of :data:`SECTIONS`): its table, as the report has it."""
    table = _by_dataset(summaries["records"])
    methods = _methods(table)
    make = {
        "nll": lambda: _metric_table(table, methods, "nll"),
        "error": lambda: _metric_table(table, methods, "error"),
        "standings": lambda: _standing_lines(table, methods),
        "wins": lambda: _win_tie_loss_lines(table, methods),
        "ranks": lambda: _rank_lines(table, methods)[0],
        "time": lambda: _time_table(table, methods),
        "calibration": lambda: _calibration_table(table, methods),
    }
    if name not in make:
        raise ValueError(f"no report section {name!r}; the sections are {', '.join(make)}")
    return "\n".join(make[name]()) + "\n"


def report_markdown(summaries: Mapping[str, Any]) -> str:
    """The report's Markdown: the stamp, then every section of :data:`SECTIONS`."""
    parts = [_stamp_line(summaries["stamp"], summaries["records"]) + "\n"]
    for name, sentence in SECTIONS:
        parts.append(f"{sentence}\n\n{report_section(summaries, name)}")
    return "\n".join(parts)


def _curves(table: Mapping[str, Any]) -> Dict[str, Dict[str, List[Any]]]:
    return {
        dataset: {m: [r["trace"] for _, r in sorted(runs[m].items())] for m in runs}
        for dataset, runs in table.items()
    }


def write_report(source: Union[Path, Sequence[Path]], output: Optional[Path] = None) -> str:
    """Read the summaries of ``source`` (a results folder or a ``summaries.json``, or several of
    them) and write ``summaries.json`` (unless it is the source), ``report.md``,
    ``figures/ranks.png`` and ``figures/anytime.png`` to ``output`` (default: the one source's
    folder, or the file's; several sources need it); returns the Markdown."""
    from .plots import anytime_figure, rank_figure, save_figure
    from .runs import write_atomically, write_json

    sources = [Path(source)] if isinstance(source, (str, Path)) else [Path(s) for s in source]
    if output is None and len(sources) > 1:
        raise ValueError("a report of several sources needs an output folder (--output)")
    summaries = read_summaries(*sources)
    if output is None:
        output = sources[0].parent if sources[0].is_file() else sources[0]
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    kept = output / "summaries.json"
    if len(sources) > 1 or not (sources[0].is_file() and sources[0].resolve() == kept.resolve()):
        write_json(kept, summaries)
    text = report_markdown(summaries)
    write_atomically(output / "report.md", lambda handle: handle.write(text))
    table = _by_dataset(summaries["records"])
    methods = _methods(table)
    _, test = _rank_lines(table, methods)
    if test is not None:
        figure = rank_figure(test.methods, test.average_ranks, test.critical_difference)
        save_figure(figure, output / "figures" / "ranks.png")
    save_figure(anytime_figure(_curves(table)), output / "figures" / "anytime.png")
    return text
