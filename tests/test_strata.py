"""The label strata's estimate of the data's statistics (gpflow_augmented.strata)."""

import itertools

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.strata import LabelStrata, stratified_estimate

M, C = 2, 3


def _point_statistics(rng: np.random.Generator, labels: np.ndarray) -> tuple:
    """Per point and class, a precision term [N, C, M, M] and a linear one [N, M, C], the points
    of each class unlike the rest (their own class's terms are shifted), as sites are."""
    N = len(labels)
    precision = rng.standard_normal((N, C, M, M))
    nat1 = rng.standard_normal((N, M, C))
    own = np.eye(C)[labels]  # [N, C]
    precision += 5.0 * own[:, :, None, None]
    nat1 += 5.0 * own[:, None, :]
    return precision, nat1, own


def _estimates(estimator, labels, precision, nat1, own, batch_size):
    """Every batch of ``batch_size`` points (without replacement): its class counts and the
    estimate of the data's sums."""
    N = len(labels)
    truth_own = (np.einsum("nc,ncij->cij", own, precision), np.einsum("nc,nic->ic", own, nat1))
    counts = own.sum(0)
    for batch in itertools.combinations(range(N), batch_size):
        rows = list(batch)
        total = (precision[rows].sum(0), nat1[rows].sum(0))
        own_sum = (
            np.einsum("nc,ncij->cij", own[rows], precision[rows]),
            np.einsum("nc,nic->ic", own[rows], nat1[rows]),
        )
        batch_counts = own[rows].sum(0)
        yield (
            tuple(batch_counts),
            estimator(total, own_sum, truth_own, counts, batch_counts, N, batch_size),
        )


def _stratified(total, own, memory, counts, batch_counts, N, B):
    estimate = stratified_estimate(
        *[tuple(tf.constant(a) for a in pair) for pair in (total, own, memory)],
        tf.constant(counts),
        tf.constant(batch_counts),
        tf.constant(float(N), tf.float64),
        tf.constant(float(B), tf.float64),
    ).estimate
    return tuple(np.asarray(e) for e in estimate)


def _plain(total, own, memory, counts, batch_counts, N, B):
    return tuple(N / B * np.asarray(t) for t in total)


def _conditional_bias(estimator, labels, batch_size, seed=0):
    """The largest deviation from class k's data sums of the mean of its estimate over the
    batches with the same count b_k of its points, for every k and b_k < B."""
    rng = np.random.default_rng(seed)
    precision, nat1, own = _point_statistics(rng, labels)
    truth = (precision.sum(0), nat1.sum(0))
    batches = list(_estimates(estimator, labels, precision, nat1, own, batch_size))
    worst, groups = 0.0, 0
    for k in range(C):
        for count in range(batch_size):
            estimates = [e for key, e in batches if key[k] == count]
            if not estimates:
                continue
            groups += 1
            means = (
                np.mean([e[0][k] for e in estimates], axis=0),
                np.mean([e[1][:, k] for e in estimates], axis=0),
            )
            worst = max(worst, float(np.max(np.abs(means[0] - truth[0][k]))))
            worst = max(worst, float(np.max(np.abs(means[1] - truth[1][:, k]))))
    assert groups >= 2 * C
    return worst


LABELS = np.array([0, 1, 1, 2, 2, 0, 1, 1])


@pytest.mark.parametrize("batch_size", [2, 3, 5])
def test_the_estimate_is_unbiased_given_the_batchs_class_counts(batch_size):
    # Given b_k, a batch's own points of class k and its other points are uniform draws from
    # their strata, and an absent class takes its memory (here its stratum's true sum): for each
    # class, every group of batches with the same b_k averages to the data's sums, to rounding.
    assert _conditional_bias(_stratified, LABELS, batch_size) < 1e-9


@pytest.mark.parametrize("batch_size", [2, 3, 5])
def test_the_plain_estimate_fails_that_check(batch_size):
    # The check above can fail: N / B times the batch's sum, unbiased over all batches, is not
    # unbiased given the counts (a batch with more of class k's points over-counts them).
    assert _conditional_bias(_plain, LABELS, batch_size) > 0.5


def test_the_full_batch_estimate_is_the_batchs_sum():
    rng = np.random.default_rng(1)
    precision, nat1, own = _point_statistics(rng, LABELS)
    total = (precision.sum(0), nat1.sum(0))
    own_sum = (np.einsum("nc,ncij->cij", own, precision), np.einsum("nc,nic->ic", own, nat1))
    memory = (rng.standard_normal((C, M, M)), rng.standard_normal((M, C)))  # never read
    counts = own.sum(0)
    estimate = _stratified(total, own_sum, memory, counts, counts, len(LABELS), len(LABELS))
    np.testing.assert_allclose(estimate[0], total[0], rtol=1e-12)
    np.testing.assert_allclose(estimate[1], total[1], rtol=1e-12)


def test_a_rare_class_is_estimated_with_less_spread():
    # One point in twenty is class 2: most batches of 4 hold none of it. The plain estimate of
    # class 2's statistics then swings between none of its own points and one weighed N / B; the
    # stratified one takes the memory instead.
    labels = np.array([2] + [0, 1] * 9 + [0])
    rng = np.random.default_rng(2)
    precision, nat1, own = _point_statistics(rng, labels)

    def spread(estimator):
        values = [e[0][2] for _, e in _estimates(estimator, labels, precision, nat1, own, 4)]
        return float(np.mean(np.var(values, axis=0)))

    assert spread(_stratified) < 0.5 * spread(_plain)


