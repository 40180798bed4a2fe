"""Model and optimizer state (ρ_t's counter, Adam's slots) round-trip through
tf.train.Checkpoint."""

import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from helpers import MODEL_KINDS, make_problem, model_of_kind


def build(kind):
    model, data, options = model_of_kind(
        kind, num_data=120, num_inducing=10, seed=11, lengthscale=1.5
    )
    trainer = ga.Trainer(model, step_size=ga.RobbinsMonro(), learning_rate=0.02, seed=2, **options)
    return model, trainer, data


@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.slow
def test_resumed_training_equals_uninterrupted(tmp_path, kind):
    """15 + 15 minibatch iterations with a checkpoint in between equal 30 without: q(u), the
    hyperparameters, Adam's slots, ρ's counter, the minibatch stream, the class subsets drawn and
    the class weights' SVI state all resume. The uninterrupted run writes the checkpoint from its
    callback (saving reads the state and changes nothing), one trace fewer than a third model."""
    k = 15
    straight, straight_trainer, data = build(kind)
    checkpoint = tf.train.Checkpoint(model=straight, trainer=straight_trainer)
    saved = {}

    def save_halfway(step, **_):
        if step == k:
            saved["path"] = checkpoint.save(str(tmp_path / "ckpt"))
            saved["q_mu"] = straight.q_mu.numpy().copy()

    ga.fit(
        straight,
        data,
        iterations=2 * k,
        batch_size=30,
        trainer=straight_trainer,
        progress=False,
        callback=save_halfway,
    )
    path, halfway = saved["path"], saved["q_mu"]

    resumed, resumed_trainer, _ = build(kind)
    assert not np.allclose(resumed.q_mu.numpy(), halfway)
    tf.train.Checkpoint(model=resumed, trainer=resumed_trainer).restore(path).assert_consumed()
    assert int(resumed_trainer.iteration) == k
    np.testing.assert_array_equal(resumed.q_mu.numpy(), halfway)
    ga.fit(resumed, data, iterations=k, batch_size=30, trainer=resumed_trainer, progress=False)

    assert int(straight_trainer.iteration) == 2 * k
    assert not np.allclose(straight.kernel.lengthscales.numpy(), 1.5)  # Adam did move it
    # The closed-form kernel variance runs by default wherever it applies (not with subsets)
    assert bool(straight_trainer.cavi.variances) == (kind != "subsets")
    for a, b in zip(straight.variables, resumed.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)
    for a, b in zip(straight_trainer.adam.variables, resumed_trainer.adam.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)
    if kind == "exact-weighted":
        assert not np.allclose(straight.likelihood.class_weights.numpy(), 1.0)
        np.testing.assert_allclose(
            straight_trainer.cavi.class_weight_exposure.numpy(),
            resumed_trainer.cavi.class_weight_exposure.numpy(),
            rtol=1e-12,
        )


def _all_state(model, trainer):
    return (
        [v.numpy().copy() for v in model.variables]
        + [v.numpy().copy() for v in trainer.adam.variables]
        + [trainer.iteration.numpy()]
    )


def test_restore_checkpoint_of_another_class_count_changes_nothing(tmp_path):
    """tf.train.Checkpoint would overwrite Z and the kernel before failing on q(u)'s shape."""
    three, trainer3, data = build("exact")
    ga.fit(three, data, iterations=3, batch_size=30, trainer=trainer3, progress=False)
    path = tf.train.Checkpoint(model=three, trainer=trainer3).save(str(tmp_path / "ckpt"))

    four, _ = make_problem(120, 4, num_inducing=10, seed=3, scheme="exact")
    trainer4 = ga.Trainer(four, step_size=ga.RobbinsMonro(), learning_rate=0.02)
    before = _all_state(four, trainer4)
    with pytest.raises(
        ga.CheckpointError,
        match=r"cannot restore into model, trainer: .*"
        r"nothing was restored",
    ):
        ga.restore_checkpoint(path, model=four, trainer=trainer4)
    for b, a in zip(before, _all_state(four, trainer4)):
        np.testing.assert_array_equal(a, b)
    # The unguarded read does damage: the evidence that the guard is needed.
    with pytest.raises(Exception):
        tf.train.Checkpoint(model=four, trainer=trainer4).read(path)
    damaged = _all_state(four, trainer4)
    assert any(not np.array_equal(a, b) for a, b in zip(before, damaged) if a.shape == b.shape)


