"""The report over seeds (comparison.report) and the ``report`` command, on summaries made here."""

import json
import re

import numpy as np
import pytest

from gpflow_augmented.comparison.cli import main
from gpflow_augmented.comparison.report import (
    read_summaries,
    report_markdown,
    report_section,
    standings,
    times_to_target,
    win_tie_loss,
    write_report,
)
from gpflow_augmented.comparison.report import _by_dataset

STAMP = {
    "measured": "2026-01-02",
    "machine": {"processor": "cpu-x", "cpu_count": 2, "tensorflow": "2", "gpflow": "2"},
    "settings": {"num_inducing": 100, "batch_size": 200, "time_budget": 20.0},
}


def _record(dataset, method, seed, nll, reach=1.0):
    """A run whose trace falls to ``nll`` at ``reach`` seconds and stays there."""
    trace = [[0.0, 3.0], [reach / 2, 2 * nll], [reach, nll], [20.0, nll]]
    return dict(
        dataset=dataset, seed=seed, method=method, nll=nll, error=nll / 3, ece=0.01, brier=0.1,
        iterations=100, seconds=20.0, failed_steps=0, trace=trace,
    )  # fmt: skip


def _summaries(gaps, seeds=5, datasets=("a", "b", "c")):
    """Each method's NLL = the dataset's seed noise × (1 + its gap), on every dataset."""
    rng = np.random.default_rng(0)
    records = []
    for d in datasets:
        noise = 0.2 * np.exp(rng.normal(scale=0.1, size=seeds))
        for method, gap in gaps.items():
            for s in range(seeds):
                nll = noise[s] * (1 + gap) * (1 + 0.001 * rng.normal())
                records.append(_record(d, method, s, nll, reach=1.0 + 4 * gap))
    return {"stamp": STAMP, "records": records}


def test_a_method_ahead_by_construction_is_best_everywhere_and_wins_every_dataset():
    summaries = _summaries({"lsm": 0.0, "softmax": 0.10, "rm": 0.20})
    table = _by_dataset(summaries["records"])
    assert win_tie_loss(table, "lsm", "softmax") == (3, 0, 0)
    assert standings(table) == {"lsm": (3, 0, 0), "softmax": (0, 0, 3), "rm": (0, 0, 3)}
    text = report_markdown(summaries)
    assert "| lsm | 3 | 3 / 0 / 0 | 3 / 0 / 0 |" in text
    assert text.count(" best |") == 2 * 3  # NLL and error tables, three datasets
    assert "| lsm | 1.00 |" in text and "| rm | 3.00 |" in text
    # NLL = noise × (1 + gap): the geometric means stand in the ratios 1 : 1.1 : 1.2
    ranks = report_section(summaries, "ranks")
    geometric = {m: float(re.search(rf"\| {m} \| [0-9.]+ \| ([0-9.]+) \|", ranks)[1])
                 for m in ("lsm", "softmax", "rm")}  # fmt: skip
    assert geometric["softmax"] / geometric["lsm"] == pytest.approx(1.1, rel=2e-3)
    assert geometric["rm"] / geometric["lsm"] == pytest.approx(1.2, rel=2e-3)
    assert "Measured 2026-01-02 on cpu-x, 2 cores" in text


def test_a_copy_of_a_method_is_tied_with_it_on_every_dataset():
    summaries = _summaries({"lsm": 0.0, "softmax": 0.10})
    copies = [dict(r, method="copy") for r in summaries["records"] if r["method"] == "lsm"]
    table = _by_dataset(summaries["records"] + copies)
    assert win_tie_loss(table, "lsm", "copy") == (0, 3, 0)
    found = standings(table)
    assert [sum(found[m][:2]) for m in ("lsm", "copy")] == [3, 3]  # best or tied everywhere
    assert found["softmax"] == (0, 0, 3)


def test_time_to_target_is_when_the_trace_first_reaches_the_best_final_nll_times_1_02():
    table = _by_dataset(_summaries({"lsm": 0.0, "softmax": 0.10}, seeds=3)["records"])
    times = times_to_target(table["a"])
    assert times["lsm"] == [1.0, 1.0, 1.0]
    assert times["softmax"] == [np.inf] * 3  # 10 % above the best: never within 2 %


