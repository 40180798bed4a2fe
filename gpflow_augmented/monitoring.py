"""
TensorBoard monitoring as :mod:`gpflow.monitor` tasks: the ELBO, the step size of q(u)'s optimizer,
the hyperparameters, test metrics as scalars, and the reliability diagram as an image.

In a training loop of your own::

    trainer = ga.Trainer(model)
    monitor = tensorboard_monitor("logs/run", model, trainer, test_data=(X_test, Y_test))
    batches = iter(ga.minibatches(X, Y, batch_size=200, seed=0))
    for step in range(1000):
        monitor(step, elbo=trainer.step(next(batches)))

The tasks work for any GPflow classifier with ``predict_y`` and ``predict_log_density`` (GPflow's
SVGP baselines too); ``optimizer`` may be a :class:`~gpflow_augmented.Trainer`,
:class:`~gpflow_augmented.CAVI`, a comparison
:class:`~gpflow_augmented.comparison.methods.Method`, or a callable returning the step size.
"""

from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, Union, cast

import numpy as np
import tensorflow as tf
from gpflow.monitor import (
    ImageToTensorBoard,
    ModelToTensorBoard,
    Monitor,
    MonitorTask,
    MonitorTaskGroup,
    ToTensorBoard,
)

from .metrics import expected_calibration_error, reliability_curve

__all__ = [
    "BoundCertificateToTensorBoard",
    "ElboToTensorBoard",
    "StepSizeToTensorBoard",
    "TestMetricsToTensorBoard",
    "ReliabilityDiagramToTensorBoard",
    "SafeguardsToTensorBoard",
    "TensorBoardTasks",
    "plot_reliability_diagram",
    "read_event_files",
    "tensorboard_monitor",
    "tensorboard_tasks",
]


class ElboToTensorBoard(ToTensorBoard):
    """Writes the ``elbo`` passed to the monitor call (``monitor(step, elbo=...)``) as ``elbo``;
    a call without it writes nothing."""

    def run(self, elbo: Optional[Any] = None, **unused_kwargs: Any) -> None:
        if elbo is not None:
            tf.summary.scalar("elbo", tf.cast(elbo, tf.float64), step=self.current_step)


class BoundCertificateToTensorBoard(ToTensorBoard):
    """Writes the :func:`~gpflow_augmented.certificate.bound_certificate` of the model on the
    training data as ``certificate/augmented``, ``certificate/exact``, ``certificate/gap`` and
    ``certificate/quadrature_error``: how far the closed-form bound is from the exact ELBO."""

    def __init__(self, log_dir: str, model: Any, train_data: Tuple[np.ndarray, np.ndarray]) -> None:
        super().__init__(log_dir)
        self.model, self.train_data = model, train_data

    def run(self, **unused_kwargs: Any) -> None:
        from .certificate import bound_certificate

        for name, value in bound_certificate(self.model, self.train_data).as_dict().items():
            tf.summary.scalar(f"certificate/{name}", value, step=self.current_step)


class StepSizeToTensorBoard(ToTensorBoard):
    """Writes q(u)'s step size as ``step_size``: ρ for CAVI, γ for natural gradients."""

    def __init__(self, log_dir: str, step_size: Callable[[], float]) -> None:
        super().__init__(log_dir)
        self.step_size = step_size

    def run(self, **unused_kwargs: Any) -> None:
        tf.summary.scalar("step_size", float(self.step_size()), step=self.current_step)


class SafeguardsToTensorBoard(ToTensorBoard):
    """Writes what the CAVI step's line search did so far as ``safeguards/shortened_steps`` and
    ``safeguards/kept_steps`` (:attr:`CAVI.shortened_steps`, :attr:`CAVI.kept_steps`;
    docs/stability.md)."""

    def __init__(self, log_dir: str, cavi: Any) -> None:
        super().__init__(log_dir)
        self.cavi = cavi

    def run(self, **unused_kwargs: Any) -> None:
        for name in ("shortened_steps", "kept_steps"):
            value = float(getattr(self.cavi, name).numpy())
            tf.summary.scalar(f"safeguards/{name}", value, step=self.current_step)


def _cavi_of(optimizer: Any) -> Any:
    """The :class:`~gpflow_augmented.CAVI` behind a CAVI, a Trainer or a comparison method that
    trains with one; ``None`` for any other optimizer."""
    from .cavi import CAVI

    for candidate in (optimizer, getattr(optimizer, "cavi", None)):
        if isinstance(candidate, CAVI):
            return candidate
    trainer = getattr(optimizer, "trainer", None)
    return getattr(trainer, "cavi", None) if trainer is not None else None


