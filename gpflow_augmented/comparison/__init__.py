"""
Side-by-side comparison with GPflow's own classifiers: the methods (:mod:`.baselines`), the fair
protocol (:mod:`.protocol`: same data, kernel, inducing points, minibatches and clock), its records
(:mod:`.results`), verdicts over seeds (:mod:`.statistics`) and their report (:mod:`.report`),
tuning on a validation split (:mod:`.tuning`), the benchmark table (:mod:`.benchmark`), figures
(:mod:`.plots`) and the ``gpflow-augmented`` command (:mod:`.cli`).

This layer uses the library and :mod:`gpflow_augmented.sampling`, never the reverse; the benchmark
studies outside the package (the repository's ``benchmarks/``) use this layer.
"""

from .protocol import MinibatchStream, compare
from .results import (
    ComparisonResult,
    MethodResult,
    best_nll,
    time_to_common_nll,
    time_to_converge,
    time_to_reach,
)

__all__ = [
    "ComparisonResult",
    "MethodResult",
    "MinibatchStream",
    "best_nll",
    "compare",
    "time_to_common_nll",
    "time_to_converge",
    "time_to_reach",
]