def _results_folder(root, dataset="d", seeds=(0, 1, 2), tuning=None):
    """A results folder as compare writes it: a results.json per seed, and saved probabilities;
    ``tuning``: what a tuned run writes of its tuning (its grid's budget)."""
    for seed in seeds:
        folder = root / f"seed-{seed}"
        folder.mkdir(parents=True)
        methods = [
            {
                "name": name,
                "iterations": 10,
                "failed_steps": 0,
                "final": {"time": 20.0, "nll": nll, "error": 0.1, "ece": 0.0, "brier": 0.2},
                "trace": [{"time": t, "nll": nll * (1 + 1 / (1 + t))} for t in range(0, 21, 2)],
            }
            for name, nll in (("lsm", 0.30 + 0.01 * seed), ("softmax", 0.40 + 0.01 * seed))
        ]
        payload = {
            "created": "2026-01-02T00:00:00+00:00",
            "machine": STAMP["machine"],
            "dataset": dataset,
            "settings": {"seed": seed, "max_iterations": None, **STAMP["settings"]},
            "tuning": tuning,
            "methods": methods,
        }
        (folder / "results.json").write_text(json.dumps(payload))
        (folder / "methods").mkdir()
        for name in ("lsm", "softmax"):  # confidences 0.9 and 0.6
            np.save(folder / "methods" / f"{name}.npy", np.array([[0.9, 0.1], [0.4, 0.6]]))
    return root


def test_the_report_rebuilds_from_its_summaries_alone(tmp_path):
    _results_folder(tmp_path / "run")
    text = write_report(tmp_path / "run")
    assert (tmp_path / "run" / "report.md").read_text() == text
    assert (tmp_path / "run" / "figures" / "anytime.png").exists()
    # Only the summaries travel (e.g. committed): the report is the same without the runs.
    summaries = tmp_path / "kept" / "summaries.json"
    summaries.parent.mkdir()
    summaries.write_bytes((tmp_path / "run" / "summaries.json").read_bytes())
    assert main(["report", str(summaries)]) == 0
    assert (tmp_path / "kept" / "report.md").read_text() == text
    assert "| d | 3 | **0.3100** ± 0.0248 best | 0.4100 ± 0.0248 behind |" in text
    assert "| d | 0.750 / 0.900 | 0.750 / 0.900 |" in text  # mean confidence / accuracy


def test_the_report_refuses_a_folder_without_results_and_two_runs_of_one_seed(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "holds no results.json" in capsys.readouterr().err
    method = {
        "name": "lsm",
        "iterations": 1,
        "final": {"time": 1.0, "nll": 0.3, "error": 0.1, "ece": 0.0, "brier": 0.2},
        "trace": [{"time": 1.0, "nll": 0.3}],
    }
    payload = {"dataset": "d", "settings": {"seed": 0}, "methods": [method]}
    for name in ("x", "y"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="two runs of one dataset, method and seed"):
        read_summaries(tmp_path)


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("benchmark.md", "# a benchmark's table\n", "benchmark.md is not a summaries.json"),
        ("step_times.json", '{"lsm": [0.1]}', "step_times.json is not a summaries.json"),
        ("results.json", '{"dataset": "d"}', "is one run's results: give its folder"),
    ],
)
def test_the_report_names_a_file_that_is_not_a_summaries_json(
    tmp_path, capsys, name, text, message
):
    (tmp_path / name).write_text(text)
    assert main(["report", str(tmp_path / name)]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("text", ['{"dataset": "d", "meth', '["a list"]'])
def test_the_report_names_a_results_json_it_cannot_read(tmp_path, capsys, text):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "results.json").write_text(text)
    assert main(["report", str(tmp_path)]) == 2
    assert "results.json is not a run's results" in capsys.readouterr().err


