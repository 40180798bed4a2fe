"""The package's own export of its compiled iteration (issue 35): every input of the step is a
parameter of the module, nothing the step reads is frozen into it, a jit-compiled Trainer traces its
step once, and another XLA client (jaxlib's, through ../shared/tools/xla-gpu/run_hlo.py) reproduces
TensorFlow's step, and a part of the step exported on its own, from the files."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.likelihoods import expectation
from gpflow_augmented.updates import mean_and_sqrt
from benchmarks.__main__ import main
from benchmarks.hlo_export import (
    _check_module,
    export_function,
    export_steps,
    module_key,
    opcodes,
    synthetic_method,
)

# The integration tier (the exported step, run by another XLA client in a subprocess): run by --slow
# or -m integration.
pytestmark = pytest.mark.integration

SIZE = (24, 6, 3, 2)  # B, M, C, D
METHODS = ("lsm", "lsm-negative-multinomial", "softmax", "rm")
RUN_HLO = Path(
    os.environ.get(
        "GPFLOW_AUGMENTED_RUN_HLO",
        Path(__file__).resolve().parents[3] / "shared" / "tools" / "xla-gpu" / "run_hlo.py",
    )
)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hlo")
    return folder, export_steps(str(folder), [SIZE], METHODS, ["float64"])


def test_every_input_of_the_step_is_a_parameter_and_the_step_moves_its_state(exported):
    folder, manifest = exported
    assert set(manifest) == {module_key(name, SIZE, "float64") for name in METHODS}
    assert json.loads((folder / "manifest.json").read_text()) == manifest
    for key, entry in manifest.items():
        hlo = gzip.open(folder / f"{key}.hlo.pb.gz").read()
        assert len(hlo) > 1000, key
        # run_hlo.py reads the method from the entry (softmax's random step has no reference).
        assert module_key(entry["method"], entry["size"], entry["dtype"]) == key
        arrays = np.load(folder / f"{key}.npz")
        names = [parameter["name"] for parameter in entry["params"]]
        assert names[:2] == ["X", "Y"]
        # X and Z are regenerated from their seeds by the reader, not stored.
        regenerated = [p for p in entry["params"] if p["source"] == "normal"]
        assert len(regenerated) == 2, (key, names)
        for index, parameter in enumerate(entry["params"]):
            if parameter["source"] == "npz":
                assert list(arrays[f"arg_{index}"].shape) == parameter["shape"], (key, parameter)
        # Two steps from the prior change q(u) and the kernel (the second step's kernel gradient
        # is not zero), and each is a parameter of the module under its place in the model.
        changed = " ".join(entry["changed_variables"])
        for path in (".q_mu ", ".q_sqrt ", ".kernel.lengthscales "):
            assert path in changed, (key, path, changed)


def test_a_module_that_would_freeze_a_variable_is_refused():
    header = (
        "HloModule step, entry_computation_layout={(f64[4,2]{1,0}, s64[4,1]{1,0})->"
        "(f64[], pred[])}\n"
    )
    _check_module(header, 2)
    with pytest.raises(RuntimeError, match="2 parameters for 3 inputs"):
        _check_module(header, 3)
    baked = header + (
        '  %c = f64[6,2]{1,0} constant({...}), metadata={op_type="ReadVariableOp" op_name="read"}\n'
    )
    with pytest.raises(RuntimeError, match="1 variable reads compiled in as constants"):
        _check_module(baked, 2)


def test_a_jit_compiled_trainer_traces_once_and_reads_its_variables_at_every_step():
    """Issue 35 asked whether a user's Trainer(jit_compile=True) retraces for every minibatch or
    holds stale values once the fused expectation has seen other shapes in the process. It does
    neither: one trace over minibatches of one size, and every variable a parameter."""
    rng = np.random.default_rng(0)
    C, M, D, N, B = 3, 6, 2, 60, 12
    X = rng.standard_normal((N, D))
    Y = rng.integers(0, C, (N, 1)).astype(np.int64)
    # Other shapes first, as a process that evaluated or trained on another batch size would.
    for rows in (5, 7):
        expectation.expected_log_logistic_softmax(
            tf.zeros((rows, C), tf.float64),
            tf.ones((rows, C), tf.float64),
            tf.one_hot(tf.zeros(rows, tf.int64), C, dtype=tf.float64),
        )
    model = ga.LogisticSoftmaxSVGP(gpflow.kernels.SquaredExponential(), X[:M].copy(), C, num_data=N)
    trainer = ga.Trainer(model, ga.RobbinsMonro(), jit_compile=True)
    for start in range(0, N, B):
        trainer.step((X[start : start + B], Y[start : start + B]))
    assert trainer._iteration.experimental_get_tracing_count() == 1
    args = (tf.constant(X[:B]), tf.constant(Y[:B]))
    concrete = trainer._iteration.get_concrete_function(*args)
    hlo = trainer._iteration.experimental_get_compiler_ir(*args)(stage="hlo")
    _check_module(hlo, len(args) + len(concrete.captured_inputs))


@pytest.mark.parametrize(
    "name, conditionals, loops, factorisations, solves",
    [
        # The warm start's choice of sites; loops: the backoff's, the line search's and the
        # backoff's again inside the search's halving. Factorisations: K_uu, the step, the trust
        # region, the two of the backoff's retry and the mean's (ExactBound.mean_sites), then
        # the same five in the halving, and the averaged q(u)'s covariance after the step.
        # Solves: the projection and its gradient, the current natural parameters once (not
        # again in the retry), the step's inverse, the retry's and the mean's two; in the
        # halving the last five again.
        ("lsm", 1, 3, 12, 13),
        # K_uu for the step and for the hyperparameters' loss after it; the step and its retry:
        # no trust region, whose sites are never negative, and no search: an augmented step
        # ascends its bound at any ρ.
        ("lsm-negative-multinomial", 0, 1, 4, 7),
        ("softmax", 0, 0, 1, 3),
    ],
)
def test_the_compiled_iteration_reads_no_predicate_it_does_not_need(
    name, conditionals, loops, factorisations, solves
):
    """XLA on a GPU reads each conditional's predicate on the host (issue 35). The minibatch
    iteration keeps only the conditional that picks the warm start's sites, the backoff's while
    loop and the line search's; Adam's finite-step guard, the Trainer's status test, the trust
    region and the search's predicate are selects. A tf.cond put back in any of them, or the
    trust region's factorisation traced where its sites cannot be negative, changes these
    counts."""
    method, args, _, _ = synthetic_method(name, SIZE, "float64")
    compiled = tf.function(method.iteration_function(), jit_compile=True, autograph=False)
    codes = opcodes(compiled.experimental_get_compiler_ir(*args)(stage="hlo"))
    assert codes.count("conditional") == conditionals
    assert codes.count("while") == loops
    assert codes.count("cholesky") == factorisations
    assert codes.count("triangular-solve") == solves


def test_export_command_refuses_bad_options_in_one_line(tmp_path, capsys):
    assert main(["export-hlo", str(tmp_path), "--sizes", "24,6,3"]) == 2
    assert "--sizes takes B,M,C,D groups" in capsys.readouterr().err
    assert main(["export-hlo", str(tmp_path), "--methods", "lsm,nope"]) == 2
    assert "unknown method 'nope'; choose from lsm," in capsys.readouterr().err
    # A full GP's step holds its training set, not a batch: not exportable.
    assert main(["export-hlo", str(tmp_path), "--methods", "rmgpc"]) == 2
    assert "unknown method 'rmgpc'" in capsys.readouterr().err
    assert main(["export-hlo", str(tmp_path), "--methods", "lsm,lsm"]) == 2
    assert "--methods names 'lsm' twice" in capsys.readouterr().err
    assert main(["scale", "--dtypes", "float32"]) == 2
    assert "unrecognized arguments: --dtypes" in capsys.readouterr().err
    assert main(["export-hlo", str(tmp_path), "--dtypes", "float16"]) == 2
    assert "--dtypes takes float64 and/or float32" in capsys.readouterr().err
    assert not (tmp_path / "manifest.json").exists()
    # An existing file is not a folder (it was a FileExistsError traceback; issue 57, item 15).
    (tmp_path / "file").write_text("")
    assert main(["export-hlo", str(tmp_path / "file")]) == 2
    assert "is a file; export-hlo writes a folder" in capsys.readouterr().err


def test_export_reports_this_runs_modules_only(tmp_path, capsys):
    """An earlier run's failure in the folder's manifest was printed again, with exit status 1
    (issue 57, item 28)."""
    stale = {"lsm_B9_M9_C9_D9_float64": {"key": "lsm_B9_M9_C9_D9_float64", "error": "old"}}
    (tmp_path / "manifest.json").write_text(json.dumps(stale))
    argv = ["export-hlo", str(tmp_path), "--sizes", "24,6,3,2", "--methods", "lsm"]
    assert main([*argv, "--dtypes", "float64"]) == 0
    out, err = capsys.readouterr()
    assert "lsm_B9" not in err and "1 modules (2 in manifest.json)" in out


def _python_with_jaxlib():
    """jaxlib 0.11 needs Python 3.12 or newer, so it usually lives in an environment of its own:
    GPFLOW_AUGMENTED_JAX_PYTHON, else ../jaxenv beside the checkout (the xla-gpu tool's README),
    else this Python."""
    candidates = [
        os.environ.get("GPFLOW_AUGMENTED_JAX_PYTHON"),
        Path(__file__).resolve().parents[3] / "jaxenv" / "bin" / "python",
        sys.executable,
    ]
    for candidate in candidates:
        if (
            candidate
            and Path(candidate).exists()
            and subprocess.run(
                [str(candidate), "-c", "import jaxlib"], capture_output=True
            ).returncode
            == 0
        ):
            return str(candidate)
    return None


def _jaxlib_runner():
    """The Python that runs RUN_HLO. These tests run only when asked for (``-m jax``), so a
    missing one is a failure, never a skip."""
    python = _python_with_jaxlib()
    if python is None:
        pytest.fail("no Python with jaxlib (set GPFLOW_AUGMENTED_JAX_PYTHON to one)")
    if not RUN_HLO.exists():
        pytest.fail(f"{RUN_HLO} not found (set GPFLOW_AUGMENTED_RUN_HLO)")
    return python


@pytest.mark.jax
def test_another_xla_client_reproduces_tensorflows_step_from_the_files(exported, tmp_path):
    """The check the issue asks for, on this CPU: jaxlib's XLA compiles each module and runs it
    from the exported state for the reference's two steps. float64 results agree with
    TensorFlow's graph-mode step to rounding (XLA's CPU kernels and TensorFlow's differ in
    summation order and fusion, ~1e-13 relative; 1e-9 still fails any wrong input order, a stale
    variable or a missing step, which are errors of order 1). softmax draws its Monte Carlo
    samples with TensorFlow's stateful generator, which XLA seeds otherwise: only finite there.
    float32 is not compared: its rounding differs by up to 1e-3 (measured on this CPU)."""
    python = _jaxlib_runner()
    folder, manifest = exported

    def run_hlo(artifacts, keys=""):
        out = tmp_path / "cpu.json"
        subprocess.run(
            [
                python,
                str(RUN_HLO),
                "--platform",
                "cpu",
                "--artifacts",
                str(artifacts),
                "--keys",
                keys,
                "--warmup",
                "0",
                "--repeats",
                "2",
                "--out",
                str(out),
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
        return {r["key"]: r for r in json.loads(out.read_text())["results"]}

    results = run_hlo(folder)
    assert set(results) == set(manifest)
    for key, result in results.items():
        assert "error" not in result, (key, result.get("error"))
        assert result["regenerated_inputs_match"] and result["finite"] and result["finite_after"]
        assert result["aliased_outputs"] >= 3, key  # the step writes its state back
        if not key.startswith("softmax"):
            groups = result["rel_err_groups"]
            assert max(groups["q"], groups["hyper"], groups["returns"]) < 1e-9, (key, groups)
            # Adam's moments hold the hyperparameters' gradients of the first steps, which are
            # nearly zero (exactly zero at the prior) and so mostly rounding: relative to their
            # own tiny size, TF and XLA differ by up to 2e-8 in rm's (measured). A wrong input
            # would still be off by order 1.
            assert groups["adam"] < 1e-6, (key, groups)

    # The check has teeth: the same lsm module given other labels than the reference's.
    key = module_key("lsm", SIZE, "float64")
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    arrays = dict(np.load(broken / f"{key}.npz"))
    arrays["arg_1"] = (arrays["arg_1"] + 1) % SIZE[2]
    np.savez_compressed(broken / f"{key}.npz", **arrays)
    assert run_hlo(broken, key)[key]["max_rel_err_vs_tf"] > 1e-3


@pytest.mark.jax
def test_a_part_of_the_step_exported_on_its_own_is_reproduced_from_its_files(tmp_path):
    """``export_function`` writes a stateless part of the step (here q(v)'s mean and square root
    from a precision, which tools/step_parts.py times on a device) in the same layout, its inputs
    regenerated by the reader from their seeds: jaxlib's XLA reproduces TensorFlow's outputs to
    rounding (1e-12: a 5 x 5 factorisation in float64), and the module of another function (the
    shift's sign flipped) fails the same reference."""
    python = _jaxlib_runner()

    def part(draw, shift):
        return mean_and_sqrt(
            4.0 * tf.eye(5, dtype=draw.dtype) + 0.2 * (draw + tf.transpose(draw, [0, 2, 1])), shift
        )

    def wrong_part(draw, shift):
        return part(draw, -shift)

    size, shapes = (7, 5, 2, 1), [(2, 5, 5), (5, 2)]
    entry = export_function("mean-and-sqrt", size, "float64", part, shapes, tmp_path, seed=11)
    (tmp_path / "manifest.json").write_text(json.dumps({entry["key"]: entry}))
    assert [p["source"] for p in entry["params"]] == ["normal", "normal"]

    def largest_difference():
        out = tmp_path / "cpu.json"
        subprocess.run(
            [python, str(RUN_HLO), "--platform", "cpu", "--artifacts", str(tmp_path)]
            + ["--warmup", "0", "--repeats", "1", "--out", str(out)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        (result,) = json.loads(out.read_text())["results"]
        assert "error" not in result and result["regenerated_inputs_match"], result
        assert result["finite"], result
        return result["max_rel_err_vs_tf"]

    assert largest_difference() < 1e-12
    other = tmp_path / "other"
    other.mkdir()
    export_function("mean-and-sqrt", size, "float64", wrong_part, shapes, other, seed=11)
    module = f"{entry['key']}.hlo.pb.gz"
    shutil.copy(other / module, tmp_path / module)
    assert largest_difference() > 1e-3
