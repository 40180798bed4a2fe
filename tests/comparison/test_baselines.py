"""The comparison is fair by construction: every method starts from the same hyperparameters and
inducing points and sees the same minibatches; RM's natural-gradient schedule and its recovery
from a failed step behave as the paper's authors' baseline did."""

import dataclasses
import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.comparison.baselines import (
    BINARY_METHODS,
    FULL_GP_METHODS,
    METHOD_SPECS,
    MULTICLASS_METHODS,
    build_method,
    method_learning_rate,
)
from gpflow_augmented.comparison.methods import (
    Method,
    NaturalGradientWarmUp,
    hyperparameter_snapshot,
)
from gpflow_augmented.comparison import MinibatchStream, compare, time_to_converge
from gpflow_augmented.comparison.protocol import check_methods


@pytest.fixture(scope="module")
def tiny():
    d = ga.datasets.load_dataset("vehicle", seed=1)
    keep = slice(0, 150)
    return d._replace(
        X_train=d.X_train[keep], Y_train=d.Y_train[keep], X_test=d.X_test[:60], Y_test=d.Y_test[:60]
    )


def test_minibatch_stream_is_a_seeded_sequence_of_permutations():
    stream = MinibatchStream(num_data=23, batch_size=5, seed=3)
    assert stream.batches_per_epoch == 4
    for epoch in range(3):
        seen = np.concatenate([stream.indices(4 * epoch + k) for k in range(4)])
        assert len(np.unique(seen)) == 20  # no repeats within an epoch
    again = MinibatchStream(23, 5, seed=3)
    assert np.array_equal(again.indices(9), stream.indices(9))  # random access, reproducible
    assert not np.array_equal(MinibatchStream(23, 5, seed=4).indices(9), stream.indices(9))


def _all_subclasses(cls):
    for subclass in cls.__subclasses__():
        yield subclass
        yield from _all_subclasses(subclass)


def _record_steps(monkeypatch):
    """The evidence of what each method was given: every step's (X, Y), recorded at the step
    itself, by method name."""
    steps = {}
    for cls in {Method, *_all_subclasses(Method)}:
        if "step" in vars(cls):

            def recording(self, X, Y, _step=vars(cls)["step"]):
                steps.setdefault(self.name, []).append((X.numpy().copy(), Y.numpy().copy()))
                return _step(self, X, Y)

            monkeypatch.setattr(cls, "step", recording)
    return steps


@pytest.fixture(scope="module")
def shared_runs():
    """Comparison runs that several tests read: a run traces every method's step, which costs
    far more than its few steps. Each is made by the first test that needs it (so under that
    test's AutoGraph guard), with every step recorded."""
    return {}


def _shared_run(shared_runs, key, dataset, methods, **options):
    """(result, the steps each method was given) of ``compare(dataset, methods, **options)``."""
    if key not in shared_runs:
        with pytest.MonkeyPatch.context() as patch:
            consumed = _record_steps(patch)
            result = compare(dataset, methods, time_budget=None, **options)
        shared_runs[key] = (result, consumed)
    return shared_runs[key]


def _minibatch_run(tiny, shared_runs):
    """Every sparse method, 7 steps on minibatches of 32."""
    return _shared_run(
        shared_runs,
        "minibatches",
        tiny,
        SPARSE_METHODS,
        num_inducing=12,
        batch_size=32,
        max_iterations=7,
        seed=5,
    )


def _full_batch_run(tiny, shared_runs):
    """Every multi-class method, a full GP included, 3 steps on the whole training set."""
    return _shared_run(
        shared_runs,
        "full batch",
        tiny,
        list(MULTICLASS_METHODS),
        num_inducing=12,
        batch_size=len(tiny.X_train),
        max_iterations=3,
        seed=5,
    )


def test_a_full_batch_is_the_training_set_in_its_order_at_every_step():
    stream = MinibatchStream(num_data=23, batch_size=50, seed=3)
    assert stream.full_batch and stream.batch_size == 23
    for iteration in (0, 1, 2, 9):
        np.testing.assert_array_equal(stream.indices(iteration), np.arange(23))


SPARSE_METHODS = [name for name in MULTICLASS_METHODS if name not in FULL_GP_METHODS]


