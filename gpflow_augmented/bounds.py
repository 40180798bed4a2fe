"""
What :class:`~gpflow_augmented.CAVI` steps on, as objects (in the way GPflow's natural-gradient
optimizer takes ``XiTransform`` objects): each bound gives each point's local ELBO, the sites of a
q(u) step, and the defaults of the optimisation on it, so that a model, ``CAVI``, ``Trainer`` and
``fit`` read one default from one place.

* :class:`AugmentedBound`: the likelihood's augmented bound at the optimal local parameters. CAVI is
  exact coordinate ascent on it (conjugate given the local parameters).
* :class:`ExactBound`: the exact ELBO, E_q log p(y | f) - KL. Its sites are the expected
  log-likelihood's natural-gradient sites (likelihoods with ``exact_sites``), its fixed point the
  exact variational optimum. The first ``warm_start_iterations`` steps take the augmented bound's
  sites, which are stable from any start.

Bounds are frozen dataclasses, not ``tf.Module``: values that compare and print by their settings,
which a model holds without adding a variable or a checkpoint entry.
"""

import dataclasses
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import tensorflow as tf

from .likelihoods import AugmentedLikelihood
from .projection import BatchGeometry
from .updates import batch_elbo
from .validation import check_integer

__all__ = [
    "AUGMENTED_LEARNING_RATE",
    "AugmentedBound",
    "Bound",
    "BoundPass",
    "EXACT_AVERAGING",
    "EXACT_LEARNING_RATE",
    "EXACT_LEARNING_RATE_DECAY_STEPS",
    "EXACT_WARM_START",
    "ExactBound",
    "check_hyperparameter_bound",
]

# The first minibatch steps on the exact bound take the augmented bound's sites: chosen on
# validation splits of ten datasets (docs/method.md, "The three schemes").
EXACT_WARM_START = 50
# Adam's learning rate for the hyperparameters on the exact bound when none is given: chosen from
# 0.01, 0.03 and 0.1 on the same validation splits (docs/benchmarks.md, "How each method's
# defaults were chosen").
# The augmented bounds were not swept and keep GPflow's customary 0.01.
EXACT_LEARNING_RATE = 0.1
AUGMENTED_LEARNING_RATE = 0.01
# Adam's rate on the exact bound decays as 1/√(1 + t / EXACT_LEARNING_RATE_DECAY_STEPS)
# (schedules.InverseSquareRootDecay): at a constant 0.1 the hyperparameters keep moving on
# minibatches, and the test NLL with them (docs/stability.md, "What keeps the NLL moving").
EXACT_LEARNING_RATE_DECAY_STEPS = 100.0
# On minibatches the model holds the average of q(u)'s iterates with η = EXACT_AVERAGING
# (averaging.averaging_weight): the last iterate's noise keeps the test NLL moving on large
# data. Chosen from 1, 3 and 10 on validation splits (docs/stability.md, "The averaged q(u)").
EXACT_AVERAGING = 10.0


class BoundPass(NamedTuple):
    """What one evaluation of a bound on a batch gives a CAVI step (:meth:`Bound.evaluate`)."""

    geometry: BatchGeometry
    #: each point's local ELBO [B]
    local_elbo: tf.Tensor
    #: the step's (linear, quadratic) sites [B, K]
    linear: tf.Tensor
    quadratic: tf.Tensor
    #: this replica's training loss and its gradients with respect to the hyperparameters where
    #: the same pass gave them, at q(u) before the step; else ``None`` and ``[]``
    loss: Optional[tf.Tensor]
    gradients: List[tf.Tensor]
    #: the gradient of the batch's summed local ELBO with respect to log θ (learned class
    #: weights), or ``None``
    log_weight_gradient: Optional[tf.Tensor]


