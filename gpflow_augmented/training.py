"""
The paper's Algorithm 1 for GPflow users: minibatches from ``tf.data``, a closed-form CAVI step on
q(u) alternating with an Adam step on the kernel hyperparameters (and, optionally, the inducing
points), a progress bar and a monitoring callback.

:class:`Trainer` holds one iteration (the CAVI optimizer and Adam, both trackable, so
``tf.train.Checkpoint(model=model, trainer=trainer)`` saves everything needed to resume);
:func:`fit` is the loop.
"""
from typing import Callable, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf
from gpflow.config import default_float
from gpflow.keras import tf_keras
from gpflow.utilities import set_trainable

from .cavi import CAVI, numerical_errors
from .convergence import GlobalParameterConvergence
from .models import AugmentedSVGP
from .schedules import RobbinsMonro, StepSizeSchedule
from .validation import OK, NumericalError, check_data, raise_for_status

__all__ = ["Trainer", "FitResult", "adam_step_if_finite", "fit", "minibatches"]


def adam_step_if_finite(
    adam: tf_keras.optimizers.Optimizer,
    loss_fn: Callable[[], tf.Tensor],
    variables: Sequence[tf.Variable],
) -> Tuple[tf.Tensor, tf.Tensor]:
    """One Adam step, skipped (every variable and Adam's state untouched) when the loss or a
    gradient is not finite. Traceable; returns (loss, applied)."""
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(variables)
        loss = loss_fn()
    gradients = tape.gradient(loss, variables)
    finite = tf.math.is_finite(loss)
    for gradient in gradients:
        finite &= tf.reduce_all(tf.math.is_finite(gradient))

    def apply() -> tf.Tensor:
        adam.apply_gradients(zip(gradients, variables))
        return tf.constant(True)

    return loss, tf.cond(finite, apply, lambda: tf.constant(False))


