r"""
Each class's own points as a stratum of a minibatch's estimate of q(u)'s natural parameters.

A minibatch step estimates the data's sums of site statistics, T_k = Σ_n t_nk for class k's q(u_k)
(:func:`~gpflow_augmented.updates.conjugate_statistics`), by N/B times the batch's sum. The points
labelled k are a different kind of term in T_k from the rest: they pull f_k up where all the others
push it down. A class with n_k of N points has B n_k / N of them in a batch of B on average, a rare
class none in most batches, so its estimate swings between "no points of class k" and a few points
weighed N/B each, and q(u_k) follows.

With the labels as strata (as Gopalan et al. 2012 stratify a network's links and non-links), the
estimate of T_k is

    T̂_k = (N - n_k) / (B - b_k) Σ_{batch, y ≠ k} t_nk + P̂_k,
    P̂_k = n_k / b_k Σ_{batch, y = k} t_nk   where the batch holds b_k > 0 points of class k,
          P_k, the stratum's running estimate, where it holds none,

and each step whose batch holds class k moves P_k ← (1 - ρ) P_k + ρ P̂_k, ρ the step's, as q(u)'s
natural parameters move. Given b_k, a batch's points of class k are a uniform draw from that class
and its other points a uniform draw from the rest, so each term is unbiased for its stratum's sum
whatever b_k is, and a class is never estimated as absent. n_k is estimated by N times the fraction
of class k among the points of the steps taken so far, so nothing need be passed in (streamed data
included). On the full batch (b_k = n_k, B = N) T̂_k is the batch's sum: the step is unchanged.
A class that fills the whole batch (b_k = B: no other points to estimate the rest from) takes the
plain N/B estimate in that step.
"""

from typing import NamedTuple, Sequence, Tuple

import tensorflow as tf
from check_shapes import check_shapes
from gpflow.config import default_float

from .distributed import replicated_by_first

__all__ = ["LabelStrata", "StrataEstimate", "stratified_estimate"]

#: (Σ A diag(θ) Aᵀ [C, M, M], Σ A linear [M, C]): a set of conjugate statistics, one per class.
_Statistics = Tuple[tf.Tensor, tf.Tensor]


class StrataEstimate(NamedTuple):
    """:func:`stratified_estimate`'s result."""

    #: the estimate T̂ of the data's statistics, already scaled to the data
    estimate: _Statistics
    #: P̂, the classes' own points scaled to their stratum (where present), for the memory's step
    own: _Statistics
    #: whether the stratum's estimate moved the memory: the class is in the batch and does not
    #: fill it [C]
    moves: tf.Tensor


@check_shapes(
    "total[0]: [C, M, M]",
    "total[1]: [M, C]",
    "own[0]: [C, M, M]",
    "own[1]: [M, C]",
    "memory[0]: [C, M, M]",
    "memory[1]: [M, C]",
    "class_counts: [C]",
    "batch_counts: [C]",
    "num_data: []",
    "batch_points: []",
)
def stratified_estimate(
    total: _Statistics,
    own: _Statistics,
    memory: _Statistics,
    class_counts: tf.Tensor,
    batch_counts: tf.Tensor,
    num_data: tf.Tensor,
    batch_points: tf.Tensor,
) -> StrataEstimate:
    """T̂ of the module docstring from a batch's statistics summed over all its points (``total``)
    and over each class's own points (``own``), the strata's ``memory`` P, the classes' counts n_k
    in the data and b_k in the batch, N and B."""
    present = batch_counts > 0.0
    rest = batch_points - batch_counts
    moves = present & (rest > 0.0)
    own_scale = class_counts / tf.maximum(batch_counts, 1.0)
    rest_scale = (num_data - class_counts) / tf.maximum(rest, 1.0)
    # T̂_k = a_k Σ_batch + b_k Σ_own + c_k P_k: the strata where class k moves its stratum, the
    # plain N / B where it fills the batch, the rest and the memory where it is absent.
    zero = tf.zeros_like(own_scale)
    a = tf.where(moves | ~present, rest_scale, num_data / batch_points)
    b = tf.where(moves, own_scale - rest_scale, zero)
    c = tf.where(present, zero, tf.ones_like(own_scale))
    precision = (
        a[:, None, None] * total[0] + b[:, None, None] * own[0] + c[:, None, None] * memory[0]
    )
    nat1 = a[None, :] * total[1] + b[None, :] * own[1] + c[None, :] * memory[1]
    scaled_own = (own_scale[:, None, None] * own[0], own_scale[None, :] * own[1])
    return StrataEstimate((precision, nat1), scaled_own, moves)


class LabelStrata(tf.Module):
    """The strata's state, kept and checkpointed by :class:`~gpflow_augmented.CAVI`: the running
    estimates P of each class's own points, one per set of statistics a step takes (the sites of
    q(u)'s covariance, and of its mean where the bound gives them apart), and the class counts of
    the points the steps have taken."""

    def __init__(
        self, num_classes: int, num_inducing: int, num_sets: int, name: str = "label_strata"
    ) -> None:
        super().__init__(name=name)
        dtype = default_float()
        with replicated_by_first():
            #: P's precision sums [C, M, M] and linear sums [M, C], one of each a set
            self.precision = tuple(
                tf.Variable(
                    tf.zeros([num_classes, num_inducing, num_inducing], dtype),
                    trainable=False,
                    name=f"precision_{index}",
                )
                for index in range(num_sets)
            )
            self.nat1 = tuple(
                tf.Variable(
                    tf.zeros([num_inducing, num_classes], dtype),
                    trainable=False,
                    name=f"nat1_{index}",
                )
                for index in range(num_sets)
            )
            #: the points of each class in the steps taken
            self.counts = tf.Variable(
                tf.zeros([num_classes], dtype), trainable=False, name="counts"
            )

    def class_counts(self, batch_counts: tf.Tensor, num_data: tf.Tensor) -> tf.Tensor:
        """n_k: N times each class's fraction of the points taken so far and of this batch."""
        seen = self.counts + batch_counts
        return num_data * seen / tf.reduce_sum(seen)

    def estimates(
        self,
        totals: Sequence[_Statistics],
        owns: Sequence[_Statistics],
        batch_counts: tf.Tensor,
        num_data: tf.Tensor,
    ) -> Tuple[StrataEstimate, ...]:
        """:func:`stratified_estimate` of each set of statistics, in the order of the memory's."""
        class_counts = self.class_counts(batch_counts, num_data)
        batch_points = tf.reduce_sum(batch_counts)
        return tuple(
            stratified_estimate(
                total, own, memory, class_counts, batch_counts, num_data, batch_points
            )
            for total, own, memory in zip(totals, owns, zip(self.precision, self.nat1))
        )

    def step(
        self,
        estimates: Tuple[StrataEstimate, ...],
        batch_counts: tf.Tensor,
        rho: tf.Tensor,
        taken: tf.Tensor,
    ) -> None:
        """After a step of size ρ (``taken`` or refused): P ← (1 - ρ) P + ρ P̂ in each class whose
        stratum ``moves``, and the batch's classes counted."""
        taken = tf.cast(taken, rho.dtype)
        for index, estimate in enumerate(estimates):
            weight = taken * rho * tf.cast(estimate.moves, rho.dtype)
            precision, nat1 = self.precision[index], self.nat1[index]
            precision.assign_add(weight[:, None, None] * (estimate.own[0] - precision))
            nat1.assign_add(weight[None, :] * (estimate.own[1] - nat1))
        self.counts.assign_add(taken * batch_counts)