class Bound:
    """A bound CAVI steps on. Subclasses give the local ELBO and the step's sites."""

    #: Adam's learning rate for the hyperparameters where :class:`~gpflow_augmented.Trainer` and
    #: :func:`~gpflow_augmented.fit` are given none.
    learning_rate: float = AUGMENTED_LEARNING_RATE
    #: Adam's rate decays as 1/√(1 + t / this)
    #: (:class:`~gpflow_augmented.schedules.InverseSquareRootDecay`; ``inf``: constant).
    learning_rate_decay_steps: float = float("inf")
    #: η of the averaged q(u) the model holds on minibatches (:class:`~gpflow_augmented.CAVI`'s
    #: ``averaging``; ``inf``: the last iterate).
    averaging: float = float("inf")
    #: How many first steps take the augmented bound's sites instead of this bound's own.
    warm_start_iterations: int = 0
    #: The smallest class subset whose step estimates this bound.
    min_class_subset_size: int = 1
    #: Whether each step is line-searched on its batch's own bound
    #: (:func:`~gpflow_augmented.line_search.halving_search`): a bound whose sites are its own
    #: derivatives takes Newton steps on itself, which overshoot where it is far from quadratic.
    line_searched: bool = False
    #: Whether a site's quadratic coefficient θ can be negative, so that a minibatch step needs
    #: the trust region of :func:`~gpflow_augmented.updates.natural_step` (``False`` leaves it out
    #: of the compiled step).
    sites_can_be_negative: bool = True
    #: Whether :meth:`mean_sites` can give sites apart from the step's own.
    mean_sites_differ: bool = False
    #: Whether a minibatch step estimates the data's statistics with each class's own points as a
    #: stratum (:mod:`~gpflow_augmented.strata`; :class:`~gpflow_augmented.CAVI`'s
    #: ``label_strata``).
    label_strata: bool = False

    def check(self, likelihood: AugmentedLikelihood) -> None:
        """Raise a ValueError naming the problem if this bound cannot be stepped on with
        ``likelihood``."""

    def check_warm_start(self, iterations: int) -> None:
        """Raise a ValueError if this bound cannot take ``iterations`` warm-start steps."""
        if iterations:
            raise ValueError(
                "warm_start_iterations is for a model on the exact bound "
                "(LogisticSoftmaxSVGP(..., scheme='exact'))"
            )

    def check_hyperparameter_bound(self, bound: "Bound") -> None:
        """Raise a ValueError if a gradient optimizer beside a step on this bound cannot train
        the hyperparameters on ``bound``."""

    def evaluate(
        self,
        likelihood: AugmentedLikelihood,
        build_geometry: Callable[[], BatchGeometry],
        Y: tf.Tensor,
        *,
        in_warm_start: Optional[tf.Tensor],
        hyperparameters: Sequence[tf.Variable],
        log_weights: Sequence[tf.Variable],
        training_loss: Callable[[BatchGeometry], Tuple[tf.Tensor, tf.Tensor]],
        scale: tf.Tensor,
    ) -> BoundPass:
        """This bound on the batch: the geometry ``build_geometry()`` gives, the step's sites
        (:meth:`sites`) and the gradient of the local ELBO with respect to ``log_weights`` (at most
        one, log θ). ``training_loss(geometry)`` gives (each point's local ELBO, this replica's
        training loss), ``scale`` the batch's N / B. Here the hyperparameters' loss is not taken
        (``loss`` is ``None``): the step's caller takes it after the step."""
        geometry = build_geometry()
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(log_weights)
            local_elbo, linear, quadratic = self.sites(likelihood, geometry, Y, in_warm_start)
            local_sum = tf.reduce_sum(local_elbo)
        gradient = tape.gradient(local_sum, log_weights[0]) if log_weights else None
        return BoundPass(geometry, local_elbo, linear, quadratic, None, [], gradient)

    def local_elbo(
        self, likelihood: AugmentedLikelihood, geometry: BatchGeometry, Y: tf.Tensor
    ) -> tf.Tensor:
        """Each point's local ELBO [N], of the geometry's marginals (its class subset's
        columns)."""
        raise NotImplementedError

    def sites(
        self,
        likelihood: AugmentedLikelihood,
        geometry: BatchGeometry,
        Y: tf.Tensor,
        in_warm_start: Optional[tf.Tensor] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(local ELBO [N], linear [N, K], quadratic [N, K]) of a q(u) step at the geometry's
        marginals; ``in_warm_start`` is a boolean tensor (``None``: no warm start)."""
        raise NotImplementedError

    def mean_sites(
        self,
        likelihood: AugmentedLikelihood,
        geometry: BatchGeometry,
        Y: tf.Tensor,
        sites: Tuple[tf.Tensor, tf.Tensor],
        scale: tf.Tensor,
    ) -> Optional[Tuple[tf.Tensor, tf.Tensor]]:
        """(linear, quadratic) [N, K] of the sites whose step gives q(u)'s new mean, where they
        can differ from the step's ``sites`` (which give its covariance); ``None`` where they
        cannot. ``scale`` is the batch's N / B."""
        return None

    def batch_bound(
        self,
        likelihood: AugmentedLikelihood,
        geometry: BatchGeometry,
        Y: tf.Tensor,
        scale: tf.Tensor,
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """(each point's local ELBO [N], the batch ELBO []) of the geometry's class subset, the
        sum scaled by ``scale`` (N / B)."""
        local_elbo = self.local_elbo(likelihood, geometry, Y)
        return local_elbo, batch_elbo(geometry, tf.reduce_sum(local_elbo), scale)


@dataclasses.dataclass(frozen=True)
class AugmentedBound(Bound):
    """The likelihood's augmented bound at the optimal local parameters: CAVI is exact coordinate
    ascent on it."""

    # θ is a Pólya-Gamma mean E[ω], ω ≥ 0.
    sites_can_be_negative = False

    def local_elbo(
        self, likelihood: AugmentedLikelihood, geometry: BatchGeometry, Y: tf.Tensor
    ) -> tf.Tensor:
        return likelihood.augmented_local_elbo(geometry.marginals, Y)

    def sites(
        self,
        likelihood: AugmentedLikelihood,
        geometry: BatchGeometry,
        Y: tf.Tensor,
        in_warm_start: Optional[tf.Tensor] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        return likelihood.augmented_sites(geometry.marginals, Y)


@dataclasses.dataclass(frozen=True)
class ExactBound(Bound):
    """The exact ELBO, stepped on by closed-form natural-gradient steps from the exact sites.

    :param warm_start_iterations: take the first steps with the augmented bound's sites, which
        are stable from any start; the exact sites follow from there to the exact optimum.
    """

    learning_rate = EXACT_LEARNING_RATE
    learning_rate_decay_steps = EXACT_LEARNING_RATE_DECAY_STEPS
    averaging = EXACT_AVERAGING
    # The subset estimate of the normaliser needs a class besides each point's own.
    min_class_subset_size = 2
    line_searched = True
    mean_sites_differ = True
    label_strata = True

    warm_start_iterations: int = EXACT_WARM_START

    def __post_init__(self) -> None:
        checked = check_integer(self.warm_start_iterations, "warm_start_iterations", minimum=0)
        object.__setattr__(self, "warm_start_iterations", checked)

    def check(self, likelihood: AugmentedLikelihood) -> None:
        if not likelihood.has_exact_sites:
            raise ValueError(
                f"{type(likelihood).__name__} has no exact-bound step; use AugmentedBound()"
            )

    def check_warm_start(self, iterations: int) -> None:
        pass

    def check_hyperparameter_bound(self, bound: Bound) -> None:
        if type(bound) is not type(self):
            raise ValueError(
                f"on the {type(self).__name__} the hyperparameter gradient comes from the "
                f"step's own backward pass: hyperparameter_bound must be None or the model's "
                f"bound, got {bound!r}"
            )

    def local_elbo(
        self, likelihood: AugmentedLikelihood, geometry: BatchGeometry, Y: tf.Tensor
    ) -> tf.Tensor:
        return likelihood.exact_local_elbo(geometry.marginals, Y)

    def evaluate(
        self,
        likelihood: AugmentedLikelihood,
        build_geometry: Callable[[], BatchGeometry],
        Y: tf.Tensor,
        *,
        in_warm_start: Optional[tf.Tensor],
        hyperparameters: Sequence[tf.Variable],
        log_weights: Sequence[tf.Variable],
        training_loss: Callable[[BatchGeometry], Tuple[tf.Tensor, tf.Tensor]],
        scale: tf.Tensor,
    ) -> BoundPass:
        """With ``hyperparameters``, the step and the training loss's gradient from one
        evaluation of the expected log-likelihood: its derivatives with respect to the marginals
        are the sites, and the same backward pass continues to the hyperparameters (and log θ),
        all at q(u) before the step. Without, :meth:`Bound.evaluate`."""
        if not hyperparameters:
            return super().evaluate(
                likelihood,
                build_geometry,
                Y,
                in_warm_start=in_warm_start,
                hyperparameters=hyperparameters,
                log_weights=log_weights,
                training_loss=training_loss,
                scale=scale,
            )
        sources = [*hyperparameters, *log_weights]
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(sources)
            geometry = build_geometry()
            marginals = geometry.marginals
            tape.watch([marginals.mean, marginals.variance])
            expected, loss = training_loss(geometry)
        *gradients, d_mean, d_var = tape.gradient(
            loss, [*sources, marginals.mean, marginals.variance]
        )
        # The loss carries each point's expectation with weight -(B_r/B)(N/B_r) = -N/B.
        log_weight_gradient = -gradients.pop() / scale if log_weights else None
        exact = likelihood.sites_from_derivatives(marginals, -d_mean / scale, -d_var / scale, Y)
        linear, quadratic = self.warm_start_sites(likelihood, geometry, Y, exact, in_warm_start)
        return BoundPass(
            geometry, expected, linear, quadratic, loss, gradients, log_weight_gradient
        )

    def sites(
        self,
        likelihood: AugmentedLikelihood,
        geometry: BatchGeometry,
        Y: tf.Tensor,
        in_warm_start: Optional[tf.Tensor] = None,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        # The exact expectation and its derivatives outside any tf.cond: a gradient (for the
        # class weights) taken through a cond whose branch differentiates the XLA-compiled
        # expectation comes back as zero.
        expected, *exact = likelihood.exact_sites(geometry.marginals, Y)
        linear, quadratic = self.warm_start_sites(
            likelihood, geometry, Y, (exact[0], exact[1]), in_warm_start
        )
        return expected, linear, quadratic

    def mean_sites(
        self,
        likelihood: AugmentedLikelihood,
        geometry: BatchGeometry,
        Y: tf.Tensor,
        sites: Tuple[tf.Tensor, tf.Tensor],
        scale: tf.Tensor,
    ) -> Optional[Tuple[tf.Tensor, tf.Tensor]]:
        """On a minibatch (``scale`` N / B > 1), the exact ``sites`` with each quadratic
        coefficient raised to at least the augmented bound's θ at the optimal local parameters,
        the linear one moved with it so that the gradient they give at the current marginals is
        the exact one; on the full batch the exact sites, whose step the line search on the
        batch's bound, there the data's, keeps from overshooting.

        The mean's step is then m + ρ Λ⁻¹ ∇ with the exact ELBO's gradient ∇ and a precision Λ
        from the raised sites, so it has the exact step's fixed points. The exact curvature of
        E log σ(f) vanishes like ``σ(-|f|)`` on a confident or confidently wrong point, where
        E log p(y | f) is nearly linear, and a Newton step there has no bound. A minibatch weighs
        each of its points N / B times, so a few misclassified points of a rare class can send that
        class's mean across the data in one step (kddcup, docs/stability.md). θ = E[ω] is the
        curvature of the augmented bound, a quadratic lower bound of the log-likelihood in f, and
        decays only like ``1 / |f|``: the step stays within the region where a bound of the
        likelihood vouches for it. The covariance keeps the exact sites, so its fixed point is the
        exact optimum's."""
        linear, quadratic = sites
        _, theta = self._augmented_sites(likelihood, geometry, Y)
        floored = tf.where(scale > 1.0, tf.maximum(quadratic, theta), quadratic)
        return linear + (floored - quadratic) * geometry.marginals.mean, floored

    @staticmethod
    def _augmented_sites(
        likelihood: AugmentedLikelihood, geometry: BatchGeometry, Y: tf.Tensor
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """The augmented bound's (linear, quadratic) at the optimal local parameters of the
        geometry's marginals."""
        Y_rows = likelihood.label_rows(Y, geometry.marginals.subset)
        local = likelihood.local_parameters(geometry.marginals, Y_rows)
        return likelihood.conjugate_coefficients(Y_rows, local)

    @staticmethod
    def warm_start_sites(
        likelihood: AugmentedLikelihood,
        geometry: BatchGeometry,
        Y: tf.Tensor,
        exact: Tuple[tf.Tensor, tf.Tensor],
        in_warm_start: Optional[tf.Tensor],
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """The ``exact`` (linear, quadratic) sites, or the augmented bound's at the optimal local
        parameters of the geometry's marginals while ``in_warm_start`` is true."""
        if in_warm_start is None:
            return exact
        return tf.cond(
            in_warm_start,
            lambda: ExactBound._augmented_sites(likelihood, geometry, Y),
            lambda: exact,
        )


def check_hyperparameter_bound(
    bound: Optional[Bound], model_bound: Bound, likelihood: AugmentedLikelihood
) -> Optional[Bound]:
    """``bound``, the bound whose loss a gradient optimizer maximises over the hyperparameters of a
    model on ``model_bound``, if it is ``None`` (the model's) or a :class:`Bound` the pair allows;
    else a clear error."""
    if bound is None:
        return None
    if not isinstance(bound, Bound):
        raise TypeError(
            f"hyperparameter_bound must be None (the model's bound) or a Bound such as "
            f"ExactBound(), got {bound!r}"
        )
    bound.check(likelihood)
    model_bound.check_hyperparameter_bound(bound)
    return bound
