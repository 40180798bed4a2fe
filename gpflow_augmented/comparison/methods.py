"""How each kind of method in a comparison is trained, one step at a time: the :class:`Method`
interface and its kinds, this package's CAVI step + Adam (:class:`AugmentedMethod`), GPflow's
``NaturalGradient`` + Adam, Adam alone, and expectation propagation + Adam. Which method is which
kind, with its settings, is :mod:`.baselines`'s registry."""

import abc
import contextlib
import dataclasses
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.config import default_float
from gpflow.keras import tf_keras
from gpflow.kernels import Kernel
from gpflow.models.training_mixins import InternalDataTrainingLossMixin
from gpflow.optimizers import NaturalGradient
from gpflow.utilities import set_trainable

from .._quiet import without_failed_step_warnings
from ..models import AugmentedSVGP
from ..projection import inducing_inputs
from ..schedules import StepSizeSchedule
from ..training import Trainer, adam_step_if_finite
from ..validation import NumericalError
from .sep import ExpectationPropagation, ExpectationPropagationModel

__all__ = [
    "Method",
    "AugmentedMethod",
    "NaturalGradientWarmUp",
    "NaturalGradientMethod",
    "AdamMethod",
    "ExpectationPropagationMethod",
    "positive_parameters",
    "hyperparameter_snapshot",
]


