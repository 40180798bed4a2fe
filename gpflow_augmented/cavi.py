"""
:class:`CAVI`: the optimizer that owns every update of q(u) of an
:class:`~gpflow_augmented.AugmentedSVGP` (any augmented likelihood, on the model's bound), one
compiled sweep per call. :meth:`CAVI.update` also gives a gradient optimizer beside it
(``Trainer``'s Adam) the hyperparameters' loss and gradient; on the exact bound from the step's own
backward pass.

Like :class:`gpflow.optimizers.NaturalGradient` it owns the step and assigns to the model's ``q_mu``
and ``q_sqrt``; unlike it, the step needs no gradient: local updates, then a step of size ρ in
natural parameters. The step is built once as a ``tf.function`` (optionally XLA-compiled with
``jit_compile=True``, which is how it runs unchanged on a GPU) and validates its batch on the
device: on bad data or a numerical failure it assigns nothing and the Python wrapper raises.
"""

from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

import tensorflow as tf
from gpflow.config import default_float

from ._quiet import without_failed_step_warnings
from .class_subsets import (
    ClassSubset,
    ClassSubsetSampler,
    as_class_subset,
    assign_variational_parameters,
    subset_classes,
    variational_parameters,
)
from .averaging import IterateAverage
from .bounds import Bound, check_hyperparameter_bound
from .distributed import (
    loss_and_gradients,
    replica_max_code,
    replica_share,
    replica_sum,
    replicated_by_first,
)
from .kernel_variance import updated_variances, variance_step
from .line_search import Proposal, all_finite, count_search, halving_search, single_trial
from .models import AugmentedSVGP
from .projection import BatchGeometry, geometry_at
from .schedules import ConstantStepSize, StepSizeSchedule
from .strata import LabelStrata, StrataEstimate
from .updates import (
    BatchStatistics,
    batch_elbo,
    batch_size,
    batch_statistics,
    class_weight_exposure,
    is_full_batch,
    update_class_weights,
    minibatch_scale,
    natural_step,
)
from .validation import (
    NUM_STATUS_CODES,
    InvalidDataError,
    NUMERICAL_FAILURE,
    OK,
    check_data,
    check_integer,
    data_status,
    numerical_errors,
    raise_for_status,
    step_size_status,
)

__all__ = ["CAVI", "CAVIUpdate"]


class _Sites(NamedTuple):
    """A step's sites: each point's local ELBO [N], the (linear, quadratic) sites [N, K] that give
    q(u)'s new covariance, and those that give its mean where they differ
    (:meth:`~gpflow_augmented.bounds.Bound.mean_sites`; else ``None``)."""

    local_elbo: tf.Tensor
    linear: tf.Tensor
    quadratic: tf.Tensor
    mean: Optional[Tuple[tf.Tensor, tf.Tensor]]


class _Step(NamedTuple):
    """A step's proposal from its batch's sites (:meth:`CAVI._step_from_sites`), unassigned."""

    #: q(u)'s new mean and square root, as stored
    mu: tf.Tensor
    sqrt: tf.Tensor
    #: the kernel variances over their running statistics [4, P] (:meth:`CAVI._variance_state`);
    #: ``None`` where no variance is updated in closed form
    state: Optional[tf.Tensor]
    #: the batch ELBO before the step
    elbo: tf.Tensor
    #: ρ as taken
    step_size: tf.Tensor
    #: :attr:`CAVIUpdate.retry`
    retry: tf.Tensor
    #: (the strata's estimates, the batch's class counts) for
    #: :meth:`~gpflow_augmented.strata.LabelStrata.step`; ``None`` without label strata
    strata: Optional[Tuple[Tuple[StrataEstimate, ...], tf.Tensor]]


class CAVIUpdate(NamedTuple):
    """What :meth:`CAVI.update` returns."""

    #: the global batch's ELBO before the step, the same on every replica
    elbo: tf.Tensor
    #: the batch's validation status (``validation.OK`` when q(u) was assigned)
    status: tf.Tensor
    #: the training loss, summed over the replicas; ``None`` without hyperparameters
    loss: Optional[tf.Tensor]
    #: its gradients with respect to the hyperparameters given, summed over the replicas
    gradients: List[tf.Tensor]
    #: under a ``tf.distribute`` strategy, the batch's bound fell at the step's ρ and nothing was
    #: assigned: take the step again with one more halving (:meth:`CAVI.update`); else false
    retry: tf.Tensor