@pytest.mark.parametrize("gap, verdict", [(0.005, "tied"), (0.05, "behind")])
def test_a_gap_below_one_percent_reads_tied_in_the_table(gap, verdict):
    text = report_markdown(_summaries({"lsm": 0.0, "softmax": gap}, datasets=("a",)))
    row = next(line for line in text.splitlines() if line.startswith("| a |"))
    assert row.endswith(f" {verdict} |")


def test_three_methods_on_three_datasets_get_the_rank_diagram(tmp_path):
    path = tmp_path / "summaries.json"
    path.write_text(json.dumps(_summaries({"lsm": 0.0, "softmax": 0.10, "rm": 0.20})))
    text = write_report(path)
    assert "Friedman's test over 3 datasets" in text
    assert (tmp_path / "figures" / "ranks.png").read_bytes().startswith(b"\x89PNG")


def _large(budget=120.0, machine=None):
    """Summaries of a run of another dataset at its own budget, as a separate folder gives."""
    stamp = dict(STAMP, settings=dict(STAMP["settings"], time_budget=budget))
    if machine is not None:
        stamp["machine"] = machine
    records = [dict(r, dataset="large") for r in _summaries({"lsm": 0.0, "softmax": 0.1})["records"]
               if r["dataset"] == "a"]  # fmt: skip
    return {"stamp": stamp, "records": records}


def test_sources_at_other_budgets_report_as_one_and_the_stamp_says_which(tmp_path):
    small, large = tmp_path / "small.json", tmp_path / "large.json"
    small.write_text(json.dumps(_summaries({"lsm": 0.0, "softmax": 0.1})))
    large.write_text(json.dumps(_large()))
    text = write_report([small, large], tmp_path / "both")
    assert "M = 100, B = 200, 20 s a method; large: M = 100, B = 200, 120 s a method." in text
    assert "| large | 5 |" in text and "| a | 5 |" in text
    # The merged summaries, committed, rebuild the same report alone.
    assert main(["report", str(tmp_path / "both" / "summaries.json")]) == 0
    assert (tmp_path / "both" / "report.md").read_text() == text


def test_a_results_folder_and_a_summaries_file_report_as_one(tmp_path):
    # The file's stamp leaves out max_iterations, which the folder's runs give as None: the same.
    small = tmp_path / "small.json"
    small.write_text(json.dumps(_summaries({"lsm": 0.0, "softmax": 0.1})))
    summaries = read_summaries(_results_folder(tmp_path / "run"), small)
    assert "settings_by_dataset" not in summaries["stamp"]
    assert {r["dataset"] for r in summaries["records"]} == {"a", "b", "c", "d"}
    with pytest.raises(ValueError, match=r"two runs of one dataset, method and seed \(d, lsm"):
        read_summaries(tmp_path / "run", tmp_path / "run" / "seed-0")
    with pytest.raises(ValueError, match="does not exist"):
        read_summaries(tmp_path / "missing.json")


def test_tuned_runs_say_so_in_the_stamp_and_never_merge_with_untuned_ones(tmp_path):
    budget = {"time_budget": 5.0, "max_iterations": None}
    tuned = _results_folder(tmp_path / "tuned", tuning={"budget": budget, "chosen": {}})
    assert read_summaries(tuned)["stamp"]["settings"]["tuned"] == "5 s"
    text = write_report(tuned)
    assert "20 s a method, each method's learning rate and positive bijector chosen" in text
    assert "(candidates at 5 s)" in text
    untuned = _results_folder(tmp_path / "untuned", seeds=(3,))
    with pytest.raises(ValueError, match="runs of d differ in M, B, budget, tuning or kernels"):
        read_summaries(tuned, untuned)
    # the same tuning, run apart, reports as one
    more = _results_folder(tmp_path / "more", seeds=(3,), tuning={"budget": budget})
    assert len(read_summaries(tuned, more)["records"]) == 4 * 2


