r"""
Random subsets of the classes for the extreme-classification step (paper, appendix A.3,
Algorithm 2): each step updates q(u^c) only for c in a uniformly drawn subset K, |K| fixed.

With one kernel shared by all classes the step then costs O(|K|·B·M² + |K|·M³) whatever C is,
besides an O(M·C) copy of ``q_mu`` (a MirroredVariable cannot scatter columns in place).
What it estimates, and how (see :mod:`~gpflow_augmented.likelihoods.logistic_softmax`):

* Each class in K takes a step of size ρ towards its conjugate target; the others stay. A class is
  in K with probability |K|/C, so the expected step is the full step at size ρ|K|/C, and the
  natural-gradient estimate (C/|K|)·1[c ∈ K]·(η̂^c - η^c) is unbiased for the full one given the
  class coupling S_i (tested by enumerating every subset).
* The class coupling of each point, S_i = Σ_c σ̃_ic / C (negative-multinomial family) or α_i
  (Gamma–Poisson, eq. 17), is re-estimated from K at every step: the quantities that are global
  with respect to the classes become stochastic. Its estimate is unbiased, but γ depends on it
  nonlinearly, so the targets η̂^c carry an O(1/|K|) bias, which vanishes when K is all classes.
* The hyperparameter gradient uses the same K: the ELBO's per-class sums and the KL are C/|K|
  times their sums over K.
"""

from typing import NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf
from gpflow.base import Parameter
from gpflow.config import default_float


__all__ = [
    "ClassSubset",
    "ClassSubsetSampler",
    "as_class_subset",
    "assign_variational_parameters",
    "sample_without_replacement",
    "subset_classes",
    "subset_scale",
    "variational_parameters",
]


def sample_without_replacement(seed: tf.Tensor, population: int, size: int) -> tf.Tensor:
    """A uniformly random subset of ``size`` distinct integers from 0..population-1 [size].

    Floyd's algorithm: for j = P-k, ..., P-1 draw t uniform in 0..j and take t, or j if t is
    taken already. Every subset is equally likely, and the work is O(size²) whatever the population,
    so a step's cost does not grow with the number of classes.

    :param seed: the stateless random seed, an int64 pair.
    """
    uniforms = tf.random.stateless_uniform([size], seed=seed, dtype=tf.float64)
    chosen = tf.zeros([0], tf.int32)
    for offset, j in enumerate(range(population - size, population)):
        t = tf.minimum(tf.cast(uniforms[offset] * (j + 1), tf.int32), j)
        t = tf.where(tf.reduce_any(tf.equal(chosen, t)), j, t)
        chosen = tf.concat([chosen, t[None]], axis=0)
    return chosen


class ClassSubsetSampler:
    """Draws the class subset K of a step as a stateless function of (seed, iteration): a resumed
    run draws the same subsets, and a refused step is retried on the same subset.

    (XLA's random bits differ from the CPU kernels', so a compiled and an uncompiled run draw
    different subsets from the same seed.)"""

    def __init__(
        self,
        num_classes: int,
        subset_size: int,
        seed: int = 0,
        minimum: Tuple[int, str] = (1, "model"),
    ) -> None:
        """``minimum``: the smallest subset the model's bound can estimate from, and the bound's
        name for the message."""
        if num_classes < 2:
            raise ValueError("class subsets need a multi-class model (one latent GP per class)")
        if isinstance(subset_size, bool) or int(subset_size) != subset_size:
            raise ValueError(f"class_subset_size must be an integer, got {subset_size!r}")
        if not 1 <= subset_size <= num_classes:
            raise ValueError(
                f"class_subset_size must be in 1..{num_classes} (the number of classes), "
                f"got {subset_size}"
            )
        if subset_size < minimum[0]:
            raise ValueError(
                f"class_subset_size must be at least {minimum[0]} on the {minimum[1]}: its "
                "estimate needs a class besides each point's own"
            )
        self.num_classes = int(num_classes)
        self.subset_size = int(subset_size)
        self.seed = int(seed)

    def __call__(self, iteration: tf.Tensor) -> "ClassSubset":
        seed = tf.stack([tf.constant(self.seed, tf.int64), tf.cast(iteration, tf.int64)])
        return ClassSubset(
            sample_without_replacement(seed, self.num_classes, self.subset_size), self.num_classes
        )


