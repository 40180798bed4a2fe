"""
A fair, reproducible head-to-head run: several methods (see
:mod:`~gpflow_augmented.comparison.baselines`) on one dataset, the same initial state, the same
minibatches, the same clock.

The clock counts training only: it is stopped while the test metrics are computed, and each
method first makes one warm-up step, which traces its ``tf.function`` and sets up its first
execution, and is then restored exactly to its initial state (the warm-up is reported as
``compile_seconds``). Test metrics are evaluated at geometrically spaced iterations, so a trace has
evenly spaced points on the log-time axis of the paper's Figure 7.
"""

import hashlib
import time
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    cast,
)

import numpy as np
import tensorflow as tf
from gpflow.config import default_float
from gpflow.kernels import SeparateIndependent
from gpflow.utilities import deepcopy
from tensorflow.python.util import deprecation

from ..checkpoints import keep_values
from ..training import Trainer, safeguard_counts, training_report, worst_fall
from ..metrics import Evaluator
from .baselines import (
    FULL_GP_METHODS,
    METHODS,
    build_method,
    check_full_gp_method,
    check_method_names,
    check_method_options,
    default_methods,
    method_positive_bijector,
)
from .methods import Method, hyperparameter_snapshot, positive_parameters
from .results import ComparisonResult, MethodResult
from ..datasets import Dataset, seeded_rows
from ..initialisation import inducing_points as kmeans_inducing_points
from ..initialisation import initial_kernel

__all__ = ["MinibatchStream", "check_methods", "compare"]


class MinibatchStream:
    """A seeded stream of minibatch indices with random access: batch t is the (t mod E)-th slice
    of epoch t // E's permutation, where E = N // B (the remainder of each epoch is dropped, so
    every batch has the same static shape). A full batch (B ≥ N) is the training set in its own
    order at every step: a full-batch step does not depend on the order, and a full GP, whose
    sites belong to its points, needs the order it was built with."""

    def __init__(self, num_data: int, batch_size: int, seed: int) -> None:
        self.num_data, self.seed = int(num_data), int(seed)
        self.batch_size = min(int(batch_size), self.num_data)
        self.batches_per_epoch = self.num_data // self.batch_size
        self._epoch, self._permutation = -1, np.arange(0)

    @property
    def full_batch(self) -> bool:
        """Whether every batch is the whole training set, in its own order."""
        return self.batch_size == self.num_data

    def indices(self, iteration: int) -> np.ndarray:
        """The training rows [B] of step ``iteration``: a seeded permutation a epoch, cut into
        batches; the same for every method."""
        if self.full_batch:
            return np.arange(self.num_data)
        epoch, slot = divmod(int(iteration), self.batches_per_epoch)
        if epoch != self._epoch:
            rng = np.random.default_rng([self.seed, epoch])
            self._epoch, self._permutation = epoch, rng.permutation(self.num_data)
        start = slot * self.batch_size
        return self._permutation[start : start + self.batch_size]


def _evaluation_iterations(growth: float = 1.25, every: Optional[int] = None):
    """1, 2, 3, 4, 5, 7, 9, 11, 14, …: geometric, at least one apart; with ``every``, also each
    multiple of it."""
    iteration, regular = 1, every
    while True:
        if regular is not None and regular <= iteration:
            iteration, regular = regular, regular + cast(int, every)
        yield iteration
        step = max(iteration + 1, int(np.ceil(iteration * growth)))
        iteration = step if regular is None else min(step, regular)


#: The options ``method_options`` may give a method (:func:`compare`).
_METHOD_OPTIONS = (
    "learning_rate",
    "positive_bijector",
    "step_size",
    "class_subset_size",
    "alpha_epsilon",
    "update_variance",
)


