"""Model and optimizer state (ρ_t's counter, Adam's slots) round-trip through tf.train.Checkpoint."""
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from conftest import make_problem


def build(scheme):
    weighted = scheme == "exact-weighted"
    model, data = make_problem(120, 3, num_inducing=10, seed=11, lengthscale=1.5,
                               scheme="exact" if weighted else scheme, class_weights=weighted)
    trainer = ga.Trainer(model, step_size=ga.RobbinsMonro(), learning_rate=0.02)
    return model, trainer, data


@pytest.mark.parametrize("scheme", ["collapsed", "exact", "exact-weighted"])
def test_resumed_training_equals_uninterrupted(tmp_path, scheme):
    k = 15
    straight, straight_trainer, data = build(scheme)
    ga.fit(straight, data, iterations=2 * k, batch_size=30, trainer=straight_trainer, progress=False)

    first, first_trainer, _ = build(scheme)
    ga.fit(first, data, iterations=k, batch_size=30, trainer=first_trainer, progress=False)
    path = tf.train.Checkpoint(model=first, trainer=first_trainer).save(str(tmp_path / "ckpt"))

    resumed, resumed_trainer, _ = build(scheme)
    assert not np.allclose(resumed.q_mu.numpy(), first.q_mu.numpy())
    tf.train.Checkpoint(model=resumed, trainer=resumed_trainer).restore(path).assert_consumed()
    assert int(resumed_trainer.iteration) == k
    ga.fit(resumed, data, iterations=k, batch_size=30, trainer=resumed_trainer, progress=False)

    for a, b in zip(straight.variables, resumed.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)
    for a, b in zip(straight_trainer.adam.variables, resumed_trainer.adam.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)
    if scheme == "exact-weighted":  # the class weights' SVI state resumes too
        assert not np.allclose(straight.likelihood.class_weights.numpy(), 1.0)
        np.testing.assert_allclose(straight_trainer.cavi.class_weight_exposure.numpy(),
                                   resumed_trainer.cavi.class_weight_exposure.numpy(), rtol=1e-12)
