"""
Tuned against tuned: every method's settings chosen on a validation split carved from the training
data, never on the test set.

Every method gets the same grid: the Adam learning rates :data:`LEARNING_RATES` times the positive
bijectors (softplus, exp: :data:`~gpflow_augmented.comparison.baselines.POSITIVE_BIJECTORS`).
What only some methods have (a CAVI method's ρ schedule, the Dirichlet classifier's α_ε) keeps its
default or the value given, so that no method is chosen from more candidates than another. Each
candidate is one :func:`~gpflow_augmented.comparison.compare` run on the training part of the
split, every candidate under the same budget, scored by its final validation NLL. The test set is
not read until the chosen settings are run on the whole training set.
"""

import math
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from .baselines import (
    POSITIVE_BIJECTORS,
    default_methods,
    method_learning_rate,
    method_positive_bijector,
)
from .protocol import check_methods, compare
from ..datasets import Dataset, from_arrays, keep_every_class, train_test_split

__all__ = [
    "LEARNING_RATES",
    "TuningResult",
    "candidate_settings",
    "settings_text",
    "tune",
    "validation_split",
]

#: Each method's own default rate is one of these (``baselines.METHOD_SPECS``).
LEARNING_RATES = (0.01, 0.03, 0.1)


def validation_split(dataset: Dataset, fraction: float = 0.2, seed: int = 0) -> Dataset:
    """The training data split again: a seeded ``fraction`` of it becomes the "test" set of the
    returned dataset (re-standardised with the remaining points' statistics). The test set of
    ``dataset`` is not part of it. A class whose every training point the draw would put into
    validation keeps its first one for training
    (:func:`~gpflow_augmented.datasets.keep_every_class`)."""
    is_test = train_test_split(len(dataset.X_train), fraction, seed)
    is_validation = ~keep_every_class(dataset.Y_train[:, 0], ~is_test)
    split = from_arrays(
        f"{dataset.name} (validation)", dataset.X_train, dataset.Y_train, is_validation
    )
    if split.num_classes != dataset.num_classes:  # the highest label fell in neither part
        split = split._replace(num_classes=dataset.num_classes)
    return split


def candidate_settings() -> List[Dict[str, Any]]:
    """The grid every method is tuned over: every learning rate with every positive bijector."""
    return [
        {"learning_rate": rate, "positive_bijector": bijector}
        for bijector in POSITIVE_BIJECTORS
        for rate in LEARNING_RATES
    ]


def settings_text(settings: Dict[str, Any]) -> str:
    """ "lr 0.03, exp, ρ constant-0.1": a method's settings as the reports print them."""
    text = f"lr {settings['learning_rate']:g}"
    text += f", {settings['positive_bijector']}" if settings.get("positive_bijector") else ""
    text += f", ρ {settings['step_size']}" if settings.get("step_size") else ""
    text += f", α_ε {settings['alpha_epsilon']:g}" if settings.get("alpha_epsilon") else ""
    text += ", σ² by Adam" if settings.get("update_variance") is False else ""
    return text + (
        f", |K| {settings['class_subset_size']}" if settings.get("class_subset_size") else ""
    )


class TuningResult(NamedTuple):
    chosen: Dict[str, Dict[str, Any]]  # method -> its settings with the best validation NLL
    candidates: List[Dict[str, Any]]  # every run: method, settings, validation error and NLL

    def to_json(self) -> Dict[str, Any]:
        return {"chosen": self.chosen, "candidates": self.candidates}


def tune(
    dataset: Dataset,
    methods: Optional[Sequence[str]] = None,
    *,
    validation_fraction: float = 0.2,
    seed: int = 0,
    batch_size: int = 200,
    progress: bool = False,
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    finished: Sequence[Mapping[str, Any]] = (),
    on_candidate: Optional[Callable[[Dict[str, Any]], None]] = None,
    **compare_options: Any,
) -> TuningResult:
    """Choose each method's settings by its final NLL on a validation split of the training data.

    ``compare_options`` (``num_inducing``, ``time_budget``, ``max_iterations``, …) are passed to
    every :func:`~gpflow_augmented.comparison.compare` run. ``method_options`` are a method's
    settings that are not tuned (e.g. ``class_subset_size``); every candidate carries them. A
    candidate whose validation NLL is not finite is never chosen; where none is finite, the
    method keeps its own defaults. ``finished`` are candidates an
    earlier, interrupted tuning ran (its ``candidates``), kept rather than run again;
    ``on_candidate`` is given each candidate as it finishes, so that a caller can save them."""
    if methods is None:
        methods = default_methods(dataset.num_classes)
    # On the whole training set: what the final run would refuse is refused before any candidate.
    check_methods(
        methods,
        len(dataset.X_train),
        batch_size=batch_size,
        method_options=method_options,
        train_inducing_points=compare_options.get("train_inducing_points", False),
    )
    split = validation_split(dataset, validation_fraction, seed)
    run_options = dict(seed=seed, batch_size=batch_size, progress=progress, **compare_options)
    chosen: Dict[str, Dict[str, Any]] = {}
    candidates: List[Dict[str, Any]] = []
    for method in methods:
        fixed = dict((method_options or {}).get(method, {}))
        scored = []
        for candidate in candidate_settings():
            settings = {**fixed, **candidate}
            record = _earlier(finished, method, settings)
            if record is None:
                record = _run_candidate(split, method, settings, run_options)
                if on_candidate is not None:
                    on_candidate(record)
            candidates.append(record)
            nll = record["validation_nll"]
            scored.append((nll if nll is not None and np.isfinite(nll) else math.inf, settings))
        # Ties go to the earlier candidate in the grid's order (softplus first, then the rates).
        best_nll, best = min(scored, key=lambda pair: pair[0])
        if best_nll == math.inf:
            best = {
                **fixed,
                "learning_rate": method_learning_rate(method),
                "positive_bijector": method_positive_bijector(method),
            }
        chosen[method] = dict(best)
    return TuningResult(chosen, candidates)


def _earlier(
    finished: Sequence[Mapping[str, Any]], method: str, settings: Mapping[str, Any]
) -> Optional[Dict[str, Any]]:
    for record in finished:
        if record["method"] == method and all(record.get(k) == v for k, v in settings.items()):
            return dict(record)
    return None


def _run_candidate(
    split: Dataset, method: str, settings: Dict[str, Any], run_options: Dict[str, Any]
) -> Dict[str, Any]:
    result = compare(split, [method], method_options={method: settings}, **run_options)
    final = result.methods[0].final_metrics
    return {
        "method": method,
        **settings,
        "validation_error": final["error"],
        "validation_nll": final["nll"],
        "iterations": result.methods[0].iterations,
    }