@pytest.mark.slow
def test_restore_checkpoint_round_trips_and_reads_a_folder(tmp_path):
    model, trainer, data = build("exact")
    ga.fit(model, data, iterations=3, batch_size=30, trainer=trainer, progress=False)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, trainer=trainer), str(tmp_path), max_to_keep=1
    )
    manager.save()
    fresh, fresh_trainer, _ = build("exact")
    ga.restore_checkpoint(str(tmp_path), model=fresh, trainer=fresh_trainer)
    for a, b in zip(_all_state(model, trainer), _all_state(fresh, fresh_trainer)):
        np.testing.assert_array_equal(a, b)
    only_model, _, _ = build("exact")  # a model alone from a model-and-trainer checkpoint
    ga.restore_checkpoint(str(tmp_path), model=only_model)
    np.testing.assert_array_equal(only_model.q_mu.numpy(), model.q_mu.numpy())


def test_a_truncated_checkpoint_is_one_clear_error(tmp_path):
    model, trainer, data = build("exact")
    path = tf.train.Checkpoint(model=model, trainer=trainer).save(str(tmp_path / "ckpt"))
    data_file = next(tmp_path.glob("ckpt-1.data-*"))
    data_file.write_bytes(data_file.read_bytes()[:100])
    fresh, fresh_trainer, _ = build("exact")
    before = _all_state(fresh, fresh_trainer)
    with pytest.raises(ga.CheckpointError, match=r"truncated or corrupt"):
        ga.restore_checkpoint(path, model=fresh, trainer=fresh_trainer)
    for b, a in zip(before, _all_state(fresh, fresh_trainer)):
        np.testing.assert_array_equal(a, b)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ga.CheckpointError, match=r"empty: no checkpoint in this folder"):
        ga.restore_checkpoint(str(tmp_path / "empty"), model=fresh)
    with pytest.raises(
        ga.CheckpointError,
        match=r"nothing-here: cannot restore into model: no "
        r"checkpoint there",
    ):
        ga.restore_checkpoint(str(tmp_path / "nothing-here"), model=fresh)


def test_a_damaged_state_file_resumes_from_the_newest_complete_checkpoint(tmp_path):
    """A corrupt ``checkpoint`` state file beside intact ``ckpt-*`` files resumes from the newest
    complete one, with a warning (TensorFlow's latest_checkpoint says there is none, and a job
    would start over from step 0 without a word)."""
    variable = tf.Variable(1.0)
    checkpoint = tf.train.Checkpoint(v=variable)
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=3)
    for value in (2.0, 3.0):
        variable.assign(value)
        manager.save()
    assert ga.latest_checkpoint(str(tmp_path)).endswith("ckpt-2")
    (tmp_path / "checkpoint").write_bytes(b"\x00\xffnot a state file")
    variable.assign(0.0)
    with pytest.warns(ga.CheckpointWarning, match="using ckpt-2, the newest complete checkpoint"):
        ga.restore_checkpoint(str(tmp_path), v=variable)
    assert float(variable.numpy()) == 3.0
    (tmp_path / "checkpoint").unlink()
    with pytest.warns(ga.CheckpointWarning, match="is missing"):
        assert ga.latest_checkpoint(str(tmp_path)).endswith("ckpt-2")
    for file in tmp_path.glob("ckpt-*"):
        file.unlink()
    assert ga.latest_checkpoint(str(tmp_path)) is None
