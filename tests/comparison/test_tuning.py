"""Tuned against tuned: settings are chosen on a validation split of the training data, the test set
is never read while choosing, and the chosen settings are the ones the final run uses."""

import json

import numpy as np
import pytest

import gpflow_augmented as ga
from gpflow_augmented.comparison import tuning
from gpflow_augmented.comparison import compare
from gpflow_augmented.comparison.baselines import method_learning_rate, method_positive_bijector
from gpflow_augmented.datasets import keep_every_class, train_test_split

# The integration tier (whole tuning and comparison runs): run by --slow or -m integration.
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny():
    d = ga.datasets.load_dataset("vehicle", seed=1)
    return d._replace(
        X_train=d.X_train[:150], Y_train=d.Y_train[:150], X_test=d.X_test[:60], Y_test=d.Y_test[:60]
    )


def rows(X):
    return {tuple(np.round(row, 9)) for row in X}


def test_validation_split_is_carved_from_the_training_points_only(tiny):
    split = tuning.validation_split(tiny, 0.2, seed=3)
    assert len(split.X_test) == 30 and len(split.X_train) == 120
    assert split.num_classes == tiny.num_classes
    # Re-standardised, so compare through the affine map back to the training features.
    train = np.concatenate([split.X_train, split.X_test])
    labels = np.concatenate([split.Y_train, split.Y_test])
    order_original = np.lexsort(tiny.X_train.T)
    scale = tiny.X_train.std(0) / train.std(0)
    back = (train - train.mean(0)) * scale + tiny.X_train.mean(0)
    order_split = np.lexsort(back.T)
    np.testing.assert_allclose(back[order_split], tiny.X_train[order_original], atol=1e-9)
    np.testing.assert_array_equal(labels[order_split], tiny.Y_train[order_original])
    again = tuning.validation_split(tiny, 0.2, seed=3)
    np.testing.assert_array_equal(again.X_test, split.X_test)


def test_a_class_with_one_training_point_keeps_it_for_training(tiny):
    labels = tiny.Y_train.copy()
    lone = np.flatnonzero(labels[:, 0] == 0)
    labels[lone[1:]] = 1  # class 0 is left with one training point
    dataset = tiny._replace(Y_train=labels)
    held_out = [seed for seed in range(40) if train_test_split(len(labels), 0.2, seed)[lone[0]]]
    assert held_out  # the draw alone puts it into validation for these seeds
    for seed in held_out[:3]:
        split = tuning.validation_split(dataset, 0.2, seed)
        assert np.sum(split.Y_train == 0) == 1 and np.sum(split.Y_test == 0) == 0
        assert len(split.X_test) == 29


def test_a_mask_that_drops_a_class_whole_keeps_its_first_point_and_nothing_else():
    labels = np.array([2, 0, 1, 2, 0, 1, 1])
    keep = np.array([False, True, True, False, False, False, True])  # drops class 2 whole
    kept = keep_every_class(labels, keep)
    assert list(np.flatnonzero(kept)) == [0, 1, 2, 6]
    assert list(np.flatnonzero(keep)) == [1, 2, 6]  # the caller's mask is not changed
    assert np.array_equal(keep_every_class(labels, kept), kept)


def test_every_method_is_tuned_over_the_same_grid_which_holds_its_own_defaults():
    grid = tuning.candidate_settings()
    assert len(grid) == len(tuning.LEARNING_RATES) * 2
    for bijector in ("softplus", "exp"):
        rates = {c["learning_rate"] for c in grid if c["positive_bijector"] == bijector}
        assert rates == set(tuning.LEARNING_RATES)
    for method in ("lsm", "softmax", "rm", "sep", "dirichlet", "lsm-vi"):
        own = {"learning_rate": method_learning_rate(method)}
        own["positive_bijector"] = method_positive_bijector(method)
        assert own in grid, method
    assert all(set(c) == {"learning_rate", "positive_bijector"} for c in grid)


