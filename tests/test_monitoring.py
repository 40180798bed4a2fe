"""TensorBoard monitoring, proven twice: the event files read back, and a real TensorBoard server
on a loopback port serving the same scalars through its HTTP data API."""

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict

import pytest

import gpflow_augmented as ga
from gpflow_augmented.metrics import Evaluator
from gpflow_augmented.monitoring import read_event_files, tensorboard_monitor

STEPS = 6


@pytest.fixture(scope="module")
def monitored_run(tmp_path_factory):
    """A user's own loop, monitored in the three lines docs/comparison.md shows."""
    log_dir = tmp_path_factory.mktemp("tensorboard")
    d = ga.datasets.load_dataset("wine")
    model = ga.LogisticSoftmaxSVGP(
        ga.initial_kernel(d.X_train),
        ga.inducing_points(d.X_train, 15),
        d.num_classes,
        num_data=len(d.X_train),
    )
    trainer = ga.Trainer(model, ga.RobbinsMonro(), learning_rate=0.05)
    batches = iter(ga.minibatches(d.X_train, d.Y_train, 40, seed=0))

    monitor = tensorboard_monitor(
        str(log_dir),
        model,
        trainer,
        test_data=(d.X_test, d.Y_test),
        train_data=(d.X_train, d.Y_train),
        test_period=STEPS - 1,
        image_period=STEPS - 1,
        certificate_period=STEPS - 1,
    )
    recorded = defaultdict(dict)
    for step in range(STEPS):
        elbo = trainer.step(next(batches))
        monitor(step, elbo=elbo)
        recorded["elbo"][step] = float(elbo)
        recorded["step_size"][step] = float(ga.RobbinsMonro()(trainer.iteration))
        recorded["kernel.variance"][step] = float(model.kernel.variance.numpy())
        recorded["safeguards/shortened_steps"][step] = float(trainer.cavi.shortened_steps.numpy())
        recorded["safeguards/kept_steps"][step] = float(trainer.cavi.kept_steps.numpy())
    final_metrics = Evaluator(d.X_test, d.Y_test)(model)
    final_metrics["certificate"] = ga.bound_certificate(model, (d.X_train, d.Y_train)).as_dict()
    return log_dir, recorded, final_metrics


@pytest.mark.slow
def test_event_files_hold_the_logged_values(monitored_run):
    log_dir, recorded, final_metrics = monitored_run
    scalars, images = read_event_files(log_dir)
    tags = ("elbo", "step_size", "kernel.variance")
    for tag in (*tags, "safeguards/shortened_steps", "safeguards/kept_steps"):
        assert sorted(scalars[tag]) == list(range(STEPS)), tag
        for step, value in recorded[tag].items():
            # tf.summary.scalar stores float32: agreement to its precision (6e-8), with margin
            assert scalars[tag][step] == pytest.approx(value, rel=1e-6), (tag, step)
    assert scalars["step_size"][0] == pytest.approx(2**-0.51)  # ρ_1 = (1 + 1)^-0.51
    assert len(scalars["kernel.lengthscales[0]"]) == STEPS
    # the test metrics at steps 0 and 5 (test_period 5); the last matches a fresh evaluation
    for name in ("error", "nll", "ece", "classwise_ece", "brier"):
        assert sorted(scalars[f"test/{name}"]) == [0, STEPS - 1], name
        assert scalars[f"test/{name}"][STEPS - 1] == pytest.approx(final_metrics[name], rel=1e-6)
    # the bound certificate at steps 0 and 5; the gap is positive and is exact - augmented
    certificate = final_metrics["certificate"]
    for name, value in certificate.items():
        assert sorted(scalars[f"certificate/{name}"]) == [0, STEPS - 1], name
        assert scalars[f"certificate/{name}"][STEPS - 1] == pytest.approx(value, rel=1e-6, abs=1e-9)
    assert certificate["gap"] > 0
    assert certificate["gap"] == pytest.approx(certificate["exact"] - certificate["augmented"])
    # the reliability diagram: a PNG image summary (width, height, encoded bytes)
    assert sorted(images["reliability"]) == [0, STEPS - 1]
    width, height, png = images["reliability"][STEPS - 1]
    assert png.startswith(b"\x89PNG") and int(width) > 100 and int(height) > 100


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.integration
def test_tensorboard_server_serves_the_same_scalars(monitored_run):
    log_dir, recorded, final_metrics = monitored_run
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(log_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--load_fast",
            "false",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"

    def get(path: str):
        with urllib.request.urlopen(base + path, timeout=5) as response:
            return json.loads(response.read())

    try:
        deadline = time.monotonic() + 90
        points = None
        while time.monotonic() < deadline:  # bounded: at most 90 s of polling, 1 request / s
            try:
                points = get("/data/plugin/scalars/scalars?run=.&tag=elbo")
                if len(points) == STEPS:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(1.0)
        assert points is not None and len(points) == STEPS, "TensorBoard did not serve the run"
        served = {step: value for _, step, value in points}
        assert served == pytest.approx(recorded["elbo"], rel=1e-6)  # served as float32
        nll = {
            step: value for _, step, value in get("/data/plugin/scalars/scalars?run=.&tag=test/nll")
        }
        assert nll[STEPS - 1] == pytest.approx(final_metrics["nll"], rel=1e-6)
        tags = get("/data/plugin/images/tags")
        assert "reliability" in tags["."]
    finally:
        server.terminate()
        server.wait(timeout=30)
