"""bounds.py: a bound object decides the model's ELBO, the step's sites and the defaults that
CAVI, Trainer and fit read, from one place."""

import gpflow
import numpy as np
import pytest

import gpflow_augmented as ga
from helpers import make_problem


def test_the_elbo_of_a_bound_is_that_bound_whatever_the_model_steps_on():
    model, data = make_problem(30, 3, num_inducing=6, seed=4, scheme="negative-multinomial")
    ga.CAVI(model).step(data)
    exact = float(model.elbo(data, bound=ga.ExactBound()))
    np.testing.assert_allclose(exact, float(model.exact_elbo(data)), rtol=1e-12)
    # The augmented bound is strictly below the exact ELBO away from a degenerate q(u), so the
    # bound argument is not ignored.
    assert float(model.elbo(data)) < exact - 1e-3
    assert float(model.elbo(data, bound=ga.AugmentedBound())) == float(model.elbo(data))


def test_trainer_and_fit_read_their_defaults_from_the_models_bound():
    base, _ = make_problem(30, 3, num_inducing=6, seed=4, scheme="exact")
    model = ga.AugmentedSVGP(
        base.kernel,
        ga.LogisticSoftmax(3),
        base.inducing_variable.Z.numpy(),
        num_data=30,
        bound=ga.ExactBound(warm_start_iterations=7),
    )
    trainer = ga.Trainer(model)
    assert trainer.cavi.warm_start_iterations == 7
    assert float(trainer.learning_rate) == pytest.approx(ga.EXACT_LEARNING_RATE)
    augmented = ga.AugmentedSVGP(base.kernel, ga.LogisticSoftmax(3), np.zeros((4, 2)))
    assert ga.Trainer(augmented).cavi.warm_start_iterations == 0
    assert float(ga.Trainer(augmented).adam.learning_rate) == pytest.approx(0.01)


def test_bounds_are_values_and_bad_ones_are_refused_by_name():
    assert ga.ExactBound() == ga.ExactBound(ga.EXACT_WARM_START) != ga.ExactBound(3)
    assert ga.AugmentedBound() == ga.AugmentedBound() != ga.ExactBound()
    assert repr(ga.ExactBound(3)) == "ExactBound(warm_start_iterations=3)"
    for bad in (-1, 2.5, True, None):
        with pytest.raises(ValueError, match="warm_start_iterations must be an integer ≥ 0"):
            ga.ExactBound(bad)
    with pytest.raises(ValueError, match="BinaryLogistic has no exact-bound step"):
        ga.AugmentedSVGP(
            gpflow.kernels.SquaredExponential(),
            ga.likelihoods.BinaryLogistic(),
            np.zeros((3, 2)),
            bound=ga.ExactBound(),
        )


def test_a_users_bound_steps_on_its_own_sites_in_the_trainers_step():
    """CAVI runs one sequence for every bound: a user's bound that is line-searched like the exact
    bound gets its own sites in Trainer's step (not the exact bound's fused pass or warm start),
    and a bound without a warm start refuses one by name."""

    class ScaledBound(ga.AugmentedBound):
        # The augmented bound's sites, halved: a different step, so taking another bound's
        # sites would show in q(u).
        line_searched = True

        def sites(self, likelihood, geometry, Y, in_warm_start=None):
            local, linear, quadratic = super().sites(likelihood, geometry, Y, in_warm_start)
            return local, 0.5 * linear, 0.5 * quadratic

    base, data = make_problem(30, 3, num_inducing=6, seed=4, scheme="exact")

    def model(bound):
        return ga.AugmentedSVGP(
            base.kernel, ga.LogisticSoftmax(3), base.inducing_variable.Z.numpy(), bound=bound
        )

    stepped = model(ScaledBound())
    ga.Trainer(stepped, learning_rate=1e-12, update_variance=False).step(data)
    reference = model(ScaledBound())
    ga.CAVI(reference).step(data)
    np.testing.assert_allclose(stepped.q_mu.numpy(), reference.q_mu.numpy(), rtol=1e-9)
    plain = model(ga.AugmentedBound())
    ga.CAVI(plain).step(data)
    assert np.max(np.abs(plain.q_mu.numpy() - stepped.q_mu.numpy())) > 1e-3
    with pytest.raises(ValueError, match="warm_start_iterations is for a model on the exact"):
        ga.CAVI(model(ScaledBound()), warm_start_iterations=5)