def _assert_same_start(start, reference, name):
    """The same initial hyperparameters up to the round trip through each method's own positive
    bijector (softmax stores log σ², the others softplus⁻¹(σ²)): a few ulps, nothing to gain."""
    assert start.keys() == reference.keys(), name
    for key, values in reference.items():
        np.testing.assert_allclose(start[key], values, rtol=1e-14, atol=0, err_msg=f"{name} {key}")


@pytest.mark.slow
def test_all_methods_see_identical_batches_and_initial_hyperparameters(tiny, shared_runs):
    result, consumed = _minibatch_run(tiny, shared_runs)
    assert [m.name for m in result.methods] == SPARSE_METHODS
    stream = MinibatchStream(len(tiny.X_train), 32, seed=5)
    # a warm-up step on the first batch (undone), then the 7 timed ones
    expected = [stream.indices(0)] + [stream.indices(t) for t in range(7)]
    for m in result.methods:
        assert m.iterations == 7 and len(consumed[m.name]) == 8, m.name
        for (X, Y), rows in zip(consumed[m.name], expected):
            np.testing.assert_array_equal(X, tiny.X_train[rows])
            np.testing.assert_array_equal(Y, tiny.Y_train[rows])
        assert m.batches_digest == result.methods[0].batches_digest, m.name
        _assert_same_start(
            m.initial_hyperparameters, result.methods[0].initial_hyperparameters, m.name
        )
    initial = result.methods[0].initial_hyperparameters
    assert initial["variance"] == [pytest.approx(1.0)]
    assert np.allclose(initial["lengthscales"], ga.median_lengthscale(tiny.X_train))
    assert np.allclose(
        np.reshape(initial["Z"], (12, -1)), ga.inducing_points(tiny.X_train, 12, seed=5)
    )
    # the hyperparameters were trained afterwards, by every method (lsm's variance waits for
    # the end of its warm start; Adam moves its lengthscales from the first step)
    for m in result.methods:
        trained = hyperparameter_snapshot(m.method.model)
        assert not np.allclose(trained["lengthscales"], initial["lengthscales"]), m.name
    # each method's trace: the initial state, geometric evaluations, the final state
    for m in result.methods:
        assert [e["iteration"] for e in m.trace] == [0, 1, 2, 3, 4, 5, 7]
        assert all(np.isfinite(e["nll"]) for e in m.trace)
    # what the safeguards did: counted for this package's Trainer-driven step, the fall for all
    for m in result.methods:
        record = m.stability
        counted = isinstance(getattr(m.method, "trainer", None), ga.Trainer)
        assert (record["kept_steps"] is not None) == counted, m.name
        assert (record["shortened_steps"] is not None) == counted, m.name
        assert record["worst_bound_fall"] >= 0.0 and not m.diverged(), m.name
    assert result.methods[0].name == "lsm" and result.methods[0].stability["kept_steps"] == 0


@pytest.mark.slow
def test_on_the_full_batch_every_method_a_full_gp_included_sees_the_same_data_and_start(
    tiny, shared_runs
):
    """The fairness contract without shared inducing points: a full GP holds the training set, so
    every method is given the whole set, in its order, at every step; every method starts from
    the same kernel; the sparse ones share the k-means inducing points, the full GP's inducing
    inputs are the training inputs."""
    assert set(FULL_GP_METHODS) <= set(MULTICLASS_METHODS)
    result, consumed = _full_batch_run(tiny, shared_runs)
    assert [m.name for m in result.methods] == list(MULTICLASS_METHODS)
    kernel_start = {k: v for k, v in result.methods[0].initial_hyperparameters.items() if k != "Z"}
    for m in result.methods:
        assert m.iterations == 3 and len(consumed[m.name]) == 4, m.name  # warm-up + 3
        for X, Y in consumed[m.name]:
            np.testing.assert_array_equal(X, tiny.X_train)
            np.testing.assert_array_equal(Y, tiny.Y_train)
        assert m.batches_digest == result.methods[0].batches_digest, m.name
        start = dict(m.initial_hyperparameters)
        Z = np.reshape(start.pop("Z"), (-1, tiny.X_train.shape[1]))
        _assert_same_start(start, kernel_start, m.name)
        expected_Z = (
            tiny.X_train
            if m.name in FULL_GP_METHODS
            else ga.inducing_points(tiny.X_train, 12, seed=5)
        )
        np.testing.assert_allclose(Z, expected_Z, rtol=1e-12, err_msg=m.name)
        trained = hyperparameter_snapshot(m.method.model)["lengthscales"]
        assert not np.allclose(trained, kernel_start["lengthscales"]), m.name
        assert all(np.isfinite(e["nll"]) for e in m.trace) and m.failed_steps == 0, m.name


