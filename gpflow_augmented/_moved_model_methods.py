"""
:class:`~gpflow_augmented.AugmentedSVGP` methods of earlier releases that left the model, kept for
one release with a ``DeprecationWarning`` that names where each went: the step to
:class:`~gpflow_augmented.CAVI` and :mod:`~gpflow_augmented.updates`, the sparse-GP algebra to
:mod:`~gpflow_augmented.projection`, each point's local ELBO to the likelihood.
"""
from typing import Optional, Tuple

import tensorflow as tf
from gpflow.base import InputData, MeanAndVariance
from gpflow.config import default_float

from ._deprecated import warn_moved
from .class_subsets import ClassSubset
from .projection import marginals, whitened_projection
from .updates import batch_elbo, batch_size, minibatch_scale, natural_step, step_sites


class MovedModelMethods:
    """Mixed into :class:`~gpflow_augmented.AugmentedSVGP`; each method warns, then does what it
    did."""

    def whitened_projection(self, X: InputData) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Deprecated: :func:`gpflow_augmented.projection.whitened_projection`."""
        warn_moved("AugmentedSVGP.whitened_projection",
                   "gpflow_augmented.projection.whitened_projection")
        return whitened_projection(self.kernel, self.inducing_variable, X, self.num_latent_gps,
                                   broadcast=False)

    @staticmethod
    def marginals(
        A: tf.Tensor, residual: tf.Tensor, q_mu: tf.Tensor, q_sqrt: tf.Tensor
    ) -> MeanAndVariance:
        """Deprecated: :func:`gpflow_augmented.projection.marginals`."""
        warn_moved("AugmentedSVGP.marginals", "gpflow_augmented.projection.marginals")
        return marginals(A, residual, q_mu, q_sqrt)

    def local_elbo(
        self, Fmu: tf.Tensor, Fvar: tf.Tensor, Y: tf.Tensor, subset: Optional[ClassSubset] = None
    ) -> tf.Tensor:
        """Deprecated: the likelihood's ``exact_local_elbo`` or ``augmented_local_elbo``, whichever
        the model's bound is (:func:`gpflow_augmented.updates.batch_bound`)."""
        warn_moved("AugmentedSVGP.local_elbo",
                   "the likelihood's exact_local_elbo / augmented_local_elbo")
        if self.on_exact_bound:
            return self.likelihood.exact_local_elbo(Fmu, Fvar, Y, subset)
        return self.likelihood.augmented_local_elbo(Fmu, Fvar, Y, subset)

    def exact_local_elbo(
        self, Fmu: tf.Tensor, Fvar: tf.Tensor, Y: tf.Tensor, subset: Optional[ClassSubset] = None
    ) -> tf.Tensor:
        """Deprecated: ``model.likelihood.exact_local_elbo``."""
        warn_moved("AugmentedSVGP.exact_local_elbo", "AugmentedSVGP.likelihood.exact_local_elbo")
        return self.likelihood.exact_local_elbo(Fmu, Fvar, Y, subset)

    def augmented_local_elbo(
        self, Fmu: tf.Tensor, Fvar: tf.Tensor, Y: tf.Tensor, subset: Optional[ClassSubset] = None
    ) -> tf.Tensor:
        """Deprecated: ``model.likelihood.augmented_local_elbo``."""
        warn_moved("AugmentedSVGP.augmented_local_elbo",
                   "AugmentedSVGP.likelihood.augmented_local_elbo")
        return self.likelihood.augmented_local_elbo(Fmu, Fvar, Y, subset)

    def minibatch_scale(self, X: tf.Tensor) -> tf.Tensor:
        """Deprecated: :func:`gpflow_augmented.updates.minibatch_scale`."""
        warn_moved("AugmentedSVGP.minibatch_scale", "gpflow_augmented.updates.minibatch_scale")
        return minibatch_scale(self.num_data, batch_size(X))

    def assemble_elbo(self, geometry: tuple, local_elbo: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
        """Deprecated: :func:`gpflow_augmented.updates.batch_elbo`."""
        warn_moved("AugmentedSVGP.assemble_elbo", "gpflow_augmented.updates.batch_elbo")
        return batch_elbo(geometry, tf.reduce_sum(local_elbo), scale)

    def conjugate_terms(
        self,
        Fmu: tf.Tensor,
        Fvar: tf.Tensor,
        Y: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        augmented_sites: Optional[tf.Tensor] = None,
        label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Deprecated: :func:`gpflow_augmented.updates.step_sites` (the likelihood's
        ``conjugate_terms`` or ``exact_sites``, as :class:`~gpflow_augmented.CAVI` takes them)."""
        warn_moved("AugmentedSVGP.conjugate_terms", "gpflow_augmented.updates.step_sites")
        subset = None if classes is None else ClassSubset(classes, self.num_classes,
                                                          label_marginals)
        return step_sites(self.likelihood, Fmu, Fvar, Y, subset, self.on_exact_bound,
                          augmented_sites)

    def natural_update(
        self,
        X: tf.Tensor,
        Y: tf.Tensor,
        step_size: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        augmented_sites: Optional[tf.Tensor] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Deprecated: ``CAVI(model).proposal(X, Y, step_size, subset)``."""
        warn_moved("AugmentedSVGP.natural_update", "CAVI.proposal")
        X = tf.convert_to_tensor(X, dtype=default_float())
        subset = None if classes is None else ClassSubset(classes, self.num_classes)
        geometry = self.batch_geometry(X, subset, Y)
        sites = step_sites(self.likelihood, geometry.Fmu, geometry.Fvar, Y, geometry.subset,
                           self.on_exact_bound, augmented_sites)
        return natural_step(geometry, *sites, scale=minibatch_scale(self.num_data, batch_size(X)),
                            step_size=step_size, whiten=self.whiten)

    def natural_step(
        self,
        X: tf.Tensor,
        geometry: tuple,
        local_elbo: tf.Tensor,
        linear: tf.Tensor,
        quadratic: tf.Tensor,
        step_size: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Deprecated: :meth:`CAVI.natural_step` (:func:`gpflow_augmented.updates.natural_step`)."""
        warn_moved("AugmentedSVGP.natural_step", "CAVI.natural_step")
        if classes is not None and geometry.subset is None:
            geometry = geometry._replace(subset=ClassSubset(classes, self.num_classes))
        return natural_step(geometry, local_elbo, linear, quadratic,
                            scale=minibatch_scale(self.num_data, batch_size(X)),
                            step_size=step_size, whiten=self.whiten)
