"""The verdicts over seeds and the rank test across datasets (comparison.statistics)."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from gpflow_augmented.comparison import statistics
from gpflow_augmented.comparison.statistics import (
    BEHIND,
    BEST,
    TIED,
    Interval,
    mean_interval,
    paired_difference,
    rank_test,
    verdicts,
)


def _coverage(interval, samples: np.ndarray, truth: float) -> float:
    covered = [interval(row).covers(truth) for row in samples]
    return float(np.mean(covered))


def _normal_quantile_interval(values) -> Interval:
    """A deliberately wrong interval for five seeds: the normal quantile where Student's t
    belongs, too narrow by a factor 2.78 / 1.96."""
    mean, scale = float(np.mean(values)), float(scipy_stats.sem(values))
    return Interval(mean, mean - 1.96 * scale, mean + 1.96 * scale, len(values))


def test_the_interval_covers_the_true_mean_about_95_percent_of_the_time_and_a_z_interval_does_not():
    # 4,000 runs of five seeds: a correct 95 % interval covers 0.95 ± 0.0034 (binomial sd), so
    # ±0.012 is 3.5 sd; the normal quantile's interval covers about 0.88 and must fall outside.
    samples = np.random.default_rng(0).normal(loc=0.3, scale=0.05, size=(4000, 5))
    assert abs(_coverage(mean_interval, samples, 0.3) - 0.95) < 0.012
    assert _coverage(_normal_quantile_interval, samples, 0.3) < 0.938


def test_the_paired_interval_covers_the_true_difference_when_the_seeds_share_their_noise():
    rng = np.random.default_rng(1)
    seed_noise = rng.normal(scale=0.05, size=(4000, 5))  # a split that suits both methods
    a = 0.30 + seed_noise + rng.normal(scale=0.002, size=(4000, 5))
    b = 0.31 + seed_noise + rng.normal(scale=0.002, size=(4000, 5))
    covered = [paired_difference(b[i], a[i]).covers(0.01) for i in range(len(a))]
    assert abs(np.mean(covered) - 0.95) < 0.012
    # Paired, the 0.01 gap is found in nearly every run; unpaired, the seeds' noise hides it.
    assert np.mean([not paired_difference(b[i], a[i]).covers(0.0) for i in range(200)]) > 0.95


def test_two_methods_that_differ_by_construction_are_found_different():
    noise = np.random.default_rng(2).normal(scale=0.01, size=5)
    found = verdicts({"good": 0.20 + noise, "worse": 0.24 + noise + 0.002 * np.arange(5)})
    assert found["good"].verdict == BEST
    assert found["worse"].verdict == BEHIND
    assert found["worse"].relative_gap == pytest.approx(0.044 / 0.2, rel=0.05)
    assert found["worse"].difference.low > 0


def test_a_method_against_an_identical_copy_of_itself_is_tied():
    values = np.random.default_rng(3).normal(loc=0.2, scale=0.02, size=5)
    found = verdicts({"lsm": values, "copy": values.copy()})
    assert {found["lsm"].verdict, found["copy"].verdict} == {BEST, TIED}
    assert found["copy"].difference == Interval(0.0, 0.0, 0.0, 5)


def test_a_gap_below_one_percent_is_a_tie_however_narrow_its_interval():
    base = np.array([0.20, 0.21, 0.19, 0.22, 0.20])
    found = verdicts({"a": base, "b": base * 1.005})
    assert found["b"].verdict == TIED and not found["b"].difference.covers(0.0)
    assert verdicts({"a": base, "b": base * 1.02})["b"].verdict == BEHIND


def test_higher_is_better_picks_the_largest_mean():
    found = verdicts({"a": [0.9, 0.91, 0.92], "b": [0.8, 0.81, 0.82]}, lower_is_better=False)
    assert found["a"].verdict == BEST and found["b"].verdict == BEHIND


def test_one_seed_has_no_interval_and_so_no_verdict_of_behind():
    found = verdicts({"a": [0.2], "b": [0.3]})
    assert math.isnan(found["b"].value.low)
    assert found["b"].verdict == TIED


def test_nemenyis_critical_values_are_demsars_table():
    # Demšar (2006), Table 5(a): q_0.05 for k = 2 … 10 classifiers.
    published = [1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164]
    for k, q in zip(range(3, 11), published[1:]):
        table = np.random.default_rng(k).random((10, k))
        test = rank_test(table, [f"m{i}" for i in range(k)])
        assert test.critical_difference == pytest.approx(q * math.sqrt(k * (k + 1) / 60), abs=2e-3)


def test_a_method_best_on_every_dataset_ranks_first_and_friedman_rejects():
    rng = np.random.default_rng(4)
    table = rng.random((12, 4)) + np.array([0.0, 1.0, 1.0, 1.0])
    test = rank_test(table, ["lsm", "a", "b", "c"])
    assert test.average_ranks[0] == 1.0
    assert test.friedman_p_value < 0.01
    assert min(test.average_ranks[1:]) - 1.0 > test.critical_difference


def test_methods_that_are_copies_rank_alike_and_friedman_does_not_reject():
    column = np.random.default_rng(5).random(12)
    test = rank_test(np.stack([column] * 3, axis=1), ["a", "b", "c"])
    assert test.average_ranks == [2.0, 2.0, 2.0]
    assert (test.friedman_statistic, test.friedman_p_value) == (0.0, 1.0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: mean_interval([0.1, float("nan")]), "not finite"),
        (lambda: mean_interval([]), "non-empty"),
        (lambda: paired_difference([0.1, 0.2], [0.1]), "same seeds"),
        (lambda: verdicts({}), "at least one method"),
        (lambda: rank_test(np.ones((5, 2)), ["a", "b"]), "at least 3 methods"),
        (lambda: rank_test(np.ones((5, 3)), ["a", "b"]), "with 2 methods"),
    ],
)
def test_bad_input_is_refused_with_a_message_that_names_it(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_module_names_its_public_api():
    assert set(statistics.__all__) >= {"verdicts", "rank_test", "mean_interval"}