def test_inducing_points_fixed_or_trained_for_all_alike(tiny):
    Z = ga.inducing_points(tiny.X_train, 8)
    for train in (False, True):
        for name in (*SPARSE_METHODS, *BINARY_METHODS):
            num_classes = 2 if name in BINARY_METHODS else 4
            method = build_method(
                name,
                ga.initial_kernel(tiny.X_train),
                Z,
                num_classes,
                150,
                train_inducing_points=train,
            )
            trainable = {v.ref() for v in method.model.trainable_variables}
            inducing = method.model.inducing_variable
            Z_param = getattr(inducing, "inducing_variable", inducing).Z
            assert (Z_param.unconstrained_variable.ref() in trainable) == train, name


def _adam(method):
    return getattr(method, "trainer", method).adam


def test_every_method_trains_at_its_own_learning_rate_unless_one_is_given_for_all(tiny):
    """Each method's Adam gets its own default rate (the table chosen on validation splits, or the
    library's default for this package's bound), or the one rate a caller gives every method."""
    Z = ga.inducing_points(tiny.X_train, 8)
    for name in (*SPARSE_METHODS, *BINARY_METHODS):
        num_classes = 2 if name in BINARY_METHODS else 4
        for given, expected in ((None, method_learning_rate(name)), (0.05, 0.05)):
            method = build_method(
                name, ga.initial_kernel(tiny.X_train), Z, num_classes, 150, learning_rate=given
            )
            assert float(_adam(method).learning_rate) == pytest.approx(expected), (name, given)
    # The library's defaults behind the package's methods: the exact bound's validated rate, the
    # augmented bounds' 0.01 (not swept).
    assert method_learning_rate("lsm") == ga.EXACT_LEARNING_RATE == 0.1
    assert method_learning_rate("lsm-gamma-poisson") == method_learning_rate("xgpc") == 0.01


@pytest.mark.slow
def test_the_positive_bijector_reaches_every_method_and_an_unknown_one_is_refused(tiny):
    """compare(..., positive_bijector="exp") builds every method's kernel with GPflow's exp
    transform (the unconstrained variable is log σ²); a method's own option overrides the shared
    one; a name GPflow does not have is refused before anything runs."""
    options = dict(
        num_inducing=8, batch_size=50, time_budget=None, max_iterations=1, trace_test_points=None
    )

    def log_variance_is_stored(result):
        return {
            m.name: np.isclose(
                float(
                    getattr(
                        m.method.model.kernel, "kernel", m.method.model.kernel
                    ).variance.unconstrained_variable.numpy()
                ),
                np.log(
                    float(
                        getattr(
                            m.method.model.kernel, "kernel", m.method.model.kernel
                        ).variance.numpy()
                    )
                ),
            )
            for m in result.methods
        }

    # One run (each method traces its step): the shared exp reaches five kinds of method, and
    # lsm-vi's own softplus overrides it.
    exp = compare(
        tiny,
        ["lsm", "softmax", "rm", "dirichlet", "sep", "lsm-vi"],
        positive_bijector="exp",
        method_options={"lsm-vi": {"positive_bijector": "softplus"}},
        **options,
    )
    assert log_variance_is_stored(exp) == {
        "lsm": True,
        "softmax": True,
        "rm": True,
        "dirichlet": True,
        "sep": True,
        "lsm-vi": False,
    }
    assert exp.settings["positive_bijector"] == "exp"
    with pytest.raises(ValueError, match="unknown positive bijector 'log'"):
        compare(tiny, ["lsm"], positive_bijector="log", **options)