class _Unreadable:
    """Stands in for a test set: any use of it (as an array, its length, a row, an attribute) is
    recorded and refused."""

    def __init__(self, uses):
        self._uses = uses

    def _refuse(self, use):
        self._uses.append(use)
        raise AssertionError(f"the test set was read ({use})")

    def __array__(self, *args, **kwargs):
        self._refuse("as an array")

    def __len__(self):
        self._refuse("its length")

    def __getitem__(self, key):
        self._refuse(f"[{key!r}]")

    def __iter__(self):
        self._refuse("iterated")

    def __getattr__(self, name):
        self._refuse(f".{name}")


def test_tune_never_reads_the_test_set_and_picks_the_best_validation_nll(tiny, monkeypatch):
    monkeypatch.setattr(tuning, "LEARNING_RATES", (0.1,))
    # A CAVI method and a GPflow one; lsm-gamma-poisson is the CAVI method whose step traces
    # fastest (each candidate is a run that traces its step).
    options = dict(
        methods=["lsm-gamma-poisson", "softmax"],
        max_iterations=4,
        time_budget=None,
        num_inducing=10,
        batch_size=40,
        seed=2,
    )
    # A test set that cannot be read, and records any attempt (an error caught inside tune would
    # still be on the record): one tuning run proves what a second one on a poisoned copy did.
    uses = []
    result = tuning.tune(
        tiny._replace(X_test=_Unreadable(uses), Y_test=_Unreadable(uses)), **options
    )
    assert uses == []

    assert len(result.candidates) == 2 * 2  # two bijectors, two methods: no method has more
    for method in ("lsm-gamma-poisson", "softmax"):
        runs = [c for c in result.candidates if c["method"] == method]
        best = min(runs, key=lambda c: c["validation_nll"])
        assert result.chosen[method] == {
            "learning_rate": best["learning_rate"],
            "positive_bijector": best["positive_bijector"],
        }
    # Different settings gave different validation scores, so the choice was not vacuous.
    assert len({c["validation_nll"] for c in result.candidates}) > 2


def test_compare_runs_each_method_with_its_own_settings(tiny):
    run = compare(
        tiny,
        ["lsm", "softmax"],
        max_iterations=2,
        time_budget=None,
        num_inducing=10,
        batch_size=40,
        method_options={"lsm": {"learning_rate": 0.02, "step_size": "constant-0.3"}},
    )
    ours, softmax = run.methods
    assert ours.options == {
        "learning_rate": 0.02,
        "positive_bijector": "softplus",
        "step_size": "constant-0.3",
    }
    # no rate given to softmax, by option or for all: its own default
    assert softmax.options == {
        "learning_rate": method_learning_rate("softmax"),
        "positive_bijector": method_positive_bijector("softmax"),
        "step_size": None,
    }
    np.testing.assert_allclose(float(ours.method.trainer.learning_rate), 0.02)
    np.testing.assert_allclose(
        float(softmax.method.adam.learning_rate), method_learning_rate("softmax")
    )
    assert ours.method.step_size == pytest.approx(0.3)
    dirichlet = compare(
        tiny,
        ["dirichlet"],
        max_iterations=2,
        time_budget=None,
        num_inducing=10,
        batch_size=40,
        method_options={"dirichlet": {"alpha_epsilon": 0.1}},
    )
    assert dirichlet.methods[0].method.model.likelihood.alpha_epsilon == 0.1
    with pytest.raises(ValueError, match="no ρ schedule"):
        compare(
            tiny,
            ["softmax"],
            max_iterations=1,
            time_budget=None,
            method_options={"softmax": {"step_size": "constant-0.1"}},
        )
    with pytest.raises(ValueError, match="unknown option"):
        compare(
            tiny,
            ["softmax"],
            max_iterations=1,
            time_budget=None,
            method_options={"softmax": {"momentum": 0.9}},
        )


