"""Data-parallel CAVI under tf.distribute.MirroredStrategy on two logical CPU devices equals the
single-device run to float64 round-off (the script runs in a subprocess, which splits the CPU
before TensorFlow initialises it)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