def test_the_memory_moves_by_rho_in_the_classes_the_batch_holds():
    strata = LabelStrata(num_classes=C, num_inducing=M, num_sets=1)
    own = (tf.ones([C, M, M], tf.float64), tf.ones([M, C], tf.float64))
    total = (3.0 * own[0], 3.0 * own[1])
    counts = tf.constant([2.0, 0.0, 3.0], tf.float64)  # class 2 fills nothing: the batch is 5
    (estimate,) = strata.estimates([total], [own], counts, tf.constant(50.0, tf.float64))
    np.testing.assert_array_equal(estimate.moves, [True, False, True])
    strata.step((estimate,), counts, tf.constant(0.25, tf.float64), tf.constant(False))
    np.testing.assert_array_equal(strata.precision[0].numpy(), 0.0)  # a refused step moves nothing
    np.testing.assert_array_equal(strata.counts.numpy(), 0.0)
    strata.step((estimate,), counts, tf.constant(0.25, tf.float64), tf.constant(True))
    # n_k = 50 * b_k / 5 from the batch alone; P̂_k = n_k / b_k * own = 10 * own.
    np.testing.assert_allclose(strata.precision[0].numpy()[:, 0, 0], [2.5, 0.0, 2.5])
    np.testing.assert_array_equal(strata.counts.numpy(), [2.0, 0.0, 3.0])


def _model(num_data):
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((6, 2))
    return ga.LogisticSoftmaxSVGP(
        gpflow.kernels.SquaredExponential(), Z, num_classes=C, num_data=num_data
    )


def _data(N=60):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, 2))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 1.5).astype(int)
    return X, np.minimum(y, C - 1)[:, None]


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("outer_products", [True, False])
def test_own_class_statistics_are_each_classs_sums_over_its_points(
    shared, outer_products, monkeypatch
):
    # Both ways of summing (the outer products by class, the masked product per class) give each
    # class's conjugate statistics over its own points, summed one point at a time.
    monkeypatch.setattr(ga.updates, "OWN_CLASS_OUTER_PRODUCTS_FROM", 0 if outer_products else 99)
    rng = np.random.default_rng(4)
    N = 9
    A = rng.standard_normal((1 if shared else C, M + 1, N))
    linear, quadratic = (rng.standard_normal((N, C)) for _ in range(2))
    label = rng.integers(0, C, N)
    labels = tf.one_hot(label, C, dtype=tf.float64)
    precision, nat1 = ga.updates.own_class_statistics(
        tf.constant(A), tf.constant(linear), tf.constant(quadratic), labels
    )
    expected_precision = np.zeros((C, M + 1, M + 1))
    expected_nat1 = np.zeros((M + 1, C))
    for n, k in enumerate(label):
        column = A[k if not shared else 0, :, n]
        expected_precision[k] += quadratic[n, k] * np.outer(column, column)
        expected_nat1[:, k] += linear[n, k] * column
    np.testing.assert_allclose(precision.numpy(), expected_precision, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(nat1.numpy(), expected_nat1, rtol=1e-12, atol=1e-12)


def _means_with_and_without_strata(batch_size, steps):
    """q_mu after ``steps`` steps on batches of ``batch_size`` with label_strata False, then True,
    and the second run's CAVI."""
    X, Y = _data()
    means = []
    for strata in (False, True):
        model = _model(len(X))
        cavi = ga.CAVI(model, step_size=0.5, warm_start_iterations=0, label_strata=strata)
        for batch in ga.minibatches(X, Y, batch_size=batch_size, seed=0).take(steps):
            cavi.step(batch)
        means.append(model.q_mu.numpy())
    return means, cavi


def test_a_full_batch_step_is_the_same_with_and_without_strata():
    (plain, stratified), _ = _means_with_and_without_strata(len(_data()[0]), 1)
    np.testing.assert_array_equal(plain, stratified)


def test_the_minibatch_step_uses_and_keeps_the_strata():
    (plain, stratified), cavi = _means_with_and_without_strata(10, 3)
    assert not np.allclose(plain, stratified)
    np.testing.assert_array_equal(cavi.strata.counts.numpy().sum(), 30.0)
    assert all(np.all(np.isfinite(p.numpy())) for p in cavi.strata.precision)


def test_the_strata_are_saved_with_the_optimizer(tmp_path):
    X, Y = _data()
    model = _model(len(X))
    cavi = ga.CAVI(model, step_size=0.5, warm_start_iterations=0)
    assert cavi.strata is not None  # the exact bound's default
    for batch in ga.minibatches(X, Y, batch_size=10, seed=0).take(2):
        cavi.step(batch)
    path = tf.train.Checkpoint(optimizer=cavi).save(str(tmp_path / "ckpt"))
    saved = [p.numpy() for p in cavi.strata.precision]
    restored = ga.CAVI(_model(len(X)), step_size=0.5, warm_start_iterations=0)
    tf.train.Checkpoint(optimizer=restored).restore(path).assert_existing_objects_matched()
    for p, q in zip(restored.strata.precision, saved):
        np.testing.assert_array_equal(p.numpy(), q)


def test_strata_and_class_subsets_are_refused_together():
    with pytest.raises(ValueError, match="class subsets"):
        ga.CAVI(_model(60), class_subset_size=2, label_strata=True)
    assert ga.CAVI(_model(60), class_subset_size=2).strata is None


def test_strata_need_one_latent_gp_per_class():
    model = ga.BinaryLogisticSVGP(gpflow.kernels.SquaredExponential(), np.zeros((3, 2)), num_data=9)
    with pytest.raises(ValueError, match="one latent GP per class"):
        ga.CAVI(model, label_strata=True)
    assert ga.CAVI(model).strata is None