def compare(
    dataset: Dataset,
    methods: Optional[Sequence[str]] = None,
    *,
    num_inducing: int = 100,
    batch_size: int = 200,
    time_budget: Optional[float] = 60.0,
    max_iterations: Optional[int] = None,
    learning_rate: Optional[float] = None,
    positive_bijector: Optional[str] = None,
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    train_inducing_points: bool = False,
    per_class_kernels: bool = False,
    seed: int = 0,
    evaluation_growth: float = 1.25,
    evaluation_every: Optional[int] = None,
    trace_test_points: Optional[int] = 2000,
    callback: Optional[Callable[[Method, Dict[str, float], Evaluator], None]] = None,
    progress: bool = False,
    completed: Optional[Mapping[str, "MethodResult"]] = None,
    on_method_done: Optional[Callable[["MethodResult"], None]] = None,
) -> ComparisonResult:
    """Train every method in turn on ``dataset`` and trace its test metrics against training time.

    Each method stops when its training clock reaches ``time_budget`` seconds or it has made
    ``max_iterations`` steps, whichever comes first (at least one must be given).
    The test metrics are evaluated at geometrically spaced steps (``evaluation_growth``) and, with
    ``evaluation_every``, at every multiple of it as well.
    ``callback(method, entry, evaluator)`` is called after every evaluation with the trace entry
    and the :class:`Evaluator` that computed it (its ``latest_probabilities`` and labels ``Y``),
    e.g. to log to TensorBoard.

    The trace is evaluated on a seeded subset of at most ``trace_test_points`` test points (all of
    them if ``None``), which keeps evaluation from dominating the wall-clock time of a run on a
    large test set; the final state is also evaluated on the whole test set (``final_metrics``).

    ``methods`` defaults to :func:`~gpflow_augmented.comparison.baselines.default_methods` of the
    dataset's number of classes: ``xgpc`` and ``bernoulli`` for binary labels, the multi-class set
    otherwise.

    ``per_class_kernels`` gives every method a kernel of its own for each class (GPflow's
    ``SeparateIndependent``, each starting where the shared kernel does) instead of one kernel
    shared by the classes; the full-GP method refuses it.

    A full-GP method (``rmgpc``) holds the training set: it is given the whole set at every
    step (``batch_size`` ≥ N, where every method gets the training set in its own order), its
    inducing inputs are the training inputs, and ``num_inducing`` is the sparse methods'.

    ``learning_rate`` (Adam's) and ``positive_bijector`` ("softplus", GPflow's default, or "exp":
    :data:`~gpflow_augmented.comparison.baselines.POSITIVE_BIJECTORS`) apply to every method; by
    default each method takes its own
    (:func:`~gpflow_augmented.comparison.baselines.method_learning_rate`,
    :func:`~gpflow_augmented.comparison.baselines.method_positive_bijector`, chosen for all by the
    same rule on validation splits), which each result's ``options`` record.

    ``method_options`` gives a method its own ``learning_rate`` and ``positive_bijector`` (e.g. as
    chosen by :func:`~gpflow_augmented.comparison.tuning.tune`), (CAVI methods) ``step_size`` (a
    name in :data:`~gpflow_augmented.comparison.baselines.STEP_SIZE_SCHEDULES`);
    ``lsm-subsets`` its ``class_subset_size``;
    this package's methods ``update_variance`` (``False``: Adam trains the kernel variance). The
    others use ``learning_rate`` (or their own) and the default ρ.

    ``on_method_done(result)`` is called as each method finishes (e.g. to save it at once), and
    ``completed`` holds the results of methods an interrupted run already finished, which are
    not run again: the methods are independent, so a resumed run equals an uninterrupted one.
    TensorFlow's global seed is set to ``seed`` before each method is built, so that a method's
    random draws (``softmax``'s Monte Carlo samples) repeat from run to run.
    """
    if methods is None:
        methods = default_methods(dataset.num_classes)
    if time_budget is None and max_iterations is None:
        raise ValueError("give a time_budget, max_iterations or both")
    options = check_methods(
        methods,
        len(dataset.X_train),
        batch_size=batch_size,
        learning_rate=learning_rate,
        positive_bijector=positive_bijector,
        method_options=method_options,
        train_inducing_points=train_inducing_points,
        per_class_kernels=per_class_kernels,
    )
    X: np.ndarray = np.asarray(dataset.X_train, dtype=default_float())
    Y = np.asarray(dataset.Y_train).reshape(-1, 1).astype(np.int64)
    stream = MinibatchStream(len(X), batch_size, seed)
    num_inducing = min(num_inducing, len(X))
    Z = kmeans_inducing_points(X, num_inducing, seed=seed)
    evaluator, trace_evaluator = _evaluators(dataset, trace_test_points, seed)
    X_device, Y_device = tf.constant(X), tf.constant(Y)
    settings = _settings(
        dataset,
        stream,
        num_inducing,
        options,
        time_budget=time_budget,
        max_iterations=max_iterations,
        learning_rate=learning_rate,
        positive_bijector=positive_bijector,
        trace_test_points=trace_test_points,
        train_inducing_points=train_inducing_points,
        per_class_kernels=per_class_kernels,
        seed=seed,
    )
    results = []
    for name in methods:
        if completed is not None and name in completed:
            results.append(completed[name])
            continue
        tf.random.set_seed(seed)  # a method's own draws repeat, whatever ran before it
        # GPflow's per-class conditional calls map_fn in a way TensorFlow has deprecated: a
        # warning the user can do nothing about, kept off the terminal.
        with deprecation.silence():
            method = _built(
                name,
                options[name],
                (X, Y),
                Z,
                dataset.num_classes,
                stream,
                train_inducing_points,
                per_class_kernels,
            )
            result = _run(
                method,
                stream,
                X_device,
                Y_device,
                trace_evaluator,
                evaluator,
                time_budget,
                max_iterations,
                evaluation_growth,
                evaluation_every,
                callback,
                progress,
            )
        results.append(result._replace(options=options[name]))
        if on_method_done is not None:
            on_method_done(results[-1])
    return ComparisonResult(dataset.name, settings, results)