@pytest.mark.slow
def test_every_method_keeps_its_own_positive_bijector_unless_one_is_given_for_all(
    tiny, monkeypatch
):
    """With no bijector given, each method gets its own (the table chosen on validation splits,
    GPflow's softplus where not measured), recorded in its options and used to build its kernel;
    one given for all overrides every method's own."""
    methods = ["lsm", "softmax", "rm", "dirichlet", "sep", "lsm-vi", "lsm-gamma-poisson"]
    own = check_methods(methods, 150, batch_size=50)
    assert {name: own[name]["positive_bijector"] for name in methods} == {
        name: "exp" if name == "softmax" else "softplus" for name in methods
    }
    assert (
        own["lsm-gamma-poisson"]["positive_bijector"] == "softplus"
    )  # not measured: GPflow's default
    given = check_methods(methods, 150, batch_size=50, positive_bijector="exp")
    assert {options["positive_bijector"] for options in given.values()} == {"exp"}

    # The registry is what builds the kernel: flip softmax's record and its variance is stored as
    # log σ².
    options = dict(
        num_inducing=8, batch_size=50, time_budget=None, max_iterations=1, trace_test_points=None
    )
    for bijector, stored_as_log in (("softplus", False), ("exp", True)):
        flipped = dataclasses.replace(METHOD_SPECS["softmax"], positive_bijector=bijector)
        monkeypatch.setitem(METHOD_SPECS, "softmax", flipped)
        variance = compare(tiny, ["softmax"], **options).methods[0].method.model.kernel.variance
        assert (
            np.isclose(
                float(variance.unconstrained_variable.numpy()), np.log(float(variance.numpy()))
            )
            == stored_as_log
        ), bijector


def test_natural_gradient_warm_up_schedule():
    schedule = NaturalGradientWarmUp()
    gammas = []
    for _ in range(60):
        gammas.append(float(schedule.gamma.numpy()))
        schedule.gamma.assign(schedule.next_gamma(tf.constant(True)))
    assert gammas[0] == pytest.approx(1e-5)
    assert gammas[10] == pytest.approx(1e-4)  # ×10^0.1 per step: a decade per 10 steps
    assert gammas[40] == pytest.approx(0.1) and max(gammas) == pytest.approx(0.1)
    schedule.gamma.assign(schedule.next_gamma(tf.constant(False)))
    assert float(schedule.gamma.numpy()) == pytest.approx(1e-4)  # 0.1 × 1e-3


def test_failed_natural_gradient_step_is_recovered(tiny):
    X, Y = tf.constant(tiny.X_train[:64]), tf.constant(tiny.Y_train[:64])
    method = build_method(
        "rm", ga.initial_kernel(tiny.X_train), ga.inducing_points(tiny.X_train, 10), 4, 150
    )
    for _ in range(3):
        method.step(X, Y)
    assert method.failed_steps == 0
    q_mu, q_sqrt = method.model.q_mu.numpy(), method.model.q_sqrt.numpy()
    variance = method.model.kernel.variance.numpy()
    # A negative step makes the new precision I - 1000·Λ indefinite: its Cholesky must fail.
    method.schedule.gamma.assign(-1e3)
    elbo = method.step(X, Y)
    assert method.failed_steps == 1
    np.testing.assert_array_equal(method.model.q_mu.numpy(), q_mu)
    np.testing.assert_array_equal(method.model.q_sqrt.numpy(), q_sqrt)
    assert method.step_size == pytest.approx(-1e3 * 1e-3)  # cut by the fallback factor
    assert np.isfinite(float(elbo))
    assert method.model.kernel.variance.numpy() != variance  # Adam still stepped, as in the recipe
    # and training goes on from the recovered state
    method.schedule.gamma.assign(1e-3)
    method.step(X, Y)
    assert method.failed_steps == 1 and not np.array_equal(method.model.q_mu.numpy(), q_mu)


def test_rm_baseline_is_gpflow_svgp_with_robust_max_and_full_q_sqrt(tiny):
    method = build_method(
        "rm", ga.initial_kernel(tiny.X_train), ga.inducing_points(tiny.X_train, 10), 4, 150
    )
    assert isinstance(method.model, gpflow.models.SVGP)
    assert isinstance(method.model.likelihood, gpflow.likelihoods.MultiClass)
    assert isinstance(method.model.likelihood.invlink, gpflow.likelihoods.RobustMax)
    assert method.model.q_sqrt.shape == (4, 10, 10) and method.model.whiten
    assert isinstance(method.natgrad, gpflow.optimizers.NaturalGradient)
    names = {v.name for v in method.model.trainable_variables}
    assert not any("q_" in n for n in names)  # Adam leaves q(u) to the natural gradient


def test_time_to_converge():
    trace = [{"time": t, "nll": v} for t, v in [(0, 2.0), (1, 1.0), (2, 0.505), (4, 0.5), (8, 0.6)]]
    assert time_to_converge(trace) == 2  # first within 0.01 of the best (0.5)
    assert time_to_converge(trace, tolerance=0.0) == 4


