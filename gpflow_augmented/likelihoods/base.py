r"""
The augmented-likelihood contract: what a GPflow likelihood provides so that
:class:`~gpflow_augmented.AugmentedSVGP` can update q(u) in closed form, and the Gibbs sampler can
draw from the same augmented model.

A likelihood p(y | f) is augmented by auxiliary variables ω (Pólya-Gamma, Poisson counts, ...)
so that, given them, log p(y, ω | f) = linear·f - quadratic·f²/2 + const: Gaussian in f. Given the
batch's :class:`Marginals` q(f) = N(mean, variance) a likelihood gives

* :meth:`AugmentedLikelihood.local_parameters`: the optimal q(ω) (its moments);
* :meth:`AugmentedLikelihood.conjugate_coefficients`: (linear, quadratic) given the auxiliaries'
  moments (CAVI) or draws (Gibbs) — one formula serves both;
* :meth:`AugmentedLikelihood.augmented_local_elbo`: each point's augmented bound
  E_q log p(y, ω | f) - KL(q(ω) ‖ p(ω)) at given local parameters (their optimum if none);
* :meth:`AugmentedLikelihood.exact_local_elbo` and, for the exact-bound step,
  :meth:`AugmentedLikelihood.exact_sites`: E_q log p(y | f) and the (linear, quadratic) of a
  natural-gradient step on it; :meth:`AugmentedLikelihood.refined_exact_local_elbo`, the same
  expectation more accurately, for the bound certificate.

The sampled version of the same operations, for the Gibbs sampler (as in
AugmentedGPLikelihoods.jl, where each likelihood gives both):

* :meth:`AugmentedLikelihood.draw_auxiliaries`: one draw of ω from its complete conditional given
  f (the sampled counterpart of :meth:`~AugmentedLikelihood.local_parameters`, whose moments it has
  where q(f) is a point mass), which :meth:`~AugmentedLikelihood.conjugate_coefficients` turns into
  f's Gaussian conditional;
* :meth:`AugmentedLikelihood.log_class_probabilities`: log p(y = k | f) for sampled f, for the
  samplers' predictions and the non-augmented target of NUTS.

The columns of the marginals are all latent GPs, or, for a multi-class likelihood, those of a
:class:`~gpflow_augmented.class_subsets.ClassSubset`, which the marginals carry: what the columns
are travels with them, so no method that reads them takes the subset beside them. Shapes are
declared here once and inherited.
"""

import abc
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes
from gpflow.likelihoods import Likelihood

from .polya_gamma import LocalParameters
from ..class_subsets import ClassSubset

__all__ = ["AugmentedLikelihood", "Marginals"]


class Marginals(NamedTuple):
    """q(f) at a batch as a likelihood reads it: the marginal means and variances [N, K] of all
    latent GPs (``subset`` ``None``) or of a class subset's K classes, in the subset's order."""

    mean: tf.Tensor
    variance: tf.Tensor
    subset: Optional[ClassSubset] = None
    # On a subset, given the labels: each point's observed class's (mean [N], variance [N]),
    # which the exact bound's estimate keeps exact whether or not that class is in the subset.
    label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None


# The subset's classes are the columns, and the observed classes' marginals one per point.
_MARGINALS = (
    "marginals.mean: [N, K]",
    "marginals.variance: [N, K]",
    "marginals.subset.classes: [K] if marginals.subset is not None",
    "marginals.label_marginals[0]: [N] if marginals.label_marginals is not None",
    "marginals.label_marginals[1]: [N] if marginals.label_marginals is not None",
)

# (local ELBO or expected log-likelihood [N], linear [N, K], quadratic [N, K]) from the marginals
_LOCAL_ELBO_AND_SITES = (
    *_MARGINALS,
    "Y: [N, L]",
    "return[0]: [N]",
    "return[1]: [N, K]",
    "return[2]: [N, K]",
)


