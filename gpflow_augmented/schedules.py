"""Step-size schedules ρ_t for stochastic variational inference, as functions of the iteration,
and the decay of Adam's learning rate for the hyperparameters beside it."""

import tensorflow as tf
from gpflow.config import default_float
from gpflow.keras import tf_keras

from .validation import check_positive_number

__all__ = ["StepSizeSchedule", "ConstantStepSize", "RobbinsMonro", "InverseSquareRootDecay"]


class StepSizeSchedule:
    """ρ as a function of the iteration counter (an int64 tensor); computed inside the step."""

    def __call__(self, iteration: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError


class ConstantStepSize(StepSizeSchedule):
    """ρ_t = ``step_size`` at every step, in (0, 1]: 1 on the full batch is exact coordinate
    ascent."""

    def __init__(self, step_size: float) -> None:
        self.step_size = check_positive_number(step_size, "step_size", maximum=1.0)

    def __call__(self, iteration: tf.Tensor) -> tf.Tensor:
        return tf.constant(self.step_size, dtype=default_float())

    def __repr__(self) -> str:
        return f"ConstantStepSize({self.step_size})"


class RobbinsMonro(StepSizeSchedule):
    """ρ_t = (t + τ)^(-κ): Σρ = ∞ and Σρ² < ∞ for κ ∈ (0.5, 1], so SVI converges.

    The default κ = 0.51, τ = 1 (ρ_0 = 1) follows the reference implementation.
    """

    def __init__(self, tau: float = 1.0, kappa: float = 0.51) -> None:
        kappa = check_positive_number(kappa, "kappa", maximum=1.0)
        if not kappa > 0.5:
            raise ValueError(f"kappa must be in (0.5, 1], got {kappa!r}")
        # A finite τ: at τ = inf every ρ is 0 and nothing would ever be learned.
        tau = check_positive_number(tau, "tau")
        if tau < 1.0:
            raise ValueError(f"tau must be ≥ 1 so that ρ ≤ 1, got {tau!r}")
        self.tau, self.kappa = tau, kappa

    def __call__(self, iteration: tf.Tensor) -> tf.Tensor:
        t = tf.cast(iteration, default_float())
        return tf.pow(t + self.tau, -self.kappa)

    def __repr__(self) -> str:
        return f"RobbinsMonro(tau={self.tau}, kappa={self.kappa})"


class InverseSquareRootDecay(tf_keras.optimizers.schedules.LearningRateSchedule):
    """Adam's learning rate at its step t: ``rate`` / √(1 + t / ``decay_steps``).

    With a constant rate Adam does not converge on minibatches: its steps keep a size of about the
    rate whatever the gradient's noise, so the hyperparameters, and with them the test NLL, keep
    moving. α_t ∝ 1/√t is the decay of Adam's convergence proof (Kingma & Ba 2015, Theorem 4.1);
    ``decay_steps`` keeps the first steps near ``rate``, and ``math.inf`` keeps the rate constant.

    :param rate: the rate at step 0, a variable so that it can be changed after the optimizer is
        built (and is saved with it).
    :param decay_steps: the steps over which the rate falls by √2.
    """

    def __init__(self, rate: tf.Variable, decay_steps: float) -> None:
        self.rate = rate
        if decay_steps != float("inf"):
            check_positive_number(decay_steps, "learning_rate_decay_steps")
        self.decay_steps = float(decay_steps)

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        rate = tf.convert_to_tensor(self.rate)
        return rate * tf.math.rsqrt(1.0 + tf.cast(step, rate.dtype) / self.decay_steps)

    def get_config(self) -> dict:
        return {"rate": float(self.rate.numpy()), "decay_steps": self.decay_steps}
