"""
The records of a comparison (:class:`MethodResult`, :class:`ComparisonResult`, as ``results.json``
holds them) and the summaries of a method's trace: its best test NLL and the training time to
reach a target.
"""

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, cast

import numpy as np

from ..training import TrainingReport
from .methods import Method

__all__ = [
    "ComparisonResult",
    "MethodResult",
    "best_nll",
    "time_to_common_nll",
    "time_to_converge",
    "time_to_reach",
]


class MethodResult(NamedTuple):
    """One method's run in a comparison: its test metrics against training time, the final state
    on the whole test set, and what it was given."""

    name: str
    description: str
    trace: List[Dict[str, float]]  # time, iteration, elbo, step_size and the test metrics
    final_metrics: Dict[str, float]  # the trace's last entry, evaluated on the whole test set
    compile_seconds: float
    iterations: int
    failed_steps: int
    initial_hyperparameters: Dict[str, List[float]]
    batches_digest: str  # SHA-256 of the minibatch indices the method was given, in order
    method: Optional[Method]  # None for a result read back from disk (a resumed run)
    probabilities: np.ndarray  # the final predicted probabilities of the whole test set
    options: Optional[Dict[str, Any]] = None  # the learning rate and ρ schedule it was given
    # what the steps' safeguards did (:func:`_stability_record`)
    stability: Optional[Dict[str, Any]] = None

    def final(self) -> Dict[str, float]:
        """The last trace entry's metrics, evaluated on the whole test set."""
        return self.final_metrics

    def diverged(self) -> bool:
        """Whether the run looks unhealthy: its bound collapsed, or a tenth of its steps failed
        or were kept (:class:`~gpflow_augmented.TrainingReport`)."""
        record = self.stability or {}
        report = TrainingReport(
            self.iterations,
            record.get("shortened_steps") or 0,
            record.get("kept_steps") or 0,
            record.get("worst_bound_fall", 0.0),
            record.get("worst_bound_fall_step", 0),
        )
        return (
            report.collapsed
            or report.keeps_failing
            or self.failed_steps >= 0.1 * max(self.iterations, 1)
        )

    @classmethod
    def from_json(cls, payload: Dict[str, Any], probabilities: np.ndarray) -> "MethodResult":
        """A finished method's result as :meth:`to_json` saved it, without the trained method."""
        return cls(
            payload["name"],
            payload["description"],
            payload["trace"],
            payload["final"],
            payload["compile_seconds"],
            payload["iterations"],
            payload["failed_steps"],
            payload["initial_hyperparameters"],
            payload["batches_digest"],
            None,
            np.asarray(probabilities),
            payload.get("options"),
            payload.get("stability"),
        )

    def to_json(self) -> Dict[str, Any]:
        """The result as ``results.json`` holds it (without the trained method and the test
        probabilities, which are saved beside it)."""
        return {
            "name": self.name,
            "description": self.description,
            "options": self.options,
            "compile_seconds": self.compile_seconds,
            "iterations": self.iterations,
            "failed_steps": self.failed_steps,
            "stability": self.stability,
            "time_to_converge": time_to_converge(self.trace),
            "final": self.final_metrics,
            "initial_hyperparameters": self.initial_hyperparameters,
            "batches_digest": self.batches_digest,
            "trace": self.trace,
        }


class ComparisonResult(NamedTuple):
    """A comparison on one dataset: its settings (sizes and options) and each method's
    :class:`MethodResult`, in the order they ran."""

    dataset: str
    settings: Dict[str, Any]
    methods: List[MethodResult]

    def to_json(self) -> Dict[str, Any]:
        """The comparison as ``results.json`` holds it."""
        return {
            "dataset": self.dataset,
            "settings": self.settings,
            "methods": [m.to_json() for m in self.methods],
        }


def best_nll(trace: Sequence[Dict[str, float]]) -> Optional[float]:
    """The lowest finite test NLL in the trace (``None`` if there is none)."""
    finite = [e["nll"] for e in trace if e["nll"] is not None and np.isfinite(e["nll"])]
    return min(finite) if finite else None


def time_to_reach(trace: Sequence[Dict[str, float]], nll: float) -> Optional[float]:
    """The training time at which the test NLL first reached ``nll`` (``None`` if never)."""
    for entry in trace:
        if entry["nll"] is not None and entry["nll"] <= nll:
            return float(entry["time"])
    return None


def time_to_common_nll(
    trace: Sequence[Dict[str, float]], other: Sequence[Dict[str, float]], tolerance: float = 0.01
) -> Tuple[float, Optional[float], Optional[float]]:
    """The common target of two methods, the worse of their best test NLLs + ``tolerance``, and
    the training time at which each trace first reached it: ``(target, t(trace), t(other))``."""
    # Both traces have at least one evaluation, so both have a best NLL.
    target = max(cast(float, best_nll(trace)), cast(float, best_nll(other))) + tolerance
    return target, time_to_reach(trace, target), time_to_reach(other, target)


def time_to_converge(trace: Sequence[Dict[str, float]], tolerance: float = 0.01) -> Optional[float]:
    """The training time at which the test NLL first came within ``tolerance`` nats of the best
    test NLL in the trace (``None`` if the trace has no finite NLL)."""
    best = best_nll(trace)
    return None if best is None else time_to_reach(trace, best + tolerance)
