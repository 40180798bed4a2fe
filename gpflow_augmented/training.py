"""
The paper's Algorithm 1 for GPflow users: minibatches from ``tf.data``, a closed-form CAVI step on
q(u) alternating with an Adam step on the kernel hyperparameters (and, optionally, the inducing
points), a progress bar and a monitoring callback.

:class:`Trainer` holds one iteration (the CAVI optimizer and Adam, both trackable, so
``tf.train.Checkpoint(model=model, trainer=trainer)`` saves everything needed to resume);
:func:`fit` is the loop.
"""

import contextlib
import warnings
from typing import Any, Callable, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union, cast

import numpy as np
import tensorflow as tf
from gpflow.config import default_float
from gpflow.keras import tf_keras

from ._interrupts import noting_interrupts, raised_by_interrupt
from ._quiet import without_failed_step_warnings
from .cavi import CAVI
from .certificate import BoundCertificate, bound_certificate
from .convergence import GlobalParameterConvergence
from .class_subsets import ClassSubset, as_class_subset
from .distributed import loss_and_gradients, replica_share, set_trainable
from .models import AugmentedSVGP
from .schedules import InverseSquareRootDecay, RobbinsMonro, StepSizeSchedule
from .bounds import Bound, check_hyperparameter_bound
from .validation import (
    OK,
    NumericalError,
    check_data,
    check_integer,
    check_positive_number,
    is_soft,
    numerical_errors,
    raise_for_status,
)

__all__ = [
    "Trainer",
    "FitResult",
    "TrainingReport",
    "TrainingWarning",
    "adam_step_if_finite",
    "fit",
    "minibatches",
    "worst_fall",
    "raised_by_interrupt",
    "safeguard_counts",
    "training_report",
]


def adam_step_if_finite(
    adam: tf_keras.optimizers.Optimizer,
    loss_fn: Callable[[], tf.Tensor],
    variables: Sequence[tf.Variable],
) -> Tuple[tf.Tensor, tf.Tensor]:
    """One Adam step that does not stand (every variable and Adam's state as they were) when the
    loss or a gradient is not finite (:func:`_apply_if_finite`). Traceable; returns (loss,
    applied)."""
    loss, gradients = loss_and_gradients(loss_fn, variables)
    return loss, _apply_if_finite(adam, loss, gradients, variables)


def _apply_if_finite(
    adam: tf_keras.optimizers.Optimizer,
    loss: tf.Tensor,
    gradients: Sequence[tf.Tensor],
    variables: Sequence[tf.Variable],
    allowed: Union[bool, tf.Tensor] = True,
) -> tf.Tensor:
    """Apply the gradients with Adam unless ``allowed`` is false, the loss or a gradient is not
    finite, or what Adam writes is not (a learning rate made NaN or huge after construction, an
    overflow); returns whether the step stands. A step that does not stand leaves every variable
    and Adam's own state as they were. In a cross-replica context the (already summed) gradients
    update every replica.

    Adam is applied whatever the test says and undone by a select, not skipped by a branch: XLA on
    a GPU reads a conditional's predicate on the host, and the select costs one pass over the
    hyperparameters and Adam's slots."""
    stands = tf.logical_and(allowed, tf.math.is_finite(loss))
    for gradient in gradients:
        stands &= tf.reduce_all(tf.math.is_finite(gradient))
    with tf.init_scope():  # Adam's slots must exist before they are saved
        adam.build(list(variables))
    state = [*variables, *adam.variables]
    before = [tf.identity(v) for v in state]
    with tf.control_dependencies(before):
        adam.apply_gradients(zip(gradients, variables))
    for variable in variables:
        stands &= tf.reduce_all(tf.math.is_finite(variable))
    for variable, value in zip(state, before):
        variable.assign(tf.where(stands, variable, value))
    return stands