class TestMetricsToTensorBoard(ToTensorBoard):
    """Writes test error, NLL, both calibration errors and the Brier score as ``test/<metric>``.

    It evaluates the model itself unless the call passes ``metrics=`` (a dict, e.g. an entry of a
    comparison trace) with the ``probabilities`` and ``labels`` they came from, so metrics computed
    elsewhere are not computed twice. The last predicted probabilities and their labels are kept in
    ``latest_probabilities`` and ``latest_labels`` for :class:`ReliabilityDiagramToTensorBoard`.
    """

    NAMES = ("error", "nll", "ece", "classwise_ece", "brier")

    def __init__(self, log_dir: str, model: Any, test_data: Tuple[np.ndarray, np.ndarray]) -> None:
        from .metrics import Evaluator

        super().__init__(log_dir)
        self.model = model
        self.evaluator = Evaluator(*test_data)
        self.latest_probabilities: Optional[np.ndarray] = None
        self.latest_labels: Optional[np.ndarray] = None

    def run(
        self,
        metrics: Optional[Dict[str, float]] = None,
        probabilities: Optional[np.ndarray] = None,
        labels: Optional[np.ndarray] = None,
        **unused_kwargs: Any,
    ) -> None:
        if metrics is None:
            metrics = self.evaluator(self.model)
            probabilities, labels = self.evaluator.latest_probabilities, self.evaluator.Y
        if probabilities is not None:
            self.latest_probabilities = probabilities
            self.latest_labels = self.evaluator.Y if labels is None else labels
        for name in self.NAMES:
            if name in metrics:
                tf.summary.scalar(f"test/{name}", float(metrics[name]), step=self.current_step)


class ReliabilityDiagramToTensorBoard(ImageToTensorBoard):
    """The reliability diagram of the latest test predictions as the image ``reliability``."""

    def __init__(
        self, log_dir: str, metrics_task: TestMetricsToTensorBoard, num_bins: int = 15
    ) -> None:
        self.metrics_task = metrics_task
        self.num_bins = num_bins
        super().__init__(log_dir, self._plot, "reliability", fig_kw={"figsize": (4, 4)})

    def _plot(self, figure: Any, axes: Any) -> None:
        task = self.metrics_task
        if task.latest_probabilities is None or task.latest_labels is None:
            task.evaluator(task.model)
            task.latest_probabilities = task.evaluator.latest_probabilities
            task.latest_labels = task.evaluator.Y
        plot_reliability_diagram(
            axes, cast(np.ndarray, task.latest_probabilities), task.latest_labels, self.num_bins
        )


def plot_reliability_diagram(
    ax: Any, probabilities: np.ndarray, y: np.ndarray, num_bins: int = 15, title: str = ""
) -> None:
    """Accuracy against confidence per bin; the gap to the diagonal is the miscalibration."""
    curve = reliability_curve(probabilities, y, num_bins)
    centres = 0.5 * (curve.edges[:-1] + curve.edges[1:])
    width = 1.0 / num_bins
    filled = curve.count > 0
    ax.bar(
        centres[filled],
        curve.accuracy[filled],
        width=width,
        color="tab:blue",
        edgecolor="black",
        linewidth=0.5,
        label="accuracy",
    )
    ax.bar(
        centres[filled],
        (curve.confidence - curve.accuracy)[filled],
        bottom=curve.accuracy[filled],
        width=width,
        color="tab:red",
        alpha=0.3,
        edgecolor="tab:red",
        linewidth=0.5,
        label="gap",
    )
    ax.plot([0, 1], [0, 1], "k--", linewidth=1)
    ece = expected_calibration_error(probabilities, y, num_bins)
    ax.text(0.04, 0.92, f"ECE {ece:.3f}", transform=ax.transAxes)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence", ylabel="accuracy", title=title)


def _step_size_callable(optimizer: Any) -> Optional[Callable[[], float]]:
    if optimizer is None:
        return None
    if callable(optimizer) and not hasattr(optimizer, "step"):
        return optimizer
    if hasattr(optimizer, "cavi"):  # Trainer
        optimizer = optimizer.cavi
    if hasattr(optimizer, "iteration") and hasattr(optimizer, "step_size"):  # CAVI
        cavi = optimizer
        return lambda: float(cavi.step_size(cavi.iteration))
    if hasattr(type(optimizer), "step_size"):  # comparison Method
        return lambda: optimizer.step_size
    raise TypeError(f"cannot read a step size from {type(optimizer).__name__}")