def _settings(
    dataset: Dataset,
    stream: MinibatchStream,
    num_inducing: int,
    method_options: Mapping[str, Any],
    **run: Any,
) -> Dict[str, Any]:
    """A comparison's settings as its result records them: the data's sizes, then :func:`compare`'s
    options (``run``: the time budget, iterations, learning rate, positive bijector, trace test
    points, trained inducing points, per-class kernels and seed) and each method's."""
    num_test = len(dataset.X_test)
    trace_test_points = run.pop("trace_test_points") or num_test
    return {
        "num_train": len(dataset.X_train),
        "num_test": num_test,
        "input_dim": np.shape(dataset.X_train)[1],
        "num_classes": dataset.num_classes,
        "num_inducing": num_inducing,
        "batch_size": stream.batch_size,
        "method_options": method_options,
        "trace_test_points": min(num_test, trace_test_points),
        **run,
    }


def _evaluators(
    dataset: Dataset, trace_test_points: Optional[int], seed: int
) -> Tuple[Evaluator, Evaluator]:
    """The final metrics' evaluator, on every test point, and the trace's, on a seeded subset of at
    most ``trace_test_points`` of them (the same evaluator where the test set is no larger)."""
    evaluator = Evaluator(dataset.X_test, dataset.Y_test)
    if trace_test_points is None or len(dataset.X_test) <= trace_test_points:
        return evaluator, evaluator
    subset = seeded_rows(len(dataset.X_test), trace_test_points, seed)
    return evaluator, Evaluator(dataset.X_test[subset], dataset.Y_test[subset])


def _built(
    name: str,
    options: Mapping[str, Any],
    data: Tuple[np.ndarray, np.ndarray],
    Z: np.ndarray,
    num_classes: int,
    stream: "MinibatchStream",
    train_inducing_points: bool,
    per_class_kernels: bool = False,
) -> Method:
    """Method ``name`` built with its chosen ``options`` (its positive bijector among them), from
    the kernel every method starts from on the training inputs (one per class with
    ``per_class_kernels``)."""
    chosen = dict(options)
    X = data[0]
    with positive_parameters(chosen.pop("positive_bijector")):
        kernel = initial_kernel(X)
        if per_class_kernels:  # copies of the one start, not C medians of the distances
            kernel = SeparateIndependent([deepcopy(kernel) for _ in range(num_classes)])
        return build_method(
            name,
            kernel,
            Z,
            num_classes,
            len(X),
            train_inducing_points=train_inducing_points,
            full_batch=stream.full_batch,
            data=data if name in FULL_GP_METHODS else None,
            **chosen,
        )


def check_methods(
    methods: Sequence[str],
    num_data: int,
    *,
    batch_size: int,
    learning_rate: Optional[float] = None,
    positive_bijector: Optional[str] = None,
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    train_inducing_points: bool = False,
    per_class_kernels: bool = False,
) -> Dict[str, Dict[str, Any]]:
    """Refuse, before anything is computed or trained, what :func:`compare` would refuse for one
    of ``methods`` on ``num_data`` training points: an unknown or repeated name, an option
    a method does not take, and a full GP on minibatches, on too many points, with trained
    inducing points or with per-class kernels. Returns each method's options (``learning_rate``,
    ``positive_bijector`` and ``step_size`` filled in, the learning rate and the bijector with
    the method's own where none is given)."""
    check_method_names(methods, what="methods")
    options = {
        name: {
            "learning_rate": learning_rate,
            "positive_bijector": positive_bijector,
            "step_size": None,
            **dict((method_options or {}).get(name, {})),
        }
        for name in methods
    }
    for name, chosen in options.items():
        unknown_options = set(chosen) - set(_METHOD_OPTIONS)
        if unknown_options:
            raise ValueError(
                f"unknown option {sorted(unknown_options)[0]!r} for method {name!r} "
                f"({', '.join(_METHOD_OPTIONS)})"
            )
        chosen["learning_rate"] = check_method_options(name, **chosen)
        if chosen["positive_bijector"] is None:
            chosen["positive_bijector"] = method_positive_bijector(name)
        if name in FULL_GP_METHODS:
            check_full_gp_method(name, num_data, batch_size >= num_data, train_inducing_points)
            if per_class_kernels:
                raise ValueError(
                    f"method {name!r} is a full GP with one kernel shared by the classes: "
                    "per-class kernels are for the sparse methods"
                )
    return options


