"""The averaged q(u) (CAVI's ``averaging``): the model holds the mixture of the iterates with the
polynomial-decay weights, the steps themselves are those of a run without it, and a q(u) assigned
from outside restarts the average."""

import math

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
import gpflow_augmented.averaging as averaging_module
from helpers import make_problem

ETA = 2.0
STEPS = 12
BATCH = 20


def _batches(X, Y, seed=0):
    order = np.random.default_rng(seed).permutation(len(X))
    for step in range(STEPS):
        rows = order[(step * BATCH) % len(X) :][:BATCH]
        yield X[rows], Y[rows]


def _problem(scheme="exact"):
    return make_problem(100, 3, num_inducing=8, seed=4, lengthscale=1.5, scheme=scheme)


def _q(model):
    return model.q_mu.numpy().copy(), model.q_sqrt.numpy().copy()


def _iterate(cavi):
    mu, packed = cavi.average.iterate
    return mu.numpy().copy(), cavi.model.q_sqrt.transform.forward(packed).numpy()


def _mixture(iterates, eta):
    """The mixture of the iterates N(m_s, L_s L_sᵀ) with weights a_s = w_s Π_{r>s} (1 − w_r),
    w_t = (η + 1) / (t + η), written out as a mixture (not as the recursion): (mean, covariance)."""
    weights = [(eta + 1.0) / (t + eta) for t in range(1, len(iterates) + 1)]
    a = [w * np.prod([1.0 - v for v in weights[s + 1 :]]) for s, w in enumerate(weights)]
    assert np.isclose(sum(a), 1.0)
    mean = sum(w * m for w, (m, _) in zip(a, iterates))
    second = sum(
        w * (L @ np.transpose(L, (0, 2, 1)) + np.einsum("mc,nc->cmn", m, m))
        for w, (m, L) in zip(a, iterates)
    )
    return mean, second - np.einsum("mc,nc->cmn", mean, mean)


def _averaged_run(eta=ETA, scheme="exact"):
    model, (X, Y) = _problem(scheme)
    cavi = ga.CAVI(model, ga.RobbinsMonro(), averaging=eta)
    iterates, averages = [], []
    for batch in _batches(X, Y):
        cavi.step(batch)
        iterates.append(_iterate(cavi))
        averages.append(_q(model))
    return iterates, averages


