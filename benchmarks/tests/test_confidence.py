"""The under-confidence study: the Nyström residual, and the study's command on a bundled set."""

import json

import gpflow
import numpy as np
import pytest

import gpflow_augmented as ga
from benchmarks.__main__ import main
import benchmarks.confidence as confidence_module
from benchmarks.confidence import _rule_scores, _scored_points, nystrom_residual


def _model(X, Z, variance=2.5):
    kernel = gpflow.kernels.SquaredExponential(variance=variance, lengthscales=0.7)
    return ga.LogisticSoftmaxSVGP(kernel, Z, num_classes=3, num_data=len(X))


def test_the_residual_is_zero_at_the_inducing_points_and_the_prior_variance_far_from_them():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(8, 2))
    model = _model(Z, Z)
    # At Z itself, K_ZZ⁻¹ reproduces k exactly but for the jitter (1e-6 of a variance of 2.5).
    np.testing.assert_allclose(nystrom_residual(model, Z), 0.0, atol=1e-5)
    far = Z + 50.0
    np.testing.assert_allclose(nystrom_residual(model, far), 2.5, rtol=1e-12)
    between = rng.normal(size=(20, 2))
    residual = nystrom_residual(model, between)
    assert np.all(residual > 0.0) and np.all(residual < 2.5)
    # What is left over the prior of the latent variance: q(u) = p(u) (whitened, the default).
    _, variance = model.predict_f(between)
    np.testing.assert_allclose(variance[:, 0], 2.5, rtol=1e-6)


def test_both_rules_are_the_predictive_where_q_f_has_no_variance():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(12, 2))
    Y = rng.integers(0, 3, size=(12, 1))
    model = _model(X, X.copy())
    model.q_mu.assign(rng.normal(scale=2.0, size=(12, 3)))
    model.q_sqrt.assign(np.tile(1e-6 * np.eye(12), (3, 1, 1)))
    # Z = X: no residual at the points, so q(f) is a point mass at its mean there (up to jitter).
    own = -float(np.mean(model.predict_log_density((X, Y))))
    np.testing.assert_allclose(_rule_scores(model, X, Y)[:2], [own, own], rtol=1e-4)
    # With q(u)'s prior variance the rules part: E log σ(f) < log σ(E f) lowers every class.
    model.q_sqrt.assign(np.tile(np.eye(12), (3, 1, 1)))
    plug_in, geometric, confidence = _rule_scores(model, X, Y)
    assert abs(plug_in - geometric) > 1e-3
    assert 1.0 / 3.0 < confidence < 1.0


def test_a_large_split_is_scored_on_a_seeded_sample_of_its_rows(monkeypatch):
    class Split:
        X_test = np.arange(50.0)[:, None]
        Y_test = np.arange(50)[:, None]

    assert _scored_points(Split, 0)[0].shape == (50, 1)
    monkeypatch.setattr(confidence_module, "_MAX_SCORED", 10)
    X, Y = _scored_points(Split, 3)
    assert X.shape == (10, 1) and len(np.unique(X)) == 10
    np.testing.assert_array_equal(X[:, 0], Y[:, 0])  # each point keeps its own label
    np.testing.assert_array_equal(X, _scored_points(Split, 3)[0])
    assert not np.array_equal(X, _scored_points(Split, 4)[0])


@pytest.mark.integration
def test_the_study_scores_each_model_with_and_without_the_residual(tmp_path):
    argv = ["confidence", "--datasets", "vehicle", "--num-inducing", "10,20", "--time-budget", "2"]
    assert main(argv + ["--output", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "confidence.json").read_text())["rows"]
    assert [r["num_inducing"] for r in rows] == [10, 20]
    for r in rows:
        assert 0.0 < r["residual"] < r["latent_variance"]
        assert 0.25 <= r["confidence"] <= 1.0 and 0.25 <= r["confidence_without_residual"] <= 1.0
        assert 0.0 < r["nll"] < 2.0 and 0.0 < r["nll_without_residual"] < 2.0
        assert 0.0 < r["nll_plug_in"] < 2.0 and 0.0 < r["nll_geometric"] < 2.0
        assert 0.25 <= r["confidence_geometric"] <= 1.0
    assert "| vehicle | 0 | 20 |" in (tmp_path / "confidence.md").read_text()
