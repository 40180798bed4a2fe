"""The command-line tool end to end on a tiny dataset, and its answers to bad input."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gpflow_augmented as ga
from gpflow_augmented.comparison import benchmark
from gpflow_augmented.comparison.baselines import BINARY_METHODS, DEFAULT_MULTICLASS_METHODS
from gpflow_augmented.comparison.cli import main
from gpflow_augmented.comparison.files import load_file

# The integration tier (the command line, in-process and in subprocesses, Ctrl-C included): run by
# --slow or -m integration.
pytestmark = pytest.mark.integration

# TensorFlow's C++ log lines (I0000 …, W0000 …, E0000 …) and its absl start-up notice.
TF_LOG_LINE = re.compile(
    r"^([IWEF]\d{4} |WARNING: All log messages before absl)|oneDNN|cuda", re.MULTILINE
)

TRACE_KEYS = {
    "time",
    "iteration",
    "elbo",
    "step_size",
    "error",
    "nll",
    "ece",
    "classwise_ece",
    "brier",
}
METHOD_KEYS = {
    "name",
    "description",
    "compile_seconds",
    "iterations",
    "failed_steps",
    "stability",
    "time_to_converge",
    "final",
    "initial_hyperparameters",
    "batches_digest",
    "trace",
    "options",
}


@pytest.fixture(scope="module")
def tiny_npz(tmp_path_factory):
    """120 rows of the bundled vehicle data (raw features), with a test split of 40."""
    d = ga.datasets.load_dataset("vehicle")
    path = tmp_path_factory.mktemp("data") / "tiny.npz"
    X = np.vstack([d.X_train[:80], d.X_test[:40]]) * 3.0 + 10.0  # un-standardised
    y = np.r_[d.Y_train[:80, 0], d.Y_test[:40, 0]]
    np.savez(path, X=X, y=y, is_test=np.r_[np.zeros(80, bool), np.ones(40, bool)])
    return path


def _strict_json(path):
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_compare_end_to_end(tiny_npz, tmp_path):
    output = tmp_path / "out"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpflow_augmented",
            "compare",
            str(tiny_npz),
            "--num-inducing",
            "10",
            "--batch-size",
            "32",
            "--max-iterations",
            "4",
            "--time-budget",
            "60",
            "--output",
            str(output),
            "--no-progress",
            "--seeds",
            "0,1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        # as a user's shell has it (conftest sets a log level for the test process)
        env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    # `python -m` is quiet from start-up to the end of a run (test_start_up_is_quiet_unless_verbose
    # shows that --verbose brings these lines)
    assert not TF_LOG_LINE.search(completed.stderr), completed.stderr[:2000]
    table = completed.stdout
    for name in DEFAULT_MULTICLASS_METHODS:
        assert f"\n{name} " in table
    results = _strict_json(output / "seed-0" / "results.json")
    other_seed = _strict_json(output / "seed-1" / "results.json")
    # tiny.npz has its own split; the seed draws the inducing points and the minibatches
    runs = [_strict_json(output / f"seed-{s}" / "run.json") for s in (0, 1)]
    assert runs[0]["test_data_digest"] == runs[1]["test_data_digest"]
    assert other_seed["methods"][0]["batches_digest"] != results["methods"][0]["batches_digest"]
    assert {"created", "command", "machine", "dataset", "settings", "methods"} <= set(results)
    assert results["dataset"] == "tiny"
    assert results["settings"]["num_train"] == 80 and results["settings"]["num_test"] == 40
    assert [m["name"] for m in results["methods"]] == list(DEFAULT_MULTICLASS_METHODS)
    for method in results["methods"]:
        assert set(method) == METHOD_KEYS
        assert method["iterations"] == 4
        assert [e["iteration"] for e in method["trace"]] == [0, 1, 2, 3, 4]
        assert set(method["final"]) == TRACE_KEYS and method["final"]["iteration"] == 4
        for entry in method["trace"]:
            assert set(entry) == TRACE_KEYS
            assert 0.0 <= entry["error"] <= 1.0 and entry["nll"] > 0
    assert len({m["batches_digest"] for m in results["methods"]}) == 1
    for figure in ("traces.png", "calibration.png"):
        data = (output / "seed-0" / "figures" / figure).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, figure
    for name in DEFAULT_MULTICLASS_METHODS:
        assert list((output / "seed-0" / "tensorboard" / name).glob("events.out.tfevents.*")), name
    # the report over the two seeds, from summaries written beside them
    summaries = _strict_json(output / "summaries.json")
    assert len(summaries["records"]) == 2 * len(DEFAULT_MULTICLASS_METHODS)
    report = (output / "report.md").read_text()
    assert report in table and "| tiny | 2 |" in report
    assert (output / "figures" / "anytime.png").read_bytes().startswith(b"\x89PNG")


def test_binary_labels_pick_the_binary_methods(tiny_npz, tmp_path, capsys):
    data = np.load(tiny_npz)
    binary = tmp_path / "binary.npz"
    np.savez(binary, X=data["X"], y=(data["y"] == 0).astype(int), is_test=data["is_test"])
    output = tmp_path / "out"
    code = main(
        [
            "compare",
            str(binary),
            "--num-inducing",
            "10",
            "--batch-size",
            "32",
            "--max-iterations",
            "4",
            "--output",
            str(output),
            "--no-progress",
            "--seeds",
            "0",
            "--no-tensorboard",
        ]
    )
    assert code == 0
    results = _strict_json(output / "seed-0" / "results.json")
    assert [m["name"] for m in results["methods"]] == list(BINARY_METHODS)
    for method in results["methods"]:
        assert method["iterations"] == 4 and 0.0 <= method["final"]["error"] <= 1.0
    assert "xgpc" in capsys.readouterr().out
    # A binary method on multi-class labels is refused with the reason.
    assert (
        main(
            [
                "compare",
                str(tiny_npz),
                "--methods",
                "xgpc",
                "--max-iterations",
                "2",
                "--output",
                str(tmp_path / "refused"),
                "--no-progress",
                "--seeds",
                "0",
            ]
        )
        == 2
    )
    assert "binary labels" in capsys.readouterr().err


def test_libsvm_file_with_separate_test_file(tmp_path, capsys):
    from sklearn.datasets import dump_svmlight_file

    d = ga.datasets.load_dataset("wine")
    labels = np.array([3, 7, 9])  # arbitrary LIBSVM labels, mapped to 0..2 in sorted order
    # LIBSVM counts features from 1 (scikit-learn writes from 0 unless told). Rows drawn from the
    # whole file: wine's rows are sorted by class, and its first 60 lack class 2.
    train, test = np.random.default_rng(0).permutation(len(d.X_train))[:60], slice(0, 30)
    dump_svmlight_file(
        d.X_train[train],
        labels[d.Y_train[train, 0]],
        str(tmp_path / "wine.train"),
        zero_based=False,
    )
    dump_svmlight_file(
        d.X_test[test], labels[d.Y_test[test, 0]], str(tmp_path / "wine.test"), zero_based=False
    )
    # One method, the cheapest to trace: what is tested is how the files are read.
    code = main(
        [
            str(tmp_path / "wine.train"),
            "--test-file",
            str(tmp_path / "wine.test"),
            "--methods",
            "softmax",
            "--num-inducing",
            "8",
            "--batch-size",
            "20",
            "--max-iterations",
            "3",
            "--output",
            str(tmp_path / "out"),
            "--no-tensorboard",
            "--no-progress",
            "--seeds",
            "0",
        ]
    )
    assert code == 0
    results = _strict_json(tmp_path / "out" / "seed-0" / "results.json")
    assert results["settings"]["num_classes"] == 3
    assert results["settings"]["num_train"] == 60 and results["settings"]["num_test"] == 30


def _bad_npz(tmp_path, name, **arrays):
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    return str(path)


@pytest.mark.parametrize(
    "case",
    [
        "missing file",
        "unknown method",
        "label out of range",
        "negative label",
        "fractional label",
        "one class",
        "NaN feature",
        "no y array",
        "not an npz",
        "not libsvm",
        "empty method list",
        "subset size without lsm-subsets",
        "subset size zero",
        "alpha_epsilon without dirichlet",
        "alpha_epsilon zero",
        "learning rate and tune",
        "tune budget without tune",
        "full GP on minibatches",
        "full GP with trained inducing points",
    ],
)
def test_bad_input_gives_one_error_line_and_exit_2(case, tmp_path, capsys):
    X = np.random.default_rng(0).standard_normal((20, 3))
    y = np.arange(20) % 2
    argv = {
        "missing file": [str(tmp_path / "nowhere.npz")],
        "unknown method": ["vehicle", "--methods", "lsm,gibbs"],
        "label out of range": [_bad_npz(tmp_path, "a", X=X, y=np.r_[y[:-1], 1.5])],
        "negative label": [_bad_npz(tmp_path, "b", X=X, y=np.r_[y[:-1], -1])],
        "fractional label": [_bad_npz(tmp_path, "c", X=X, y=y + 0.25)],
        "one class": [_bad_npz(tmp_path, "d", X=X, y=np.zeros(20))],
        "NaN feature": [
            _bad_npz(tmp_path, "e", X=np.where(np.arange(60).reshape(20, 3) == 7, np.nan, X), y=y)
        ],
        "no y array": [_bad_npz(tmp_path, "f", X=X, labels=y)],
        "not an npz": [str(tmp_path / "g.npz")],
        "not libsvm": [str(tmp_path / "h.txt")],
        "empty method list": ["vehicle", "--methods", ","],
        "subset size without lsm-subsets": [
            "vehicle",
            "--methods",
            "lsm",
            "--class-subset-size",
            "2",
        ],
        "subset size zero": ["vehicle", "--methods", "lsm-subsets", "--class-subset-size", "0"],
        "alpha_epsilon without dirichlet": [
            "vehicle",
            "--methods",
            "lsm",
            "--alpha-epsilon",
            "0.1",
        ],
        "alpha_epsilon zero": ["vehicle", "--methods", "dirichlet", "--alpha-epsilon", "0"],
        "learning rate and tune": ["vehicle", "--learning-rate", "0.1", "--tune"],
        "tune budget without tune": ["vehicle", "--tune-budget", "5"],
        "full GP on minibatches": ["vehicle", "--methods", "lsm,rmgpc"],
        "full GP with trained inducing points": [
            "vehicle",
            "--methods",
            "lsm,rmgpc",
            "--batch-size",
            "100000",
            "--train-inducing-points",
        ],
    }[case]
    (tmp_path / "g.npz").write_text("this is not a zip archive")
    (tmp_path / "h.txt").write_text("1 1:0.5 2:abc\nnot libsvm at all\n")
    code = main([*argv, "--output", str(tmp_path / "out"), "--max-iterations", "1"])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpflow-augmented: error: "), captured.err
    assert not (tmp_path / "out").exists()  # refused before the output folder is touched


def test_error_messages_name_the_problem(tmp_path, capsys):
    X = np.zeros((4, 2))
    main([_bad_npz(tmp_path, "z", X=X, y=np.array([0, 1, 2, -3]))])
    assert "labels must be integers 0..C-1" in capsys.readouterr().err
    main(["vehicle", "--methods", "lsm,gibbs"])
    assert "unknown method 'gibbs'" in capsys.readouterr().err
    main(["vehicle", "--methods", "rm", "--class-subset-size", "2"])
    assert "--class-subset-size is an option of lsm-subsets" in capsys.readouterr().err
    for option, value in (("--learning-rate", "0.1"), ("--positive-bijector", "exp")):
        main(["vehicle", option, value, "--tune"])
        assert f"{option} fixes what --tune would choose" in capsys.readouterr().err
    main(["vehicle", "--tune-budget", "5"])
    assert "--tune-budget is the budget of --tune's candidates; add --tune" in (
        capsys.readouterr().err
    )
    # Without --methods the option would be ignored while run.json recorded it.
    assert main(["vehicle", "--class-subset-size", "2", "--output", str(tmp_path / "o")]) == 2
    assert "which --methods does not name (the default methods do not include it)" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "o").exists()
    main(
        [
            "vehicle",
            "--methods",
            "lsm,rmgpc",
            "--batch-size",
            "100",
            "--output",
            str(tmp_path / "out"),
        ]
    )
    assert (
        "method 'rmgpc' is a full GP, trained on the whole training set at every step: it "
        "takes no minibatches (give a batch size of at least N = 677)"
    ) in capsys.readouterr().err


def test_features_standardised_with_training_statistics_and_split_seeded():
    rng = np.random.default_rng(0)
    X = rng.normal(5.0, 3.0, (200, 4))
    X[:, 2] = 7.0  # a constant column stays finite (at zero)
    y = rng.integers(0, 3, 200)
    d = ga.datasets.from_arrays("synthetic", X, y, test_fraction=0.25, seed=4)
    assert len(d.X_test) == 50 and len(d.X_train) == 150
    np.testing.assert_allclose(d.X_train.mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(d.X_train.std(0)[[0, 1, 3]], 1.0, rtol=1e-12)
    assert np.all(d.X_train[:, 2] == 0) and np.all(d.X_test[:, 2] == 0)
    assert abs(d.X_test.mean()) > 1e-3  # test rows use the training statistics, not their own
    again = ga.datasets.from_arrays("synthetic", X, y, test_fraction=0.25, seed=4)
    np.testing.assert_array_equal(again.X_test, d.X_test)
    other = ga.datasets.from_arrays("synthetic", X, y, test_fraction=0.25, seed=5)
    assert not np.array_equal(other.X_test, d.X_test)


def test_ground_truth_end_to_end(tiny_npz, tmp_path, capsys):
    output = tmp_path / "truth"
    code = main(
        [
            "ground-truth",
            str(tiny_npz),
            "--samples",
            "100",
            "--nuts-samples",
            "50",
            "--burnin",
            "50",
            "--chains",
            "2",
            "--output",
            str(output),
            "--no-progress",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "split R-hat" in printed and "negative-multinomial" in printed
    results = _strict_json(output / "results.json")
    assert set(results["discrepancies"]) == {
        "nuts",
        "exact",
        "negative-multinomial",
        "gamma-poisson",
        "vi",
    }
    # The table written is the one the written summaries give: each method against Gibbs.
    summaries = {
        name: {q: np.array(v) for q, v in summary.items()}
        for name, summary in results["summaries"].items()
    }
    assert summaries["gibbs"]["probabilities"].shape == (40, 4)
    for method, table in results["discrepancies"].items():
        for quantity in ("probabilities", "latent_mean", "latent_variance"):
            difference = np.abs(summaries[method][quantity] - summaries["gibbs"][quantity])
            assert table[quantity]["mean"] == pytest.approx(difference.mean(), rel=1e-12)
            assert table[quantity]["max"] == pytest.approx(difference.max(), rel=1e-12)
    assert set(results["diagnostics"]) == {"gibbs", "nuts"}
    assert (output / "figures" / "ground_truth.png").stat().st_size > 10_000


def test_ground_truth_rejects_bad_options(capsys):
    assert main(["ground-truth", "--chains", "1"]) == 2
    assert "argument --chains: must be an integer ≥ 2, got '1'" in capsys.readouterr().err


def test_report_compares_the_package_method_with_the_best_peer_at_the_common_target():
    from gpflow_augmented.comparison.benchmark import _against_best_peer

    def method(name, error, times_and_nlls, final_nll=None):
        trace = [{"time": t, "nll": nll} for t, nll in times_and_nlls]
        final = trace[-1]["nll"] if final_nll is None else final_nll
        return {"name": name, "final": {"error": error, "nll": final}, "trace": trace}

    methods = [
        method("lsm", 0.10, [(0.0, 2.0), (0.5, 0.52), (1.0, 0.505), (4.0, 0.49)]),
        # the best peer by final NLL (whole test set: 0.45); its last trace value (0.50) sets the
        # target, after a lower one (0.47) that a "best of the trace" target would use
        method(
            "softmax",
            0.09,
            [(0.0, 2.0), (5.0, 0.55), (20.0, 0.509), (30.0, 0.47), (40.0, 0.50)],
            final_nll=0.45,
        ),
        method("rm", 0.08, [(0.0, 2.0), (2.0, 0.60), (40.0, 0.70)]),  # never reaches the target
        method("lsm-vi", 0.12, [(0.0, 2.0), (10.0, 0.505), (40.0, 0.53)]),
    ]
    row = _against_best_peer("toy", methods).split(" | ")
    # Not rm, which has the lowest error; ΔNLL = 0.49 / 0.45 - 1; target 0.50 × 1.02 = 0.51,
    # which ours reached at 1 s, softmax at 20 s and lsm-vi at 10 s.
    assert row[1] == "softmax"
    assert row[2] == "+0.0100" and row[3] == "+8.9 %"
    assert row[4] == "0.5100" and row[5] == "1.00 s"
    assert row[6].rstrip(" |") == "rm ∞, softmax 20.0×, lsm-vi 10.0×"

    slow = method("lsm", 0.10, [(0.0, 2.0), (40.0, 0.6)])
    row = _against_best_peer("toy", [slow, *methods[1:]]).split(" | ")
    assert row[5] == "never" and row[6].rstrip(" |") == "rm –, softmax –, lsm-vi –"
    # A peer whose run diverged (NLL stored as None) is skipped, not a crash.
    diverged_rm = method("rm", 0.5, [(0.0, None)], final_nll=None)
    assert _against_best_peer("toy", [methods[0], diverged_rm]) == ""
    # Without the package's method (or any peer) there is no row.
    assert _against_best_peer("toy", methods[1:]) == ""


# -- options, output folders, interrupted and resumed runs ---------------------------


def _numeric_options():
    """Every option of every command whose value is a number, from the parser itself."""
    from gpflow_augmented.comparison.arguments import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for command, sub in commands.items():
        for action in sub._actions:
            if (
                action.option_strings
                and action.type is not None
                and ("integer" in action.type.__name__ or "number" in action.type.__name__)
            ):
                yield command, action.option_strings[0]


@pytest.mark.parametrize("command, option", list(_numeric_options()))
def test_no_numeric_option_accepts_nan_or_inf(command, option, capsys):
    for value in ("nan", "inf", "-inf"):
        assert main([command, f"{option}={value}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(
            f"gpflow-augmented: error: argument {option}: must be"
        ), err


def test_the_numeric_options_cover_the_ones_users_set():
    options = {option for _, option in _numeric_options()}
    assert {
        "--time-budget",
        "--learning-rate",
        "--max-iterations",
        "--num-inducing",
        "--batch-size",
        "--trace-test-points",
        "--seed",
        "--test-fraction",
        "--samples",
        "--chains",
        "--burnin",
        "--class-subset-size",
        "--alpha-epsilon",
    } <= options


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--methods", "lsm,lsm"], "--methods names 'lsm' twice"),
        (["--max-iterations", "-1"], "argument --max-iterations: must be an integer ≥ 1, got '-1'"),
        (["--seeds", "0,-1"], "argument --seeds: must be an integer ≥ 0, got '-1'"),
        (["--seeds", "1,1"], "argument --seeds: names a seed twice"),
        (["--trace-test-points", "0"], "argument --trace-test-points: must be an integer ≥ 1"),
        (["--resume", "--overwrite"], "--resume and --overwrite contradict each other"),
    ],
)
def test_options_that_used_to_do_the_wrong_thing_are_refused(
    argv, message, tiny_npz, tmp_path, capsys
):
    assert main(["compare", str(tiny_npz), *argv, "--output", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


def test_the_header_gives_the_inducing_points_actually_used(tiny_npz, tmp_path, capsys):
    # softmax: the cheapest method to trace (any sparse method has its inducing points capped)
    assert (
        main(
            [
                "compare",
                str(tiny_npz),
                "--num-inducing",
                "500",
                "--methods",
                "softmax",
                "--max-iterations",
                "1",
                "--output",
                str(tmp_path / "o"),
                "--no-progress",
                "--seeds",
                "0",
                "--no-tensorboard",
            ]
        )
        == 0
    )
    assert "M=80 (--num-inducing 500 capped at the training points)" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["a file", "under a file"])
def test_an_unusable_output_is_refused_before_training(case, tiny_npz, tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    output = blocker if case == "a file" else blocker / "out"
    assert (
        main(
            [
                "compare",
                str(tiny_npz),
                "--methods",
                "lsm",
                "--max-iterations",
                "1",
                "--output",
                str(output),
                "--no-progress",
                "--seeds",
                "0",
            ]
        )
        == 2
    )
    captured = capsys.readouterr()
    assert "is a file, not a folder" in captured.err
    assert "lsm " not in captured.out  # nothing was trained


def test_a_reused_output_is_refused_unless_resumed_or_overwritten(tiny_npz, tmp_path, capsys):
    output = tmp_path / "o"
    common = [
        "compare",
        str(tiny_npz),
        "--max-iterations",
        "1",
        "--num-inducing",
        "5",
        "--output",
        str(output),
        "--no-progress",
        "--seeds",
        "0",
    ]
    # The earlier run's method is not among the later run's, which must not keep it.
    assert main([*common, "--methods", "softmax"]) == 0
    assert main([*common, "--methods", "lsm"]) == 2
    assert "already holds an earlier run" in capsys.readouterr().err
    assert main([*common, "--methods", "lsm", "--overwrite"]) == 0
    # the earlier run's softmax is gone, not mixed into the new one
    assert not (output / "seed-0" / "tensorboard" / "softmax").exists()
    assert not (output / "seed-0" / "methods" / "softmax.json").exists()
    assert [m["name"] for m in _strict_json(output / "seed-0" / "results.json")["methods"]] == [
        "lsm"
    ]
    # a resumed run with other options is refused by name
    assert main([*common[:5], "6", *common[6:], "--methods", "lsm", "--resume"]) == 2
    assert "the run in" in capsys.readouterr().err


def test_the_default_output_folder_moves_on_instead_of_mixing_runs(
    tiny_npz, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # softmax: the cheapest method to trace; any method writes the folder
        assert (
            main(
                [
                    "compare",
                    str(tiny_npz),
                    "--methods",
                    "softmax",
                    "--max-iterations",
                    "1",
                    "--num-inducing",
                    "5",
                    "--no-progress",
                    "--seeds",
                    "0",
                    "--seeds",
                    "0",
                    "--no-tensorboard",
                ]
            )
            == 0
        )
    assert (tmp_path / "gpflow-augmented-results" / "tiny" / "seed-0" / "results.json").exists()
    assert (tmp_path / "gpflow-augmented-results" / "tiny-2" / "seed-0" / "results.json").exists()
    assert "written to gpflow-augmented-results/tiny-2/" in capsys.readouterr().out


def test_ctrl_c_keeps_the_finished_methods_and_resume_completes_the_run(tiny_npz, tmp_path, capsys):
    import signal
    import time

    output = tmp_path / "o"
    # The child is the tool as a user starts it (the script, or else `python -m`), so that its
    # error output is checked whole: the interruption's line and nothing else, no TensorFlow log
    # line from start-up on (test_start_up_is_quiet_unless_verbose shows --verbose brings them).
    # A shell runs a background job (`.ci/run &`) with SIGINT ignored, and Python keeps an
    # inherited ignore, so the child would finish as if never interrupted. Ctrl-C at a terminal
    # reaches a process with the default handler: a bare Python resets it and executes the tool.
    script = os.path.join(os.path.dirname(sys.executable), "gpflow-augmented")
    tool = [script] if os.path.exists(script) else [sys.executable, "-m", "gpflow_augmented"]
    with_default_sigint = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    # Each method trains for 3 s of its clock, which leaves out its tracing and evaluations: the
    # signal, sent 2 s after lsm-vi has finished, finds softmax still running. (Two of the
    # methods a new process traces fastest: AutoGraph converts lsm's code in twice the time.)
    command = [
        "compare",
        str(tiny_npz),
        "--methods",
        "lsm-vi,softmax",
        "--num-inducing",
        "10",
        "--batch-size",
        "32",
        "--time-budget",
        "3",
        "--output",
        str(output),
        "--no-progress",
        "--no-tensorboard",
    ]
    process = subprocess.Popen(
        [sys.executable, "-c", with_default_sigint, *tool, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
    )
    finished = output / "seed-0" / "methods" / "lsm-vi.json"
    deadline = time.time() + 300
    while not finished.exists() and time.time() < deadline and process.poll() is None:
        time.sleep(0.2)
    assert finished.exists(), process.communicate()[1][-2000:]
    time.sleep(2)  # softmax is training now
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    # All of standard error: on a loaded core the signal once landed in softmax's tracing and the
    # tool exited with 1, and the last 2,000 characters held only the stack, not the error.
    assert process.returncode == 130, err
    assert err.splitlines() == [
        f"gpflow-augmented: interrupted; the finished results are in "
        f"{output}/ (continue with --resume)"
    ], err[-2000:]
    kept = _strict_json(finished)
    assert not (output / "seed-0" / "results.json").exists()
    assert not (output / "seed-0" / "methods" / "softmax.json").exists()

    # The same command with --resume keeps lsm-vi as it was and runs softmax. What it reads is
    # the folder the interrupted process left, so it runs here, not in a process of its own (which
    # would import TensorFlow again).
    assert main([*command, "--resume"]) == 0
    assert "resuming: lsm-vi finished earlier" in capsys.readouterr().out
    results = _strict_json(output / "seed-0" / "results.json")
    assert [m["name"] for m in results["methods"]] == ["lsm-vi", "softmax"]
    assert results["methods"][0] == kept
    assert results["methods"][1]["iterations"] > 0


def test_ctrl_c_while_tensorflow_traces_is_reported_as_an_interrupt(
    tiny_npz, tmp_path, capsys, ctrl_c_while_tracing
):
    # What CI met on a slow machine: the interrupt landed while softmax's step was being traced
    # (then by AutoGraph, which turned it into an AssertionError: exit code 1 and a traceback).
    output = tmp_path / "o"
    assert (
        main(
            [
                "compare",
                str(tiny_npz),
                "--methods",
                "softmax",
                "--max-iterations",
                "2",
                "--num-inducing",
                "5",
                "--output",
                str(output),
                "--no-progress",
                "--seeds",
                "0",
                "--no-tensorboard",
            ]
        )
        == 130
    )
    assert len(ctrl_c_while_tracing) == 3
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"gpflow-augmented: interrupted; the finished results are in {output}/ "
        "(continue with --resume)"
    )
    assert not (output / "seed-0" / "results.json").exists()


def test_ctrl_c_that_comes_out_as_another_error_is_reported_as_an_interrupt(
    tiny_npz, tmp_path, capsys, monkeypatch, ctrl_c_replaced_by_an_error
):
    # An error that keeps no trace of the interrupt (CI met one: exit code 1): the tool knows it
    # by the signal.
    from gpflow_augmented.comparison import cli

    monkeypatch.setattr(cli, "run_comparison", lambda *_, **__: ctrl_c_replaced_by_an_error())
    output = tmp_path / "o"
    command = ["compare", str(tiny_npz), "--methods", "softmax", "--output", str(output)]
    assert main([*command, "--no-progress", "--no-tensorboard"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"gpflow-augmented: interrupted; the finished results are in {output}/ "
        "(continue with --resume)"
    )


def test_a_benchmarks_first_line_is_a_reports_stamp_and_names_datasets_run_elsewhere():
    """benchmark.md opens with the line a report over seeds stamps, then the datasets that ran on
    another machine; re-read (--report-only), it has no total time."""
    from gpflow_augmented.comparison.options import RunOptions

    here = {"processor": "cpu-a", "cpu_count": 2, "probe_ms": 8.0}
    here.update({"tensorflow": "t", "gpflow": "g", "gpflow_augmented": "v"})
    there = {**here, "processor": "cpu-b", "cpu_count": 1}
    payloads = [
        {"dataset": "d1", "created": "2026-01-02T03:04:05", "machine": here},
        {"dataset": "d2", "created": "2026-01-03T03:04:05", "machine": there},
    ]
    line = benchmark._measured(RunOptions(report_only=True), 0.0, payloads)
    assert line == (
        "Measured 2026-01-02 to 2026-01-03 on cpu-a (speed probe 8.0 ms), 2 cores; "
        "gpflow_augmented v, TensorFlow t, GPflow g. d2 ran on cpu-b, 1 core."
    )
    timed = benchmark._measured(RunOptions(), 0.0, payloads[:1])
    assert re.fullmatch(r".*; gpflow_augmented v, TensorFlow t, GPflow g\. Total \d+ s\.", timed)


def test_one_bad_dataset_does_not_sink_a_benchmark(tiny_npz, tmp_path, capsys, monkeypatch):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "good.npz").write_bytes(tiny_npz.read_bytes())
    np.savez(data_dir / "flat.npz", X=np.ones((30, 3)), y=np.arange(30) % 2)
    (data_dir / "empty.npz").write_bytes(b"")
    # softmax: the cheapest method to trace (the step timings trace lsm's and rm's steps anyway)
    options = [
        "--datasets",
        "flat,good,empty",
        "--methods",
        "softmax",
        "--max-iterations",
        "2",
        "--num-inducing",
        "5",
        "--time-budget",
        "0",
        "--output",
        str(tmp_path / "bench"),
        "--no-progress",
        "--seeds",
        "0",
    ]
    # One small size of the isolated step timings (four sizes take most of a minute per run).
    monkeypatch.setattr(benchmark, "_STEP_TIME_SIZES", ((16, 4, 3),))
    # The library assumes no data folder: without --data-dir it is the environment's or none.
    monkeypatch.delenv("GPFLOW_AUGMENTED_DATA", raising=False)
    assert main(["benchmark", *options]) == 2
    assert "pass --data-dir or set GPFLOW_AUGMENTED_DATA" in capsys.readouterr().err
    monkeypatch.setenv("GPFLOW_AUGMENTED_DATA", str(data_dir))
    code = main(["benchmark", *options])
    assert code == 1  # the report is written, and the status says not everything ran
    report = (tmp_path / "bench" / "seed-0" / "benchmark.md").read_text()
    assert "| good | softmax |" in report
    assert "- **flat**: flat: every feature is constant on the training split" in report
    assert "- **empty**: " in report and "(empty file)" in report

    # --report-only re-writes the same table from the results, with their own date and machine
    # (not the day and machine that re-wrote it).
    results_file = tmp_path / "bench" / "seed-0" / "good" / "results.json"
    payload = json.loads(results_file.read_text())
    payload["created"] = "2025-01-02T03:04:05+00:00"
    payload["machine"]["processor"] = "the-measuring-machine"
    results_file.write_text(json.dumps(payload))
    (tmp_path / "bench" / "seed-0" / "benchmark.md").unlink()
    assert main(["benchmark", *options, "--report-only"]) == 1
    rewritten = (tmp_path / "bench" / "seed-0" / "benchmark.md").read_text()
    # The line a report over seeds stamps, without the total time when re-read.
    assert re.fullmatch(
        r"Measured 2025-01-02 on the-measuring-machine( \(speed probe [\d.]+ ms\))?, \d+ cores?; "
        r"gpflow_augmented \S+, TensorFlow \S+, GPflow \S+\.",
        rewritten.splitlines()[0],
    )
    assert rewritten.splitlines()[1:] == report.splitlines()[1:]
    # On a folder with no results it says so, measuring nothing.
    empty = [*options[:-3], "--output", str(tmp_path / "nothing"), "--no-progress"]
    (tmp_path / "nothing").mkdir()
    assert main(["benchmark", *empty, "--report-only"]) == 2
    assert "holds no benchmark results (no <dataset>/results.json)" in capsys.readouterr().err
    assert list((tmp_path / "nothing").iterdir()) == []


def test_a_benchmark_over_seeds_times_the_isolated_steps_once(tiny_npz, tmp_path, monkeypatch):
    """The isolated steps' timings depend on the machine and the code, not the seed: measured
    for the first seed, the next seed's report carries the same table. Measured again for each
    seed (the broken variant), the timer runs twice and the tables differ."""
    calls = []

    def timer(B, M, C, seed=0):
        calls.append(seed)
        return {"cavi": 1e-3 * (1 + seed), "natgrad": 2e-3, "cavi+adam": 3e-3, "natgrad+adam": 4e-3}

    monkeypatch.setattr(benchmark, "step_times", timer)
    monkeypatch.setattr(benchmark, "_STEP_TIME_SIZES", ((16, 4, 3),))
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "tiny.npz").write_bytes(tiny_npz.read_bytes())
    options = ["--data-dir", str(data_dir), "--datasets", "tiny", "--methods", "softmax"]
    options += ["--max-iterations", "1", "--num-inducing", "5", "--time-budget", "0"]
    options += ["--output", str(tmp_path / "bench"), "--no-progress", "--seeds", "0,1"]
    assert main(["benchmark", *options]) == 0
    assert calls == [0]
    rows = [
        [
            line
            for line in (tmp_path / "bench" / f"seed-{seed}" / "benchmark.md")
            .read_text()
            .splitlines()
            if line.startswith("| 16 | 4 | 3 |")
        ]
        for seed in (0, 1)
    ]
    assert rows[0] == rows[1] == ["| 16 | 4 | 3 | 1.00 | 2.00 | 2.00 | 3.00 | 4.00 | 1.33 |"]


def test_a_dataset_whose_process_dies_is_reported_and_the_benchmark_goes_on(
    tiny_npz, tmp_path, monkeypatch
):
    """Each dataset runs in a process of its own; one killed (for memory, say) is not run, in
    words, and the datasets after it still run."""
    import multiprocessing

    real = multiprocessing.context.SpawnProcess.start

    def killed_once(process):
        real(process)
        if process.name.endswith("-first"):
            process.kill()

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for name in ("first", "second"):
        (data_dir / f"{name}.npz").write_bytes(tiny_npz.read_bytes())
    monkeypatch.setattr(multiprocessing.context.SpawnProcess, "start", killed_once)
    monkeypatch.setattr(benchmark, "_STEP_TIME_SIZES", ((16, 4, 3),))
    options = ["--data-dir", str(data_dir), "--datasets", "first,second", "--methods", "softmax"]
    options += ["--max-iterations", "2", "--num-inducing", "5", "--time-budget", "0"]
    options += ["--output", str(tmp_path / "bench"), "--no-progress", "--seeds", "0"]
    assert main(["benchmark", *options]) == 1
    report = (tmp_path / "bench" / "seed-0" / "benchmark.md").read_text()
    assert "- **first**: its process was killed by signal 9 before it finished" in report
    assert "| second | softmax |" in report
    assert not (tmp_path / "bench" / "seed-0" / "first" / "results.json").exists()


def _children(pid):
    """The processes whose parent is ``pid``, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