@pytest.mark.parametrize("scheme", ["exact", "negative-multinomial"])
def test_the_model_holds_the_mixture_of_the_iterates(scheme):
    iterates, averages = _averaged_run(scheme=scheme)
    mean, covariance = _mixture(iterates, ETA)
    q_mu, q_sqrt = averages[-1]
    np.testing.assert_allclose(q_mu, mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(q_sqrt @ np.transpose(q_sqrt, (0, 2, 1)), covariance, atol=1e-10)
    # The first average is the first iterate, and later ones differ from their iterate.
    np.testing.assert_allclose(averages[0][0], iterates[0][0], atol=1e-12)
    assert np.max(np.abs(averages[-1][0] - iterates[-1][0])) > 1e-3


def _without_cross_term(mean, sqrt, new_mean, new_sqrt, weight):
    covariance = (1.0 - weight) * tf.matmul(sqrt, sqrt, transpose_b=True) + weight * tf.matmul(
        new_sqrt, new_sqrt, transpose_b=True
    )
    return (1.0 - weight) * mean + weight * new_mean, tf.linalg.cholesky(covariance)


@pytest.mark.parametrize(
    "name, broken",
    [
        ("weight", lambda steps, eta: eta / (tf.cast(steps, tf.float64) + eta)),
        ("covariance", None),
    ],
)
def test_a_wrong_average_is_caught(monkeypatch, name, broken):
    """Deliberately wrong: the weight η / (t + η), or the mixture's covariance without its
    w (1 − w) d dᵀ term; the mixture written out above tells both apart."""
    if name == "weight":
        monkeypatch.setattr(averaging_module, "averaging_weight", broken)
    else:
        monkeypatch.setattr(averaging_module, "averaged_gaussians", _without_cross_term)
    iterates, averages = _averaged_run()
    mean, covariance = _mixture(iterates, ETA)
    q_mu, q_sqrt = averages[-1]
    wrong_mean = np.max(np.abs(q_mu - mean))
    wrong_covariance = np.max(np.abs(q_sqrt @ np.transpose(q_sqrt, (0, 2, 1)) - covariance))
    assert max(wrong_mean, wrong_covariance) > 1e-6


def test_the_steps_are_those_of_a_run_without_averaging():
    iterates, _ = _averaged_run()
    model, (X, Y) = _problem()
    cavi = ga.CAVI(model, ga.RobbinsMonro(), averaging=math.inf)
    for batch, (mu, sqrt) in zip(_batches(X, Y), iterates):
        cavi.step(batch)
        np.testing.assert_allclose(model.q_mu.numpy(), mu, atol=1e-10)
        np.testing.assert_allclose(model.q_sqrt.numpy(), sqrt, atol=1e-10)


def test_a_q_u_assigned_from_outside_restarts_the_average():
    model, (X, Y) = _problem()
    # Without the label strata, whose memory of the first batches the reference would lack.
    cavi = ga.CAVI(model, ga.RobbinsMonro(), averaging=ETA, label_strata=False)
    batches = list(_batches(X, Y))
    for batch in batches[:5]:
        cavi.step(batch)
    model.q_mu.assign(np.zeros_like(model.q_mu.numpy()))
    model.q_sqrt.assign(np.tile(np.eye(8), (3, 1, 1)))
    cavi.step(batches[5])
    # The step went from the assigned prior, and the average restarted at that iterate.
    control, _ = _problem()
    reference = ga.CAVI(control, ga.RobbinsMonro(), averaging=math.inf, label_strata=False)
    reference.iteration.assign(5)
    reference.step(batches[5])
    np.testing.assert_allclose(model.q_mu.numpy(), control.q_mu.numpy(), atol=1e-10)
    np.testing.assert_allclose(_iterate(cavi)[0], control.q_mu.numpy(), atol=1e-10)


def test_a_full_batch_step_is_not_averaged():
    model, (X, Y) = _problem()
    averaged = ga.CAVI(model, averaging=ETA)
    control, _ = _problem()
    plain = ga.CAVI(control, averaging=math.inf)
    for _ in range(3):
        averaged.step((X, Y))
        plain.step((X, Y))
    np.testing.assert_allclose(model.q_mu.numpy(), control.q_mu.numpy(), atol=1e-12)


def test_a_checkpoint_resumes_the_iterate_and_the_average(tmp_path):
    batches = list(_batches(*_problem()[1]))
    model, _ = _problem()
    cavi = ga.CAVI(model, ga.RobbinsMonro(), averaging=ETA)
    for batch in batches[:6]:
        cavi.step(batch)
    path = tf.train.Checkpoint(model=model, cavi=cavi).save(str(tmp_path / "run"))
    for batch in batches[6:]:
        cavi.step(batch)
    restored, _ = _problem()
    resumed = ga.CAVI(restored, ga.RobbinsMonro(), averaging=ETA)
    tf.train.Checkpoint(model=restored, cavi=resumed).restore(path).assert_consumed()
    for batch in batches[6:]:
        resumed.step(batch)
    np.testing.assert_allclose(restored.q_mu.numpy(), model.q_mu.numpy(), atol=1e-12)
    np.testing.assert_allclose(_iterate(resumed)[0], _iterate(cavi)[0], atol=1e-12)


def test_fit_averages_and_float32_works():
    with gpflow.config.as_context(gpflow.config.Config(float=np.float32, jitter=1e-4)):
        model, (X, Y) = _problem()
        result = ga.fit(
            model, (X, Y), iterations=20, batch_size=BATCH, averaging=10.0, progress=False, seed=0
        )
        assert result.trainer.cavi.average is not None
        assert model.q_mu.dtype == tf.float32
        assert np.all(np.isfinite(model.predict_log_density((X, Y)).numpy()))


@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), "10"])
def test_a_bad_averaging_is_refused(value):
    model, _ = _problem()
    with pytest.raises(ValueError, match="averaging"):
        ga.CAVI(model, averaging=value)


def test_averaging_with_class_subsets_is_refused():
    model, _ = _problem()
    with pytest.raises(ValueError, match="class subsets"):
        ga.CAVI(model, class_subset_size=2, averaging=ETA)


def test_the_default_is_the_bound_s_and_class_subsets_are_not_averaged(monkeypatch):
    exact, _ = _problem("exact")
    assert ga.CAVI(exact).average.averaging == ga.EXACT_AVERAGING
    augmented, _ = _problem("negative-multinomial")
    assert ga.CAVI(augmented).average is None  # the augmented bounds' default: the last iterate
    assert ga.CAVI(exact, averaging=ETA).average.averaging == ETA
    monkeypatch.setattr(ga.ExactBound, "averaging", 7.0)
    assert ga.CAVI(exact).average.averaging == 7.0
    assert ga.CAVI(exact, averaging=math.inf).average is None
    # Class subsets leave most classes alone at a step: a bound's default does not average them.
    assert ga.CAVI(exact, class_subset_size=2).average is None