class CAVI(tf.Module):
    """Coordinate-ascent / stochastic variational inference for a conjugate :class:`AugmentedSVGP`.

    :param model: the model whose q(u) is updated.
    :param step_size: ρ, a constant in (0, 1] or a schedule of the iteration (e.g.
        :class:`~gpflow_augmented.RobbinsMonro`). ρ = 1 on the full data is exact coordinate ascent;
        minibatches need a decaying schedule to converge. A model on the exact bound halves ρ
        within the step until the batch's bound does not fall, on the full data and on
        minibatches alike (:meth:`_line_search`).
    :param class_subset_size: update only this many classes per step, drawn uniformly at random
        (paper, Algorithm 2; see :mod:`~gpflow_augmented.class_subsets`). With one kernel shared by
        all classes the step's cost then does not grow with the number of classes.
    :param seed: seeds the class subsets.
    :param warm_start_iterations: for a model on the exact bound (``scheme="exact"``), take the
        first steps with the negative-multinomial bound's sites, which are stable from any start;
        the exact sites follow from there to the exact optimum. Default: the model's bound's
        (:data:`~gpflow_augmented.EXACT_WARM_START` on the exact bound, else 0), as for
        :class:`~gpflow_augmented.Trainer` and :func:`~gpflow_augmented.fit`.
    :param update_variance: also move the kernel variance σ² with q(u), in closed form
        (:func:`~gpflow_augmented.kernel_variance.variance_update`), at every step. ``False``
        (default, as GPflow's ``NaturalGradient`` updates only q(u)) leaves σ² alone; ``True``
        requires it; ``None`` applies it wherever it can: a stationary kernel whose variance is
        trainable and has no prior, without class subsets (the default of
        :class:`~gpflow_augmented.Trainer` and :func:`~gpflow_augmented.fit`).
    :param averaging: η of the averaged q(u) that the model holds for prediction on minibatches
        (:mod:`~gpflow_augmented.averaging`): the steps go on from the last iterate, which this
        optimizer keeps, and the model's q_mu and q_sqrt are the polynomial-decay average of the
        iterates, reaching back about the last t / (η + 1) of t steps; ``math.inf``: the model
        holds the last iterate. Default: the model's bound's ``averaging`` (10 on the exact bound,
        ``math.inf`` on the augmented ones), but never with class subsets, whose steps leave most
        classes alone. A full-batch step is never averaged.
    :param label_strata: estimate a minibatch's statistics with each class's own points as a
        stratum (:mod:`~gpflow_augmented.strata`): a class absent from the batch keeps the running
        estimate of its points' sites instead of being estimated as absent from the data, which
        is what moves a rare class's q(u) on minibatches. Default: the model's bound's (on for
        the exact bound, off for the augmented ones), but never with class subsets. Full-batch
        steps are unchanged; rows of class probabilities take the stratum of their largest.
    :param compile: wrap the step in ``tf.function``.
    :param jit_compile: compile the step with XLA.

    ``iteration`` counts successful steps; it drives the schedule and is saved by
    ``tf.train.Checkpoint`` together with the optimizer (it also seeds the class subsets).

    The closed-form q(u) step alone, without Adam on the hyperparameters::

        cavi = ga.CAVI(model, step_size=ga.RobbinsMonro(tau=1, kappa=0.51))
        for batch in ga.minibatches(X, Y, batch_size=200, seed=0).take(100):
            elbo = cavi.step(batch)
    """

    def __init__(
        self,
        model: AugmentedSVGP,
        step_size: Union[float, StepSizeSchedule] = 1.0,
        *,
        class_subset_size: Optional[int] = None,
        seed: int = 0,
        warm_start_iterations: Optional[int] = None,
        update_variance: Optional[bool] = False,
        averaging: Optional[float] = None,
        label_strata: Optional[bool] = None,
        compile: bool = True,
        jit_compile: bool = False,
        name: str = "CAVI",
    ) -> None:
        super().__init__(name=name)
        if not isinstance(model, AugmentedSVGP):
            raise TypeError(
                f"CAVI updates a conjugate model (LogisticSoftmaxSVGP, BinaryLogisticSVGP), "
                f"got {type(model).__name__}"
            )
        if not callable(step_size):
            step_size = ConstantStepSize(step_size)
        if warm_start_iterations is None:
            warm_start_iterations = model.bound.warm_start_iterations
        if int(warm_start_iterations) != warm_start_iterations or warm_start_iterations < 0:
            raise ValueError(
                f"warm_start_iterations must be an integer ≥ 0, got {warm_start_iterations!r}"
            )
        model.bound.check_warm_start(warm_start_iterations)
        self.warm_start_iterations = int(warm_start_iterations)
        self.model = model
        self.step_size = step_size
        with replicated_by_first():
            self.iteration = tf.Variable(0, dtype=tf.int64, trainable=False, name="iteration")
            # What the line search did (:meth:`_line_search`), counted over the steps taken and
            # saved with the optimizer: steps it shortened, and steps on which no ρ it tried
            # raised the batch's bound, so that q(u) was kept.
            self.shortened_steps = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="shortened_steps"
            )
            self.kept_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="kept_steps")
        self.class_weight_exposure = class_weight_exposure(model, class_subset_size)
        self.class_sampler = None
        if class_subset_size is not None:
            minimum = (model.bound.min_class_subset_size, type(model.bound).__name__)
            self.class_sampler = ClassSubsetSampler(
                model.num_latent_gps, class_subset_size, seed, minimum
            )
        #: the averaged q(u)'s iterate and state, where ``averaging`` is given
        self.average: Optional[IterateAverage] = None
        if averaging is None and class_subset_size is None:
            averaging = model.bound.averaging
        if averaging is not None and averaging != float("inf"):
            if class_subset_size is not None:
                raise ValueError(
                    "averaging moves every class's q(u) at each step, which class subsets are "
                    "there to avoid: give one or the other"
                )
            self.average = IterateAverage(model, averaging, self.iteration)
        self.variances = updated_variances(
            model.kernel, update_variance, self.class_sampler is not None
        )
        # The variance update's statistics averaged over the steps (variance_step); all zeros
        # until the first step on the model's own sites.
        self.variance_statistics: Optional[tf.Variable] = None
        if self.variances:
            with replicated_by_first():
                self.variance_statistics = tf.Variable(
                    tf.zeros([3, len(self.variances)], default_float()),
                    trainable=False,
                    name="variance_statistics",
                )
        #: the label strata (:mod:`~gpflow_augmented.strata`), where minibatch steps use them
        self.strata: Optional[LabelStrata] = None
        one_per_class = model.num_latent_gps == model.num_classes
        if label_strata is None:
            label_strata = model.bound.label_strata and class_subset_size is None and one_per_class
        if label_strata:
            if not one_per_class:
                raise ValueError(
                    f"label strata need one latent GP per class; this model has "
                    f"{model.num_latent_gps} for {model.num_classes} classes"
                )
            if class_subset_size is not None:
                raise ValueError(
                    "label strata estimate every class's statistics, which class subsets are "
                    "there to avoid: give one or the other"
                )
            self.strata = LabelStrata(
                model.num_latent_gps, model.q_mu.shape[0], 2 if model.bound.mean_sites_differ else 1
            )
        self._step_fn: Callable = self.update
        if compile:
            # The step's loops and branches are TensorFlow's own (tf.while_loop, tf.cond), as XLA
            # needs them; AutoGraph would only re-convert GPflow's and our code at every trace,
            # about a quarter of the tracing time.
            self._step_fn = tf.function(self.update, jit_compile=jit_compile, autograph=False)

    @property
    def owned_variables(self) -> Tuple[tf.Variable, ...]:
        """The hyperparameters' variables this optimizer assigns in closed form (the kernel
        variances it updates, the likelihood's class weights), which a gradient optimizer beside
        it must leave alone."""
        owned = [v.unconstrained_variable for v in self.variances]
        if self.model.learns_class_weights:
            owned.append(self.model.likelihood.class_weights.unconstrained_variable)
        return tuple(owned)

    def _sample_subset(self) -> Optional[ClassSubset]:
        """This step's class subset K, or ``None`` when every class is updated."""
        return None if self.class_sampler is None else self.class_sampler(self.iteration)

    def update(
        self,
        X: tf.Tensor,
        Y: tf.Tensor,
        subset: Optional[ClassSubset] = None,
        *,
        hyperparameters: Sequence[tf.Variable] = (),
        hyperparameter_bound: Optional[Bound] = None,
        halvings: Optional[tf.Tensor] = None,
    ) -> CAVIUpdate:
        """One step as a traceable computation, for use inside a larger compiled function or
        ``strategy.run``; :meth:`step` is the same step called eagerly. It assigns the new q(u)
        only if the batch is valid and the proposal finite (status ``OK``).

        Every bound takes the same sequence: its evaluation on the batch
        (:meth:`~gpflow_augmented.bounds.Bound.evaluate`: the geometry, the sites, and where the
        bound gives them from the same pass the hyperparameters' loss and gradient), the step
        (:meth:`_step_from_sites`), :meth:`_accept`, the class weights, and the hyperparameters'
        loss after the step where the bound's pass did not give it.

        :param subset: the :class:`ClassSubset` to update (drawn here if the optimizer
            subsamples classes and none is given).
        :param hyperparameters: variables for a gradient optimizer beside CAVI (``Trainer``'s
            Adam): the update then also returns the training loss -(ELBO + log prior) on the batch
            and its gradient with respect to them, both summed over the replicas. On the exact
            bound both come from the step's own backward pass, at q(u) before the step (one
            evaluation of the expected log-likelihood gives the sites and the gradient); on an
            augmented bound they are taken after the step.
        :param hyperparameter_bound: the bound of that loss: ``None`` (the model's) or, for an
            augmented model, an :class:`~gpflow_augmented.ExactBound`.
        :param halvings: under a ``tf.distribute`` strategy, how many times the line search has
            halved this step's ρ (default 0). The search's loop cannot hold the replicas'
            all-reduce, so the step makes one trial
            (:func:`~gpflow_augmented.line_search.single_trial`) and returns ``retry`` where the
            bound fell; the caller then calls again with ``halvings + 1`` on the same batch, and
            the step ends where :func:`~gpflow_augmented.line_search.halving_search` would.

        With ``averaging``, the step goes from the iterate, and the model holds the average after
        it (:class:`~gpflow_augmented.averaging.IterateAverage`).
        """
        if self.average is None or is_full_batch(self.model.num_data, X.shape[0]) is True:
            return self._update_iterate(
                X, Y, subset, hyperparameters, hyperparameter_bound, halvings
            )
        average = self.average.swap_in(self.model, self.iteration)
        update = self._update_iterate(X, Y, subset, hyperparameters, hyperparameter_bound, halvings)
        taken = (update.status == OK) & ~update.retry
        self.average.publish(self.model, average, self.iteration, taken)
        return update

    def _update_iterate(
        self,
        X: tf.Tensor,
        Y: tf.Tensor,
        subset: Optional[ClassSubset],
        hyperparameters: Sequence[tf.Variable],
        hyperparameter_bound: Optional[Bound],
        halvings: Optional[tf.Tensor],
    ) -> CAVIUpdate:
        """:meth:`update` of the model's q(u) as it stands."""
        model = self.model
        subset = as_class_subset(subset, model.num_classes)
        if subset is None:
            subset = self._sample_subset()
        hyperparameters = list(hyperparameters)
        bound = (
            check_hyperparameter_bound(hyperparameter_bound, model.bound, model.likelihood)
            or model.bound
        )
        step_size = self.current_step_size()
        status = step_size_status(self._batch_status(X, Y), step_size)
        X = tf.convert_to_tensor(X, dtype=default_float())
        scale = self._batch_scale(X)
        # Learned class weights: their statistic is the gradient of the batch's local ELBO with
        # respect to log θ (the exp bijector's unconstrained variable), at q(u) before the step.
        log_weights = []
        if self.class_weight_exposure is not None:
            if tf.distribute.has_strategy():
                raise ValueError("class weights are not supported under a tf.distribute strategy")
            log_weights = [model.likelihood.class_weights.unconstrained_variable]
        evaluation = model.bound.evaluate(
            model.likelihood,
            lambda: model.batch_geometry(X, subset, Y),
            Y,
            in_warm_start=self._in_warm_start(),
            hyperparameters=hyperparameters,
            log_weights=log_weights,
            training_loss=lambda geometry: self._training_loss(X, Y, model.bound, geometry),
            scale=scale,
        )
        geometry = evaluation.geometry
        scheduled = step_size
        sites = (evaluation.local_elbo, evaluation.linear, evaluation.quadratic)
        step = self._step_from_sites(geometry, Y, *sites, scale, step_size, halvings)
        elbo, step_size, retry = step.elbo, step.step_size, step.retry
        status = self._accept(
            step.mu, step.sqrt, status, subset_classes(geometry.marginals.subset), step.state, retry
        )
        taken = (status == OK) & ~retry
        if step.strata is not None:
            assert self.strata is not None
            self.strata.step(*step.strata, tf.cast(step_size, elbo.dtype), taken)
        count_search((self.shortened_steps, self.kept_steps), scheduled, step_size, taken)
        if log_weights:
            assert evaluation.log_weight_gradient is not None
            assert self.class_weight_exposure is not None  # made where weights are learned
            update_class_weights(
                model.likelihood,
                self.class_weight_exposure,
                (Y, evaluation.log_weight_gradient, scale, step_size),
                status == OK,
            )
        if not hyperparameters:
            return CAVIUpdate(elbo, status, None, [], retry)
        if evaluation.loss is not None:
            loss, gradients = replica_sum((evaluation.loss, evaluation.gradients))
            return CAVIUpdate(elbo, status, loss, gradients, retry)
        return CAVIUpdate(
            elbo, status, *self._loss_after_step(X, Y, subset, bound, hyperparameters), retry
        )

    def _loss_after_step(
        self,
        X: tf.Tensor,
        Y: tf.Tensor,
        subset: Optional[ClassSubset],
        bound: Bound,
        hyperparameters: List[tf.Variable],
    ) -> Tuple[tf.Tensor, List[tf.Tensor]]:
        """The training loss on ``bound`` at q(u) after the step, and its gradient with respect to
        ``hyperparameters``, both summed over the replicas."""
        # The step's status has refused bad labels with a clear error, which a compiled assertion
        # in the loss would pre-empt: the loss is not validated again.
        return loss_and_gradients(
            lambda: self._training_loss(X, Y, bound, self.model.batch_geometry(X, subset, Y))[1],
            hyperparameters,
        )

    def _step_from_sites(
        self,
        geometry: BatchGeometry,
        Y: tf.Tensor,
        local_elbo: tf.Tensor,
        linear: tf.Tensor,
        quadratic: tf.Tensor,
        scale: tf.Tensor,
        step_size: tf.Tensor,
        halvings: Optional[tf.Tensor] = None,
    ) -> _Step:
        """The proposal from the batch's sites, nothing assigned: the natural step
        (:meth:`_natural_step`) and the kernel variances'
        (:func:`~gpflow_augmented.kernel_variance.variance_step`), line-searched on the batch's own
        bound where :meth:`_searches_line`; under a strategy, from ρ halved ``halvings`` times."""
        model = self.model
        mean = None
        if self._is_full_batch(geometry) is not True:
            mean = model.bound.mean_sites(model.likelihood, geometry, Y, (linear, quadratic), scale)
        labels = self._strata_labels(geometry, Y)
        statistics, estimates, counts = batch_statistics(
            geometry,
            local_elbo,
            linear,
            quadratic,
            scale=scale,
            mean_sites=mean,
            strata=None if labels is None else self.strata,
            labels=labels,
        )
        sites = _Sites(local_elbo, linear, quadratic, mean)
        scheduled = tf.cast(step_size, local_elbo.dtype)
        rho, retry = scheduled, tf.constant(False)
        searched = self._searches_line(geometry)
        trial = searched and tf.distribute.has_strategy()
        if trial and halvings is not None:
            rho = scheduled * tf.pow(tf.constant(0.5, rho.dtype), tf.cast(halvings, rho.dtype))
        proposal, elbo = self._joint_proposal(geometry, statistics, sites, scale, rho, scheduled)
        if trial:
            proposal, rho, retry = self._single_trial(
                geometry, Y, scale, rho, proposal, elbo, halvings
            )
        elif searched:
            proposal, rho = self._line_search(
                geometry, Y, statistics, sites, scale, rho, proposal, elbo
            )
        strata = None if labels is None else (estimates, counts)
        return _Step(*proposal, elbo, rho, retry, strata)

    def _strata_labels(self, geometry: BatchGeometry, Y: tf.Tensor) -> Optional[tf.Tensor]:
        """The batch's one-hot strata [B, C] where its step uses the label strata (a minibatch, at
        trace time), else ``None``: each point in the stratum of its label, a row of class
        probabilities in that of its largest, so that one-hot rows step as their integer labels
        do (any partition of the points keeps each stratum's estimate unbiased)."""
        if self.strata is None or self._is_full_batch(geometry) is True:
            return None
        rows = self.model.likelihood.label_rows(Y)
        return tf.one_hot(tf.argmax(rows, axis=-1), self.model.num_latent_gps, dtype=rows.dtype)

    def _joint_proposal(
        self,
        geometry: BatchGeometry,
        statistics: BatchStatistics,
        sites: _Sites,
        scale: tf.Tensor,
        rho: tf.Tensor,
        scheduled: tf.Tensor,
    ) -> Tuple[Tuple[tf.Tensor, tf.Tensor, Optional[tf.Tensor]], tf.Tensor]:
        """((q_mu, q_sqrt as stored, the variances' state [4, P] or ``None``), the batch ELBO
        before the step) of a step of size ``rho`` out of the ``scheduled`` ρ. q(u)'s mean comes
        from the statistics' ``mean`` where they have one
        (:meth:`~gpflow_augmented.bounds.Bound.mean_sites`), its covariance from their own. The
        state is the kernel variances and their running statistics (:meth:`_variance_state`). The
        variance moves only on the model's own sites (not in the warm start: its fixed point is the
        exact ELBO's stationary point) and by the fraction ρ / ``scheduled`` of its update in log
        space, so that a halved step moves both less."""
        new_mu, new_sqrt, elbo = self._natural_step(geometry, statistics, rho, scale)
        if not self.variances:
            return (new_mu, new_sqrt, None), elbo
        old_state = self._variance_state()
        mu, sqrt, variance, statistics = variance_step(
            geometry,
            old_state[0],
            new_mu,
            new_sqrt,
            sites.linear,
            sites.quadratic,
            scale,
            rho,
            self.model.whiten,
            fraction=rho / scheduled,
            running_statistics=old_state[1:],
        )
        state = tf.concat([variance[None], statistics], axis=0)
        warm = self._in_warm_start()
        if warm is not None:
            mu = tf.where(warm, new_mu, mu)
            sqrt = tf.where(warm, new_sqrt, sqrt)
            state = tf.where(warm, old_state, state)
        return (mu, sqrt, state), elbo

    def _variance_state(self) -> tf.Tensor:
        """The kernel variances σ² [P] over their update's running statistics [3, P]."""
        assert self.variance_statistics is not None
        statistics = tf.convert_to_tensor(self.variance_statistics)
        return tf.concat([self._current_variances()[None], statistics], 0)

    def _current_variances(self) -> tf.Tensor:
        """The kernel variances σ² [P] this optimizer updates."""
        return tf.stack([tf.convert_to_tensor(v) for v in self.variances])

    def _searches_line(self, geometry: BatchGeometry) -> bool:
        """Whether this step is line-searched on its batch's bound (at trace time): a model on
        the exact bound, all classes. The step then also checks at run time that the warm start
        is over."""
        return self.model.bound.line_searched and geometry.marginals.subset is None

    def _is_full_batch(self, geometry: BatchGeometry) -> Optional[bool]:
        return is_full_batch(self.model.num_data, geometry.marginals.mean.shape[0])

    def _may_need_trust_region(self, geometry: BatchGeometry) -> bool:
        """Whether the minibatch trust region of :func:`~gpflow_augmented.updates.natural_step`
        can apply (at trace time): only a bound whose sites can be negative needs it, and only a
        batch smaller than the data has N / B > 1. Under a strategy a replica's shard is smaller
        than the batch, so it is kept."""
        return self.model.bound.sites_can_be_negative and (
            tf.distribute.has_strategy() or self._is_full_batch(geometry) is not True
        )

    def _line_search(
        self,
        geometry: BatchGeometry,
        Y: tf.Tensor,
        statistics: BatchStatistics,
        sites: _Sites,
        scale: tf.Tensor,
        rho: tf.Tensor,
        proposal: Tuple[tf.Tensor, tf.Tensor, Optional[tf.Tensor]],
        elbo: tf.Tensor,
    ) -> Tuple[Tuple[tf.Tensor, tf.Tensor, Optional[tf.Tensor]], tf.Tensor]:
        """(the proposal, ρ taken) from ``proposal``, the :meth:`_joint_proposal` of size ``rho``
        from ``sites``, by :func:`~gpflow_augmented.line_search.halving_search` on the batch's
        bound (:meth:`_bound_at`); not in the warm start."""
        search, current = self._search_start(proposal, elbo)
        with_variance = proposal[2] is not None
        old_state = current[2]
        scheduled = rho

        def propose(rho: tf.Tensor) -> Proposal:
            (mu, sqrt, state), _ = self._joint_proposal(
                geometry, statistics, sites, scale, rho, scheduled
            )
            return mu, sqrt, state if with_variance else old_state

        (mu, sqrt, state), rho = halving_search(
            propose,
            lambda mu, sqrt, variance: self._bound_at(geometry, Y, scale, mu, sqrt, variance),
            (*proposal[:2], proposal[2] if with_variance else old_state),
            current,
            rho,
            elbo,
            search,
        )
        return (mu, sqrt, state if with_variance else None), rho

    def _single_trial(
        self,
        geometry: BatchGeometry,
        Y: tf.Tensor,
        scale: tf.Tensor,
        rho: tf.Tensor,
        proposal: Tuple[tf.Tensor, tf.Tensor, Optional[tf.Tensor]],
        elbo: tf.Tensor,
        halvings: Optional[tf.Tensor],
    ) -> Tuple[Tuple[tf.Tensor, tf.Tensor, Optional[tf.Tensor]], tf.Tensor, tf.Tensor]:
        """(the proposal, ρ taken, retry): :meth:`_line_search` under a ``tf.distribute``
        strategy, one trial a call (:func:`~gpflow_augmented.line_search.single_trial`)."""
        search, current = self._search_start(proposal, elbo)
        with_variance = proposal[2] is not None
        halvings = tf.constant(0) if halvings is None else tf.cast(halvings, tf.int32)
        (mu, sqrt, state), rho, retry = single_trial(
            lambda mu, sqrt, variance: self._bound_at(geometry, Y, scale, mu, sqrt, variance),
            (*proposal[:2], proposal[2] if with_variance else current[2]),
            current,
            rho,
            elbo,
            search,
            halvings,
        )
        return (mu, sqrt, state if with_variance else None), rho, retry

    def _search_start(
        self, proposal: Tuple[tf.Tensor, tf.Tensor, Optional[tf.Tensor]], elbo: tf.Tensor
    ) -> Tuple[tf.Tensor, Proposal]:
        """(whether the line search runs: not in the warm start; the current state, which it
        keeps when no ρ raises the bound). Without variances a dummy state stands in for theirs:
        σ² = 1, never read."""
        search = tf.constant(True)
        warm = self._in_warm_start()
        if warm is not None:
            search &= ~warm
        state = self._variance_state() if proposal[2] is not None else tf.ones([4, 1], elbo.dtype)
        current = (tf.convert_to_tensor(self.model.q_mu), tf.convert_to_tensor(self.model.q_sqrt))
        return search, (*current, state)

    def _bound_at(
        self,
        geometry: BatchGeometry,
        Y: tf.Tensor,
        scale: tf.Tensor,
        mu: tf.Tensor,
        sqrt: tf.Tensor,
        variance: tf.Tensor,
    ) -> tf.Tensor:
        """The batch's bound at a proposed q(u) (as stored) and kernel variances, from the
        step's geometry (:func:`~gpflow_augmented.projection.geometry_at`: no new M³ work)."""
        model = self.model
        ratio = variance / self._current_variances() if self.variances else None
        proposed = geometry_at(geometry, mu, sqrt, model.whiten, ratio)
        # Under a strategy the replicas' shards add up to the batch, as for the bound before.
        local_sum = replica_sum(
            tf.reduce_sum(model.bound.local_elbo(model.likelihood, proposed, Y))
        )
        return batch_elbo(proposed, local_sum, scale)

    def _batch_scale(self, X: tf.Tensor) -> tf.Tensor:
        """N / B, B the global batch size: the points in ``X``, summed over the replicas under a
        ``tf.distribute`` strategy."""
        return minibatch_scale(self.model.num_data, replica_sum(batch_size(X)))

    def _natural_step(
        self,
        geometry: BatchGeometry,
        statistics: BatchStatistics,
        step_size: tf.Tensor,
        scale: tf.Tensor,
    ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(q_mu, q_sqrt) after a step of size ρ from the batch's statistics, and the global
        batch's ELBO before it (:func:`~gpflow_augmented.updates.natural_step`; ``scale`` is
        :meth:`_batch_scale`); nothing is assigned."""
        return natural_step(
            geometry,
            statistics,
            scale=scale,
            step_size=step_size,
            whiten=self.model.whiten,
            trust_region=self._may_need_trust_region(geometry),
        )

    def _batch_status(self, X: tf.Tensor, Y: tf.Tensor) -> tf.Tensor:
        """The batch's validation status, the same on every replica (they accept or refuse
        together, though their shards may differ in validity)."""
        return replica_max_code(data_status(X, Y, self.model.num_classes), NUM_STATUS_CODES)

    def current_step_size(self) -> tf.Tensor:
        """ρ for this iteration."""
        return self.step_size(self.iteration)

    def _in_warm_start(self) -> Optional[tf.Tensor]:
        """Whether this step of a model on the exact bound is a warm-start step (``None`` when the
        optimizer has no warm start)."""
        if not self.warm_start_iterations:
            return None
        return self.iteration < self.warm_start_iterations

    def _accept(
        self,
        new_mu: tf.Tensor,
        new_sqrt: tf.Tensor,
        status: tf.Tensor,
        classes: Optional[tf.Tensor] = None,
        new_state: Optional[tf.Tensor] = None,
        retry: Optional[tf.Tensor] = None,
    ) -> tf.Tensor:
        """Assign a proposed q(u) (of the latent GPs of ``classes``, all if ``None``), and the
        kernel variances of :func:`~gpflow_augmented.kernel_variance.variance_step` if given, if
        the batch was valid and the proposal is finite and positive, and the step is not to be
        taken again (``retry``), else leave both as they were; count the step if taken. Returns
        the final status."""
        model = self.model
        finite = all_finite(new_mu, new_sqrt)
        if new_state is not None:
            finite &= tf.reduce_all(tf.math.is_finite(new_state) & (new_state[0] > 0.0))
        status = tf.where((status == OK) & ~finite, NUMERICAL_FAILURE, status)
        accept = status == OK
        if retry is not None:
            accept &= ~retry
        old_mu, old_sqrt = variational_parameters(model.q_mu, model.q_sqrt, classes)
        assign_variational_parameters(
            model.q_mu,
            model.q_sqrt,
            tf.where(accept, new_mu, old_mu),
            tf.where(accept, new_sqrt, old_sqrt),
            classes,
        )
        if new_state is not None:
            for index, variance in enumerate(self.variances):
                variance.assign(tf.where(accept, new_state[0, index], variance))
            assert self.variance_statistics is not None
            self.variance_statistics.assign(
                tf.where(accept, new_state[1:], self.variance_statistics)
            )
        self.iteration.assign_add(tf.cast(accept, tf.int64))
        return status

    def _training_loss(
        self, X: tf.Tensor, Y: tf.Tensor, bound: Bound, geometry: BatchGeometry
    ) -> Tuple[tf.Tensor, tf.Tensor]:
        """(each point's local ELBO on ``bound`` [B], this replica's share of the training loss
        -(ELBO + log prior)) at the batch's ``geometry`` (of its class subset), unvalidated."""
        model = self.model
        local, elbo = bound.batch_bound(
            model.likelihood, geometry, Y, minibatch_scale(model.num_data, batch_size(X))
        )
        return local, -replica_share(X) * (elbo + model.log_prior_density())

    def step(
        self, data: Tuple[tf.Tensor, tf.Tensor], subset: Optional[ClassSubset] = None
    ) -> tf.Tensor:
        """One sweep on ``data = (X [B, D], Y [B, 1])``; returns the batch ELBO before the step.
        ``subset``: the :class:`ClassSubset` to update, instead of the optimizer's own draw.

        Raises :class:`~gpflow_augmented.InvalidDataError` (bad labels, NaN/inf in X, empty batch)
        or :class:`~gpflow_augmented.NumericalError`; in both cases the model is unchanged.
        """
        X, Y = self.prepare(data)
        subset = as_class_subset(subset, self.model.num_classes)
        with without_failed_step_warnings(), numerical_errors("the CAVI step"):
            update = self._step_fn(X, Y) if subset is None else self._step_fn(X, Y, subset)
        raise_for_status(update.status, self.model.num_classes)
        return update.elbo

    def prepare(self, data: Tuple[tf.Tensor, tf.Tensor]) -> Tuple[tf.Tensor, tf.Tensor]:
        """The batch as tensors of the model's dtype, with its static shapes checked."""
        X = tf.convert_to_tensor(data[0], dtype=default_float())
        Y = tf.convert_to_tensor(data[1])
        model = self.model
        check_data(
            X, Y, model.num_classes, model.input_dim, model.accepts_soft_labels, check_values=False
        )
        if self.class_sampler is not None and Y.shape.rank == 2 and Y.shape[1] != 1:
            raise InvalidDataError(
                "class subsets need integer labels [N, 1], not rows of class probabilities"
            )
        return X, Y

    def iterate(self, data: Tuple[tf.Tensor, tf.Tensor], iterations: int = 1) -> tf.Tensor:
        """``iterations`` steps on the same batch (full-batch CAVI); returns the last batch ELBO."""
        iterations = check_integer(iterations, "iterations")
        elbo = None
        for _ in range(iterations):
            elbo = self.step(data)
        return elbo
