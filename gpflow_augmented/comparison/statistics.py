"""
Verdicts that hold over seeds: a metric's mean with its confidence interval, each method's paired
difference to the best, and across datasets the average ranks, Friedman's test and the critical
difference of Nemenyi's test (Demšar 2006). Every distribution comes from :mod:`scipy.stats`.

A seed draws a run's split, inducing points and minibatches, and every method of a seed gets the
same draws, so two methods' results on one seed are a pair: the interval of their difference is
the paired one, which the draws' shared noise does not widen.
"""

import math
from typing import Dict, List, Mapping, NamedTuple, Sequence, Union

import numpy as np
from scipy import stats

#: a metric's values, one a seed
_Values = Union[Sequence[float], np.ndarray]

__all__ = [
    "BEST",
    "BEHIND",
    "TIED",
    "TIE_FRACTION",
    "Interval",
    "Verdict",
    "RankTest",
    "mean_interval",
    "paired_difference",
    "verdicts",
    "rank_test",
]

BEST, TIED, BEHIND = "best", "tied", "behind"
#: A gap to the best smaller than this fraction of the best's mean is a tie, however narrow the
#: interval: differences that small are below what a user would choose a method by.
TIE_FRACTION = 0.01


class Interval(NamedTuple):
    """A mean over seeds with its two-sided confidence interval (Student's t over the seeds; NaN
    bounds from a single seed, which says nothing about the spread)."""

    mean: float
    low: float
    high: float
    num_seeds: int

    def covers(self, value: float) -> bool:
        """Whether ``value`` lies in the interval (always, when the interval is unknown)."""
        if math.isnan(self.low):
            return True
        return self.low <= value <= self.high


class Verdict(NamedTuple):
    """One method on one dataset against the best method there (:func:`verdicts`)."""

    #: the method's metric over seeds
    value: Interval
    #: the method's value less the best method's, paired by seed (zero for the best itself)
    difference: Interval
    #: the mean difference ÷ the best method's mean
    relative_gap: float
    #: ``"best"``, ``"tied"`` or ``"behind"``
    verdict: str


def _checked(values: _Values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or len(array) == 0:
        raise ValueError(f"{name} must be a non-empty list of numbers, one a seed")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} holds a value that is not finite: {array.tolist()}")
    return array


def mean_interval(values: _Values, confidence: float = 0.95) -> Interval:
    """The mean of ``values`` (one a seed) and its ``confidence`` interval from Student's t."""
    array = _checked(values, "values")
    mean = float(array.mean())
    if len(array) < 2:
        return Interval(mean, math.nan, math.nan, 1)
    scale = float(stats.sem(array))
    if scale == 0.0:
        return Interval(mean, mean, mean, len(array))
    low, high = stats.t.interval(confidence, len(array) - 1, loc=mean, scale=scale)
    return Interval(mean, float(low), float(high), len(array))


def paired_difference(values: _Values, reference: _Values, confidence: float = 0.95) -> Interval:
    """``values`` − ``reference``, paired by seed (equal lengths, the same seeds in the same
    order), with the ``confidence`` interval of its mean."""
    a, b = _checked(values, "values"), _checked(reference, "reference")
    if len(a) != len(b):
        raise ValueError(
            f"a paired difference needs the same seeds on both sides, got {len(a)} and {len(b)}"
        )
    return mean_interval(a - b, confidence)


def verdicts(
    by_method: Mapping[str, _Values],
    lower_is_better: bool = True,
    confidence: float = 0.95,
    tie_fraction: float = TIE_FRACTION,
) -> Dict[str, Verdict]:
    """Each method's verdict on one dataset. The best is the method with the best mean; another
    method is tied with it when the interval of their paired difference covers 0 or the mean gap
    is below ``tie_fraction`` of the best's mean, and behind otherwise.

    :param by_method: each method's metric, one value a seed, the seeds in the same order.
    """
    if not by_method:
        raise ValueError("verdicts need at least one method")
    values = {name: _checked(v, f"{name}'s values") for name, v in by_method.items()}
    sign = 1.0 if lower_is_better else -1.0
    best = min(values, key=lambda name: sign * float(values[name].mean()))
    best_mean = float(values[best].mean())
    result = {}
    for name, value in values.items():
        difference = paired_difference(value, values[best], confidence)
        gap = difference.mean / abs(best_mean) if best_mean != 0.0 else math.inf * difference.mean
        if name == best:
            verdict = BEST
        elif difference.covers(0.0) or abs(gap) < tie_fraction:
            verdict = TIED
        else:
            verdict = BEHIND
        result[name] = Verdict(mean_interval(value, confidence), difference, gap, verdict)
    return result


class RankTest(NamedTuple):
    """Methods ranked across datasets (:func:`rank_test`)."""

    methods: List[str]
    #: each method's rank averaged over the datasets (1 the best; ties share their mean rank)
    average_ranks: List[float]
    #: Friedman's χ² and its p-value: whether any method ranks differently from the others
    friedman_statistic: float
    friedman_p_value: float
    #: Nemenyi's critical difference: two methods whose average ranks differ by more differ at
    #: ``alpha``
    critical_difference: float
    alpha: float
    num_datasets: int


def rank_test(
    table: np.ndarray,
    methods: Sequence[str],
    lower_is_better: bool = True,
    alpha: float = 0.05,
) -> RankTest:
    """Average ranks, Friedman's test and Nemenyi's critical difference (Demšar 2006, §3.2.2) of
    ``table`` [datasets, methods], each entry a method's mean metric on a dataset.

    Nemenyi's critical difference is q_α √(k(k+1) / 6N), with q_α the studentized range's upper
    α quantile for k groups and infinite degrees of freedom, divided by √2.
    """
    table = np.asarray(table, dtype=float)
    if table.ndim != 2 or table.shape[1] != len(methods):
        raise ValueError(
            f"the table must be [datasets, methods] with {len(methods)} methods, "
            f"got shape {table.shape}"
        )
    N, k = table.shape
    if k < 3 or N < 2:
        raise ValueError(
            f"Friedman's test needs at least 3 methods and 2 datasets, got {k} and {N}"
        )
    if not np.all(np.isfinite(table)):
        raise ValueError("the table holds a value that is not finite")
    ranks = stats.rankdata(table if lower_is_better else -table, axis=1)
    if np.all(ranks == ranks[:, :1]):
        # Every dataset ties every method: Friedman's statistic is 0/0, and there is nothing to
        # tell the methods apart by.
        statistic, p_value = 0.0, 1.0
    else:
        statistic, p_value = stats.friedmanchisquare(*table.T)
    q_alpha = stats.studentized_range.ppf(1.0 - alpha, k, np.inf) / math.sqrt(2.0)
    critical_difference = float(q_alpha * math.sqrt(k * (k + 1) / (6.0 * N)))
    return RankTest(
        list(methods),
        [float(r) for r in ranks.mean(axis=0)],
        float(statistic),
        float(p_value),
        critical_difference,
        alpha,
        N,
    )