class ClassSubset(NamedTuple):
    """The classes K of a step (paper, Algorithm 2) as the columns of a batch's marginals hold
    them: what a likelihood needs to estimate its sums over all C classes from |K| columns."""

    classes: tf.Tensor  # [K] class indices
    num_classes: int  # C

    @property
    def scale(self) -> tf.Tensor:
        """C / |K|: the weight that makes a sum over the subset estimate the sum over all."""
        return self.num_classes / tf.cast(tf.shape(self.classes)[0], default_float())


def subset_classes(subset: Optional[ClassSubset]) -> Optional[tf.Tensor]:
    """The class indices of a subset, ``None`` for all classes."""
    return None if subset is None else subset.classes


def subset_scale(subset: Optional[ClassSubset]) -> tf.Tensor:
    """C / |K| (1 for all classes): the weight of the subset's sums, the KL's among them."""
    if subset is None:
        return tf.constant(1.0, dtype=default_float())
    return subset.scale


def as_class_subset(subset: object, num_classes: int) -> Optional[ClassSubset]:
    """A :class:`ClassSubset` of a model with ``num_classes`` latent GPs, checked, or ``None`` for
    all classes.

    The indices' values are checked where they are known (eagerly): a compiled gather would clamp
    an index out of range instead of failing."""
    if subset is None:
        return None
    if not isinstance(subset, ClassSubset):
        raise TypeError(
            f"a class subset is a ClassSubset(classes, num_classes), got {type(subset).__name__}"
        )
    if subset.num_classes != num_classes:
        raise ValueError(
            f"the class subset is of {subset.num_classes} classes, the model has {num_classes}"
        )
    if tf.executing_eagerly():
        classes = np.asarray(subset.classes)
        if (
            classes.ndim != 1
            or classes.size == 0
            or not np.issubdtype(classes.dtype, np.integer)
            or classes.min() < 0
            or classes.max() >= num_classes
            or len(np.unique(classes)) != classes.size
        ):
            raise ValueError(
                f"a class subset must be distinct integers in 0..{num_classes - 1}, "
                f"got {classes.tolist()}"
            )
    return subset


def variational_parameters(
    q_mu: Parameter, q_sqrt: Parameter, classes: Optional[tf.Tensor] = None
) -> Tuple[tf.Tensor, tf.Tensor]:
    """(q_mu [M, K], q_sqrt [K, M, M]) as stored, of all latent GPs or of the ``classes`` given.

    A subset is gathered from the unconstrained storage before the triangular transform, so its
    cost does not grow with the number of classes."""
    if classes is None:
        return tf.convert_to_tensor(q_mu), tf.convert_to_tensor(q_sqrt)
    subset_mu = tf.gather(q_mu.unconstrained_variable, classes, axis=1)
    packed_sqrt = tf.gather(q_sqrt.unconstrained_variable, classes)
    assert q_sqrt.transform is not None  # q_sqrt is always a triangular Parameter
    return subset_mu, q_sqrt.transform.forward(packed_sqrt)


def assign_variational_parameters(
    q_mu: Parameter,
    q_sqrt: Parameter,
    new_mu: tf.Tensor,
    new_sqrt: tf.Tensor,
    classes: Optional[tf.Tensor] = None,
) -> None:
    """Store q(u) of all latent GPs, or scatter that of the ``classes`` given in place."""
    if classes is None:
        q_mu.assign(new_mu)
        q_sqrt.assign(new_sqrt)
        return
    # q_mu is M·C numbers, a negligible copy; the [C, M(M+1)/2] q_sqrt is scattered in place.
    columns = tf.cast(classes, tf.int32)[:, None]
    q_mu.assign(
        tf.transpose(tf.tensor_scatter_nd_update(tf.transpose(q_mu), columns, tf.transpose(new_mu)))
    )
    assert q_sqrt.transform is not None
    q_sqrt.unconstrained_variable.scatter_update(
        tf.IndexedSlices(q_sqrt.transform.inverse(new_sqrt), classes)
    )