class TensorBoardTasks(NamedTuple):
    """The tasks of :func:`tensorboard_monitor`, for callers who schedule them themselves."""

    every_step: List[MonitorTask]  # ELBO, hyperparameters and (with an optimizer) step size
    test_metrics: Optional[TestMetricsToTensorBoard]
    reliability: Optional[ReliabilityDiagramToTensorBoard]
    certificate: Optional[BoundCertificateToTensorBoard] = None


def tensorboard_tasks(
    log_dir: str,
    model: Any,
    optimizer: Any = None,
    *,
    test_data: Optional[Tuple[np.ndarray, np.ndarray]] = None,
    train_data: Optional[Tuple[np.ndarray, np.ndarray]] = None,
    max_size: int = 32,
) -> TensorBoardTasks:
    """The TensorBoard tasks of a run into ``log_dir``, grouped by how often they run: the ELBO,
    ``model``'s parameters (at most ``max_size`` values each) and ``optimizer``'s step size and
    safeguards every step; the test metrics of ``test_data`` and the bound certificate on
    ``train_data`` (an augmented model's) less often; the reliability diagram rarely.
    :func:`tensorboard_monitor` builds a ``gpflow.monitor.Monitor`` from them."""
    certificate = None
    if train_data is not None:
        from .models import AugmentedSVGP

        if isinstance(model, AugmentedSVGP):
            certificate = BoundCertificateToTensorBoard(log_dir, model, train_data)
    every_step: List[MonitorTask] = [
        ElboToTensorBoard(log_dir),
        ModelToTensorBoard(log_dir, model, max_size=max_size),
    ]
    step_size = _step_size_callable(optimizer)
    if step_size is not None:
        every_step.append(StepSizeToTensorBoard(log_dir, step_size))
    cavi = _cavi_of(optimizer)
    if cavi is not None:
        every_step.append(SafeguardsToTensorBoard(log_dir, cavi))
    if test_data is None:
        return TensorBoardTasks(every_step, None, None, certificate)
    metrics_task = TestMetricsToTensorBoard(log_dir, model, test_data)
    return TensorBoardTasks(
        every_step,
        metrics_task,
        ReliabilityDiagramToTensorBoard(log_dir, metrics_task),
        certificate,
    )


def tensorboard_monitor(
    log_dir: str,
    model: Any,
    optimizer: Any = None,
    *,
    test_data: Optional[Tuple[np.ndarray, np.ndarray]] = None,
    train_data: Optional[Tuple[np.ndarray, np.ndarray]] = None,
    period: int = 1,
    test_period: int = 10,
    image_period: int = 100,
    certificate_period: int = 100,
    max_size: int = 32,
) -> Monitor:
    """A :class:`gpflow.monitor.Monitor` writing to ``log_dir``: ELBO, step size, the
    hyperparameters (kernel and likelihood, vectors up to ``max_size`` entries) and, for a CAVI
    optimizer, what its line search did (:class:`SafeguardsToTensorBoard`) every ``period``
    calls; test metrics every ``test_period`` and the reliability diagram every ``image_period``
    (both only with ``test_data``); the bound certificate every ``certificate_period`` (only with
    ``train_data``, for this package's models)."""
    tasks = tensorboard_tasks(
        log_dir, model, optimizer, test_data=test_data, train_data=train_data, max_size=max_size
    )
    groups = [MonitorTaskGroup(tasks.every_step, period=period)]
    if tasks.certificate is not None:
        groups.append(MonitorTaskGroup(tasks.certificate, period=certificate_period))
    if tasks.test_metrics is not None and tasks.reliability is not None:
        groups.append(MonitorTaskGroup(tasks.test_metrics, period=test_period))
        groups.append(MonitorTaskGroup(tasks.reliability, period=image_period))
    return Monitor(*groups)


class _EventFileContents(NamedTuple):
    scalars: Dict[str, Dict[int, float]]  # tag → step → value
    images: Dict[str, Dict[int, np.ndarray]]  # tag → step → [width, height, PNG bytes]


def read_event_files(log_dir: Union[str, Path]) -> _EventFileContents:
    """What a run wrote to ``log_dir``, read back without TensorBoard (e.g. to plot it in a
    notebook). Scalars are float32, as ``tf.summary.scalar`` stores them."""
    scalars: Dict[str, Dict[int, float]] = defaultdict(dict)
    images: Dict[str, Dict[int, np.ndarray]] = defaultdict(dict)
    for path in sorted(Path(log_dir).glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                tensor = tf.make_ndarray(value.tensor)
                if value.metadata.plugin_data.plugin_name == "images":
                    images[value.tag][event.step] = tensor
                else:
                    scalars[value.tag][event.step] = float(tensor)
    return _EventFileContents(dict(scalars), dict(images))