def _warm_up(method: Method, X: tf.Tensor, Y: tf.Tensor, indices: np.ndarray) -> float:
    """Run one step, so that tracing and the first execution's set-up are paid outside the
    clock, then restore the state from before it exactly; returns the step's seconds."""
    put_back = keep_values(method.checkpoint())
    batch = tf.constant(indices)
    start = time.perf_counter()
    method.step(tf.gather(X, batch), tf.gather(Y, batch))
    seconds = time.perf_counter() - start
    put_back()
    method.failed_steps = 0
    return seconds


def _progress_bar(name: str, total: Optional[int]) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=name, leave=False, unit="it")


def _run(
    method: Method,
    stream: MinibatchStream,
    X: tf.Tensor,
    Y: tf.Tensor,
    evaluator: Evaluator,
    final_evaluator: Evaluator,
    time_budget: Optional[float],
    max_iterations: Optional[int],
    evaluation_growth: float,
    evaluation_every: Optional[int],
    callback: Optional[Callable],
    progress: bool,
) -> MethodResult:
    initial = hyperparameter_snapshot(method.model)
    digest = hashlib.sha256()
    trace: List[Dict[str, float]] = []

    def evaluate(iteration: int, seconds: float, elbo: float) -> None:
        entry = {
            "time": seconds,
            "iteration": iteration,
            "elbo": elbo,
            "step_size": method.step_size,
            **evaluator(method.model),
        }
        trace.append(entry)
        if callback is not None:
            callback(method, entry, evaluator)

    evaluate(0, 0.0, float("nan"))
    bar = _progress_bar(method.name, max_iterations) if progress else None
    schedule = _evaluation_iterations(evaluation_growth, evaluation_every)
    next_evaluation = next(schedule)
    seconds, iteration, elbo = 0.0, 0, tf.constant(np.nan)
    compile_seconds = _warm_up(method, X, Y, stream.indices(0))
    counts_before = _safeguard_counts(method)
    elbos: List[float] = []
    while True:
        if (max_iterations is not None and iteration >= max_iterations) or (
            time_budget is not None and seconds >= time_budget
        ):
            break
        indices = stream.indices(iteration)
        digest.update(indices.astype(np.int64).tobytes())
        index_tensor = tf.constant(indices)
        start = time.perf_counter()
        elbo = method.step(tf.gather(X, index_tensor), tf.gather(Y, index_tensor))
        seconds += time.perf_counter() - start
        iteration += 1
        elbos.append(float(elbo))
        if bar is not None:
            bar.update(1)
        if iteration >= next_evaluation:
            evaluate(iteration, seconds, float(elbo))
            while next_evaluation <= iteration:
                next_evaluation = next(schedule)
    if trace[-1]["iteration"] != iteration:
        evaluate(iteration, seconds, float(elbo))
    if bar is not None:
        bar.close()
    final_metrics = {**trace[-1], **final_evaluator(method.model)}
    return MethodResult(
        method.name,
        METHODS[method.name],
        trace,
        final_metrics,
        compile_seconds,
        iteration,
        method.failed_steps,
        initial,
        digest.hexdigest(),
        method,
        cast(np.ndarray, final_evaluator.latest_probabilities),
        None,
        _stability_record(method, counts_before, np.array(elbos)),
    )


def _trainer(method: Method) -> Optional[Trainer]:
    """The :class:`~gpflow_augmented.Trainer` a method of this package steps with, else
    ``None``."""
    trainer = getattr(method, "trainer", None)
    return trainer if isinstance(trainer, Trainer) else None


def _safeguard_counts(method: Method) -> Optional[Tuple[int, int]]:
    trainer = _trainer(method)
    return None if trainer is None else safeguard_counts(trainer)


def _stability_record(
    method: Method, counts_before: Optional[Tuple[int, int]], elbos: np.ndarray
) -> Dict[str, Any]:
    """What a method's steps' safeguards did during its run, for ``results.json``: the worst
    lasting fall of its per-step ELBO over the steps that returned a finite one
    (:func:`~gpflow_augmented.training.worst_fall`; a failed step is counted in ``failed_steps``),
    and for this package's step the steps its line search shortened and kept (``None`` for the
    others), as :func:`~gpflow_augmented.training.training_report` counts them."""
    finite = elbos[np.isfinite(elbos)]
    trainer = _trainer(method)
    if trainer is None or counts_before is None:
        worst, where = worst_fall(finite)
        shortened = kept = None
    else:
        report = training_report(trainer, counts_before, finite)
        shortened, kept = report.shortened_steps, report.kept_steps
        worst, where = report.worst_bound_fall, report.worst_bound_fall_step
    return {
        "shortened_steps": shortened,
        "kept_steps": kept,
        "worst_bound_fall": worst,
        "worst_bound_fall_step": where,
    }
