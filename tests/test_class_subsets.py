"""Class subsampling (paper, Algorithm 2): the subset sampler, the estimator's unbiasedness by
enumerating every subset, and the subset step's bookkeeping (scatter, XLA, checkpoints)."""

import itertools

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from check_shapes.exceptions import ShapeMismatchError
from gpflow.optimizers.natgrad import meanvarsqrt_to_natural

import gpflow_augmented as ga
from gpflow_augmented.class_subsets import ClassSubset, sample_without_replacement
from gpflow_augmented.likelihoods import Marginals
from gpflow_augmented.likelihoods.expectation import expected_log_logistic_softmax

from helpers import cavi_proposal, make_problem


def test_subsets_are_distinct_in_range_and_uniform():
    C, K, draws = 6, 3, 12000
    # Draw i from the seed (3, i), as a step draws from (seed, iteration); all in one compiled
    # call, not 12000 of them.
    subsets = tf.function(
        lambda: tf.map_fn(
            lambda i: sample_without_replacement(tf.stack([tf.constant(3, tf.int64), i]), C, K),
            tf.range(draws, dtype=tf.int64),
            fn_output_signature=tf.int32,
        )
    )().numpy()
    counts = {}
    for subset in subsets:
        assert len(set(subset)) == K and subset.min() >= 0 and subset.max() < C
        key = tuple(sorted(subset))
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 20  # every one of the C-choose-K subsets appears
    expected = draws / 20
    chi2 = sum((n - expected) ** 2 / expected for n in counts.values())
    # 19 degrees of freedom: P(χ² > 43.8) = 0.001.
    assert chi2 < 43.8, chi2


def _randomise_q(model, seed, identical_classes):
    rng = np.random.default_rng(seed)
    M, C = model.q_mu.shape
    mu = rng.normal(size=(M, 1 if identical_classes else C))
    sqrt = np.tril(rng.normal(scale=0.3, size=(1 if identical_classes else C, M, M)))
    sqrt[:, np.arange(M), np.arange(M)] = np.abs(sqrt[:, np.arange(M), np.arange(M)]) + 0.5
    model.q_mu.assign(np.broadcast_to(mu, (M, C)))
    model.q_sqrt.assign(np.broadcast_to(sqrt, (C, M, M)))


def _natural(q_mu, q_sqrt):
    nat1, nat2 = meanvarsqrt_to_natural(tf.constant(q_mu), tf.constant(q_sqrt))
    return nat1.numpy(), nat2.numpy()