def test_seeds_from_other_machines_report_as_one_and_a_seed_split_between_machines_is_refused(
    tmp_path,
):
    # Each seed's methods on one machine: their pairing by seed holds, so the seeds of several
    # machines report as one table, whose stamp names each machine with its seeds.
    here = _results_folder(tmp_path / "here", seeds=(0, 1))
    there = _results_folder(tmp_path / "there", seeds=(2,))
    other = dict(STAMP["machine"], processor="cpu-y", cpu_count=16)
    for path in there.rglob("results.json"):
        path.write_text(json.dumps(dict(json.loads(path.read_text()), machine=other)))
    alone = read_summaries(here)  # one machine: the stamp's and records' form as before
    assert list(alone["stamp"])[:3] == ["measured", "machine", "settings"]
    assert not any("machine" in r for r in alone["records"])
    summaries = read_summaries(here, there)
    assert list(summaries["stamp"])[:3] == ["measured", "machines", "settings"]
    assert [m["processor"] for m in summaries["stamp"]["machines"]] == ["cpu-x", "cpu-y"]
    assert {(r["seed"], r["machine"]) for r in summaries["records"]} == {(0, 0), (1, 0), (2, 1)}
    text = write_report([here, there], tmp_path / "both")
    assert "on cpu-x, 2 cores (seeds 0, 1) and on cpu-y, 16 cores (seed 2);" in text
    assert "| d | 3 |" in text
    # The committed summaries rebuild it alone, and merge with more seeds of either machine.
    assert write_report(tmp_path / "both" / "summaries.json") == text
    more = _results_folder(tmp_path / "more", seeds=(3,))
    merged = read_summaries(tmp_path / "both" / "summaries.json", more)
    assert {(r["seed"], r["machine"]) for r in merged["records"]} == {
        (0, 0), (1, 0), (2, 1), (3, 0)
    }  # fmt: skip
    # In the other order each record still names its own machine.
    later = _results_folder(tmp_path / "later", seeds=(4,))
    for path in later.rglob("results.json"):
        path.write_text(json.dumps(dict(json.loads(path.read_text()), machine=other)))
    merged = read_summaries(later, tmp_path / "both" / "summaries.json")
    assert [m["processor"] for m in merged["stamp"]["machines"]] == ["cpu-y", "cpu-x"]
    assert {(r["seed"], r["machine"]) for r in merged["records"]} == {
        (0, 1), (1, 1), (2, 0), (4, 0)
    }  # fmt: skip
    # One seed's methods on two machines (lsm's run apart from its peers') are refused.
    lsm_there = tmp_path / "lsm.json"
    lsm_there.write_text(json.dumps({
        "stamp": dict(STAMP, machine=other),
        "records": [dict(r, method="copy") for r in summaries["records"]
                    if r["seed"] == 0 and r["method"] == "lsm"],
    }))  # fmt: skip
    with pytest.raises(ValueError, match="the methods of d's seed 0 ran on different machines"):
        read_summaries(here, lsm_there)
    # Other versions never report together.
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(_large(machine=dict(STAMP["machine"], tensorflow="9.9"))))
    with pytest.raises(ValueError, match="different versions .tensorflow: "):
        read_summaries(tmp_path / "both" / "summaries.json", newer)


def test_sources_with_one_dataset_at_two_budgets_are_refused(tmp_path):
    small = tmp_path / "small.json"
    small.write_text(json.dumps(_summaries({"lsm": 0.0, "softmax": 0.1})))
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({**_large(), "records": [
        dict(r, dataset="a", seed=r["seed"] + 10) for r in _large()["records"]]}))  # fmt: skip
    with pytest.raises(ValueError, match="runs of a differ in M, B, budget, tuning or kernels"):
        read_summaries(small, twice)
    with pytest.raises(ValueError, match="two runs of one dataset, method and seed"):
        read_summaries(small, small)
    with pytest.raises(ValueError, match="needs an output folder"):
        write_report([small, small])


def _probed(root, seeds, probe_ms, **settings):
    """A results folder whose runs' machine took ``probe_ms`` for the speed probe."""
    folder = _results_folder(root, seeds=seeds)
    for path in folder.rglob("results.json"):
        payload = json.loads(path.read_text())
        payload["machine"] = dict(payload["machine"], probe_ms=probe_ms)
        payload["settings"].update(settings)
        path.write_text(json.dumps(payload))
    return folder