class Method(abc.ABC):
    """A model and its training step. ``step`` returns the minibatch ELBO (each method's own
    bound, so values are comparable within a method, not across methods)."""

    name: str
    model: gpflow.models.GPModel
    failed_steps: int = 0

    def step(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        """One training step on the batch (X, Y). A step that fails is counted
        (``failed_steps``), not raised, so TensorFlow's own lines about it are kept off the
        terminal, as this package's step keeps them."""
        with without_failed_step_warnings():
            return self._step(X, Y)

    @abc.abstractmethod
    def _step(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor: ...

    @abc.abstractmethod
    def checkpoint(self) -> tf.train.Checkpoint:
        """Everything a step changes (model, optimizers, schedules), e.g. to undo a warm-up step."""

    @abc.abstractmethod
    def iteration_function(self) -> Callable[[tf.Tensor, tf.Tensor], object]:
        """One whole iteration, as :meth:`step` runs it but not compiled and without its host-side
        bookkeeping: (X, Y) -> the step's tensors. It is what gets compiled with XLA to time or
        export the step (``benchmarks/hlo_export.py``, outside the package)."""

    @property
    @abc.abstractmethod
    def step_size(self) -> float:
        """The current step size of q(u)'s optimizer: ρ (CAVI), γ (natural gradient) or Adam's
        rate."""


class AugmentedMethod(Method):
    """This package's model trained by :class:`~gpflow_augmented.Trainer` (CAVI, then Adam)."""

    def __init__(
        self,
        name: str,
        model: AugmentedSVGP,
        learning_rate: float,
        step_size: Union[float, StepSizeSchedule],
        **trainer_options: Any,
    ) -> None:
        self.name, self.model = name, model
        self.trainer = Trainer(model, step_size, learning_rate, **trainer_options)

    def checkpoint(self) -> tf.train.Checkpoint:
        return tf.train.Checkpoint(trainer=self.trainer)

    def iteration_function(self) -> Callable[[tf.Tensor, tf.Tensor], object]:
        return self.trainer._iteration_eager

    def _step(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        try:
            return self.trainer.step((X, Y))
        except NumericalError:
            self.failed_steps += 1
            return tf.constant(np.nan, default_float())

    @property
    def step_size(self) -> float:
        return float(self.trainer.cavi.step_size(self.trainer.iteration))


class NaturalGradientWarmUp(tf.Module):
    """The natural-gradient step size of the paper authors' GPflow baseline: γ starts at
    ``start``, grows by ``growth`` after every successful step up to ``maximum``, and is multiplied
    by ``fallback`` whenever a step fails (its Cholesky or a non-finite result)."""

    def __init__(
        self,
        start: float = 1e-5,
        growth: float = 10**0.1,
        maximum: float = 0.1,
        fallback: float = 1e-3,
    ) -> None:
        super().__init__(name="NaturalGradientWarmUp")
        if not 0 < start <= maximum or growth < 1 or not 0 < fallback < 1:
            raise ValueError("need 0 < start ≤ maximum, growth ≥ 1 and 0 < fallback < 1")
        self.growth, self.maximum, self.fallback = growth, maximum, fallback
        self.gamma = tf.Variable(start, dtype=default_float(), trainable=False, name="gamma")

    def next_gamma(self, succeeded: tf.Tensor) -> tf.Tensor:
        grown = tf.minimum(self.gamma * self.growth, tf.cast(self.maximum, default_float()))
        return tf.where(succeeded, grown, self.gamma * self.fallback)


class NaturalGradientMethod(Method):
    """GPflow's recipe for non-conjugate SVGP: a ``NaturalGradient`` step on (q_mu, q_sqrt), then
    an Adam step on the hyperparameters, each compiled with ``tf.function``.

    A failed natural-gradient step is recoverable: q(u) is left as it was and γ is cut. A failed
    Cholesky makes GPflow's checked assignment raise before anything is assigned (the new q_mu and
    q_sqrt both depend on the factor); any other non-finite result is undone inside the step.
    """

    def __init__(
        self,
        name: str,
        model: gpflow.models.SVGP,
        learning_rate: float,
        schedule: Optional[NaturalGradientWarmUp] = None,
    ) -> None:
        self.name, self.model = name, model
        self.schedule = schedule or NaturalGradientWarmUp()
        self.natgrad = NaturalGradient(gamma=self.schedule.gamma)
        set_trainable(model.q_mu, False)
        set_trainable(model.q_sqrt, False)
        self.adam = tf_keras.optimizers.Adam(learning_rate)
        self.adam.build(model.trainable_variables)
        self._natural_step = tf.function(self._natural_step_eager, autograph=False)
        self._adam_step = tf.function(self._adam_step_eager, autograph=False)
        self._elbo = tf.function(lambda X, Y: -self.model.training_loss((X, Y)), autograph=False)

    def _natural_step_eager(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        q_mu, q_sqrt = self.model.q_mu, self.model.q_sqrt
        old_mu = tf.identity(q_mu.unconstrained_variable)
        old_sqrt = tf.identity(q_sqrt.unconstrained_variable)
        self.natgrad.minimize(lambda: self.model.training_loss((X, Y)), [(q_mu, q_sqrt)])
        succeeded = tf.reduce_all(tf.math.is_finite(q_mu.unconstrained_variable)) & tf.reduce_all(
            tf.math.is_finite(q_sqrt.unconstrained_variable)
        )
        q_mu.unconstrained_variable.assign(tf.where(succeeded, q_mu.unconstrained_variable, old_mu))
        q_sqrt.unconstrained_variable.assign(
            tf.where(succeeded, q_sqrt.unconstrained_variable, old_sqrt)
        )
        self.schedule.gamma.assign(self.schedule.next_gamma(succeeded))
        return succeeded

    def _adam_step_eager(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        loss, _ = adam_step_if_finite(
            self.adam, lambda: self.model.training_loss((X, Y)), self.model.trainable_variables
        )
        return -loss

    def checkpoint(self) -> tf.train.Checkpoint:
        return tf.train.Checkpoint(
            model=self.model, adam=self.adam, natgrad=self.natgrad, schedule=self.schedule
        )

    def iteration_function(self) -> Callable[[tf.Tensor, tf.Tensor], object]:
        def iteration(X: tf.Tensor, Y: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
            succeeded = self._natural_step_eager(X, Y)
            if self.model.trainable_variables:
                return self._adam_step_eager(X, Y), succeeded
            return -self.model.training_loss((X, Y)), succeeded

        return iteration

    def natural_step(self, X: tf.Tensor, Y: tf.Tensor) -> bool:
        """The natural-gradient half of the step, recovering from a failure; True if it
        succeeded."""
        try:
            with without_failed_step_warnings():
                succeeded = bool(self._natural_step(X, Y))
        except tf.errors.InvalidArgumentError as error:
            # TensorFlow's CPU Cholesky fills a failed factor with NaN (older versions raise), and
            # gpflow.Parameter.assign then refuses the NaN before anything is assigned.
            if not any(word in error.message.lower() for word in ("cholesky", "nan")):
                raise
            succeeded = False
            self.schedule.gamma.assign(self.schedule.next_gamma(tf.constant(False)))
        self.failed_steps += not succeeded
        return succeeded

    def _step(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        self.natural_step(X, Y)
        if self.model.trainable_variables:
            return self._adam_step(X, Y)
        return self._elbo(X, Y)  # nothing for Adam: the ELBO alone, compiled like the steps

    @property
    def step_size(self) -> float:
        return float(self.schedule.gamma.numpy())


class AdamMethod(Method):
    """Adam on every parameter, q(u) included: the plain gradient-based VI baseline."""

    def __init__(
        self, name: str, model: gpflow.models.SVGP, learning_rate: float, jit_compile: bool = False
    ) -> None:
        self.name, self.model = name, model
        self.learning_rate = learning_rate
        self.adam = tf_keras.optimizers.Adam(learning_rate)
        self.adam.build(model.trainable_variables)
        self._compiled_step = tf.function(
            self._step_eager, jit_compile=jit_compile, autograph=False
        )

    def _step_eager(self, X: tf.Tensor, Y: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        loss, applied = adam_step_if_finite(
            self.adam, lambda: self.model.training_loss((X, Y)), self.model.trainable_variables
        )
        return -loss, applied

    def checkpoint(self) -> tf.train.Checkpoint:
        return tf.train.Checkpoint(model=self.model, adam=self.adam)

    def iteration_function(self) -> Callable[[tf.Tensor, tf.Tensor], object]:
        return self._step_eager

    def _step(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        elbo, applied = self._compiled_step(X, Y)
        self.failed_steps += not bool(applied)
        return elbo

    @property
    def step_size(self) -> float:
        return float(self.learning_rate)


class ExpectationPropagationMethod(Method):
    """An EP model (:class:`~gpflow_augmented.comparison.sep.HeavisideSEP`, or a full GP that holds
    its training set, :class:`~gpflow_augmented.comparison.rmgpc.RobustMulticlassEP`): a damped EP
    step of its sites, then Adam on minus the EP estimate of log p(y) with the sites fixed; both
    compiled in one ``tf.function``. A step whose sites would not be finite writes none of them.

    A model that holds its training set is given that whole set, in its order, at every step (its
    sites belong to its points): anything else is refused before the step runs."""

    def __init__(
        self,
        name: str,
        model: ExpectationPropagationModel,
        learning_rate: float,
        damping: Union[float, StepSizeSchedule],
        jit_compile: bool = False,
    ) -> None:
        self.name, self.model = name, model
        self.holds_data = isinstance(model, InternalDataTrainingLossMixin)
        self.ep = ExpectationPropagation(model, damping)
        self.adam = tf_keras.optimizers.Adam(learning_rate)
        self.adam.build(model.trainable_variables)
        self._compiled_step = tf.function(
            self._step_eager, jit_compile=jit_compile, autograph=False
        )

    def _step_eager(self, X: tf.Tensor, Y: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        data = () if self.holds_data else ((X, Y),)  # a model that holds its data takes none
        log_marginal, applied = self.ep.step(*data)
        adam_step_if_finite(
            self.adam, lambda: self.model.training_loss(*data), self.model.trainable_variables
        )
        return log_marginal, applied

    def _check_held_data(self, X: tf.Tensor, Y: tf.Tensor) -> None:
        # O(N D), against the step's O(C N³).
        held_X, held_Y = self.model.data
        same = (
            X.dtype == held_X.dtype
            and Y.dtype == held_Y.dtype
            and X.shape == held_X.shape
            and Y.shape == held_Y.shape
            and bool(tf.reduce_all(tf.equal(X, held_X)))
            and bool(tf.reduce_all(tf.equal(Y, held_Y)))
        )
        if not same:
            raise ValueError(
                f"method {self.name!r} is a full GP on the {held_X.shape[0]} training points it "
                "holds: each step must be given that whole training set, in its order "
                f"(got {X.shape[0]} rows of {X.dtype.name} features and {Y.dtype.name} labels; "
                f"it holds {held_X.dtype.name} and {held_Y.dtype.name})"
            )

    def checkpoint(self) -> tf.train.Checkpoint:
        return tf.train.Checkpoint(model=self.model, adam=self.adam, ep=self.ep)

    def iteration_function(self) -> Callable[[tf.Tensor, tf.Tensor], object]:
        return self._step_eager

    def _step(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        if self.holds_data:
            self._check_held_data(X, Y)
        log_marginal, applied = self._compiled_step(X, Y)
        self.failed_steps += not bool(applied)
        return log_marginal

    @property
    def step_size(self) -> float:
        return float(self.ep.damping(self.ep.iteration))


def positive_parameters(bijector: str) -> "contextlib.AbstractContextManager":
    """The context in which a method built with :func:`build_method`, and its kernel, get
    ``bijector`` (one of :data:`POSITIVE_BIJECTORS`, which :func:`check_method_options` checks)
    for their positive parameters (GPflow's ``positive_bijector`` setting)."""
    return gpflow.config.as_context(
        dataclasses.replace(gpflow.config.config(), positive_bijector=bijector)
    )


def _base_kernel(model: gpflow.models.GPModel) -> Kernel:
    kernel = model.kernel
    return kernel.kernel if isinstance(kernel, gpflow.kernels.SharedIndependent) else kernel


def hyperparameter_snapshot(model: gpflow.models.GPModel) -> Dict[str, List[float]]:
    """The kernel's parameters and the inducing inputs, read from the model, comparable across
    this package's model and GPflow's SVGP."""
    snapshot = {
        name.lstrip("."): np.atleast_1d(np.asarray(value)).ravel().tolist()
        for name, value in gpflow.utilities.parameter_dict(_base_kernel(model)).items()
    }
    snapshot["Z"] = (
        tf.convert_to_tensor(inducing_inputs(model.inducing_variable)).numpy().ravel().tolist()
    )
    return snapshot