class Trainer(tf.Module):
    """One iteration of Algorithm 1: a CAVI step on the batch, then an Adam step on the
    hyperparameters (every trainable variable of the model; q(u) is not trainable).

    For an augmented model the hyperparameter gradient is taken after the CAVI step. For a model on
    the exact bound (``scheme="exact"``) one evaluation of the expected log-likelihood gives both:
    its derivatives with respect to the marginals are the step's sites, and the same backward pass
    continues to the hyperparameters, so the gradient is taken at q(u) before the step.

    A hyperparameter step whose loss or gradient is not finite, or whose batch is refused, does
    not stand: Adam's write is undone by a select, its own state with it, so a failed step never
    loses what was trained.

    :param learning_rate: Adam's learning rate for the hyperparameters at the first step; default
        the model's bound's ``learning_rate``.
    :param learning_rate_decay_steps: Adam's rate at its step t is ``learning_rate`` / √(1 + t /
        ``learning_rate_decay_steps``)
        (:class:`~gpflow_augmented.schedules.InverseSquareRootDecay`); default the model's
        bound's (:data:`~gpflow_augmented.EXACT_LEARNING_RATE_DECAY_STEPS` on the exact bound);
        ``math.inf`` keeps it constant.
    :param strategy: a ``tf.distribute`` strategy (e.g. ``MirroredStrategy``) whose replicas
        share each batch: the model must have been built in ``strategy.scope()``, and batches are
        the strategy's distributed values (``fit(..., strategy=...)`` does this). See
        :mod:`~gpflow_augmented.distributed`.
    :param hyperparameter_bound: the bound Adam maximises over the hyperparameters: ``None``
        (the model's own, augmented or exact) or an :class:`~gpflow_augmented.ExactBound` (the
        exact ELBO, also for an augmented q(u) step: the augmented bound's gap depends on the
        kernel, so maximising it biases the hyperparameters).
    :param warm_start_iterations: see :class:`~gpflow_augmented.CAVI`; default the model's
        bound's (:data:`~gpflow_augmented.EXACT_WARM_START` on the exact bound, else 0).
    :param update_variance: see :class:`~gpflow_augmented.CAVI`: by default (``None``) the
        kernel variance is updated in closed form with q(u) wherever that applies, and Adam trains
        the other hyperparameters; never when ``train_hyperparameters`` is false.
    :param averaging: see :class:`~gpflow_augmented.CAVI`: η of the average of q(u)'s minibatch
        iterates that the model holds; default the model's bound's ``averaging`` (10 on the exact
        bound, ``math.inf``, the last iterate, on the augmented ones).
    :param label_strata: see :class:`~gpflow_augmented.CAVI`: each class's own points as a
        stratum of a minibatch's estimate; default the model's bound's (on for the exact bound).

    A loop of your own, checkpointed (:func:`~gpflow_augmented.restore_checkpoint` resumes it)::

        trainer = ga.Trainer(model, step_size=ga.RobbinsMonro())
        checkpoint = tf.train.Checkpoint(model=model, trainer=trainer)
        for step, batch in enumerate(ga.minibatches(X, Y, batch_size=200, seed=0).take(1000)):
            elbo = trainer.step(batch)
        checkpoint.save("checkpoints/run")
    """

    def __init__(
        self,
        model: AugmentedSVGP,
        step_size: Union[float, StepSizeSchedule] = 1.0,
        learning_rate: Optional[float] = None,
        train_hyperparameters: bool = True,
        jit_compile: bool = False,
        class_subset_size: Optional[int] = None,
        seed: int = 0,
        strategy: Optional[tf.distribute.Strategy] = None,
        hyperparameter_bound: Optional[Bound] = None,
        warm_start_iterations: Optional[int] = None,
        update_variance: Optional[bool] = None,
        learning_rate_decay_steps: Optional[float] = None,
        averaging: Optional[float] = None,
        label_strata: Optional[bool] = None,
    ) -> None:
        super().__init__(name="Trainer")
        if learning_rate is None:
            learning_rate = model.bound.learning_rate
        learning_rate = check_positive_number(learning_rate, "learning_rate", allow_zero=True)
        if learning_rate_decay_steps is None:
            learning_rate_decay_steps = model.bound.learning_rate_decay_steps
        self.hyperparameter_bound = check_hyperparameter_bound(
            hyperparameter_bound, model.bound, model.likelihood
        )
        self.model = model
        self.strategy = strategy
        if strategy is not None and model.learns_class_weights:
            raise ValueError("class weights are not supported under a tf.distribute strategy")
        if strategy is not None and not strategy.extended.variable_created_in_scope(
            model.q_mu.unconstrained_variable
        ):
            raise ValueError(
                "the model must be built inside strategy.scope() to train under a tf.distribute "
                "strategy"
            )
        with self._scope():
            self.cavi = CAVI(
                model,
                step_size,
                class_subset_size=class_subset_size,
                seed=seed,
                warm_start_iterations=warm_start_iterations,
                jit_compile=jit_compile,
                update_variance=update_variance if train_hyperparameters else False,
                averaging=averaging,
                label_strata=label_strata,
            )
            #: Adam's rate at its first step; assign to change it
            self.learning_rate = tf.Variable(
                learning_rate, dtype=tf.float32, trainable=False, name="learning_rate"
            )
            decay = InverseSquareRootDecay(self.learning_rate, learning_rate_decay_steps)
            self.adam = None
            if train_hyperparameters:
                self.adam = tf_keras.optimizers.Adam(decay)
                # Slots exist from the start, so a checkpoint restores into them exactly.
                self.adam.build(self.hyperparameter_variables)
        # CAVI and Adam in one compiled call: one dispatch and one host sync per iteration. No
        # AutoGraph, as for CAVI's own step: nothing in it is Python control flow on tensors.
        self._iteration = tf.function(
            self._iteration_eager, jit_compile=jit_compile, autograph=False
        )
        self._halved_iteration = tf.function(
            self._halved_iteration_eager, jit_compile=jit_compile, autograph=False
        )

    def _scope(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext() if self.strategy is None else self.strategy.scope()

    @property
    def iteration(self) -> tf.Variable:
        """The steps taken (CAVI's counter; it drives ρ and is checkpointed)."""
        return self.cavi.iteration

    @property
    def hyperparameter_variables(self) -> List[tf.Variable]:
        """The variables Adam trains: the model's trainable ones but those CAVI assigns in closed
        form (:attr:`CAVI.owned_variables`)."""
        owned = {id(v) for v in self.cavi.owned_variables}
        return [v for v in self.model.trainable_variables if id(v) not in owned]

    def _iteration_eager(
        self, X: tf.Tensor, Y: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """One iteration on one device (:meth:`_halved_iteration_eager` without halvings)."""
        return self._halved_iteration_eager(X, Y, None)

    def _halved_iteration_eager(
        self, X: tf.Tensor, Y: tf.Tensor, halvings: Optional[tf.Tensor]
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """(the batch ELBO, the status, whether Adam's step stands, retry): CAVI's step
        (:meth:`CAVI.update`; under a strategy its ρ halved ``halvings`` times), then Adam's on
        the same batch, unless the step is to be taken again."""
        strategy = self.strategy or tf.distribute.get_strategy()
        variables = self.hyperparameter_variables if self.adam is not None else []
        update = strategy.run(
            lambda X, Y: self.cavi.update(
                X,
                Y,
                hyperparameters=variables,
                hyperparameter_bound=self.hyperparameter_bound,
                halvings=halvings,
            ),
            args=(X, Y),
        )
        # Every replica computed the same values from all-reduced sums.
        elbo, status, loss, gradients, retry = tf.nest.map_structure(
            lambda v: strategy.experimental_local_results(v)[0], update
        )
        if not variables:
            return elbo, status, tf.constant(True), retry
        allowed = (status == OK) & ~retry
        applied = _apply_if_finite(self.adam, loss, gradients, variables, allowed=allowed)
        return elbo, status, applied, retry

    def _iterate(self, X: tf.Tensor, Y: tf.Tensor, halvings: int) -> Tuple[tf.Tensor, ...]:
        """The compiled iteration: on one device (X, Y) → its search's loop inside; under a
        strategy with ``halvings`` as a tensor (one trace for every count)."""
        if self.strategy is None:
            return self._iteration(X, Y)
        return self._halved_iteration(X, Y, tf.constant(halvings))

    def training_loss(
        self, X: tf.Tensor, Y: tf.Tensor, subset: Optional[ClassSubset] = None
    ) -> tf.Tensor:
        """The loss Adam minimises, -(ELBO + log prior of the hyperparameters), on the batch
        (validated); with a :class:`ClassSubset`, its class-subsampled estimate. In a replica it
        is weighted by the replica's share of the global batch, so the replicas' losses add up to
        the global batch's."""
        model = self.model
        bound = self.hyperparameter_bound or model.bound
        elbo = model.elbo((X, Y), as_class_subset(subset, model.num_classes), bound)
        return -replica_share(X) * (elbo + model.log_prior_density())

    def step(self, data: Tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        """One CAVI step then one Adam step; returns the batch ELBO before the CAVI step."""
        X, Y = data if self.strategy is not None else self.cavi.prepare(data)
        with without_failed_step_warnings(), numerical_errors("the training step"):
            # Under a strategy a step whose bound fell is taken again with ρ halved
            # (CAVI.update's halvings); elsewhere the search's loop is inside the step.
            halvings = 0
            elbo, status, applied, retry = self._iterate(X, Y, halvings)
            while bool(retry):
                halvings += 1
                elbo, status, applied, retry = self._iterate(X, Y, halvings)
        raise_for_status(status, self.model.num_classes)
        if not bool(applied):
            raise NumericalError(
                "the hyperparameter step was not finite (the loss, its gradient or the values Adam "
                "would write); nothing was updated. Lower the learning rate or increase "
                "gpflow.config jitter"
            )
        return elbo


class TrainingReport(NamedTuple):
    """What the steps' safeguards did during one :func:`fit` (docs/stability.md)."""

    #: steps taken
    steps: int
    #: steps whose line search took a shorter ρ than the schedule's, because the batch's bound
    #: fell at the longer one
    shortened_steps: int
    #: steps on which no ρ the line search tried raised the batch's bound, so q(u) was kept
    kept_steps: int
    #: the largest fall of the median of 10 successive batch ELBOs below the median of the 50
    #: before them, in units of that median's magnitude (0 when none fell below it;
    #: :func:`worst_fall`)
    worst_bound_fall: float
    #: the last step of those 10 (0 if none)
    worst_bound_fall_step: int

    @property
    def collapsed(self) -> bool:
        """The batch ELBO's recent median fell more than :data:`_BOUND_COLLAPSE` times the
        earlier median's magnitude below it."""
        return self.worst_bound_fall > _BOUND_COLLAPSE

    @property
    def keeps_failing(self) -> bool:
        """At least a tenth of the steps were kept."""
        return bool(self.steps) and self.kept_steps >= 0.1 * self.steps

    def warning(self) -> Optional[str]:
        """A sentence for the user when the run :attr:`collapsed` or :attr:`keeps_failing`;
        else ``None``."""
        problems = []
        if self.collapsed:
            problems.append(
                f"by step {self.worst_bound_fall_step} the batch ELBO had fallen "
                f"{self.worst_bound_fall:.3g} times its earlier median's magnitude below it"
            )
        if self.keeps_failing:
            problems.append(
                f"{self.kept_steps} of {self.steps} steps found no step size that raised their "
                "batch's bound and kept q(u)"
            )
        if not problems:
            return None
        return (
            "training may have diverged: "
            + "; ".join(problems)
            + ". Check the held-out error, and consider a smaller step size schedule or "
            "learning rate (FitResult.report has the counts)"
        )


#: A batch ELBO whose recent median is this many times the earlier median's magnitude below it has
#: collapsed (:func:`worst_fall`).
_BOUND_COLLAPSE = 10.0


class TrainingWarning(UserWarning):
    """:func:`fit` saw its bound collapse or its steps keep failing (:class:`TrainingReport`)."""


def worst_fall(elbos: np.ndarray, recent: int = 10, window: int = 50) -> Tuple[float, int]:
    """(the largest fall of the median of ``recent`` batch ELBOs below the median of the
    ``window`` before them, relative to that median's magnitude; the 1-based step that ended the
    recent ones), (0, 0) where none fell below. Medians, because one batch holding a rare class's
    points can have ten times the typical batch's ELBO in a healthy run; a collapse lasts."""
    worst, where = 0.0, 0
    for end in range(recent + 1, len(elbos) + 1):
        before = float(np.median(elbos[max(0, end - recent - window) : end - recent]))
        fall = (before - float(np.median(elbos[end - recent : end]))) / max(abs(before), 1e-300)
        if np.isfinite(fall) and fall > worst:
            worst, where = fall, end
    return worst, where


class FitResult(NamedTuple):
    """What :func:`fit` returns (and a ``KeyboardInterrupt`` out of it carries as
    ``fit_result``)."""

    #: the :class:`Trainer` that took the steps; ``fit(..., trainer=result.trainer)`` continues
    trainer: Trainer
    #: the minibatch ELBO before each step [steps]
    elbo: np.ndarray
    #: the stopping rule ended training before ``iterations``
    converged: bool = False
    #: augmented bound, exact ELBO and their gap on the training data at the end (``None`` when
    #: the data were a stream or training ran under a strategy)
    certificate: Optional[BoundCertificate] = None
    #: what the steps' safeguards did during this fit
    report: Optional[TrainingReport] = None


def minibatches(
    X: np.ndarray, Y: np.ndarray, batch_size: int, seed: int, skip: int = 0
) -> tf.data.Dataset:
    """An endless, seeded stream of shuffled minibatches of a fixed size (static shapes, so the
    compiled step is traced once); ``skip`` resumes the same stream after that many batches.

    It shuffles arrays held in memory; for data that does not fit, pass ``fit`` a
    ``tf.data.Dataset`` of batches instead."""
    dataset = tf.data.Dataset.from_tensor_slices((X, Y))
    dataset = dataset.shuffle(len(X), seed=seed, reshuffle_each_iteration=True).repeat()
    return dataset.batch(batch_size, drop_remainder=True).skip(skip).prefetch(2)


def fit(
    model: AugmentedSVGP,
    data: Union[Tuple[np.ndarray, np.ndarray], tf.data.Dataset],
    *,
    iterations: int = 1000,
    batch_size: Optional[int] = 200,
    step_size: Optional[Union[float, StepSizeSchedule]] = None,
    learning_rate: Optional[float] = None,
    train_hyperparameters: bool = True,
    train_inducing_points: bool = False,
    trainer: Optional[Trainer] = None,
    callback: Optional[Callable[..., None]] = None,
    stop_rule: Optional[GlobalParameterConvergence] = None,
    class_subset_size: Optional[int] = None,
    seed: int = 0,
    progress: bool = True,
    jit_compile: bool = False,
    strategy: Optional[tf.distribute.Strategy] = None,
    hyperparameter_bound: Optional[Bound] = None,
    warm_start_iterations: Optional[int] = None,
    update_variance: Optional[bool] = None,
    averaging: Optional[float] = None,
    label_strata: Optional[bool] = None,
) -> FitResult:
    """Train ``model`` on ``data = (X [N, D], Y [N, 1])`` for ``iterations`` steps.

    ``data`` may instead be a ``tf.data.Dataset`` of batches ``(X [B, D], Y [B, 1])`` (repeated
    when it ends), for data streamed from disk or generated: nothing then depends on N but
    ``model.num_data``, which must be set. Batches are validated on the device as they arrive.

    :param batch_size: minibatch size B; ``None`` or ≥ N means full-batch CAVI.
    :param step_size: ρ; default 1 (exact CAVI) for full batches, else ``RobbinsMonro()``.
    :param learning_rate: Adam's learning rate for the hyperparameters; default the model's
        bound's (:data:`~gpflow_augmented.EXACT_LEARNING_RATE` on the exact bound).
    :param train_inducing_points: also let Adam move the inducing inputs (the paper keeps them
          fixed).
    :param trainer: continue with this :class:`Trainer` (e.g. restored from a checkpoint): the
        minibatch stream resumes where its iteration counter says.
    :param stop_rule: e.g. :class:`~gpflow_augmented.GlobalParameterConvergence` (the X-GPC rule):
        stop before ``iterations`` once it reports convergence.
    :param class_subset_size: update only this many randomly drawn classes per step (paper,
        Algorithm 2), for many classes sharing one kernel; the hyperparameter step uses the same
        subset.
    :param seed: seeds the minibatch order and the class subsets.
    :param strategy: a ``tf.distribute`` strategy whose replicas split every batch (the model must
        be built in its ``scope()``); ``MirroredStrategy`` for one machine's devices,
        ``MultiWorkerMirroredStrategy`` for several machines.
    :param hyperparameter_bound: ``None`` (the model's) or an
        :class:`~gpflow_augmented.ExactBound`: the bound Adam maximises (see :class:`Trainer`).
    :param warm_start_iterations: a model on the exact bound takes this many first steps with the
        augmented bound's sites (see :class:`~gpflow_augmented.CAVI`); default the bound's,
        :data:`~gpflow_augmented.EXACT_WARM_START` (on the full batch too: from the prior, exact
        steps at ρ = 1 can oscillate before they settle).
    :param update_variance: the kernel variance in closed form with q(u) (default: wherever it
        applies; see :class:`~gpflow_augmented.CAVI`).
    :param averaging: η of the average of q(u)'s minibatch iterates that the model holds (see
        :class:`~gpflow_augmented.CAVI`); default the model's bound's ``averaging`` (10 on the
        exact bound, ``math.inf``, the last iterate, on the augmented ones).
    :param label_strata: each class's own points as a stratum of a minibatch's estimate of the
        data's statistics (see :class:`~gpflow_augmented.CAVI`); default the model's bound's (on
        for the exact bound).
    :param callback: called after every step as ``callback(step, model=model, elbo=elbo)``; a
        :class:`gpflow.monitor.Monitor` fits here.

    On Ctrl-C the ``KeyboardInterrupt`` carries ``fit_result``, the :class:`FitResult` so far
    (its ``trainer`` resumes training).

    With TensorBoard monitoring (``tensorboard --logdir logs``)::

        monitor = ga.monitoring.tensorboard_monitor("logs/fit", model, test_data=(X_test, Y_test))
        result = ga.fit(model, (X, Y), iterations=1000, callback=monitor)
        print(result.report)  # steps shortened or kept, the worst fall of the bound
    """
    iterations = check_integer(iterations, "iterations")
    if batch_size is not None:
        batch_size = check_integer(batch_size, "batch_size")
    batches, full_batch, arrays = _batches(model, data, batch_size, seed)
    set_trainable(model.inducing_variable, train_inducing_points)
    if trainer is None:
        if step_size is None:
            step_size = 1.0 if full_batch else RobbinsMonro()
        trainer = Trainer(
            model,
            step_size,
            learning_rate,
            train_hyperparameters,
            jit_compile,
            class_subset_size=class_subset_size,
            seed=seed,
            strategy=strategy,
            hyperparameter_bound=hyperparameter_bound,
            warm_start_iterations=warm_start_iterations,
            update_variance=update_variance,
            averaging=averaging,
            label_strata=label_strata,
        )
    else:
        _check_continued_trainer(trainer, model, strategy)
    if not full_batch:
        batches = batches.skip(int(trainer.iteration.numpy()))  # resume the same stream
    if strategy is not None:
        batches = strategy.experimental_distribute_dataset(batches)
    counts_before = safeguard_counts(trainer)
    elbos, converged = _steps(
        trainer, iter(batches), iterations, callback, stop_rule, progress, counts_before
    )
    certificate = None
    if arrays is not None and strategy is None:
        certificate = bound_certificate(model, arrays)
    report = training_report(trainer, counts_before, elbos)
    message = report.warning()
    if message is not None:
        warnings.warn(message, TrainingWarning, stacklevel=2)
    return FitResult(trainer, elbos, converged, certificate, report)


def _batches(
    model: AugmentedSVGP,
    data: Union[Tuple[np.ndarray, np.ndarray], tf.data.Dataset],
    batch_size: Optional[int],
    seed: int,
) -> Tuple[tf.data.Dataset, bool, Optional[Tuple[np.ndarray, np.ndarray]]]:
    """(the endless stream of batches, whether each is the full data, the checked arrays (X, Y)
    or ``None`` for a ``tf.data.Dataset``) of :func:`fit`'s ``data``, checked against ``model``."""
    if isinstance(data, tf.data.Dataset):
        if model.num_data is None:
            raise ValueError(
                "training from a tf.data.Dataset needs model.num_data (the number of "
                "training points) to scale the minibatch ELBO"
            )
        return data.map(lambda X, Y: (tf.cast(X, default_float()), Y)).repeat(), False, None
    X, Y = data
    check_data(X, Y, model.num_classes, model.input_dim, model.accepts_soft_labels)
    X = np.asarray(X, dtype=default_float())
    soft = model.accepts_soft_labels and is_soft(Y, model.num_classes)
    Y = np.asarray(Y, dtype=default_float()) if soft else np.asarray(Y).astype(np.int64)
    num_data = len(X)
    if model.num_data is not None and model.num_data != num_data:
        raise ValueError(f"model.num_data is {model.num_data} but the data has {num_data} points")
    full_batch = batch_size is None or batch_size >= num_data
    if not full_batch and model.num_data is None:
        raise ValueError("minibatch training needs model.num_data to scale the minibatch ELBO")
    if full_batch:
        return tf.data.Dataset.from_tensors((X, Y)).repeat(), True, (X, Y)
    return minibatches(X, Y, cast(int, batch_size), seed), False, (X, Y)


def _check_continued_trainer(
    trainer: Trainer, model: AugmentedSVGP, strategy: Optional[tf.distribute.Strategy]
) -> None:
    """Refuse a trainer :func:`fit` cannot continue for ``model`` under ``strategy``."""
    if trainer.model is not model:
        raise ValueError(
            f"the trainer passed to fit trains another {type(trainer.model).__name__} "
            "object, not this model; pass the model the trainer was built for, or no "
            "trainer"
        )
    if strategy is not trainer.strategy:
        raise ValueError("pass the strategy to the Trainer that fit continues")


def _steps(
    trainer: Trainer,
    stream: Any,
    iterations: int,
    callback: Optional[Callable[..., None]],
    stop_rule: Optional[GlobalParameterConvergence],
    progress: bool,
    counts_before: Tuple[int, int],
) -> Tuple[np.ndarray, bool]:
    """:func:`fit`'s loop: (each step's batch ELBO, whether ``stop_rule`` stopped it). On Ctrl-C
    the ``KeyboardInterrupt`` carries ``fit_result``, what was trained so far."""
    model = trainer.model
    steps: Iterable[int] = range(iterations)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc=f"CAVI {type(model).__name__}", leave=False)
    elbos = []
    with noting_interrupts():
        try:
            for _ in steps:
                elbo = trainer.step(next(stream))
                elbos.append(elbo)
                if callback is not None:
                    callback(int(trainer.iteration.numpy()), model=model, elbo=elbo)
                if stop_rule is not None and stop_rule.update(model):
                    return np.array([float(e) for e in elbos]), True
        except BaseException as error:
            if not raised_by_interrupt(error):
                raise
            # Ctrl-C between or during steps: a step assigns all or nothing, so the model holds the
            # last finished step. What was trained travels with the exception; fit(...,
            # trainer=interrupt.fit_result.trainer) continues the same stream.
            interrupt = error if isinstance(error, KeyboardInterrupt) else KeyboardInterrupt()
            values = np.array([float(e) for e in elbos])
            interrupt.fit_result = FitResult(  # type: ignore[attr-defined]
                trainer, values, False, None, training_report(trainer, counts_before, values)
            )
            if interrupt is error:
                raise
            raise interrupt from error
    return np.array([float(e) for e in elbos]), False


def safeguard_counts(trainer: Trainer) -> Tuple[int, int]:
    """(steps shortened, steps kept) by the trainer's line search so far."""
    cavi = trainer.cavi
    return int(cavi.shortened_steps.numpy()), int(cavi.kept_steps.numpy())


def training_report(
    trainer: Trainer, counts_before: Tuple[int, int], elbos: np.ndarray
) -> TrainingReport:
    """The :class:`TrainingReport` of the steps since ``counts_before`` (:func:`safeguard_counts`
    then), whose batch ELBOs were ``elbos``."""
    shortened, kept = (
        after - before for after, before in zip(safeguard_counts(trainer), counts_before)
    )
    worst, where = worst_fall(elbos)
    return TrainingReport(len(elbos), shortened, kept, worst, where)
