"""The matched-hyperparameter study on a bundled set: each method at its own kernel, then the
swapped fits, on a validation split of the training data."""

import json

import gpflow
import numpy as np
import pytest

from gpflow_augmented import sampling

from benchmarks.__main__ import main
from benchmarks import matched

# The integration tier (a whole study: several methods trained and refitted): run by --slow.
pytestmark = pytest.mark.integration


def test_the_swapped_fits_hold_the_other_methods_kernel(tmp_path, monkeypatch):
    """Every refit runs at the donor's kernel, unchanged by its training: a refit that let its
    kernel train (the broken variant) moves it and fails the check."""
    refitted = []
    original = matched._refit

    def recording(name, values, Z, split, steps, seed):
        method = original(name, values, Z, split, steps, seed)
        refitted.append((name, values, matched._kernel_values(method.model.kernel)))
        return method

    monkeypatch.setattr(matched, "_refit", recording)
    sampled = []

    class RecordingSampler(sampling.GibbsSampler):
        def __init__(self, data, kernel, num_classes, **options):
            super().__init__(data, kernel, num_classes, **options)
            sampled.append((kernel, options))

    monkeypatch.setattr(sampling, "GibbsSampler", RecordingSampler)
    argv = ["matched", "--datasets", "vehicle", "--peers", "rm", "--time-budget", "2"]
    assert main(argv + ["--exact-draws", "20", "--output", str(tmp_path)]) == 0
    written = json.loads((tmp_path / "matched.json").read_text())
    assert {"processor", "cpu_count", "tensorflow", "measured"} <= set(written["stamp"])
    rows = written["rows"]
    assert [(r["method"], r["kernel_of"]) for r in rows] == [
        ("lsm", "lsm"),
        ("rm", "rm"),
        ("lsm", "rm"),
        ("rm", "lsm"),
        ("gibbs", "lsm"),
    ]
    assert [name for name, _, _ in refitted] == ["lsm", "rm"]
    for _, donor, after in refitted:
        # equal up to the positive bijector's round trip (~1e-16); a trainable kernel (the broken
        # variant) moved them by up to 78 % (measured)
        np.testing.assert_allclose(after["lengthscales"], donor["lengthscales"], rtol=1e-12)
        assert after["variance"] == pytest.approx(donor["variance"], rel=1e-12)
    # the refits took as many steps as the method made at its own kernel
    assert rows[2]["steps"] == rows[0]["steps"] and rows[3]["steps"] == rows[1]["steps"]
    for row in rows:
        assert 0 < row["nll"] < np.log(4) and 0 <= row["error"] < 0.5
        assert 0.25 <= row["confidence"] <= 1.0 and row["accuracy"] == 1 - row["error"]
    table = (tmp_path / "matched.md").read_text()
    assert "| vehicle | 0 | lsm | rm |" in table
    # the exact posterior's own table, beside lsm's q(u) at its kernel
    assert f"| vehicle | 0 | {rows[-1]['train_points']} | 20 | {rows[0]['nll']:.4f} |" in table
    # the exact posterior is lsm's own model: its learned kernel, prior mean and inducing inputs
    [(kernel, options)] = sampled
    assert kernel.variance.numpy() == pytest.approx(rows[0]["kernel_variance"], rel=1e-12)
    assert isinstance(options["mean_function"], gpflow.mean_functions.Constant)
    assert options["inducing_variable"].shape == (100, 18)
    assert rows[-1]["steps"] == 20
    assert rows[-1]["latent_rhat"] >= 1.0
    assert rows[-1]["probability_rhat"] >= rows[-1]["probability_rhat_median"] > 0.9
    assert 0 < rows[-1]["nll_from_q"] < np.log(4) and 0 < rows[-1]["nll_from_prior"] < np.log(4)


@pytest.mark.parametrize("whiten", [True, False])
def test_half_the_chains_start_at_q_and_half_at_the_prior(whiten):
    """With q(u) nearly a point mass, the first two starts are its mean in whitened coordinates
    (L⁻¹ m when q(u) is stored unwhitened); the other two are prior draws."""
    import gpflow_augmented as ga

    X = np.random.default_rng(0).normal(size=(30, 2))
    Z = X[:5]
    model = ga.LogisticSoftmaxSVGP(ga.initial_kernel(X), Z, 3, num_data=30, whiten=whiten)
    q_mu = np.random.default_rng(1).normal(size=(5, 3))
    model.q_mu.assign(q_mu)
    model.q_sqrt.assign(np.tile(1e-9 * np.eye(5), (3, 1, 1)))
    starts = matched._chain_starts(model, seed=0)
    L = np.linalg.cholesky(model.kernel(Z) + np.eye(5) * gpflow.config.default_jitter())
    expected = q_mu.T if whiten else np.linalg.solve(L, q_mu).T
    np.testing.assert_allclose(starts[:2], np.broadcast_to(expected, (2, 3, 5)), atol=1e-6)
    assert np.abs(starts[2:]).max() < 5 and not np.allclose(starts[2], expected, atol=0.1)


def test_the_matched_study_refuses_lsm_as_its_own_peer(capsys):
    assert main(["matched", "--peers", "lsm,rm"]) == 2
    assert "--peers takes the methods set beside lsm" in capsys.readouterr().err


def test_the_training_subsample_keeps_every_class_and_the_validation_points():
    """A seeded subsample of training rows (the same draw for the same seed), a class the draw
    missed kept by one point, the validation points untouched; a split no larger is returned
    as it is. A draw that let a rare class go (the broken variant) leaves 2 of 3 classes."""
    from gpflow_augmented.datasets import Dataset

    y = np.r_[np.zeros(300, int), np.ones(300, int), 2]  # class 2 has one training point
    X = np.random.default_rng(0).normal(size=(len(y), 3))
    split = Dataset("toy", X, y[:, None], np.ones((7, 3)), np.zeros((7, 1), int), 3)
    small = matched._training_subsample(split, 50, seed=3)
    assert len(small.X_train) in (50, 51)
    assert set(small.Y_train[:, 0]) == {0, 1, 2}
    rows = {tuple(row) for row in split.X_train}
    assert all(tuple(row) in rows for row in small.X_train)
    np.testing.assert_array_equal(small.X_test, split.X_test)
    again = matched._training_subsample(split, 50, seed=3)
    np.testing.assert_array_equal(again.X_train, small.X_train)
    assert matched._training_subsample(split, len(y), seed=3) is split