class AugmentedLikelihood(Likelihood):
    """A GPflow likelihood that is conditionally conjugate given auxiliary variables."""

    @property
    @abc.abstractmethod
    def num_classes(self) -> int:
        """The number of classes a label can take."""

    @property
    @abc.abstractmethod
    def num_latent_gps(self) -> int:
        """The number of latent GPs (columns of f)."""

    @property
    def accepts_soft_labels(self) -> bool:
        """Whether training takes rows [N, C] of class probabilities as well as labels [N, 1]."""
        return False

    @property
    def has_exact_sites(self) -> bool:
        """Whether :meth:`exact_sites` is available (a model may then step on the exact bound)."""
        return False

    @property
    def learns_class_weights(self) -> bool:
        """Whether the likelihood has class weights that CAVI updates in closed form."""
        return False

    @property
    def has_gibbs_conditionals(self) -> bool:
        """Whether :meth:`draw_auxiliaries` is available (the Gibbs sampler may then draw from the
        augmented model's exact posterior)."""
        return False

    @abc.abstractmethod
    @check_shapes("Y: [N, L]", "return: [N, K]")
    def label_rows(self, Y: tf.Tensor, subset: Optional[ClassSubset] = None) -> tf.Tensor:
        """The labels as the coefficients take them, one column per latent GP (of the subset)."""

    @abc.abstractmethod
    @check_shapes(*_MARGINALS, "Y_rows: [N, K]", "return.theta: [N, K]", "return.c: [N, K]")
    def local_parameters(self, marginals: Marginals, Y_rows: tf.Tensor) -> LocalParameters:
        """The optimal q(ω) given the marginals: the moments the coefficients need."""

    @abc.abstractmethod
    @check_shapes(
        "Y_rows: [batch..., K]",
        "local.theta: [batch..., K]",
        "return[0]: [batch..., K]",
        "return[1]: [batch..., K]",
    )
    def conjugate_coefficients(
        self, Y_rows: tf.Tensor, local: LocalParameters
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """(linear, quadratic): given the auxiliaries, the augmented log-likelihood of f is
        ``linear·f - quadratic·f²/2`` + const. ``local`` holds their expectations under q (CAVI)
        or one draw (Gibbs), in any leading batch shape."""

    @abc.abstractmethod
    @check_shapes(*_MARGINALS, "Y: [N, L]", "return: [N]")
    def augmented_local_elbo(
        self, marginals: Marginals, Y: tf.Tensor, local: Optional[LocalParameters] = None
    ) -> tf.Tensor:
        """E_q log p(y, ω | f) - KL(q(ω) ‖ p(ω)) per point at ``local`` (its optimum if ``None``),
        estimated from the subset's columns. Local parameters are held constant when this is
        differentiated: at their optimum that is the gradient of the optimised bound (envelope
        theorem)."""

    @abc.abstractmethod
    @check_shapes("F: [batch..., K]", "return: [batch..., C]")
    def log_class_probabilities(self, F: tf.Tensor) -> tf.Tensor:
        """log p(y = k | f) of every class k (C of them) at the latent values F."""

    def initial_gibbs_state(self, F: np.ndarray, rng: np.random.Generator) -> Any:
        """What a Gibbs chain carries from one sweep to the next besides f, drawn given the
        chains' first f [S, K, N]; ``None`` (the default) when the auxiliaries' conditional needs
        f alone."""
        return None

    def draw_auxiliaries(
        self,
        F: np.ndarray,
        Y_rows: np.ndarray,
        state: Any,
        rng: np.random.Generator,
        scan: str = "blocked",
    ) -> Tuple[LocalParameters, Any]:
        """One draw of the auxiliaries from their complete conditional, on the host (NumPy):
        F [S, K, N] (chains, latent GPs, points: the samplers' layout), the label rows [K, N] and
        the chain's ``state`` (see :meth:`initial_gibbs_state`) → (the draw, whose ``gamma`` and
        ``theta`` [S, K, N] :meth:`conjugate_coefficients` takes as it takes their moments, and
        the state for the next sweep). ``scan`` names the order of the draws where a likelihood
        offers more than one (:data:`~gpflow_augmented.sampling.gibbs.SCANS`)."""
        raise NotImplementedError(f"{type(self).__name__} has no Gibbs conditionals")

    @abc.abstractmethod
    @check_shapes(*_MARGINALS, "Y: [N, L]", "return: [N]")
    def exact_local_elbo(self, marginals: Marginals, Y: tf.Tensor) -> tf.Tensor:
        """E_q log p(y | f) per point (estimated from the subset's columns)."""

    @check_shapes(*_MARGINALS, "Y: [N, L]", "return: [N]")
    def refined_exact_local_elbo(self, marginals: Marginals, Y: tf.Tensor) -> tf.Tensor:
        """:meth:`exact_local_elbo` of marginals of all classes, computed again more accurately:
        the bound certificate's estimate of its quadrature error. The default is
        :meth:`exact_local_elbo` itself, for a likelihood whose expectation is exact to machine
        precision."""
        return self.exact_local_elbo(marginals, Y)

    @check_shapes(*_LOCAL_ELBO_AND_SITES)
    def augmented_sites(
        self, marginals: Marginals, Y: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(augmented local ELBO [N], linear [N, K], quadratic [N, K]) at the optimal local
        parameters: what one CAVI step on the augmented bound needs."""
        Y_rows = self.label_rows(Y, marginals.subset)
        local = self.local_parameters(marginals, Y_rows)
        return (
            self.augmented_local_elbo(marginals, Y, local),
            *self.conjugate_coefficients(Y_rows, local),
        )

    @check_shapes(*_LOCAL_ELBO_AND_SITES)
    def exact_sites(
        self, marginals: Marginals, Y: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(E_q log p(y | f) [N], linear [N, K], quadratic [N, K]): the exact expected
        log-likelihood and the coefficients of a natural-gradient step on it, each column's
        own."""
        raise NotImplementedError(f"{type(self).__name__} has no exact-bound step")

    @check_shapes(
        *_MARGINALS,
        "d_mean: [N, K]",
        "d_var: [N, K]",
        "Y: [N, L]",
        "return[0]: [N, K]",
        "return[1]: [N, K]",
    )
    def sites_from_derivatives(
        self, marginals: Marginals, d_mean: tf.Tensor, d_var: tf.Tensor, Y: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """The exact sites from the derivatives of the batch's expected log-likelihood with
        respect to the marginals, taken elsewhere (e.g. in the backward pass of the training
        loss): what :meth:`exact_sites` returns, without a second evaluation."""
        raise NotImplementedError(f"{type(self).__name__} has no exact-bound step")
