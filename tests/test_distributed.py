"""Data-parallel CAVI under tf.distribute equals the single-process run to float64 round-off:
MirroredStrategy on two logical CPU devices (the script runs in a subprocess, which splits the CPU
before TensorFlow initialises it), and MultiWorkerMirroredStrategy across two processes on
127.0.0.1."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from gpflow_augmented.bounds import ExactBound
from gpflow_augmented.distributed import free_local_ports

# The integration tier (two logical devices in a subprocess): run by --slow or -m integration.
pytestmark = pytest.mark.integration

# Each config costs two traces of the training step (most of this test's time), so none repeats
# another's path: minibatches (RobbinsMonro ρ, the N/B scale) run in the first and the last, and
# all classes with the kernel variance in closed form in the full-batch one, whose statistics are
# the same replica sums (a separate minibatch run of all classes added no path of its own).
CONFIGS = [
    # minibatches, class subsets (the scatter of q(u) into mirrored variables), the Gamma–Poisson
    # family, Adam on the kernel
    {"steps": 6, "batch_size": 40, "class_subset_size": 3, "scheme": "gamma-poisson"},
    # full-batch CAVI (ρ = 1) split over the replicas, all classes, the kernel variance in closed
    # form
    {"steps": 3, "batch_size": None, "class_subset_size": None, "scheme": "negative-multinomial"},
    # the exact-bound step: its sites are per point, its statistics summed like the augmented ones
    {"steps": 6, "batch_size": 40, "class_subset_size": 3, "scheme": "exact"},
    # all classes on minibatches with the averaged q(u): the iterate kept aside and the average
    # written into mirrored variables, the kernel variance in closed form
    {"steps": 6, "batch_size": 40, "class_subset_size": None, "scheme": "exact", "averaging": 10.0},
]


def test_mirrored_strategy_equals_single_device():
    script = Path(__file__).with_name("distributed_replicas.py")
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    completed = subprocess.run(
        [sys.executable, str(script), json.dumps(CONFIGS)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    output = json.loads(completed.stdout.strip().splitlines()[-1])
    # The model's ELBO means the same in a replica as outside one (the loop does the reduction):
    # a replica that returned its share of the batch would differ by about half.
    assert output["elbo_in_replica"] < 1e-12
    results = output["runs"]
    for config, result in zip(CONFIGS, results):
        print(config, result)
        assert result["replicas"] == 2
        assert result["iteration"] == config["steps"]
        assert result["moved"] > 0.1  # q(u) left its N(0, I) start, so equality is not vacuous
        # the kernel variance is CAVI's, in closed form, wherever there are no class subsets
        assert result["closed_form_variance"] == (config["class_subset_size"] is None)
        # q_mu, q_sqrt, Z, lengthscales, variance and the ELBO trace. Observed ≤ 2e-13: the shards'
        # sums are added in another order, and the M×M solves amplify that round-off by their
        # condition number. A missing all-reduce or a wrong batch scale differs at 1e-2 or more.
        assert len(result["differences"]) == 6
        for name, difference in result["differences"].items():
            assert difference < 1e-10, (config, name, difference)


def replicas_script(*arguments):
    """The JSON that tests/distributed_replicas.py prints for ``arguments``."""
    script = Path(__file__).with_name("distributed_replicas.py")
    completed = subprocess.run(
        [sys.executable, str(script), *arguments],
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_the_line_search_halves_under_a_strategy_as_on_one_device():
    """Under MirroredStrategy the step whose batch bound falls is taken again with ρ halved, and
    ends where one device's search loop does: 12 of 40 steps shortened on both (measured), q(u)
    and σ² equal to 1e-11 (the shards' sums in another order). Without the search under a
    strategy (the broken variant) nothing is shortened and q(u) differs by 1.4
    (measured)."""
    output = replicas_script("line-search")
    single, replicated = output["shortened"]
    assert single >= 5  # the search had work to do, so the equality is not vacuous
    assert replicated == single
    assert output["difference"] < 1e-8


def test_two_workers_on_disjoint_halves_equal_one_process_on_the_whole_batch(tmp_path):
    """Two processes under MultiWorkerMirroredStrategy, each given its own half of every global
    batch, train the exact-bound and the augmented (negative-multinomial) model by Trainer, by
    CAVI alone (its update in strategy.run), and by fit (tf.data shards its minibatches across the
    workers); their q(u), hyperparameters, counters and fit's ELBO trace equal one process's on the
    whole batches, and each other's."""
    script = Path(__file__).with_name("multi_worker.py")
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    ports = ",".join(str(port) for port in free_local_ports(2))
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), str(index), ports, str(tmp_path / f"worker{index}.npz")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
        )
        for index in range(2)
    ]
    single = subprocess.run(
        [sys.executable, str(script), "0", "0", str(tmp_path / "single.npz")],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert single.returncode == 0, single.stderr[-3000:]
    _finish(workers)
    expected = np.load(tmp_path / "single.npz")
    results = [np.load(tmp_path / f"worker{index}.npz") for index in range(2)]
    for scheme in ("exact", "negative-multinomial", "fit", "cavi"):
        assert expected[f"{scheme}/iteration"] == 5
        assert np.max(np.abs(expected[f"{scheme}/.q_mu"])) > 0.1  # q(u) moved: not vacuous
        assert len([name for name in expected.files if name.startswith(scheme)]) >= 6
    assert expected["local_batch"] == 60
    assert [int(result["local_batch"]) for result in results] == [30, 30]
    for name in expected.files:
        if name == "local_batch":
            continue
        for result in results:
            # Observed ≤ 1.1e-14 (values up to 5): the halves' sums are added in another order.
            np.testing.assert_allclose(result[name], expected[name], rtol=0, atol=1e-10)
        # The workers apply the same all-reduced update: bit-identical.
        np.testing.assert_array_equal(results[0][name], results[1][name])


def test_the_example_launches_two_workers_and_reports_the_step(tmp_path):
    """The documented command: two workers on 127.0.0.1 train the bundled vehicle data; the chief
    reports the step time and what each step all-reduced, O(C M²) bytes."""
    script = Path(__file__).parents[1] / "examples" / "multi_worker.py"
    completed = subprocess.run(
        [
            sys.executable,
            str(script),
            "--workers",
            "2",
            "--iterations",
            "8",
            "--num-inducing",
            "10",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        cwd=tmp_path,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "vehicle: 2 worker(s), 8 steps of a global batch of 200" in completed.stdout
    reduced = [line for line in completed.stdout.splitlines() if line.startswith("all-reduced")]
    assert len(reduced) == 1, completed.stdout
    # The statistics Λ̂ [C, M, M] in float64 (C = 4, M = 10: 3,200 bytes) twice, the
    # covariance's and the mean's (ExactBound.mean_sites), each over all the batch's points and,
    # with label strata, over each class's own; plus η̂ [C, M] as often and the hyperparameters'
    # gradients: more than that many C M², far less than one more.
    copies = 2 * (2 if ExactBound.label_strata else 1)
    total = int(reduced[0].split()[3])
    assert copies * 3200 < total < (copies + 1) * 3200, reduced[0]


def _start_workers(script, ports, options):
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    workers = []
    for index in range(len(ports)):
        config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_CONFIG=json.dumps(config))
        workers.append(
            subprocess.Popen(
                [sys.executable, str(script), "--worker", *options],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environment,
            )
        )
    return workers


def _finish(workers):
    outputs = []
    for worker in workers:
        try:
            stdout, stderr = worker.communicate(timeout=300)
        finally:
            worker.kill()
        assert worker.returncode == 0, stderr[-3000:]
        outputs.append(stdout)
    return outputs


def test_a_worker_killed_mid_run_loses_nothing_before_the_last_checkpoint(tmp_path):
    """Two workers checkpoint every 50 steps (the chief writes); one is SIGKILLed after the first
    checkpoint and the job is stopped. Started again on the same folder, the job resumes from the
    chief's latest checkpoint, continues the same minibatch stream and ends where an uninterrupted
    job ends, bit for bit (the same reductions in the same order)."""
    script = Path(__file__).parents[1] / "examples" / "multi_worker.py"
    options = ["--iterations", "200", "--num-inducing", "10", "--checkpoint-every", "50"]
    whole = tmp_path / "whole.npz"
    _finish(
        _start_workers(
            script,
            free_local_ports(2),
            [*options, "--checkpoint-dir", str(tmp_path / "a"), "--save-parameters", str(whole)],
        )
    )
    folder = tmp_path / "b"
    interrupted = [*options, "--checkpoint-dir", str(folder)]
    workers = _start_workers(script, free_local_ports(2), interrupted)
    try:
        deadline = time.monotonic() + 240
        # The chief writes ckpt-50's files before the folder's state file that names it, and a
        # restart reads the state file, so a kill between the two would leave nothing to resume.
        while tf.train.latest_checkpoint(str(folder)) is None:
            assert time.monotonic() < deadline, "no checkpoint written"
            assert all(worker.poll() is None for worker in workers), "a worker ended early"
            time.sleep(0.05)
        workers[1].send_signal(signal.SIGKILL)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    resumed = tmp_path / "resumed.npz"
    outputs = _finish(
        _start_workers(
            script, free_local_ports(2), [*interrupted, "--save-parameters", str(resumed)]
        )
    )
    assert "resumed at step" in outputs[0]
    resumed_at = int(outputs[0].split("resumed at step ")[1].split()[0])
    assert 50 <= resumed_at < 200
    expected, result = np.load(whole), np.load(resumed)
    assert int(result["iteration"]) == 200
    for name in expected.files:
        np.testing.assert_array_equal(result[name], expected[name], err_msg=name)


@pytest.mark.integration
def test_the_example_refuses_a_worker_count_below_one_in_one_line():
    """--workers 0 or -1 is refused by name, not with ``max() arg is an empty sequence``."""
    script = Path(__file__).parents[1] / "examples" / "multi_worker.py"
    for workers in ("0", "-1", "two"):
        completed = subprocess.run(
            [sys.executable, str(script), "--workers", workers],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert completed.returncode == 2
        assert f"argument --workers: must be an integer ≥ 1, got '{workers}'" in completed.stderr
        assert "Traceback" not in completed.stderr


@pytest.mark.integration
def test_a_worker_without_tf_config_is_refused_not_trained_alone():
    """``--worker`` with TF_CONFIG unset is refused, not trained alone as if it were the job."""
    script = Path(__file__).parents[1] / "examples" / "multi_worker.py"
    environment = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    completed = subprocess.run(
        [sys.executable, str(script), "--worker", "--iterations", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**environment, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert completed.returncode == 2
    assert "error: TF_CONFIG is not set" in completed.stderr
    assert "Traceback" not in completed.stderr and "steps" not in completed.stdout


@pytest.mark.integration
def test_a_finished_job_says_so_when_started_again(tmp_path):
    """Starting a checkpointed job again with --iterations at or below the steps done says that
    the job is finished, not "iterations must be an integer ≥ 1, got -2"."""
    script = Path(__file__).parents[1] / "examples" / "multi_worker.py"

    def run(iterations):
        argv = [sys.executable, str(script), "--workers", "1", "--iterations", str(iterations)]
        argv += ["--num-inducing", "10", "--checkpoint-dir", str(tmp_path / "job")]
        argv += ["--checkpoint-every", "2"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300)

    assert run(4).returncode == 0
    for iterations in (4, 2):
        completed = run(iterations)
        assert completed.returncode == 0, completed.stderr[-2000:]
        assert "is finished: 4 steps done" in completed.stdout
        assert "Traceback" not in completed.stderr


def _launcher_module():
    import importlib.util

    path = Path(__file__).parents[1] / "examples" / "multi_worker.py"
    spec = importlib.util.spec_from_file_location("multi_worker_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.integration
def test_the_launcher_stops_the_others_when_a_worker_fails_or_dies(capsys):
    """When a worker dies (a taken port, SIGKILL), the launcher stops the rest at once, SIGKILL
    for one that ignores SIGTERM, and says which died: the others would wait for it for good."""
    launcher = _launcher_module()
    deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    workers = [
        subprocess.Popen([sys.executable, "-c", deaf]),
        subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"]),
    ]
    start = time.monotonic()
    assert launcher.wait_for(workers, "ckpt") == 3
    assert time.monotonic() - start < 30
    assert workers[0].returncode == -signal.SIGKILL
    err = capsys.readouterr().err
    assert "worker 1 failed (exit status 3); the other workers were stopped" in err
    assert "run the same command again to resume from ckpt" in err
    workers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])]
    workers.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
    workers[1].kill()
    assert launcher.wait_for(workers, None) == 1
    assert "worker 1 was killed (signal 9)" in capsys.readouterr().err
    assert workers[0].returncode is not None


@pytest.mark.integration
def test_ctrl_c_on_the_launcher_stops_the_workers_in_one_line(tmp_path):
    """Ctrl-C on the launcher stops every worker with it and prints one line, not a
    KeyboardInterrupt traceback per process."""
    script = Path(__file__).parents[1] / "examples" / "multi_worker.py"
    # A shell runs a background job (`.ci/run &`) with SIGINT ignored, which Python keeps; Ctrl-C at
    # a terminal reaches a launcher with the default disposition.
    launcher = subprocess.Popen(
        [sys.executable, str(script), "--workers", "2", "--iterations", "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    children = []
    try:
        deadline = time.monotonic() + 60
        while len(children) < 2:
            assert time.monotonic() < deadline, "the workers did not start"
            listed = subprocess.run(
                ["pgrep", "-P", str(launcher.pid)], capture_output=True, text=True
            )
            children = [int(pid) for pid in listed.stdout.split()]
            time.sleep(0.2)
        time.sleep(5)  # into TensorFlow's start-up or the first steps
        launcher.send_signal(signal.SIGINT)
        _, err = launcher.communicate(timeout=30)
        assert launcher.returncode == 130
        assert err.strip().splitlines()[-1].endswith("interrupted; the workers were stopped")
        assert "Traceback" not in err
        for pid in children:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        # A failure must not leave two workers training 100,000 steps beside the other tests:
        # each leads a session of its own, and its training child dies with it.
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        launcher.kill()


@pytest.mark.integration
def test_a_worker_waiting_for_its_cluster_answers_signals_and_gives_up_in_time():
    """A worker whose other workers never come answers SIGTERM and SIGINT while it waits, and
    gives up after its timeout."""
    script = Path(__file__).parents[1] / "examples" / "multi_worker.py"
    ports = free_local_ports(2)
    config = {
        "cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
        "task": {"type": "worker", "index": 0},
    }
    environment = {**os.environ, "TF_CONFIG": json.dumps(config), "TF_CPP_MIN_LOG_LEVEL": "3"}

    def lone_worker(*options):
        argv = [sys.executable, str(script), "--worker", "--iterations", "5", *options]
        return subprocess.Popen(
            argv, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    waiting = lone_worker()
    time.sleep(15)  # TensorFlow started and waits for worker 1
    waiting.send_signal(signal.SIGTERM)
    _, err = waiting.communicate(timeout=20)
    assert waiting.returncode == 128 + signal.SIGTERM
    assert "worker stopped by SIGTERM" in err
    timed_out = lone_worker("--startup-timeout", "10")
    _, err = timed_out.communicate(timeout=120)
    assert timed_out.returncode == 1, err[-2000:]
    assert "the cluster made no first step within 10 s" in err and "Traceback" not in err
