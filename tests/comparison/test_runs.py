"""A run's output folder: two runs started into it at once, a resume after its data changed, and
files in it that are no longer readable. Each refusal names the problem and leaves the run as it
was."""

import multiprocessing

import numpy as np
import pytest

from gpflow_augmented.comparison.cli import main
from gpflow_augmented.comparison.runs import LOCK_FILE, prepare_output, release_output

# The integration tier (output folders written by concurrent processes): run by --slow or -m
# integration.
pytestmark = pytest.mark.integration


def _write_table(path, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 2))
    y = np.digitize(X[:, 0], [-0.4, 0.4])
    path.write_text("x1,x2,label\n" + "".join(f"{a:.6f},{b:.6f},{c}\n" for (a, b), c in zip(X, y)))
    return path


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished two-step softmax run on a CSV with a separate test file, and its seed's folder."""
    folder = tmp_path_factory.mktemp("run")
    train, test = _write_table(folder / "train.csv", 0), _write_table(folder / "test.csv", 1)
    output = folder / "out"
    argv = [
        "compare",
        str(train),
        "--test-file",
        str(test),
        "--methods",
        "softmax",
        "--max-iterations",
        "2",
        "--num-inducing",
        "5",
        "--output",
        str(output),
        "--no-progress",
        "--no-tensorboard",
        "--seeds",
        "0",
    ]
    assert main(argv) == 0
    return argv, train, test, output / "seed-0"


def _snapshot(output):
    return {
        path.relative_to(output): path.read_bytes()
        for path in sorted(output.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize("rewritten", ["train", "test"])
def test_resume_after_the_data_file_was_rewritten_is_refused_by_name(
    finished_run, rewritten, capsys
):
    argv, train, test, output = finished_run
    path = train if rewritten == "train" else test
    original = path.read_bytes()
    before = _snapshot(output)
    _write_table(path, 7)  # same name, same number of rows, other contents
    try:
        assert main([*argv, "--resume"]) == 2
    finally:
        path.write_bytes(original)
    error = capsys.readouterr().err.strip()
    assert error.startswith(
        f"gpflow-augmented: error: --resume: {path} has changed since the run in {output} began"
    )
    assert _snapshot(output) == before


@pytest.mark.parametrize("damaged", ["run.json", "methods/softmax.json"])
def test_an_unreadable_run_file_is_named(finished_run, damaged, capsys):
    argv, _, _, output = finished_run
    path = output / damaged
    original = path.read_bytes()
    path.write_text('{"methods": ["softm')
    try:
        assert main([*argv, "--resume"]) == 2
    finally:
        path.write_bytes(original)
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"gpflow-augmented: error: {path} is not readable JSON")


@pytest.mark.parametrize("damage", ["truncated", "not probabilities"])
def test_an_unreadable_probabilities_file_is_named(finished_run, damage, capsys):
    argv, _, _, output = finished_run
    path = output / "methods" / "softmax.npy"
    original = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(original[: len(original) // 2])
    else:
        np.save(path, np.arange(3))
    before = _snapshot(output)
    try:
        assert main([*argv, "--resume"]) == 2
        assert _snapshot(output) == before
    finally:
        path.write_bytes(original)
    error = capsys.readouterr().err.strip()
    expected = "is not a readable .npy file" if damage == "truncated" else "holds a int64 array"
    assert error.startswith(f"gpflow-augmented: error: {path} {expected}"), error


def _start(folder, explicit, barrier, results):
    barrier.wait()
    try:
        claimed = prepare_output(folder, resume=False, overwrite=False, explicit=explicit)
        results.put(("ran", str(claimed)))
    except ValueError as error:
        results.put(("refused", str(error)))
    barrier.wait()  # hold the claim until the other process has tried too


@pytest.mark.parametrize("explicit", [True, False])
def test_two_runs_started_at_once_into_one_folder(explicit, tmp_path):
    """Both processes pass the barrier together, so both check the empty folder in the same
    instant: without an exclusive claim both would go on and write one run over the other."""
    context = multiprocessing.get_context("fork")  # the children run no TensorFlow
    for attempt in range(10):
        folder = tmp_path / f"attempt{attempt}"
        barrier, results = context.Barrier(2), context.Queue()
        processes = [
            context.Process(target=_start, args=(folder, explicit, barrier, results))
            for _ in range(2)
        ]
        for process in processes:
            process.start()
        outcomes = sorted(results.get(timeout=60) for _ in processes)
        for process in processes:
            process.join(timeout=60)
        if explicit:  # the folder the user named: one runs, the other is told why it cannot
            assert [kind for kind, _ in outcomes] == ["ran", "refused"]
            # "(process N)", or "(a process)" if the winner had not yet written its id
            assert outcomes[1][1].startswith(f"--output {folder} is being written by another run (")
        else:  # the default folder: the second run moves on to the next free name
            assert outcomes == [("ran", str(folder)), ("ran", f"{folder}-2")]


def test_a_claim_is_given_back_and_a_dead_runs_claim_is_taken_over(tmp_path):
    folder = prepare_output(tmp_path / "out", resume=False, overwrite=False, explicit=True)
    with pytest.raises(ValueError, match="is being written by another run"):
        prepare_output(folder, resume=True, overwrite=False, explicit=True)
    release_output(folder)
    assert not (folder / LOCK_FILE).exists()
    # a run killed before it could give the folder back: its process no longer exists
    dead = multiprocessing.get_context("fork").Process(target=lambda: None)
    dead.start()
    dead.join()
    (folder / LOCK_FILE).write_text(str(dead.pid))
    assert prepare_output(folder, resume=True, overwrite=False, explicit=True) == folder
    release_output(folder)
