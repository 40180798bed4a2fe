r"""
The two variational families of the logistic-softmax augmentation (the maths is in
:mod:`~gpflow_augmented.augmentation`), named after the distributions of their auxiliary counts:

* :class:`NegativeMultinomial` (``scheme="negative-multinomial"``): λ integrated out exactly, so
  q(n_i) is negative-multinomial; closed form, no inner loop, the tighter of the two bounds.
* :class:`MeanFieldGammaPoisson` (``scheme="gamma-poisson"``): the paper's mean-field q(λ_i) = Gamma,
  q(n_ic) = Poisson, the fixed point of γ and α found by Newton steps.

Both leave q(ω | n) = PG(y + n, c). A :class:`~gpflow_augmented.LogisticSoftmax` likelihood owns one.
"""
from typing import Optional

import tensorflow as tf

from .. import augmentation
from ..augmentation import LocalParameters
from ..validation import check_integer

__all__ = ["LogisticSoftmaxAugmentation", "MeanFieldGammaPoisson", "NegativeMultinomial"]


class LogisticSoftmaxAugmentation:
    """A variational family q(n, λ, ω) of the augmented logistic-softmax likelihood. ``num_classes``
    is C, also when the columns hold a subset of the classes (the coupling is then estimated)."""

    name = ""
    supports_class_weights = False

    def local_parameters(
        self, Fmu: tf.Tensor, Fvar: tf.Tensor, Y_rows: tf.Tensor, num_classes: int,
        log_weights: Optional[tf.Tensor] = None,
    ) -> LocalParameters:
        raise NotImplementedError

    def local_elbo(
        self, Fmu: tf.Tensor, Fvar: tf.Tensor, Y_rows: tf.Tensor, num_classes: int,
        local: Optional[LocalParameters] = None, log_weights: Optional[tf.Tensor] = None,
        soft_labels: bool = False,
    ) -> tf.Tensor:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NegativeMultinomial(LogisticSoftmaxAugmentation):
    """λ integrated out: q(n_i) negative-multinomial, whose optimum and bound are closed forms."""

    name = "negative-multinomial"
    supports_class_weights = True

    def local_parameters(
        self, Fmu: tf.Tensor, Fvar: tf.Tensor, Y_rows: tf.Tensor, num_classes: int,
        log_weights: Optional[tf.Tensor] = None,
    ) -> LocalParameters:
        return augmentation.collapsed_local_parameters(Fmu, Fvar, Y_rows, num_classes,
                                                       log_weights)

    def local_elbo(
        self, Fmu: tf.Tensor, Fvar: tf.Tensor, Y_rows: tf.Tensor, num_classes: int,
        local: Optional[LocalParameters] = None, log_weights: Optional[tf.Tensor] = None,
        soft_labels: bool = False,
    ) -> tf.Tensor:
        # The bound at the optimal q(n, ω) in closed form, differentiated as it stands: the
        # local parameters are always at their optimum here.
        return augmentation.collapsed_local_elbo(Fmu, Fvar, Y_rows, num_classes, log_weights,
                                                 soft_labels)


class MeanFieldGammaPoisson(LogisticSoftmaxAugmentation):
    """The paper's q(λ_i) q(n_i): Gamma and Poisson, γ and α solved by ``inner_iterations`` Newton
    steps (default 5, float64 precision). It has no class weights."""

    name = "gamma-poisson"

    def __init__(self, inner_iterations: int = 5) -> None:
        self.inner_iterations = check_integer(inner_iterations, "inner_iterations")

    def local_parameters(
        self, Fmu: tf.Tensor, Fvar: tf.Tensor, Y_rows: tf.Tensor, num_classes: int,
        log_weights: Optional[tf.Tensor] = None,
    ) -> LocalParameters:
        return augmentation.paper_local_parameters(Fmu, Fvar, Y_rows, self.inner_iterations,
                                                   num_classes)

    def local_elbo(
        self, Fmu: tf.Tensor, Fvar: tf.Tensor, Y_rows: tf.Tensor, num_classes: int,
        local: Optional[LocalParameters] = None, log_weights: Optional[tf.Tensor] = None,
        soft_labels: bool = False,
    ) -> tf.Tensor:
        if local is None:
            local = self.local_parameters(Fmu, Fvar, Y_rows, num_classes)
        local = tf.nest.map_structure(tf.stop_gradient, local)
        return (augmentation.polya_gamma_terms(Fmu, Fvar, Y_rows, local, num_classes)
                + augmentation.paper_count_terms(local, num_classes))

    def __repr__(self) -> str:
        return f"MeanFieldGammaPoisson(inner_iterations={self.inner_iterations})"
