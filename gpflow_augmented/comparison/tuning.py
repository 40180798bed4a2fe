"""
Tuned against tuned: every method's settings chosen on a validation split carved from the training
data, never on the test set.

Every method gets the same grid of Adam learning rates (:data:`LEARNING_RATES`) times the same
positive bijectors (softplus, exp:
:data:`~gpflow_augmented.comparison.baselines.POSITIVE_BIJECTORS`); the CAVI methods also choose
their ρ schedule on minibatches
(:data:`~gpflow_augmented.comparison.baselines.STEP_SIZE_SCHEDULES`),
and the Dirichlet classifier its α_ε (:data:`ALPHA_EPSILONS`).
Each candidate is one :func:`~gpflow_augmented.comparison.compare` run on the training part of the
split, under the same budget as the final run, scored by its final validation NLL. The test set is
not read until the chosen settings are run on the whole training set.
"""

import math
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from .baselines import DAMPED_METHODS, POSITIVE_BIJECTORS, STEP_SIZE_SCHEDULES, default_methods
from .protocol import check_methods, compare
from ..datasets import Dataset, from_arrays, train_test_split

__all__ = [
    "ALPHA_EPSILONS",
    "LEARNING_RATES",
    "TuningResult",
    "candidate_settings",
    "settings_text",
    "tune",
    "validation_split",
]

LEARNING_RATES = (0.003, 0.01, 0.03, 0.1)
# The Dirichlet classifier's α_ε: GPyTorch's suggested 0.01 and a decade either side (Milios et al.
# tune it; it sets how far below the label's target the other classes' targets sit).
ALPHA_EPSILONS = (0.001, 0.01, 0.1)


def validation_split(dataset: Dataset, fraction: float = 0.2, seed: int = 0) -> Dataset:
    """The training data split again: a seeded ``fraction`` of it becomes the "test" set of the
    returned dataset (re-standardised with the remaining points' statistics). The test set of
    ``dataset`` is not part of it."""
    is_validation = train_test_split(len(dataset.X_train), fraction, seed)
    split = from_arrays(
        f"{dataset.name} (validation)", dataset.X_train, dataset.Y_train, is_validation
    )
    if split.num_classes != dataset.num_classes:  # the highest label fell in neither part
        split = split._replace(num_classes=dataset.num_classes)
    return split


def candidate_settings(method: str, full_batch: bool) -> List[Dict[str, Any]]:
    """The grid a method is tuned over: every learning rate and positive bijector, times every ρ
    schedule for a CAVI method on minibatches, or every α_ε for the Dirichlet classifier."""
    schedules: Sequence[Optional[str]] = (None,)
    if method in DAMPED_METHODS and not full_batch:
        schedules = tuple(STEP_SIZE_SCHEDULES)
    grid = [
        {"learning_rate": rate, "positive_bijector": bijector, "step_size": schedule}
        for bijector in POSITIVE_BIJECTORS
        for schedule in schedules
        for rate in LEARNING_RATES
    ]
    if method == "dirichlet":
        grid = [
            {**settings, "alpha_epsilon": alpha_epsilon}
            for alpha_epsilon in ALPHA_EPSILONS
            for settings in grid
        ]
    return grid


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
    **compare_options: Any,
) -> TuningResult:
    """Choose each method's settings by its final NLL on a validation split of the training data.

    ``compare_options`` (``num_inducing``, ``time_budget``, ``max_iterations``, …) are passed to
    every :func:`~gpflow_augmented.comparison.compare` run, so candidates are trained as the final
    run will be. ``method_options`` are a method's settings that are not tuned (e.g.
    ``class_subset_size``); every candidate carries them. A candidate whose validation NLL is not
    finite is never chosen."""
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
    full_batch = batch_size >= len(split.X_train)
    chosen: Dict[str, Dict[str, Any]] = {}
    candidates: List[Dict[str, Any]] = []
    for method in methods:
        scored = []
        for candidate in candidate_settings(method, full_batch):
            settings = {**dict((method_options or {}).get(method, {})), **candidate}
            result = compare(
                split,
                [method],
                method_options={method: settings},
                seed=seed,
                batch_size=batch_size,
                progress=progress,
                **compare_options,
            )
            final = result.methods[0].final_metrics
            candidates.append(
                {
                    "method": method,
                    **settings,
                    "validation_error": final["error"],
                    "validation_nll": final["nll"],
                    "iterations": result.methods[0].iterations,
                }
            )
            scored.append((final["nll"] if np.isfinite(final["nll"]) else math.inf, settings))
        # Ties go to the earlier candidate: the smaller learning rate, the default schedule.
        chosen[method] = dict(min(scored, key=lambda pair: pair[0])[1])
    return TuningResult(chosen, candidates)