class Trainer(tf.Module):
    """One iteration of Algorithm 1: a CAVI step on the batch, then an Adam step on the
    hyperparameters (every trainable variable of the model; q(u) is not trainable).

    A hyperparameter step whose loss or gradient is not finite is refused before Adam touches
    anything, so a failed step never loses what was trained.
    """

    def __init__(
        self,
        model: AugmentedSVGP,
        step_size: Union[float, StepSizeSchedule] = 1.0,
        learning_rate: float = 0.01,
        train_hyperparameters: bool = True,
        jit_compile: bool = False,
    ) -> None:
        super().__init__(name="Trainer")
        self.model = model
        self.cavi = CAVI(model, step_size, jit_compile=jit_compile)
        self.adam = None
        if train_hyperparameters:
            self.adam = tf_keras.optimizers.Adam(learning_rate)
            # Slots exist from the start, so a checkpoint restores into them exactly.
            self.adam.build(model.trainable_variables)
        # CAVI and Adam in one compiled call: one dispatch and one host sync per iteration.
        self._iteration = tf.function(self._iteration_eager, jit_compile=jit_compile)

    @property
    def iteration(self) -> tf.Variable:
        return self.cavi.iteration

    def _iteration_eager(self, X: tf.Tensor, Y: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        elbo, status = self.cavi.update(X, Y)
        variables = self.model.trainable_variables
        if self.adam is None or not variables:
            return elbo, status, tf.constant(True)

        def hyperparameter_step() -> tf.Tensor:
            _, applied = adam_step_if_finite(
                self.adam, lambda: self.model.training_loss((X, Y)), variables
            )
            return applied

        applied = tf.cond(status == OK, hyperparameter_step, lambda: tf.constant(False))
        return elbo, status, applied

    def step(self, data: Tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        """One CAVI step then one Adam step; returns the batch ELBO before the CAVI step."""
        X, Y = self.cavi.prepare(data)
        with numerical_errors("the training step"):
            elbo, status, applied = self._iteration(X, Y)
        raise_for_status(status, self.model.num_classes)
        if not bool(applied):
            raise NumericalError(
                "the hyperparameter gradient is not finite; Adam did not update anything. "
                "Lower the learning rate or increase gpflow.config jitter"
            )
        return elbo


class FitResult(NamedTuple):
    trainer: Trainer
    elbo: np.ndarray  # the minibatch ELBO before each step
    converged: bool = False  # the stopping rule ended training before ``iterations``


def minibatches(
    X: np.ndarray, Y: np.ndarray, batch_size: int, seed: int, skip: int = 0
) -> tf.data.Dataset:
    """An endless, seeded stream of shuffled minibatches of a fixed size (static shapes, so the
    compiled step is traced once); ``skip`` resumes the same stream after that many batches."""
    dataset = tf.data.Dataset.from_tensor_slices((X, Y))
    dataset = dataset.shuffle(len(X), seed=seed, reshuffle_each_iteration=True).repeat()
    return dataset.batch(batch_size, drop_remainder=True).skip(skip).prefetch(2)


def fit(
    model: AugmentedSVGP,
    data: Tuple[np.ndarray, np.ndarray],
    *,
    iterations: int = 1000,
    batch_size: Optional[int] = 200,
    step_size: Optional[Union[float, StepSizeSchedule]] = None,
    learning_rate: float = 0.01,
    train_hyperparameters: bool = True,
    train_inducing_points: bool = False,
    trainer: Optional[Trainer] = None,
    callback: Optional[Callable[..., None]] = None,
    stop_rule: Optional[GlobalParameterConvergence] = None,
    seed: int = 0,
    progress: bool = True,
    jit_compile: bool = False,
) -> FitResult:
    """Train ``model`` on ``data = (X [N, D], Y [N, 1])`` for ``iterations`` steps.

    :param batch_size: minibatch size B; ``None`` or ≥ N means full-batch CAVI.
    :param step_size: ρ; default 1 (exact CAVI) for full batches, else ``RobbinsMonro()``.
    :param learning_rate: Adam's learning rate for the hyperparameters.
    :param train_inducing_points: also let Adam move the inducing inputs (the paper keeps them fixed).
    :param trainer: continue with this :class:`Trainer` (e.g. restored from a checkpoint): the
        minibatch stream resumes where its iteration counter says.
    :param stop_rule: e.g. :class:`~gpflow_augmented.GlobalParameterConvergence` (the X-GPC rule):
        stop before ``iterations`` once it reports convergence.
    :param callback: called after every step as ``callback(step, model=model, elbo=elbo)``; a
        :class:`gpflow.monitor.Monitor` fits here.
    """
    X, Y = data
    check_data(X, Y, model.num_classes, model.input_dim)
    X = np.asarray(X, dtype=default_float())
    Y = np.asarray(Y).astype(np.int64)
    num_data = len(X)
    if model.num_data is not None and model.num_data != num_data:
        raise ValueError(f"model.num_data is {model.num_data} but the data has {num_data} points")
    full_batch = batch_size is None or batch_size >= num_data
    if not full_batch and model.num_data is None:
        raise ValueError("minibatch training needs model.num_data to scale the minibatch ELBO")
    set_trainable(model.inducing_variable, train_inducing_points)
    if trainer is None:
        if step_size is None:
            step_size = 1.0 if full_batch else RobbinsMonro()
        trainer = Trainer(model, step_size, learning_rate, train_hyperparameters, jit_compile)
    if full_batch:
        stream = iter(tf.data.Dataset.from_tensors((X, Y)).repeat())
    else:
        stream = iter(minibatches(X, Y, batch_size, seed, skip=int(trainer.iteration)))

    steps = range(iterations)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc=f"CAVI {type(model).__name__}", leave=False)
    elbos = []
    converged = False
    for step in steps:
        elbo = trainer.step(next(stream))
        elbos.append(elbo)
        if callback is not None:
            callback(int(trainer.iteration), model=model, elbo=elbo)
        if stop_rule is not None and stop_rule.update(model):
            converged = True
            break
    return FitResult(trainer, np.array([float(e) for e in elbos]), converged)