@pytest.mark.parametrize("scheme", ["exact", "negative-multinomial", "gamma-poisson"])
@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.slow
def test_subset_update_is_unbiased_given_the_class_coupling(scheme, whiten):
    """With every q(u^c) equal, the class coupling S_i is the same on every subset, so the estimator
    must be exactly unbiased: averaged over all subsets, the natural parameters after a subset step
    equal those after the full step of size ρ|K|/C, and the subset ELBO and its kernel gradient
    equal the full ones. A missing C/|K| weight or a wrong log C breaks these equalities."""
    C, K, rho = 5, 2, 0.7
    model, (X, Y) = make_problem(40, C, num_inducing=7, seed=1, scheme=scheme, whiten=whiten)
    _randomise_q(model, seed=2, identical_classes=True)
    X, Y = tf.constant(X), tf.constant(Y)
    old_nat1, old_nat2 = _natural(*[p.numpy() for p in (model.q_mu, model.q_sqrt)])
    subsets = list(itertools.combinations(range(C), K))

    mean_nat1, mean_nat2 = np.zeros_like(old_nat1), np.zeros_like(old_nat2)
    elbos, gradients = [], []
    lengthscale = model.kernel.lengthscales.unconstrained_variable
    for subset in subsets:
        classes = ClassSubset(tf.constant(subset, tf.int32), C)
        new_mu, new_sqrt, _ = cavi_proposal(ga.CAVI(model, compile=False), X, Y, rho, classes)
        nat1, nat2 = old_nat1.copy(), old_nat2.copy()
        nat1[:, subset], nat2[list(subset)] = _natural(new_mu.numpy(), new_sqrt.numpy())
        mean_nat1 += nat1 / len(subsets)
        mean_nat2 += nat2 / len(subsets)
        with tf.GradientTape() as tape:
            elbo = model.elbo((X, Y), classes)
        elbos.append(float(elbo))
        gradients.append(float(tape.gradient(elbo, lengthscale)))

    full_mu, full_sqrt, _ = cavi_proposal(ga.CAVI(model, compile=False), X, Y, rho * K / C)
    full_nat1, full_nat2 = _natural(full_mu.numpy(), full_sqrt.numpy())
    np.testing.assert_allclose(mean_nat1, full_nat1, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(mean_nat2, full_nat2, rtol=1e-9, atol=1e-9)
    with tf.GradientTape() as tape:
        full_elbo = model.elbo((X, Y))
    full_gradient = float(tape.gradient(full_elbo, lengthscale))
    np.testing.assert_allclose(np.mean(elbos), float(full_elbo), rtol=1e-10)
    np.testing.assert_allclose(np.mean(gradients), full_gradient, rtol=1e-9)
    if scheme == "exact":
        # The exact bound's estimate keeps each point's own class exact and counts each other
        # column for (C - 1)/k classes, so with identical classes every subset gives the full
        # ELBO; its sites must divide that count back out, or the mean step above differs.
        np.testing.assert_allclose(elbos, float(full_elbo), rtol=1e-10)
    else:
        # ... and the estimate does vary between subsets (the test is not vacuous).
        assert np.std(elbos) > 1e-3 * abs(np.mean(elbos))


@pytest.mark.parametrize("scheme", ["exact", "negative-multinomial", "gamma-poisson"])
def test_subset_coupling_bias_vanishes_with_all_classes(scheme):
    """With distinct classes the coupling is estimated from the subset; with K = all classes (in a
    shuffled order) the estimator is the full update itself, column for column."""
    C = 5
    model, (X, Y) = make_problem(40, C, num_inducing=7, seed=1, scheme=scheme)
    _randomise_q(model, seed=4, identical_classes=False)
    X, Y = tf.constant(X), tf.constant(Y)
    order = np.array([3, 0, 4, 1, 2])
    mu, sqrt, elbo = cavi_proposal(
        ga.CAVI(model, compile=False), X, Y, 0.7, ClassSubset(tf.constant(order, tf.int32), C)
    )
    full_mu, full_sqrt, full_elbo = cavi_proposal(ga.CAVI(model, compile=False), X, Y, 0.7)
    np.testing.assert_allclose(mu, full_mu.numpy()[:, order], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sqrt, full_sqrt.numpy()[order], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(float(elbo), float(full_elbo), rtol=1e-12)


def test_step_updates_only_the_subset_and_scatters_it_in_place():
    C = 6
    model, (X, Y) = make_problem(40, C, num_inducing=7, seed=1)
    _randomise_q(model, seed=5, identical_classes=False)
    before_mu, before_sqrt = model.q_mu.numpy().copy(), model.q_sqrt.numpy().copy()
    classes = ClassSubset(tf.constant([4, 1], tf.int32), C)
    expected_mu, expected_sqrt, _ = cavi_proposal(
        ga.CAVI(model, compile=False), tf.constant(X), tf.constant(Y), 1.0, classes
    )
    cavi = ga.CAVI(model, 1.0, class_subset_size=2)
    cavi.update(tf.constant(X), tf.constant(Y), classes)
    untouched = [0, 2, 3, 5]
    np.testing.assert_array_equal(model.q_mu.numpy()[:, untouched], before_mu[:, untouched])
    np.testing.assert_array_equal(model.q_sqrt.numpy()[untouched], before_sqrt[untouched])
    np.testing.assert_allclose(model.q_mu.numpy()[:, [4, 1]], expected_mu, rtol=1e-12)
    np.testing.assert_allclose(model.q_sqrt.numpy()[[4, 1]], expected_sqrt, rtol=1e-12, atol=1e-14)


def test_compiled_draws_are_valid_subsets():
    """XLA's random bits differ from the CPU kernels', so its draws are checked on their own (the
    compiled step itself is checked against the eager one in test_cavi)."""
    model, _ = make_problem(60, 8, num_inducing=10, seed=3)
    cavi = ga.CAVI(model, 0.5, class_subset_size=3, seed=11)
    for jit_compile in (False, True):
        drawn = tf.function(cavi._sample_subset, jit_compile=jit_compile)().classes.numpy()
        assert len(set(drawn)) == 3 and 0 <= drawn.min() and drawn.max() < 8


@pytest.mark.parametrize("scheme", ["exact", "negative-multinomial"])
@pytest.mark.slow
def test_subset_training_approaches_the_full_fixed_point(scheme):
    """Full-batch CAVI with |K| = 4 of C = 8 classes and a decaying ρ ends near the full CAVI
    fixed point: the coupling's O(1/|K|) bias moves predictions by little. On the exact bound
    this needs each point's own class kept exact: with every column counted C/|K| times, the
    latents drift away."""
    C = 8
    full, data = make_problem(120, C, num_inducing=15, seed=9, scheme=scheme)
    ga.CAVI(full, 1.0 if scheme == "negative-multinomial" else 0.5).iterate(data, iterations=60)
    subset, _ = make_problem(120, C, num_inducing=15, seed=9, scheme=scheme)
    cavi = ga.CAVI(subset, ga.RobbinsMonro(tau=1.0, kappa=0.6), class_subset_size=4, seed=0)
    cavi.iterate(data, iterations=400)
    X = data[0]
    p_full = full.predict_y(X)[0].numpy()
    p_subset = subset.predict_y(X)[0].numpy()
    difference = np.abs(p_full - p_subset).max()
    print(f"max |Δp| subset vs full fixed point: {difference:.4f}")
    assert difference < 0.02


def test_bad_subset_sizes_are_refused():
    model, _ = make_problem(20, 4, num_inducing=5)
    for size in (0, 5, 2.5, True):
        with pytest.raises(ValueError, match="class_subset_size"):
            ga.CAVI(model, class_subset_size=size)
    binary = ga.BinaryLogisticSVGP(gpflow.kernels.SquaredExponential(), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="multi-class"):
        ga.CAVI(binary, class_subset_size=1)
    exact, _ = make_problem(20, 4, num_inducing=5, scheme="exact")
    with pytest.raises(ValueError, match="at least 2 on the ExactBound"):
        ga.CAVI(exact, class_subset_size=1)


@pytest.mark.parametrize("separate_kernels", [False, True])
@pytest.mark.parametrize("whiten", [True, False])
def test_label_marginals_are_the_observed_class_column_of_the_full_marginals(
    separate_kernels, whiten
):
    C = 5
    kernel = None
    if separate_kernels:
        kernel = gpflow.kernels.SeparateIndependent(
            [gpflow.kernels.SquaredExponential(lengthscales=0.5 + c / 4) for c in range(C)]
        )
    # A constant shared by the classes, or one per class with the separate kernels.
    constant = np.linspace(-2.0, 0.5, C) if separate_kernels else -1.5
    model, (X, Y) = make_problem(
        30,
        C,
        num_inducing=6,
        seed=3,
        scheme="exact",
        whiten=whiten,
        kernel=kernel,
        mean_function=gpflow.mean_functions.Constant(constant),
    )
    _randomise_q(model, seed=6, identical_classes=False)
    full = model.batch_geometry(tf.constant(X))
    subset = model.batch_geometry(
        tf.constant(X), ClassSubset(tf.constant([3, 1], tf.int32), C), tf.constant(Y)
    )
    rows = np.arange(len(Y))
    label_mean, label_var = (m.numpy() for m in subset.marginals.label_marginals)
    np.testing.assert_allclose(label_mean, full.marginals.mean.numpy()[rows, Y[:, 0]], rtol=1e-10)
    np.testing.assert_allclose(
        label_var, full.marginals.variance.numpy()[rows, Y[:, 0]], rtol=1e-10
    )


@pytest.mark.slow
def test_fused_exact_iteration_takes_the_same_subset_step_as_cavi():
    """On the exact bound the fused Trainer iteration takes its sites from the gradient of the
    subset ELBO and CAVI from the subset expectation: both must divide out the number of classes
    each column stands for, so with Adam at rate 0 they draw the same subsets and agree."""
    fused, (X, Y) = make_problem(50, 6, num_inducing=8, seed=2, scheme="exact")
    plain, _ = make_problem(50, 6, num_inducing=8, seed=2, scheme="exact")
    trainer = ga.Trainer(
        fused,
        step_size=0.7,
        learning_rate=0.0,
        class_subset_size=2,
        seed=4,
        warm_start_iterations=0,
    )
    cavi = ga.CAVI(plain, 0.7, class_subset_size=2, seed=4, warm_start_iterations=0)
    for _ in range(3):
        trainer.step((X, Y))
        cavi.step((X, Y))
    np.testing.assert_allclose(fused.q_mu.numpy(), plain.q_mu.numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(fused.q_sqrt.numpy(), plain.q_sqrt.numpy(), rtol=1e-9, atol=1e-11)


def test_exact_subset_estimate_stays_close_for_points_whose_own_class_dominates():
    """A trained model's normaliser is dominated by each point's own class. The exact bound's subset
    estimate keeps that class exact, so averaged over every subset it is within 0.05 nats of the
    full expectation (the rest is the Jensen bias of estimating the other classes' small sum), and
    no single subset is off by more than 0.6 nats. Counting every column C/|K| times instead (the
    estimate that made the latents diverge on mnist) is off by up to 0.4 nats on average and 3.7
    in one subset here."""
    C, K, N = 6, 3, 6
    rng = np.random.default_rng(0)
    labels = np.arange(N) % C
    mean = rng.uniform(-6.0, 0.0, (N, C))
    mean[np.arange(N), labels] = 4.0
    variance = np.full((N, C), 0.5)
    full = expected_log_logistic_softmax(
        tf.constant(mean), tf.constant(variance), tf.one_hot(labels, C, dtype=tf.float64)
    ).numpy()
    own = tuple(tf.constant(m[np.arange(N), labels]) for m in (mean, variance))
    estimates = []
    for subset in itertools.combinations(range(C), K):
        columns = list(subset)
        onehot = (labels[:, None] == np.array(columns)[None]).astype(np.float64)
        estimates.append(
            expected_log_logistic_softmax(
                tf.constant(mean[:, columns]),
                tf.constant(variance[:, columns]),
                tf.constant(onehot),
                C,
                label_marginals=own,
            ).numpy()
        )
    estimates = np.array(estimates)
    assert np.max(np.abs(estimates.mean(axis=0) - full)) < 0.05
    assert np.max(np.abs(estimates - full)) < 0.6


def test_marginals_of_a_subset_are_refused_where_all_classes_are_needed():
    """The marginals carry their subset, so a method that needs all classes sees it and says so
    instead of reading |K| columns as C classes: the certificate's refined expectation, and the
    binary likelihood, which has no classes to subsample."""
    subset = ClassSubset(tf.constant([0, 2], tf.int32), 3)
    mean = tf.zeros([4, 2], tf.float64)
    marginals = Marginals(mean, tf.ones_like(mean), subset)
    Y = tf.constant([[0], [2], [1], [0]])
    with pytest.raises(ValueError, match="of all classes, not of a class subset"):
        ga.LogisticSoftmax(3).refined_exact_local_elbo(marginals, Y)
    one_class = ClassSubset(tf.constant([1], tf.int32), 2)
    binary = Marginals(mean[:, :1], tf.ones_like(mean[:, :1]), one_class)
    with pytest.raises(ValueError, match="class subsets need a multi-class likelihood"):
        ga.likelihoods.BinaryLogistic().local_parameters(binary, tf.ones([4, 1], tf.float64))


def test_the_contract_checks_that_a_subsets_classes_are_the_marginals_columns():
    """A subset of three classes on marginals of two columns, or observed marginals of another
    batch, is a shape error at the contract, not an estimate of the wrong sum."""
    likelihood = ga.LogisticSoftmax(4)
    mean = tf.zeros([5, 2], tf.float64)
    Y = tf.constant([[0], [1], [3], [0], [1]])
    wrong_size = ClassSubset(tf.constant([0, 1, 3], tf.int32), 4)
    with pytest.raises(ShapeMismatchError):
        likelihood.exact_local_elbo(Marginals(mean, tf.ones_like(mean), wrong_size), Y)
    subset = ClassSubset(tf.constant([0, 1], tf.int32), 4)
    other_batch = (tf.zeros([4], tf.float64), tf.ones([4], tf.float64))
    with pytest.raises(ShapeMismatchError):
        likelihood.exact_local_elbo(Marginals(mean, tf.ones_like(mean), subset, other_batch), Y)
    right = (tf.zeros([5], tf.float64), tf.ones([5], tf.float64))
    assert likelihood.exact_local_elbo(
        Marginals(mean, tf.ones_like(mean), subset, right), Y
    ).shape == (5,)
