"""
:class:`RunOptions`: the settings of a comparison run (``compare``) or of a benchmark of several,
typed, in one frozen value. The command line builds it once from its arguments
(:meth:`RunOptions.from_arguments`); the runs read it and never change it: a run that needs other
settings (a dataset's own default methods, the folder it claimed) makes a new value with
:func:`dataclasses.replace`.
"""

import argparse
import dataclasses
from typing import Any, Dict, Optional, Tuple

__all__ = ["RunOptions"]


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """What a comparison run is told; the command line's options of the same names."""

    #: the methods to compare; ``None``: the dataset's defaults (``baselines.default_methods``)
    methods: Optional[Tuple[str, ...]] = None
    num_inducing: int = 100
    batch_size: int = 200
    #: training seconds per method; ``None``: no limit (then ``max_iterations`` stops it)
    time_budget: Optional[float] = 60.0
    max_iterations: Optional[int] = None
    #: Adam's rate and the positive bijector for every method; ``None``: each method's own
    learning_rate: Optional[float] = None
    positive_bijector: Optional[str] = None
    #: choose each method's settings on a validation split of the training data first
    tune: bool = False
    #: each tuning candidate's training seconds; ``None``: ``time_budget``'s
    tune_budget: Optional[float] = None
    class_subset_size: Optional[int] = None
    alpha_epsilon: Optional[float] = None
    train_inducing_points: bool = False
    #: every method with a kernel of its own per class (``SeparateIndependent``), not one shared
    per_class_kernels: bool = False
    trace_test_points: Optional[int] = 2000
    #: the seeds the command runs, each into ``seed-<s>/`` of its output; ``seed`` is the one a
    #: single run uses (each seed's run is these options with ``seed`` replaced)
    seeds: Tuple[int, ...] = (0,)
    seed: int = 0
    test_fraction: float = 0.2
    #: a progress bar; ``None``: where stderr is a terminal
    progress: Optional[bool] = None
    tensorboard: bool = True
    #: the output folder, and what to do with an earlier run found there
    output: Optional[str] = None
    resume: bool = False
    overwrite: bool = False
    #: where the data came from: ``compare``'s data and test files, a benchmark's folder
    data: Optional[str] = None
    test_file: Optional[str] = None
    data_dir: Optional[str] = None
    #: a benchmark's datasets (``None``: its defaults), binary tasks, or only its report re-read
    datasets: Optional[Tuple[str, ...]] = None
    binary: bool = False
    report_only: bool = False
    #: a ``step_times.json`` measured earlier in the same run: the isolated steps' timings depend
    #: on the machine and the code, not the seed, so a later seed reuses them
    step_times_from: Optional[str] = None

    @classmethod
    def from_arguments(cls, arguments: argparse.Namespace) -> "RunOptions":
        """The options of the parsed command line (its other arguments are the command's own);
        a time budget ≤ 0 means none."""
        names = {field.name for field in dataclasses.fields(cls)}
        values: Dict[str, Any] = {k: v for k, v in vars(arguments).items() if k in names}
        for key in ("methods", "datasets", "seeds"):
            if values.get(key) is not None:
                values[key] = tuple(values[key])
        if values.get("time_budget") is not None and values["time_budget"] <= 0:
            values["time_budget"] = None
        if values.get("seeds"):
            values["seed"] = values["seeds"][0]
        return cls(**values)

    def for_seed(self, seed: int, output: str) -> "RunOptions":
        """The options of one seed's run, into its own folder."""
        return dataclasses.replace(self, seed=seed, seeds=(seed,), output=output)
