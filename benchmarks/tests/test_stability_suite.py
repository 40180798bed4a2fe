"""The stability suite's property, its grid and its command (``python -m benchmarks stability``)."""

import itertools
import json

import numpy as np
import pytest

from benchmarks import stability
from benchmarks.__main__ import main
from gpflow_augmented.comparison.protocol import _evaluation_iterations


def trace(errors, nlls):
    return [
        {"iteration": 10 * i, "error": e, "nll": n} for i, (e, n) in enumerate(zip(errors, nlls))
    ]


def test_the_verdict_measures_the_rise_after_the_burn_in_and_the_final_nll():
    steady = trace([0.9, 0.2] + [0.05, 0.06] * 9, np.linspace(1.0, 0.2, 20))
    assert stability.stability_verdict(steady) == {
        "error_rise": pytest.approx(0.01),
        "nll_ratio": 1.0,
        "holds": True,
    }
    # A rise of 0.02 above the best so far after the first tenth of the steps fails…
    errors = [0.5] + [0.05] * 10 + [0.07] + [0.05] * 8
    verdict = stability.stability_verdict(trace(errors, [0.3] * 20))
    assert verdict["error_rise"] == pytest.approx(0.02) and not verdict["holds"]
    # … and the same rise inside the first tenth does not.
    errors = [0.05, 0.07] + [0.05] * 18
    assert stability.stability_verdict(trace(errors, [0.3] * 20))["holds"]
    # A final NLL 1.2 times the best fails; a non-finite NLL anywhere fails.
    assert not stability.stability_verdict(trace([0.1] * 20, [0.5] * 19 + [0.6]))["holds"]
    nlls = [0.5] * 10 + [None] + [0.5] * 9
    assert stability.stability_verdict(trace([0.1] * 20, nlls))["nll_ratio"] == np.inf


def test_regular_evaluations_are_merged_into_the_geometric_ones():
    geometric = list(itertools.islice(_evaluation_iterations(), 30))
    merged = list(itertools.takewhile(lambda i: i <= 1000, _evaluation_iterations(every=50)))
    assert set(range(50, 1001, 50)) <= set(merged)
    assert set(i for i in geometric if i < 50) <= set(merged)
    assert merged == sorted(set(merged))


def test_a_tiny_set_needs_training_accuracy_1_and_lsm_the_reference_elbo_within_its_band():
    record = {"train_accuracy": 1.0, "final_elbo": -5.0, "first_elbo": -6.0}
    assert stability._tiny_holds(record | {"reference_elbo": -5.00005, "reference_band": 1e-4})
    # Below the reference by more than the band that run's own ELBO still moved in: fails.
    assert not stability._tiny_holds(record | {"reference_elbo": -4.999, "reference_band": 1e-4})
    assert not stability._tiny_holds({"train_accuracy": 2 / 3})
    assert stability._tiny_holds({"train_accuracy": 1.0})  # a peer: no ELBO check


def test_a_tiny_set_is_one_cell_a_seed():
    options = stability.SuiteOptions(
        output=None, data_dir=None, sets=("tiny-6", "synthetic"), seeds=(0, 1)
    )
    cells = stability._cells(options)
    assert [c for c in cells if c[0] == "tiny-6"] == [("tiny-6", 6, 6, 0), ("tiny-6", 6, 6, 1)]
    assert len([c for c in cells if c[0] == "synthetic"]) == 2 * 2 * 2


def test_a_subsample_keeps_classes_with_five_rows_and_renumbers_them():
    y = np.r_[np.zeros(500), np.full(3, 7), np.full(497, 9)]
    X, labels = stability.subsample(np.arange(1000.0)[:, None], y, 1000)
    assert len(X) == 997 and set(labels) == {0, 1}


@pytest.mark.integration
def test_the_command_runs_checks_and_resumes_a_suite(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GPFLOW_AUGMENTED_DATA", raising=False)
    argv = [
        "stability",
        "--sets",
        "tiny-6,synthetic",
        "--seeds",
        "0",
        "--batch-sizes",
        "100",
        "--num-inducing",
        "20",
        "--iterations",
        "200",
        "--evaluations",
        "10",
        "--output",
        str(tmp_path),
        "--no-progress",
    ]
    assert main(argv) == 0
    tiny = json.loads((tmp_path / "cells" / "tiny-6-M6-B6-s0.json").read_text())
    record = tiny["methods"]["lsm"]
    assert record["train_accuracy"] == 1.0 and record["final_elbo"] >= record["first_elbo"]
    assert record["final_elbo"] >= record["reference_elbo"] - max(1e-3, record["reference_band"])
    iterations = [entry["iteration"] for entry in record["trace"]]
    assert set(range(20, 201, 20)) <= set(iterations)
    report = (tmp_path / "stability.md").read_text()
    assert "| tiny-6 | lsm | 1/1 |" in report and "| synthetic | lsm |" in report
    # The committed summary: the verdicts without the traces, and the same table.
    summary = json.loads((tmp_path / "summary.json").read_text())["cells"]
    assert [cell["set"] for cell in summary] == ["synthetic", "tiny-6"]  # the suite's order
    assert "trace" not in summary[0]["methods"]["lsm"] and summary[0]["methods"]["lsm"]["holds"]
    assert stability.stability_table(summary) in report
    # A second run into the folder is refused; --resume keeps the cells and runs none again.
    capsys.readouterr()
    assert main(argv) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*argv, "--resume"]) == 0
    assert "s0: lsm" not in capsys.readouterr().out
    # A resumed command over part of the grid still reports every cell the folder holds.
    assert main([*argv[:2], "synthetic", *argv[3:], "--resume"]) == 0
    assert "| tiny-6 | lsm | 1/1 |" in (tmp_path / "stability.md").read_text()
    summary = json.loads((tmp_path / "summary.json").read_text())["cells"]
    assert [cell["set"] for cell in summary] == ["synthetic", "tiny-6"]
    assert main([*argv[:2], "kddcup-10k", "--output", str(tmp_path / "x")]) == 2
    assert "--data-dir" in capsys.readouterr().err and not (tmp_path / "x").exists()
