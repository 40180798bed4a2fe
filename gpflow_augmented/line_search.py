"""The line search of a q(u) step on its own batch's bound (:meth:`gpflow_augmented.CAVI.update`
runs it on a model on the exact bound).

The exact bound's sites are the expected log-likelihood's derivatives at the current q(f), so its
step is a Newton step on the batch's bound, damped by ρ. Where E_q log p(y | f) is far from
quadratic (large latents on separable classes) it overshoots: on the full batch the ELBO swings by
orders of magnitude instead of rising, and on a minibatch, whose sites weigh N / B times, one step
can send q(u) and the kernel variance far off (a rare class's point on kddcup). For a small enough
ρ the step ascends the batch's bound (its direction is that bound's natural gradient), so the
search always has a step to take, and it never moves a fixed point of the step, where the proposal
is the current q(u).

Under a ``tf.distribute`` strategy the batch's bound is a sum over the replicas, and an all-reduce
cannot sit inside a loop there (MirroredStrategy refuses the merge inside ``tf.while_loop``). The
step then makes one trial (:func:`single_trial`): if the bound falls, it assigns nothing and says
so, and its caller takes it again with ρ halved (:meth:`gpflow_augmented.Trainer.step`). The
proposals and the test are the same as :func:`halving_search`'s, so the result is too.
"""

from typing import Callable, Tuple

import numpy as np
import tensorflow as tf

__all__ = [
    "MAX_LINE_SEARCH_HALVINGS",
    "Proposal",
    "all_finite",
    "count_search",
    "halving_search",
    "single_trial",
]

#: A step halves ρ up to this many times until it does not lower its batch's bound, and else keeps
#: q(u) as it was.
MAX_LINE_SEARCH_HALVINGS = 10

#: A proposed state: q(u)'s mean and square root as stored, and the kernel variances over their
#: running statistics [4, P] (a dummy [4, 1] of ones where no variance moves).
Proposal = Tuple[tf.Tensor, tf.Tensor, tf.Tensor]


def all_finite(*tensors: tf.Tensor) -> tf.Tensor:
    """Whether every entry of every tensor is finite (a scalar bool)."""
    return tf.reduce_all([tf.reduce_all(tf.math.is_finite(t)) for t in tensors])


def halving_search(
    propose: Callable[[tf.Tensor], Proposal],
    bound_at: Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor],
    proposal: Proposal,
    current: Proposal,
    rho: tf.Tensor,
    elbo: tf.Tensor,
    search: tf.Tensor,
) -> Tuple[Proposal, tf.Tensor]:
    """(the proposal, ρ taken): ``proposal``, the step of size ``rho``, with ρ halved
    (``propose(ρ)``) until the batch's bound at it (``bound_at(mu, sqrt, variances)``) is not below
    ``elbo``, the bound before the step (up to round-off), at most
    :data:`MAX_LINE_SEARCH_HALVINGS` times; else ``current`` with ρ = 0 (or, if no proposal was
    finite, the last one, for the step's check to refuse). Nothing is searched where ``search``
    is false (the warm start)."""

    def worse(mu: tf.Tensor, sqrt: tf.Tensor, state: tf.Tensor) -> tf.Tensor:
        return _falls(bound_at, (mu, sqrt, state), elbo)

    def searching(halvings, rho, mu, sqrt, state):  # type: ignore[no-untyped-def]
        return search & (halvings <= MAX_LINE_SEARCH_HALVINGS) & worse(mu, sqrt, state)

    def halve(halvings, rho, mu, sqrt, state):  # type: ignore[no-untyped-def]
        rho = rho / 2.0
        return (halvings + 1, rho, *propose(rho))

    start = (tf.constant(0), rho, *proposal)
    halvings, rho, mu, sqrt, state = tf.while_loop(searching, halve, start)
    # No halving raised the bound: keep q(u), unless no proposal was even finite, which the
    # step's check then refuses as a numerical failure (not a silent step of size 0).
    keep = (halvings > MAX_LINE_SEARCH_HALVINGS) & all_finite(mu, sqrt, state)
    return _kept(keep, current, (mu, sqrt, state), rho)


def single_trial(
    bound_at: Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor],
    proposal: Proposal,
    current: Proposal,
    rho: tf.Tensor,
    elbo: tf.Tensor,
    search: tf.Tensor,
    halvings: tf.Tensor,
) -> Tuple[Proposal, tf.Tensor, tf.Tensor]:
    """(the proposal, ρ taken, retry): one pass of :func:`halving_search`'s loop, for a
    ``proposal`` whose ρ was already halved ``halvings`` times. Where the batch's bound falls at it,
    ``retry`` is true: the caller assigns nothing and proposes again with ρ halved once more. A
    proposal past :data:`MAX_LINE_SEARCH_HALVINGS` halvings is not tested: ``current`` is kept
    (ρ = 0) if it is finite, as the loop does."""
    beyond = halvings > MAX_LINE_SEARCH_HALVINGS
    retry = search & ~beyond & _falls(bound_at, proposal, elbo)
    keep = search & beyond & all_finite(*proposal)
    return (*_kept(keep, current, proposal, rho), retry)


def _kept(
    keep: tf.Tensor, current: Proposal, proposal: Proposal, rho: tf.Tensor
) -> Tuple[Proposal, tf.Tensor]:
    """(``current``, ρ = 0) where ``keep``, else (``proposal``, ``rho``)."""
    kept = tuple(tf.where(keep, old, new) for old, new in zip(current, proposal))
    return kept, tf.where(keep, tf.zeros_like(rho), rho)  # type: ignore[return-value]


def _falls(
    bound_at: Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor],
    proposal: Proposal,
    elbo: tf.Tensor,
) -> tf.Tensor:
    """Whether the batch's bound at ``proposal`` is below ``elbo`` beyond round-off, or the
    proposal is not finite or has a variance ≤ 0."""
    mu, sqrt, state = proposal
    tolerance = 1e3 * float(np.finfo(elbo.dtype.as_numpy_dtype).eps) * tf.abs(elbo)
    # A proposal that is not finite falls. Its bound is evaluated all the same (NaN compares
    # false), and the loop's predicate is a select, not a tf.cond: XLA on a GPU reads each
    # conditional's predicate on the host.
    finite = all_finite(mu, sqrt, state) & tf.reduce_all(state[0] > 0.0)
    trial = bound_at(mu, sqrt, state[0])
    return ~finite | ~(trial >= elbo - tolerance)


def count_search(
    counters: Tuple[tf.Variable, tf.Variable],
    scheduled: tf.Tensor,
    taken: tf.Tensor,
    accepted: tf.Tensor,
) -> None:
    """Count a step the search shortened (0 < ρ taken < ρ ``scheduled``) or kept (ρ taken = 0) in
    ``counters`` = (shortened, kept), if the step was ``accepted``."""
    shortened_steps, kept_steps = counters
    scheduled = tf.cast(scheduled, taken.dtype)
    shortened = accepted & (taken > 0.0) & (taken < scheduled)
    kept = accepted & (taken == 0.0) & (scheduled > 0.0)
    shortened_steps.assign_add(tf.cast(shortened, tf.int64))
    kept_steps.assign_add(tf.cast(kept, tf.int64))