@pytest.mark.slow
def test_trace_on_a_test_subset_and_final_metrics_on_the_whole_test_set(tiny):
    from gpflow_augmented.metrics import Evaluator

    # Two kinds of model (an augmented one, a GPflow SVGP), among those that predict
    # deterministically and trace fastest: the subset is the comparison's, whatever the method.
    result = compare(
        tiny,
        ["lsm-gamma-poisson", "lsm-vi"],
        num_inducing=10,
        batch_size=32,
        time_budget=None,
        max_iterations=3,
        seed=2,
        trace_test_points=25,
    )
    assert result.settings["trace_test_points"] == 25
    subset = np.sort(np.random.default_rng(2).choice(60, 25, replace=False))
    for m in result.methods:
        on_subset = Evaluator(tiny.X_test[subset], tiny.Y_test[subset])(m.method.model)
        on_all = Evaluator(tiny.X_test, tiny.Y_test)(m.method.model)
        for name in ("error", "nll", "ece", "brier"):
            assert m.trace[-1][name] == pytest.approx(on_subset[name], rel=1e-9), name
            assert m.final()[name] == pytest.approx(on_all[name], rel=1e-9), name
        assert m.probabilities.shape == (60, 4)
        assert m.trace[-1]["nll"] != pytest.approx(m.final()["nll"], rel=1e-6)


@pytest.mark.slow
def test_warm_up_step_is_undone_exactly(tiny, shared_runs):
    """The untimed warm-up step must leave no trace: the compared run equals a fresh method
    trained on the same batches without one (Adam's moments and the step-size counters too)."""
    names = ["lsm", "rm", "lsm-vi"]  # deterministic steps (gpflow's Softmax draws Monte Carlo)
    result, _ = _minibatch_run(tiny, shared_runs)
    stream = MinibatchStream(len(tiny.X_train), 32, seed=5)
    Z = ga.inducing_points(tiny.X_train, 12, seed=5)
    for compared in (m for m in result.methods if m.name in names):
        assert compared.iterations == 7
        fresh = build_method(
            compared.name, ga.initial_kernel(tiny.X_train), Z, 4, len(tiny.X_train)
        )
        for t in range(7):
            batch = stream.indices(t)
            fresh.step(tf.constant(tiny.X_train[batch]), tf.constant(tiny.Y_train[batch]))
        trained = compared.method.model
        for mine, theirs in [
            (fresh.model.q_mu, trained.q_mu),
            (fresh.model.q_sqrt, trained.q_sqrt),
            (fresh.model.kernel.variance, trained.kernel.variance),
        ]:
            np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)
        assert fresh.step_size == pytest.approx(compared.method.step_size, rel=1e-12)
        assert compared.compile_seconds > 0


@pytest.mark.slow
def test_a_full_gps_warm_up_step_is_undone_exactly(tiny, shared_runs):
    """The same for rmgpc on the full batch: its sites, the outlier rate, the kernel, the EP step
    count and Adam's state."""
    data = (tiny.X_train, tiny.Y_train)
    result, _ = _full_batch_run(tiny, shared_runs)
    compared = next(m.method for m in result.methods if m.name == "rmgpc")
    fresh = build_method(
        "rmgpc",
        ga.initial_kernel(tiny.X_train),
        tiny.X_train,
        4,
        len(tiny.X_train),
        full_batch=True,
        data=data,
    )
    for _ in range(3):
        fresh.step(tf.constant(tiny.X_train), tf.constant(tiny.Y_train))
    assert fresh.ep.iteration.numpy() == compared.ep.iteration.numpy() == 3
    assert fresh.adam.iterations.numpy() == compared.adam.iterations.numpy() == 3
    for mine, theirs in zip(fresh.model.variables, compared.model.variables):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_ctrl_c_anywhere_in_undoing_the_warm_up_leaves_nothing_for_tensorflow_to_warn_about(tiny):
    """Ctrl-C during the warm-up's undo once left a half-read ``tf.train.Checkpoint``, whose
    deletion at exit logged a dozen 'unrestored values' warnings under the interruption's one
    line. The interruption is raised at evenly spread line events between the end of the step and
    the end of the warm-up (every frame below it included), as a signal would arrive."""
    import gc
    import io
    import logging
    import sys

    from gpflow_augmented.comparison.protocol import _warm_up

    method = build_method(
        "softmax",
        ga.initial_kernel(tiny.X_train),
        ga.inducing_points(tiny.X_train, 12, seed=5),
        4,
        len(tiny.X_train),
    )
    X, Y, batch = tf.constant(tiny.X_train), tf.constant(tiny.Y_train), np.arange(32)
    step = method.step
    events = {"count": 0, "interrupt_at": None}

    def count_then_interrupt(frame, event, arg):
        if event == "line":
            events["count"] += 1
            if events["count"] == events["interrupt_at"]:
                raise KeyboardInterrupt
        return count_then_interrupt

    def step_then_trace(*args):
        result = step(*args)
        events["count"] = 0
        sys._getframe(1).f_trace = count_then_interrupt  # the warm-up's own frame, from here on
        sys.settrace(count_then_interrupt)  # and every frame it calls
        return result

    method.step = step_then_trace
    logged = io.StringIO()
    handler = logging.StreamHandler(logged)
    logging.getLogger("tensorflow").addHandler(handler)
    try:
        for _ in range(2):  # the first undo runs some code once only (caches, imports)
            try:
                _warm_up(method, X, Y, batch)
            finally:
                sys.settrace(None)
        total = events["count"]
        assert total > 20
        for interrupt_at in np.linspace(1, 0.9 * total, 9).astype(int):  # 0.9: runs vary a little
            events["interrupt_at"] = int(interrupt_at)
            try:
                with pytest.raises(KeyboardInterrupt):
                    _warm_up(method, X, Y, batch)
            finally:
                sys.settrace(None)
            gc.collect()
    finally:
        logging.getLogger("tensorflow").removeHandler(handler)
    assert "unrestored" not in logged.getvalue() and "could not be found" not in logged.getvalue()


