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
    assert float(trainer.adam.learning_rate) == pytest.approx(ga.EXACT_LEARNING_RATE)
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