def test_a_setting_that_is_not_tuned_is_carried_by_every_candidate(tiny, monkeypatch):
    # Two candidates (each a traced compare run) suffice: the second shows the setting is carried
    # past the first, not used up by it.
    monkeypatch.setattr(tuning, "LEARNING_RATES", (0.01,))
    result = tuning.tune(
        tiny,
        ["lsm-subsets"],
        max_iterations=2,
        time_budget=None,
        num_inducing=10,
        batch_size=40,
        method_options={"lsm-subsets": {"class_subset_size": 2}},
    )
    assert len(result.candidates) == 1 * 2  # one rate, two bijectors
    assert all(c["class_subset_size"] == 2 for c in result.candidates)
    assert result.chosen["lsm-subsets"]["class_subset_size"] == 2
    assert tuning.settings_text(result.chosen["lsm-subsets"]).endswith("|K| 2")
    run = compare(
        tiny,
        ["lsm-subsets"],
        max_iterations=1,
        time_budget=None,
        num_inducing=10,
        batch_size=40,
        method_options=result.chosen,
    )
    assert run.methods[0].method.trainer.cavi.class_sampler.subset_size == 2


def test_an_interrupted_tuning_keeps_its_finished_candidates(monkeypatch, tmp_path):
    from gpflow_augmented.comparison.cli import main
    from gpflow_augmented.comparison.report import read_summaries

    monkeypatch.setattr(tuning, "LEARNING_RATES", (0.1,))
    argv = ["vehicle", "--methods", "softmax", "--tune", "--max-iterations", "20", "--seeds", "0"]
    argv += ["--tune-budget", "0.001", "--num-inducing", "10", "--output", str(tmp_path / "run")]
    argv += ["--no-progress"]
    output = tmp_path / "run" / "seed-0"
    run_candidate, ran = tuning._run_candidate, []

    def interrupted_at_the_second(*arguments):
        if len(ran) == 1:
            raise KeyboardInterrupt
        ran.append(run_candidate(*arguments))
        return ran[-1]

    monkeypatch.setattr(tuning, "_run_candidate", interrupted_at_the_second)
    assert main(argv) == 130
    saved = json.loads((output / "tuning.json").read_text())
    assert saved["candidates"] == ran  # written as it finished, before the interruption
    assert "chosen" not in saved and not (output / "results.json").exists()
    # the candidates ran for their own budget (0.001 s), not the run's 20 steps
    assert ran[0]["iterations"] < 20

    # Resumed: the finished candidate is kept (its NLL made one no run reaches, so that it is
    # the one chosen), the other is run.
    kept = {**saved["candidates"][0], "validation_nll": 1e-9}
    (output / "tuning.json").write_text(json.dumps({**saved, "candidates": [kept]}))
    monkeypatch.setattr(tuning, "_run_candidate", run_candidate)
    assert main([*argv, "--resume"]) == 0
    resumed = json.loads((output / "tuning.json").read_text())
    assert resumed["candidates"][0] == kept
    assert resumed["candidates"][1]["positive_bijector"] == "exp"
    assert resumed["chosen"]["softmax"] == {"learning_rate": 0.1, "positive_bijector": "softplus"}
    results = json.loads((output / "results.json").read_text())
    assert results["tuning"]["chosen"] == resumed["chosen"]
    assert results["methods"][0]["iterations"] == 20  # the final run at the run's budget
    stamp = read_summaries(tmp_path / "run")["stamp"]
    assert stamp["settings"]["tuned"] == "0.001 s or 20 steps"  # what stopped the candidates


def test_a_method_whose_every_candidate_fails_keeps_its_own_defaults(tiny, monkeypatch):
    def failed(split, method, settings, run_options):
        return {"method": method, **settings, "validation_nll": None, "iterations": 0}

    monkeypatch.setattr(tuning, "_run_candidate", failed)
    result = tuning.tune(tiny, ["softmax"], max_iterations=1, time_budget=None)
    assert result.chosen["softmax"] == {
        "learning_rate": method_learning_rate("softmax"),
        "positive_bijector": method_positive_bijector("softmax"),
    }