@pytest.mark.slow
def test_binary_methods_share_batches_hyperparameters_and_predict_two_columns(tiny):
    binary = ga.datasets.one_vs_rest(tiny, 0)
    assert binary.name == "vehicle-0-vs-rest" and set(np.unique(binary.Y_train)) == {0, 1}
    result = compare(
        binary, None, num_inducing=12, batch_size=32, time_budget=None, max_iterations=6, seed=2
    )
    assert [m.name for m in result.methods] == list(BINARY_METHODS)
    xgpc, bernoulli = result.methods
    assert xgpc.batches_digest == bernoulli.batches_digest
    assert xgpc.initial_hyperparameters == bernoulli.initial_hyperparameters
    assert isinstance(xgpc.method.model, ga.BinaryLogisticSVGP)
    assert isinstance(bernoulli.method.model.likelihood, gpflow.likelihoods.Bernoulli)
    assert bernoulli.method.model.q_sqrt.shape == (1, 12, 12)  # full q_sqrt: NaturalGradient
    for m in result.methods:
        assert m.probabilities.shape == (60, 2)
        # column 1 is the model's own p(y = 1), not its complement
        np.testing.assert_allclose(
            m.probabilities[:, 1],
            m.method.model.predict_y(binary.X_test)[0].numpy()[:, 0],
            rtol=1e-10,
        )
        assert np.isfinite(m.final()["nll"]) and m.failed_steps == 0
    with pytest.raises(ValueError, match="binary labels"):
        build_method("xgpc", ga.initial_kernel(tiny.X_train), tiny.X_train[:5], 4, 150)
    with pytest.raises(ValueError, match="positive_class"):
        ga.datasets.one_vs_rest(tiny, 4)


def test_method_names_build_the_variants_they_name(tiny):
    Z = ga.inducing_points(tiny.X_train, 8)

    def build(name, num_classes=10, **options):
        return build_method(name, ga.initial_kernel(tiny.X_train), Z, num_classes, 150, **options)

    lsm = build("lsm")
    assert lsm.model.scheme == "exact"
    assert isinstance(lsm.model.mean_function, gpflow.mean_functions.Constant)
    assert lsm.trainer.cavi.warm_start_iterations == ga.EXACT_WARM_START > 0
    assert lsm.trainer.cavi.class_sampler is None
    assert isinstance(build("lsm-zero-mean").model.mean_function, gpflow.mean_functions.Zero)
    assert build("lsm-weighted").model.learns_class_weights
    assert build("lsm-negative-multinomial").model.scheme == "negative-multinomial"
    assert build("lsm-gamma-poisson").model.scheme == "gamma-poisson"
    assert build("lsm-subsets").trainer.cavi.class_sampler.subset_size == 3  # ⌈10 / 4⌉
    assert build("lsm-subsets", 4).trainer.cavi.class_sampler.subset_size == 2  # not ⌈4 / 4⌉
    assert build("lsm-subsets", class_subset_size=5).trainer.cavi.class_sampler.subset_size == 5
    assert build("lsm-subsets").model.scheme == "exact"
    with pytest.raises(ValueError, match="unknown method 'lsm-exact-mean'"):
        build("lsm-exact-mean")
    with pytest.raises(
        ValueError, match=r"has no class_subset_size \(an option of 'lsm-subsets'\)"
    ):
        build("lsm", class_subset_size=2)
    with pytest.raises(ValueError, match="unknown method 'lsm-exact'"):
        compare(tiny, ["lsm-exact"], max_iterations=1)
    with pytest.raises(ValueError, match="unknown method 'lsm-paper'"):
        compare(tiny, ["lsm", "lsm-paper"], max_iterations=1)
    assert ga.comparison.baselines.default_methods(4) == ("lsm", "rm", "softmax", "lsm-vi")


