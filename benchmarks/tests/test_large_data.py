"""The large-data study's command on a small file: each (N, method) in a process of its own, the
whole training set last, and the tables it writes."""

import json

import pytest

from benchmarks.__main__ import main
from gpflow_augmented.datasets import _DATA

# The integration tier (processes that import TensorFlow each): run by --slow or -m integration.
pytestmark = pytest.mark.integration


def test_the_large_data_command_measures_each_size_in_its_own_process(tmp_path, capsys):
    argv = ["large-data", str(_DATA / "vehicle.npz"), "--sizes", "100", "--methods", "lsm"]
    argv += ["--inducing", "10", "--classes", "2", "--batch-size", "50", "--steps", "2"]
    argv += ["--output", str(tmp_path)]
    assert main(argv) == 0
    results = json.loads((tmp_path / "large_data.json").read_text())
    assert [r["N"] for r in results["sizes"]] == [100, 677]  # the subsample, then every row
    for row in results["sizes"]:
        # each process's own peak from its data on: what training holds beyond the data
        assert row["peak_rss_mb"] >= row["rss_with_data_mb"] > 0
        assert row["beyond_data_mb"] == row["peak_rss_mb"] - row["rss_with_data_mb"]
        assert row["epoch_s"] == pytest.approx(row["step_s"] * row["N"] / 50)
    assert [(r["M"], r["N"]) for r in results["inducing"]] == [(10, 677)]
    # vehicle's four classes folded into two: the step's shapes, at every row
    assert [(r["C"], r["N"], r["M"]) for r in results["classes"]] == [(2, 677, 100)]
    assert results["stamp"]["processor"] and results["stamp"]["measured"]
    table = (tmp_path / "large_data.md").read_text()
    assert "| 677 | lsm |" in table and "| 2 | lsm |" in table
    assert main([*argv[:2], "--classes", "5", "--output", str(tmp_path / "bad")]) == 2
    assert "cannot fold 4 classes into 5" in capsys.readouterr().err
    assert main(["large-data", str(tmp_path / "missing.npz")]) == 2
    assert "no such file" in capsys.readouterr().err


#: The first operation initialises the devices, where TensorFlow logs the CUDA driver's error on a
#: machine without a GPU.
_LOAD_THE_STUDIES_COMMAND_AND_RUN_AN_OPERATION = (
    "import benchmarks.__main__, tensorflow as tf; print(float(tf.constant(1.0) + 1.0))"
)


def test_the_studies_command_keeps_tensorflows_log_lines_off_its_output():
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    log_line = re.compile(r"^[IWE]\d{4} ", re.MULTILINE)
    shell = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    for level, expected in ((None, False), ("0", True)):  # the user's own level is kept
        environment = dict(shell, **({} if level is None else {"TF_CPP_MIN_LOG_LEVEL": level}))
        completed = subprocess.run(
            [sys.executable, "-c", _LOAD_THE_STUDIES_COMMAND_AND_RUN_AN_OPERATION],
            capture_output=True,
            text=True,
            cwd=root,
            env=environment,
            timeout=300,
        )
        assert completed.returncode == 0
        assert bool(log_line.search(completed.stderr)) == expected, completed.stderr[:1000]