def test_a_killed_benchmark_leaves_no_dataset_training_on(tiny_npz, tmp_path):
    """Killed outright (not Ctrl-C, which reaches the whole group), the benchmark's dataset
    process ends too."""
    import signal
    import time

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "tiny.npz").write_bytes(tiny_npz.read_bytes())
    command = ["benchmark", "--data-dir", str(data_dir), "--datasets", "tiny", "--methods"]
    command += ["softmax", "--num-inducing", "5", "--time-budget", "300", "--seeds", "0"]
    command += ["--output", str(tmp_path / "bench"), "--no-progress"]
    process = subprocess.Popen(
        [sys.executable, "-m", "gpflow_augmented", *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started = tmp_path / "bench" / "seed-0" / "tiny" / "run.json"  # the dataset's process wrote it
    deadline = time.time() + 300
    while not started.exists() and time.time() < deadline and process.poll() is None:
        time.sleep(0.5)
    assert started.exists(), "the dataset's run never started"
    children = [c for c in _children(process.pid) if "spawn_main" in _command(c)]
    assert children, "no process of the dataset's"
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.time() + 60
    while time.time() < deadline and any(_command(c) for c in children):
        time.sleep(0.2)  # a process that ended has no command line, reaped or not
    alive = [c for c in children if _command(c)]
    for pid in alive:  # not left training for the rest of the test session
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"still running after the benchmark was killed: {alive}"


def _command(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_start_up_is_quiet_unless_verbose():
    """`python -m gpflow_augmented` and the `gpflow-augmented` script print no TensorFlow log
    lines: test_compare_end_to_end checks the one and
    test_ctrl_c_keeps_the_finished_methods_and_resume_completes_the_run the other (its whole error
    output), each from start-up on. --verbose brings the lines back, so those checks can fail.
    (Each of these processes imports TensorFlow anew, about 10 s: they are not repeated here.)"""
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    verbose = subprocess.run(
        [sys.executable, "-m", "gpflow_augmented", "compare", "--help", "--verbose"],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )
    assert verbose.returncode == 0 and "robust-max" in verbose.stdout
    assert TF_LOG_LINE.search(verbose.stderr), verbose.stderr[:2000]


def _write_table(path, delimiter, header=True, label_first=False):
    d = ga.datasets.load_dataset("wine")
    names = np.array(["barolo", "grignolino", "barbera"])
    X = np.vstack([d.X_train[:60], d.X_test[:30]])[:, :4]
    y = names[np.r_[d.Y_train[:60, 0], d.Y_test[:30, 0]]]
    lines = []
    if header:
        columns = [f"f{j}" for j in range(4)]
        lines.append(
            delimiter.join(["cultivar", *columns] if label_first else [*columns, "cultivar"])
        )
    for row, label in zip(X, y):
        cells = [f"{v:.6f}" for v in row]
        lines.append(delimiter.join([label, *cells] if label_first else [*cells, label]))
    path.write_text("\n".join(lines) + "\n")
    return X, y


@pytest.mark.parametrize(
    "suffix, delimiter, header, label_first, label_column",
    [
        (".csv", ",", True, False, None),
        (".tsv", "\t", True, True, "cultivar"),
        (".csv", ",", False, True, "0"),
    ],
)
def test_csv_and_tsv_end_to_end(
    suffix, delimiter, header, label_first, label_column, tmp_path, capsys
):
    path = tmp_path / f"wine{suffix}"
    X, y = _write_table(path, delimiter, header, label_first)
    dataset = load_file(path, label_column=label_column, seed=0)
    assert dataset.class_names == ("barbera", "barolo", "grignolino")
    assert dataset.num_classes == 3 and dataset.X_train.shape[1] == 4
    # labels follow the names, whatever the column order or header
    labels = np.r_[dataset.Y_train[:, 0], dataset.Y_test[:, 0]]
    assert sorted(np.bincount(labels)) == sorted(np.unique(y, return_counts=True)[1])
    # softmax: the cheapest method to trace; what is tested is how the table is read
    argv = [
        "compare",
        str(path),
        "--methods",
        "softmax",
        "--max-iterations",
        "2",
        "--num-inducing",
        "5",
        "--output",
        str(tmp_path / "out"),
        "--no-progress",
        "--no-tensorboard",
    ]
    if label_column is not None:
        argv += ["--label-column", label_column]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "classes: 0=barbera, 1=barolo, 2=grignolino" in out
    # how the first row was read, in the words of the header rule
    assert (
        f"  read: wine{suffix}: the first row read as {'a header (column ' if header else 'data'}"
    ) in out
    assert (
        _strict_json(tmp_path / "out" / "seed-0" / "results.json")["settings"]["num_classes"] == 3
    )


def test_csv_errors_name_the_row_and_column(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("a,b,label\n1.0,2.0,x\n1.5,oops,y\n")
    with pytest.raises(ga.InvalidDataError, match=r"row 3, column 2: 'oops' is not a number"):
        load_file(path)
    with pytest.raises(
        ga.InvalidDataError,
        match=r"no column named 'kind' \(columns a, b, "
        r"label\)",
    ):
        load_file(path, label_column="kind")
    path.write_text("1.0,2.0,x\n1.5,2.5\n")
    with pytest.raises(ga.InvalidDataError, match=r"row 2 has 2 columns, row 1 has 3"):
        load_file(path)


def test_string_class_names_in_from_arrays():
    X = np.random.default_rng(0).normal(size=(30, 2))
    d = ga.datasets.from_arrays("names", X, np.array(["cat", "dog", "emu"] * 10))
    assert d.class_names == ("cat", "dog", "emu") and d.num_classes == 3


def test_an_unwritable_output_is_refused_before_training(tiny_npz, capsys):
    # /sys refuses new folders even to root, so this holds whoever runs the tests.
    assert (
        main(
            [
                "compare",
                str(tiny_npz),
                "--methods",
                "lsm",
                "--max-iterations",
                "1",
                "--output",
                "/sys/gpflow-augmented-test",
                "--no-progress",
                "--seeds",
                "0",
            ]
        )
        == 2
    )
    captured = capsys.readouterr()
    assert "--output /sys/gpflow-augmented-test cannot be written" in captured.err
    assert "lsm " not in captured.out


def test_the_binary_benchmark_reports_tasks_it_cannot_run(tiny_npz, tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "good.npz").write_bytes(tiny_npz.read_bytes())
    code = main(
        [
            "benchmark",
            "--binary",
            "--data-dir",
            str(data_dir),
            "--datasets",
            "good:1,missing:0,good:x",
            "--max-iterations",
            "2",
            "--num-inducing",
            "5",
            "--time-budget",
            "0",
            "--output",
            str(tmp_path / "bench"),
            "--no-progress",
            "--seeds",
            "0",
        ]
    )
    assert code == 1
    report = (tmp_path / "bench" / "seed-0" / "binary.md").read_text()
    assert "| good-1-vs-rest |" in report
    assert "- **missing:0**: no dataset 'missing'" in report
    assert "- **good:x**: binary task 'good:x': the positive class must be an integer" in report


@pytest.mark.parametrize("command", ["compare", "ground-truth"])
def test_an_empty_npz_is_one_error_line_in_compare_and_ground_truth(command, tmp_path, capsys):
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    assert main([command, str(empty), "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gpflow-augmented: error: {empty}: not a readable .npz file (empty file)"]


def test_negative_trace_test_points_are_refused(capsys):
    assert main(["compare", "--trace-test-points=-1"]) == 2
    assert "argument --trace-test-points: must be an integer ≥ 1, got '-1'" in (
        capsys.readouterr().err
    )


def test_a_resumed_run_warns_before_training_when_its_kept_runs_came_from_another_speed(
    tmp_path, capsys
):
    from gpflow_augmented.comparison.cli import _warn_of_another_machine
    from gpflow_augmented.comparison.options import RunOptions
    from gpflow_augmented.comparison.runs import machine

    here = machine()
    kept = tmp_path / "seed-0" / "results.json"
    kept.parent.mkdir()
    resumed = RunOptions(resume=True, time_budget=40.0)
    for probe, warned in ((here["probe_ms"], False), (100 * here["probe_ms"], True)):
        kept.write_text(json.dumps({"machine": dict(here, probe_ms=probe)}))
        _warn_of_another_machine(tmp_path, resumed)
        err = capsys.readouterr().err
        assert ("warning: " in err and "more than 2x apart" in err) == warned, err
    # Another machine's runs report beside this one's, named; other versions do not.
    kept.write_text(json.dumps({"machine": dict(here, processor="another-cpu", cpu_count=1)}))
    _warn_of_another_machine(tmp_path, resumed)
    assert "come from another machine (another-cpu, 1 core)" in capsys.readouterr().err
    # Runs of this machine and another, resumed here: the other one is named, not this one.
    also = tmp_path / "seed-1" / "results.json"
    also.parent.mkdir()
    also.write_text(json.dumps({"machine": here}))
    _warn_of_another_machine(tmp_path, resumed)
    err = capsys.readouterr().err
    assert f"machine (another-cpu, 1 core) than this one ({here['processor']}, " in err, err
    also.unlink()
    kept.write_text(json.dumps({"machine": dict(here, tensorflow="0.1")}))
    _warn_of_another_machine(tmp_path, resumed)
    assert "different versions (tensorflow: " in capsys.readouterr().err
    kept.write_text(json.dumps({"machine": dict(here, probe_ms=100 * here["probe_ms"])}))
    # A run bounded by steps, or one not resumed, has nothing to warn of.
    _warn_of_another_machine(tmp_path, RunOptions(resume=True, time_budget=None, max_iterations=5))
    _warn_of_another_machine(tmp_path, RunOptions(resume=False, time_budget=40.0))
    assert capsys.readouterr().err == ""