def test_update_variance_is_an_option_of_the_package_methods_only(tiny):
    Z = ga.inducing_points(tiny.X_train, 8)

    def build(name, **options):
        return build_method(name, ga.initial_kernel(tiny.X_train), Z, 4, 150, **options)

    closed_form, by_adam = build("lsm"), build("lsm", update_variance=False)
    assert [v is closed_form.model.kernel.variance for v in closed_form.trainer.cavi.variances] == [
        True
    ]
    assert by_adam.trainer.cavi.variances == []
    for method, by_adam_too in ((closed_form, False), (by_adam, True)):
        adam_trained = {id(v) for v in method.trainer.hyperparameter_variables}
        assert (
            id(method.model.kernel.variance.unconstrained_variable) in adam_trained
        ) is by_adam_too
    with pytest.raises(ValueError, match="method 'rm' has no update_variance"):
        build("rm", update_variance=False)
    with pytest.raises(TypeError, match="update_variance must be True, False or None"):
        build("lsm", update_variance="no")
    with pytest.raises(ValueError, match="unknown option 'update_varience'"):
        compare(tiny, ["lsm"], max_iterations=1, method_options={"lsm": {"update_varience": False}})


def test_a_monte_carlo_method_repeats_and_does_not_depend_on_the_methods_before_it(tiny):
    """softmax draws Monte Carlo samples in its step and its predictions: seeded from the run's
    seed for each method, its result repeats, and equals the one it has after another method
    (a resumed run, which skips the methods already done, equals an uninterrupted one)."""

    def softmax_nll(methods):
        tf.random.set_seed(None)  # as in a fresh process, where no global seed is set
        result = compare(tiny, methods, time_budget=None, max_iterations=3, seed=4)
        return result.methods[-1].final_metrics["nll"]

    alone = softmax_nll(["softmax"])
    assert softmax_nll(["softmax"]) == alone
    assert softmax_nll(["lsm-vi", "softmax"]) == alone


def test_per_class_kernels_give_every_sparse_method_a_kernel_of_its_own_for_each_class(tiny, capfd):
    """With ``per_class_kernels`` each method's classes learn their own lengthscales (they move
    apart from one start); a shared kernel keeps one. The full GP refuses the option, and GPflow's
    deprecated map_fn in the per-class conditional prints nothing."""
    kernels = {}

    def keep(method, entry, evaluator):
        kernels[method.name] = method.model.kernel

    result = compare(tiny, SPARSE_METHODS, num_inducing=8, batch_size=50, time_budget=None,
                     max_iterations=20, per_class_kernels=True, callback=keep)  # fmt: skip
    assert result.settings["per_class_kernels"] is True
    for name in SPARSE_METHODS:
        kernel = kernels[name]
        assert isinstance(kernel, gpflow.kernels.SeparateIndependent), name
        assert len(kernel.kernels) == tiny.num_classes, name
        scales = np.array([k.lengthscales.numpy() for k in kernel.kernels])
        assert np.ptp(scales, axis=0).max() > 1e-4, name  # each class moved its own
        assert np.isfinite(result.methods[SPARSE_METHODS.index(name)].final_metrics["nll"]), name
    assert "deprecated" not in capfd.readouterr().err
    with pytest.raises(ValueError, match="per-class kernels are for the sparse methods"):
        check_methods(FULL_GP_METHODS, 150, batch_size=150, per_class_kernels=True)