def test_runs_at_speeds_further_apart_than_the_limit_are_reported_with_a_warning(tmp_path):
    # One folder resumed on a machine 2.5x slower (a run's 40 s buy 2.5x fewer steps) is stamped
    # with its probes' range and a warning, not with its first run's machine alone; a probe is too
    # noisy on a shared machine (2.5x within one run) to refuse a report on.
    folder = _probed(tmp_path / "one", (0, 1), probe_ms=10.0)
    _probed(tmp_path / "slower", (2,), probe_ms=25.0)
    (tmp_path / "slower" / "seed-2").rename(folder / "seed-2")
    summaries = read_summaries(folder)
    assert summaries["stamp"]["machine"]["probe_range"] == [10.0, 25.0]
    assert "speed probes 10 to 25 ms, more than 2x apart" in report_markdown(summaries)
    # Across sources alike (a merged part keeps its own range), and beside unprobed runs.
    fast, slow = _probed(tmp_path / "fast", (0,), 10.0), _probed(tmp_path / "slow", (1,), 25.0)
    assert read_summaries(fast, slow)["stamp"]["machine"]["probe_range"] == [10.0, 25.0]
    near = _probed(tmp_path / "near", (1, 2), 13.0)
    write_report(folder)
    merged = read_summaries(folder / "summaries.json", _probed(tmp_path / "later", (3,), 13.0))
    assert merged["stamp"]["machine"]["probe_range"] == [10.0, 25.0]
    unprobed = read_summaries(fast, _results_folder(tmp_path / "unprobed", seeds=(1,)))
    assert "have no speed probe" in unprobed["stamp"]["machine"]["speed_warning"]
    # Within the limit they report as one, at the median probe, which the stamp line gives.
    summaries = read_summaries(fast, near)
    assert summaries["stamp"]["machine"]["probe_ms"] == 11.5
    assert "speed_warning" not in summaries["stamp"]["machine"]
    assert "on cpu-x (speed probe 11.5 ms), 2 cores" in report_markdown(summaries)
    # Runs bounded by steps alone did the same work at any speed.
    steps = {"time_budget": None, "max_iterations": 10}
    fast, slow = (
        _probed(tmp_path / "f", (0,), 10.0, **steps),
        _probed(tmp_path / "s", (1,), 25.0, **steps),
    )
    assert "speed_warning" not in read_summaries(fast, slow)["stamp"]["machine"]


def test_the_machine_record_names_the_cpu_generation_and_times_the_probe(monkeypatch):
    from gpflow_augmented.comparison import runs

    assert runs.machine()["probe_ms"] > 0
    # One process is one machine: its seeds' runs share one probe (timed afresh, they ranged 2.5x
    # within one run on a shared machine).
    assert runs.machine()["probe_ms"] == runs.machine()["probe_ms"]
    # Two generations a virtual machine names alike are told apart by family, model and vector unit.
    fields = {"model name": "AMD EPYC", "cpu family": "25", "model": "1", "flags": "fma avx avx2"}
    monkeypatch.setattr(runs, "_cpuinfo", lambda: fields)
    assert runs._cpu_model() == "AMD EPYC (family 25, model 1; AVX2)"
    fields.update(model="17", flags="avx avx2 avx512f")
    assert runs._cpu_model() == "AMD EPYC (family 25, model 17; AVX-512)"
    monkeypatch.setattr(runs, "_cpuinfo", lambda: {})
    assert runs._cpu_model() is None  # no /proc/cpuinfo: machine() falls back to platform's


def test_runs_with_a_kernel_per_class_say_so_and_never_merge_with_shared_kernel_runs(tmp_path):
    per_class = _results_folder(tmp_path / "per-class", seeds=(0,))
    for path in per_class.rglob("results.json"):
        payload = json.loads(path.read_text())
        payload["settings"]["per_class_kernels"] = True
        path.write_text(json.dumps(payload))
    assert "20 s a method, a kernel per class." in write_report(per_class)
    shared = _results_folder(tmp_path / "shared", seeds=(1,))
    assert "kernel per class" not in write_report(shared)
    with pytest.raises(ValueError, match="runs of d differ in M, B, budget, tuning or kernels"):
        read_summaries(per_class, shared)
