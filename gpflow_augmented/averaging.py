"""The averaged q(u) that a minibatch run predicts with (:class:`~gpflow_augmented.CAVI`'s
``averaging``).

A stochastic natural-gradient step leaves q(u) moving around its optimum by an amount set by ρ and
the batch's noise: a class seen in one batch in a thousand is kicked each time it appears. An
average of the iterates keeps the step's progress and removes most of that movement (Polyak and
Juditsky 1992). The average here is the polynomial-decay average of Shamir and Zhang (2013),

    q̄_t = (1 − w_t) q̄_{t−1} + w_t q_t,   w_t = (η + 1) / (t + η),

which weighs the last iterates most and forgets the early ones, so it needs no start time; η sets
how far back it reaches (roughly the last t / (η + 1) steps). The Gaussians are averaged as
distributions are mixed and then moment-matched: their means, and their second moments, so that
the average's covariance is Σ̄ = (1 − w) Σ̄ + w Σ + w (1 − w) d dᵀ with d = m − m̄, positive
definite whenever both are.
"""

from typing import Tuple

import tensorflow as tf
from check_shapes import check_shapes

from .class_subsets import assign_variational_parameters, variational_parameters
from .distributed import replicated_by_first
from .line_search import all_finite
from .models import AugmentedSVGP
from .validation import check_positive_number

__all__ = ["IterateAverage", "averaged_gaussians", "averaging_weight"]


def averaging_weight(steps: tf.Tensor, averaging: float) -> tf.Tensor:
    """w_t = (η + 1) / (t + η) for the t-th iterate averaged (t ≥ 1; w_1 = 1)."""
    t = tf.cast(steps, tf.float64)
    return (averaging + 1.0) / (t + averaging)


@check_shapes(
    "mean: [M, L]",
    "sqrt: [L, M, M]",
    "new_mean: [M, L]",
    "new_sqrt: [L, M, M]",
    "return[0]: [M, L]",
    "return[1]: [L, M, M]",
)
def averaged_gaussians(
    mean: tf.Tensor,
    sqrt: tf.Tensor,
    new_mean: tf.Tensor,
    new_sqrt: tf.Tensor,
    weight: tf.Tensor,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """The moment-matched mixture (1 − ``weight``) N(mean, sqrt sqrtᵀ) + ``weight`` N(new_mean,
    new_sqrt new_sqrtᵀ) of each latent GP's Gaussians, as (mean, lower Cholesky factor)."""
    weight = tf.cast(weight, mean.dtype)
    difference = tf.transpose(new_mean - mean)[:, :, None]  # [L, M, 1]
    covariance = (
        (1.0 - weight) * tf.matmul(sqrt, sqrt, transpose_b=True)
        + weight * tf.matmul(new_sqrt, new_sqrt, transpose_b=True)
        + weight * (1.0 - weight) * tf.matmul(difference, difference, transpose_b=True)
    )
    return (1.0 - weight) * mean + weight * new_mean, tf.linalg.cholesky(covariance)


class IterateAverage(tf.Module):
    """Keeps a minibatch run's last iterate of q(u) aside while the model holds the average, so
    that everything that reads the model (prediction, the ELBO, a checkpoint of the model alone)
    sees the average, and the next step continues from the iterate.

    :meth:`swap_in` puts the iterate into the model before a step and returns the average;
    :meth:`publish` after it averages the new iterate in. Where the model's q(u) is no longer the
    average this object last wrote (the user assigned it, or a full-batch step moved it), the
    model's q(u) is the new iterate and the average starts again from it.
    """

    def __init__(self, model: AugmentedSVGP, averaging: float, iteration: tf.Variable) -> None:
        super().__init__(name="IterateAverage")
        self.averaging = check_positive_number(averaging, "averaging")
        stored = (model.q_mu.unconstrained_variable, model.q_sqrt.unconstrained_variable)
        with replicated_by_first():
            self.iterate = [tf.Variable(v.read_value(), trainable=False) for v in stored]
            # What publish last wrote into the model, to notice another write.
            self.published = [tf.Variable(v.read_value(), trainable=False) for v in stored]
            # The iteration before the average's first iterate.
            self.start = tf.Variable(iteration.read_value(), trainable=False, name="start")

    def swap_in(self, model: AugmentedSVGP, iteration: tf.Variable) -> Tuple[tf.Tensor, tf.Tensor]:
        """Put the iterate into the model; returns the average (q_mu, q_sqrt) it held."""
        stored = (model.q_mu.unconstrained_variable, model.q_sqrt.unconstrained_variable)
        moved = tf.constant(False)
        for variable, published in zip(stored, self.published):
            moved |= tf.reduce_any(tf.not_equal(variable, published))
        average = variational_parameters(model.q_mu, model.q_sqrt)
        for variable, iterate in zip(stored, self.iterate):
            iterate.assign(tf.where(moved, variable, iterate))
            variable.assign(tf.identity(iterate))
        self.start.assign(tf.where(moved, iteration, self.start))
        return average

    def publish(
        self,
        model: AugmentedSVGP,
        average: Tuple[tf.Tensor, tf.Tensor],
        iteration: tf.Variable,
        taken: tf.Tensor,
    ) -> None:
        """Keep the model's q(u), the iterate after a step, aside, and put into the model the
        average with it if the step was ``taken``, else the average as it was."""
        new = variational_parameters(model.q_mu, model.q_sqrt)
        weight = averaging_weight(iteration - self.start, self.averaging)
        mixture = averaged_gaussians(*average, *new, weight)
        finite = all_finite(*mixture)
        # A mixture that did not factorise is replaced by the iterate, where the average restarts.
        self.start.assign(tf.where(taken & ~finite, iteration - 1, self.start))
        mixed = [tf.where(finite, m, n) for m, n in zip(mixture, new)]
        stored = (model.q_mu.unconstrained_variable, model.q_sqrt.unconstrained_variable)
        for variable, iterate in zip(stored, self.iterate):
            iterate.assign(tf.identity(variable))
        assign_variational_parameters(
            model.q_mu,
            model.q_sqrt,
            tf.where(taken, mixed[0], average[0]),
            tf.where(taken, mixed[1], average[1]),
        )
        for variable, published in zip(stored, self.published):
            published.assign(tf.identity(variable))
