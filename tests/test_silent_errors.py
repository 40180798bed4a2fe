"""Inputs that would give a wrong answer without an error are refused, in eager and in
graph mode, with a message naming the problem, and (where a model is involved) nothing changes."""

import re

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from gpflow.keras import tf_keras
from gpflow_augmented.comparison.files import load_file
from helpers import make_problem, model_variables

LABELS_C3 = re.escape("labels must be integers in 0..2 (num_classes=3)")


def _bad_label_columns(Y):
    seven, negative, fractional = (Y.astype(np.float64) for _ in range(3))
    seven[1, 0], negative[0, 0], fractional[2, 0] = 7, -1, 1.7
    return {"label 7": seven, "label -1": negative, "label 1.7": fractional}


@pytest.fixture(scope="module")
def trained():
    model, (X, Y) = make_problem(30, 3, num_inducing=6, seed=1, scheme="exact")
    ga.CAVI(model).step((X, Y))
    return model, (X, Y)


@pytest.mark.parametrize("case", ["label 7", "label -1", "label 1.7"])
@pytest.mark.slow
def test_predict_log_density_refuses_bad_labels_eagerly_and_compiled(trained, case):
    model, (X, Y) = trained
    bad = _bad_label_columns(Y)[case]
    with pytest.raises(ga.InvalidDataError, match=r"^" + LABELS_C3):
        model.predict_log_density((X, bad))
    compiled = tf.function(model.predict_log_density)
    with pytest.raises(tf.errors.InvalidArgumentError, match=LABELS_C3):
        compiled((tf.constant(X), tf.constant(bad)))
    # The valid labels still give finite log densities, so the check is not refusing everything.
    assert np.all(np.isfinite(compiled((tf.constant(X), tf.constant(Y, tf.float64))).numpy()))


@pytest.mark.slow
def test_under_xla_a_bad_label_gives_nan_not_a_perfect_score(trained):
    """XLA drops assertions; the only signal left is a NaN where the wrong label is."""
    model, (X, Y) = trained
    bad = _bad_label_columns(Y)["label 7"]
    log_density = tf.function(model.predict_log_density, jit_compile=True)(
        (tf.constant(X), tf.constant(bad))
    )
    assert np.isnan(log_density.numpy()[1]) and np.all(np.isfinite(np.delete(log_density, 1)))
    elbo = tf.function(model.elbo, jit_compile=True)((tf.constant(X), tf.constant(bad)))
    assert np.isnan(elbo.numpy())


def test_compiled_training_loss_closure_refuses_labels_equal_to_c(trained):
    model, (X, Y) = trained
    bad = np.full_like(Y, 3)
    closure = model.training_loss_closure((tf.constant(X), tf.constant(bad)))  # compiled
    with pytest.raises(tf.errors.InvalidArgumentError, match=LABELS_C3):
        closure()
    before = model_variables(model)
    with pytest.raises(tf.errors.InvalidArgumentError, match=LABELS_C3):
        gpflow.optimizers.Scipy().minimize(
            closure, model.trainable_variables, options=dict(maxiter=2)
        )
    for b, a in zip(before, model_variables(model)):
        np.testing.assert_array_equal(a, b)


def test_logistic_softmax_in_a_stock_svgp_refuses_bad_labels():
    """Labels outside 0..C-1 are refused: unchecked, they give a *higher* ELBO than valid ones."""
    _, (X, Y) = make_problem(20, 3, seed=2)
    model = gpflow.models.SVGP(
        gpflow.kernels.SquaredExponential(), ga.LogisticSoftmax(3), X[:5].copy(), num_latent_gps=3
    )
    bad = np.where(np.arange(20)[:, None] == 4, 3, Y)
    with pytest.raises(ga.InvalidDataError, match=LABELS_C3):
        model.elbo((X, bad))
    with pytest.raises(tf.errors.InvalidArgumentError, match=LABELS_C3):
        model.training_loss_closure((tf.constant(X), tf.constant(bad)))()


@pytest.mark.parametrize("label", [5, -1, 0.5])
@pytest.mark.slow
def test_binary_model_refuses_labels_outside_0_and_1(label):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    Y = (X[:, :1] > 0).astype(np.int64)
    model = ga.BinaryLogisticSVGP(gpflow.kernels.SquaredExponential(), X[:4].copy(), 12)
    bad = Y.astype(np.float64)
    bad[3, 0] = label
    message = r"labels must be integers in 0\.\.1 \(num_classes=2\)"
    with pytest.raises(ga.InvalidDataError, match=message):
        model.predict_log_density((X, bad))
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        tf.function(model.predict_log_density)((tf.constant(X), tf.constant(bad)))
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        model.training_loss_closure((tf.constant(X), tf.constant(bad)))()


@pytest.mark.parametrize(
    "metric",
    [
        ga.metrics.error_rate,
        ga.metrics.expected_calibration_error,
        ga.metrics.brier_score,
        ga.metrics.classwise_calibration_error,
        ga.metrics.reliability_curve,
    ],
)
def test_metrics_refuse_labels_that_do_not_match_the_probabilities(metric):
    probabilities = np.full((4, 3), 1 / 3)
    with pytest.raises(ga.InvalidDataError, match=r"^y must hold one label per row"):
        metric(probabilities, np.array([0, 1, 2]))  # unchecked, it broadcasts
    with pytest.raises(ga.InvalidDataError, match=r"^y must hold one label per row"):
        metric(probabilities, np.zeros((4, 2)))
    for bad in ([0, 1, 2, 3], [0, 1, 2, 1.7], [0, -1, 2, 1]):
        with pytest.raises(ga.InvalidDataError, match=r"^labels must be integers in 0\.\.2"):
            metric(probabilities, np.array(bad))
    metric(probabilities, np.array([[0], [1], [2], [1]]))  # a column is fine


@pytest.mark.parametrize("num_data", [2.7, float("nan"), 0, True, "10"])
def test_num_data_must_be_a_whole_positive_number(num_data):
    with pytest.raises(ValueError, match=r"^num_data must be an integer ≥ 1, got"):
        ga.LogisticSoftmaxSVGP(
            gpflow.kernels.SquaredExponential(), np.zeros((3, 1)), 3, num_data=num_data
        )


def test_num_data_given_as_a_whole_float_is_accepted():
    model = ga.LogisticSoftmaxSVGP(
        gpflow.kernels.SquaredExponential(), np.zeros((3, 1)), 3, num_data=10.0
    )
    assert model.num_data == 10 and isinstance(model.num_data, int)


def test_predictions_refuse_non_finite_inputs(trained):
    model, (X, _) = trained
    X_nan = X.copy()
    X_nan[2, 1] = np.nan
    with pytest.raises(ga.InvalidDataError, match=r"^X contains NaN or inf \(first at row 2"):
        model.predict_y(X_nan)
    with pytest.raises(tf.errors.InvalidArgumentError, match="X contains NaN or inf"):
        tf.function(model.predict_f)(tf.constant(X_nan))


# -- optimiser settings (points 2 and 3) ------------------------------------------------------


# None is not among them: it asks for the default rate.
@pytest.mark.parametrize("learning_rate", [float("nan"), float("inf"), -0.01, "0.01"])
def test_bad_learning_rates_are_refused_before_anything_runs(learning_rate):
    model, (X, Y) = make_problem(20, 3, num_inducing=5, seed=0, scheme="exact")
    before = model_variables(model)
    with pytest.raises(ValueError, match=r"^learning_rate must be a finite number ≥ 0, got"):
        ga.fit(model, (X, Y), iterations=1, learning_rate=learning_rate, progress=False)
    with pytest.raises(ValueError, match=r"^learning_rate must be a finite number ≥ 0, got"):
        ga.comparison.baselines.build_method(
            "softmax",
            gpflow.kernels.SquaredExponential(),
            X[:5],
            3,
            20,
            learning_rate=learning_rate,
        )
    for b, a in zip(before, model_variables(model)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("scheme", ["exact", "negative-multinomial"])
@pytest.mark.slow
def test_adam_writing_a_non_finite_value_is_rolled_back(scheme):
    """The gradients are finite, but a learning rate made NaN after construction would write NaN:
    the guard checks what was written and restores the parameters and Adam's state."""
    model, (X, Y) = make_problem(20, 3, num_inducing=5, seed=0, scheme=scheme)
    trainer = ga.Trainer(model, 1.0, learning_rate=0.01)
    trainer.step((X, Y))
    trainer.learning_rate.assign(np.nan)
    before = model_variables(model) + [v.numpy().copy() for v in trainer.adam.variables]
    with pytest.raises(ga.NumericalError, match=r"^the hyperparameter step was not finite"):
        trainer.step((X, Y))
    after = model_variables(model) + [v.numpy().copy() for v in trainer.adam.variables]
    assert np.all(np.isfinite(model.kernel.variance.numpy()))
    # q(u) and the kernel variance took their (finite) CAVI step; everything Adam touched is as
    # it was.
    adams = {id(v) for v in trainer.hyperparameter_variables}
    hyper_before = [b for b, v in zip(before, model.variables) if id(v) in adams]
    hyper_after = [a for a, v in zip(after, model.variables) if id(v) in adams]
    assert hyper_before
    for b, a in zip(hyper_before, hyper_after):
        np.testing.assert_array_equal(a, b)
    for b, a in zip(before[len(model.variables) :], after[len(model.variables) :]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.slow
def test_a_refused_batch_leaves_the_hyperparameters_and_adams_state_untouched(jit_compile):
    """Adam is applied whatever the batch and undone by a select (no conditional on a GPU): a
    batch refused for a bad label must still leave every variable and Adam's slots and iteration
    count bit-identical. A select that kept Adam's write would move the inducing points and
    Adam's iteration count here."""
    model, (X, Y) = make_problem(30, 3, num_inducing=5, seed=0, scheme="exact")
    trainer = ga.Trainer(model, 0.5, learning_rate=0.05, jit_compile=jit_compile)
    trainer.step((X, Y))
    trainer.step((X, Y))
    before = model_variables(model) + [v.numpy().copy() for v in trainer.adam.variables]
    bad = Y.copy()
    bad[0, 0] = 3  # a class the model does not have
    with pytest.raises(ga.InvalidDataError):
        trainer.step((X, bad))
    after = model_variables(model) + [v.numpy().copy() for v in trainer.adam.variables]
    for b, a in zip(before, after):
        np.testing.assert_array_equal(a, b)
    iterations = trainer.adam.iterations.numpy()
    trainer.step((X, Y))  # and the next valid step moves Adam's state on
    assert trainer.adam.iterations.numpy() == iterations + 1


def test_adams_guard_saves_the_slots_of_an_adam_not_yet_built():
    """The guard runs Adam and undoes it by a select, so it must save Adam's slots, which a fresh
    Adam creates only in its first apply_gradients: else a refused first step leaves NaN moments
    and every later step is refused."""
    variable = tf.Variable([1.0, 2.0], dtype=tf.float64)
    adam = tf_keras.optimizers.Adam(0.1)
    refused = ga.training._apply_if_finite(
        adam, tf.constant(1.0, tf.float64), [tf.constant([np.nan, 1.0], tf.float64)], [variable]
    )
    assert not refused
    np.testing.assert_array_equal(variable.numpy(), [1.0, 2.0])
    assert adam.iterations.numpy() == 0
    assert all(np.array_equal(slot.numpy(), [0.0, 0.0]) for slot in adam.variables[1:])
    assert ga.training._apply_if_finite(
        adam, tf.constant(1.0, tf.float64), [tf.constant([1.0, 1.0], tf.float64)], [variable]
    )
    assert np.all(variable.numpy() < [1.0, 2.0])


def test_adam_baseline_rolls_back_a_non_finite_write():
    _, (X, Y) = make_problem(20, 3, seed=0)
    method = ga.comparison.baselines.build_method(
        "softmax", gpflow.kernels.SquaredExponential(), X[:5], 3, 20
    )
    method.step(tf.constant(X), tf.constant(Y))
    method.adam.learning_rate.assign(np.inf)
    before = model_variables(method.model)
    method.step(tf.constant(X), tf.constant(Y))
    assert method.failed_steps == 1
    for b, a in zip(before, model_variables(method.model)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(tau=np.inf), r"^tau must be a finite number > 0, got inf"),
        (dict(tau=np.nan), r"^tau must be a finite number > 0, got nan"),
        (dict(tau=0.5), r"^tau must be ≥ 1"),
        (dict(kappa=np.nan), r"^kappa must be a finite number > 0 and ≤ 1.0, got nan"),
        (dict(kappa=0.5), r"^kappa must be in \(0.5, 1\]"),
    ],
)
def test_robbins_monro_refuses_schedules_that_train_nothing_or_overshoot(options, message):
    with pytest.raises(ValueError, match=message):
        ga.RobbinsMonro(**options)


@pytest.mark.parametrize("step_size", ["abc", None, np.nan, 0.0, 1.5])
def test_constant_step_size_names_the_argument(step_size):
    model, _ = make_problem(20, 3, num_inducing=5, seed=0)
    with pytest.raises(ValueError, match=r"^step_size must be a finite number > 0 and ≤ 1.0, got"):
        ga.CAVI(model, step_size=step_size)


class _Overshooting(ga.schedules.StepSizeSchedule):
    def __init__(self, value):
        self.value = value

    def __call__(self, iteration):
        return tf.constant(self.value, gpflow.config.default_float())


@pytest.mark.parametrize("value", [2.0, 0.0, np.nan])
@pytest.mark.parametrize("scheme", ["exact", "negative-multinomial"])
@pytest.mark.slow
def test_a_schedule_giving_rho_outside_0_1_is_refused_in_the_compiled_step(value, scheme):
    model, (X, Y) = make_problem(20, 3, num_inducing=5, seed=0, scheme=scheme)
    before = model_variables(model)
    message = r"^the step-size schedule gave a ρ outside \(0, 1\]"
    with pytest.raises(ValueError, match=message):
        ga.CAVI(model, _Overshooting(value)).step((X, Y))
    with pytest.raises(ValueError, match=message):
        ga.Trainer(model, _Overshooting(value)).step((X, Y))
    for b, a in zip(before, model_variables(model)):
        np.testing.assert_array_equal(a, b)


# -- data (point 4) -----------------------------------------------------------------------------


def test_huge_finite_features_are_standardised_not_zeroed():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.arange(40) % 2
    huge = X.copy()
    huge[:, 1] *= 1e300  # std overflowed to inf, and the column became all zeros
    plain = ga.datasets.from_arrays("plain", X, y, seed=0)
    scaled = ga.datasets.from_arrays("huge", huge, y, seed=0)
    np.testing.assert_allclose(scaled.X_train, plain.X_train, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(scaled.X_test, plain.X_test, rtol=1e-9, atol=1e-12)


def test_one_based_labels_are_refused_with_a_hint():
    X = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(
        ga.InvalidDataError,
        match=r"^one_based: no point has label 0; .*look 1-based \(1\.\.3\): "
        r"subtract 1",
    ):
        ga.datasets.from_arrays("one_based", X, np.arange(30) % 3 + 1)
    with pytest.raises(ga.InvalidDataError, match=r"^gap: no point has label 2; .*map the labels"):
        ga.datasets.from_arrays("gap", X, np.array([0, 1, 3] * 10))


def test_every_feature_constant_is_refused_by_name():
    with pytest.raises(
        ga.InvalidDataError, match=r"^flat: every feature is constant on the training split"
    ):
        ga.datasets.from_arrays("flat", np.ones((20, 3)), np.arange(20) % 2)
    with pytest.raises(ValueError, match=r"^initial_kernel: the median distance between the rows"):
        ga.initialisation.initial_kernel(np.ones((20, 3)))


def test_a_libsvm_index_0_is_refused_unless_the_file_is_declared_zero_based(tmp_path):
    path = tmp_path / "shifted.libsvm"
    path.write_text("1 0:0.5 1:1.0\n2 1:2.0 2:0.3\n1 0:0.1 2:1.5\n2 1:0.7\n" * 5)
    with pytest.raises(
        ga.InvalidDataError,
        match=r"feature index 0 found, but LIBSVM indices "
        r"start at 1",
    ):
        load_file(path)
    zero_based = load_file(path, zero_based=True)
    assert zero_based.X_train.shape[1] == 3
    one_based = tmp_path / "plain.libsvm"
    one_based.write_text("1 1:0.5 2:1.0\n2 2:2.0 3:0.3\n1 1:0.1 3:1.5\n2 2:0.7\n" * 5)
    # the same numbers, counted from 1, give the same dataset
    np.testing.assert_array_equal(load_file(one_based).X_train, zero_based.X_train)


def test_an_empty_npz_file_is_one_clear_error(tmp_path):
    path = tmp_path / "empty.npz"
    path.write_bytes(b"")
    with pytest.raises(
        ga.InvalidDataError,
        match=r"empty\.npz: not a readable \.npz file "
        r"\(empty file\)",
    ):
        load_file(path)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(iterations=2.5), r"^iterations must be an integer ≥ 1, got 2.5"),
        (dict(iterations=0), r"^iterations must be an integer ≥ 1, got 0"),
        (dict(batch_size=0), r"^batch_size must be an integer ≥ 1, got 0"),
        (dict(batch_size=-5), r"^batch_size must be an integer ≥ 1, got -5"),
    ],
)
def test_fit_names_bad_loop_options(options, message):
    model, (X, Y) = make_problem(20, 3, num_inducing=5, seed=0)
    with pytest.raises(ValueError, match=message):
        ga.fit(model, (X, Y), progress=False, **options)


@pytest.mark.slow
def test_ctrl_c_in_fit_hands_back_what_was_trained():
    model, (X, Y) = make_problem(40, 3, num_inducing=5, seed=0, scheme="exact")

    def interrupt_at_step_3(step, **_):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        ga.fit(
            model,
            (X, Y),
            iterations=10,
            batch_size=10,
            callback=interrupt_at_step_3,
            progress=False,
        )
    result = caught.value.fit_result
    assert int(result.trainer.iteration) == 3 and len(result.elbo) == 3
    # the trainer continues the same stream: 3 + 4 steps equal 7 uninterrupted ones
    ga.fit(model, (X, Y), iterations=4, batch_size=10, trainer=result.trainer, progress=False)
    straight, _ = make_problem(40, 3, num_inducing=5, seed=0, scheme="exact")
    ga.fit(straight, (X, Y), iterations=7, batch_size=10, progress=False)
    for a, b in zip(model.variables, straight.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


def test_ctrl_c_while_tensorflow_traces_the_step_is_still_ctrl_c(ctrl_c_while_tracing):
    """A slow machine traces long enough for Ctrl-C to land while the step is being traced; fit
    hands back what was trained (nothing yet), as a KeyboardInterrupt."""
    model, (X, Y) = make_problem(40, 3, num_inducing=5, seed=0, scheme="exact")
    before = [v.numpy().copy() for v in model.variables]
    with pytest.raises(KeyboardInterrupt) as caught:
        ga.fit(model, (X, Y), iterations=3, batch_size=10, progress=False)
    assert len(ctrl_c_while_tracing) == 3  # the interrupt landed while tracing, as intended
    result = caught.value.fit_result
    assert int(result.trainer.iteration) == 0 and len(result.elbo) == 0
    for variable, value in zip(model.variables, before):
        np.testing.assert_array_equal(variable.numpy(), value)


def test_ctrl_c_disguised_by_autograph_in_a_callback_is_still_ctrl_c(
    ctrl_c_while_autograph_converts,
):
    """Ctrl-C that lands while AutoGraph converts the user's compiled callback comes out of
    TensorFlow as an AssertionError; fit still hands it on as a KeyboardInterrupt, with what was
    trained."""
    model, (X, Y) = make_problem(40, 3, num_inducing=5, seed=0, scheme="exact")

    def doubled(x):
        return 2.0 * x

    @tf.function  # AutoGraph converts it and each call inside it
    def logged(elbo):
        return doubled(doubled(doubled(elbo)))

    with pytest.raises(KeyboardInterrupt) as caught:
        ga.fit(
            model,
            (X, Y),
            iterations=3,
            batch_size=10,
            progress=False,
            callback=lambda step, elbo, **_: logged(elbo),
        )
    assert len(ctrl_c_while_autograph_converts) == 3  # it landed in AutoGraph, as intended
    assert isinstance(caught.value.__cause__, AssertionError)
    result = caught.value.fit_result
    assert int(result.trainer.iteration) == 1 and len(result.elbo) == 1


def test_ctrl_c_that_comes_out_as_another_error_is_still_ctrl_c(ctrl_c_replaced_by_an_error):
    """Ctrl-C can leave TensorFlow as an unrelated error that keeps no trace of the interrupt (CI
    met one: exit code 1 and a traceback); fit knows it by the signal, and hands back what was
    trained as a KeyboardInterrupt. Python's own SIGINT handler is back in place afterwards."""
    import signal

    model, (X, Y) = make_problem(40, 3, num_inducing=5, seed=0, scheme="exact")

    def interrupt_at_step_2(step, **_):
        if step == 2:
            ctrl_c_replaced_by_an_error()

    with pytest.raises(KeyboardInterrupt) as caught:
        ga.fit(
            model, (X, Y), iterations=5, batch_size=10, callback=interrupt_at_step_2, progress=False
        )
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert caught.value.__cause__.__context__ is None  # no KeyboardInterrupt left in the chain
    assert int(caught.value.fit_result.trainer.iteration) == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    # the next fit starts afresh: an error without Ctrl-C is that error
    with pytest.raises(RuntimeError, match="the user's own"):
        ga.fit(
            model,
            (X, Y),
            iterations=2,
            batch_size=10,
            callback=lambda step, **_: (_ for _ in ()).throw(RuntimeError("the user's own")),
            progress=False,
        )


def test_ctrl_c_noted_in_the_main_thread_is_not_another_threads_error(python_sigint_handler):
    """SIGINT reaches only the main thread: once it is noted there, a fit in a worker thread that
    fails on its own error raises that error, not a KeyboardInterrupt with a FitResult."""
    import signal
    import threading

    from gpflow_augmented._interrupts import noting_interrupts

    model, (X, Y) = make_problem(40, 3, num_inducing=5, seed=0, scheme="exact")
    raised: list = []

    def worker():
        try:
            ga.fit(
                model,
                (X, Y),
                iterations=2,
                batch_size=10,
                callback=lambda step, **_: (_ for _ in ()).throw(RuntimeError("the worker's own")),
                progress=False,
            )
        except BaseException as error:  # noqa: BLE001 -- the test reads what the thread raised
            raised.append(error)

    with noting_interrupts():
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # it notes
        # raise_signal runs the handler before it returns; os.kill's handler runs between any two
        # bytecodes, a garbage collector's weakref callback included, which swallows the error.
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert len(raised) == 1 and type(raised[0]) is RuntimeError, raised


def test_a_sigint_handler_of_the_users_is_left_alone_by_fit(python_sigint_handler):
    import signal

    model, (X, Y) = make_problem(40, 3, num_inducing=5, seed=0, scheme="exact")
    received = []

    def users_handler(signum, frame):
        received.append(signum)

    signal.signal(signal.SIGINT, users_handler)
    seen = []
    ga.fit(
        model,
        (X, Y),
        iterations=2,
        batch_size=10,
        callback=lambda step, **_: seen.append(signal.getsignal(signal.SIGINT)),
        progress=False,
    )
    assert seen == [users_handler, users_handler]
    assert signal.getsignal(signal.SIGINT) is users_handler


def test_an_assertion_that_is_not_ctrl_c_passes_through_fit():
    model, (X, Y) = make_problem(40, 3, num_inducing=5, seed=0, scheme="exact")

    def fail(step, **_):
        try:
            raise ValueError("the user's own error")
        except ValueError:
            raise AssertionError("the user's own assertion")

    with pytest.raises(AssertionError, match="the user's own assertion"):
        ga.fit(model, (X, Y), iterations=3, batch_size=10, callback=fail, progress=False)


# -- messages that name the problem -------------------------------------------------------------


def test_string_labels_in_a_step_are_named():
    model, (X, _) = make_problem(4, 3, num_inducing=3, seed=0)
    with pytest.raises(
        ga.InvalidDataError,
        match=r"^labels must be integers in 0\.\.2 "
        r"\(num_classes=3\), got dtype string",
    ):
        ga.CAVI(model).step((X, np.array([["a"], ["b"], ["a"], ["c"]])))


@pytest.mark.parametrize(
    "Z, message",
    [
        (np.full((3, 1), np.nan), r"^inducing points Z must be finite numbers"),
        (
            np.zeros((0, 1)),
            r"^inducing points Z must be a 2-D array \[M, D\] with M ≥ 1, got shape",
        ),
        (np.zeros(3), r"^inducing points Z must be a 2-D array"),
    ],
)
def test_bad_inducing_points_are_named(Z, message):
    with pytest.raises(ValueError, match=message):
        ga.LogisticSoftmaxSVGP(gpflow.kernels.SquaredExponential(), Z, 3)


@pytest.mark.slow
def test_inputs_whose_square_overflows_are_refused_not_trained_on():
    """1e200 passes a finiteness check, but every squared distance is inf: unchecked, the step
    would be taken (with K_nm = 0) without a word."""
    model, (X, Y) = make_problem(20, 3, num_inducing=5, seed=0, scheme="exact")
    before = model_variables(model)
    huge = np.full_like(X, 1e200)
    for run in (
        lambda: ga.CAVI(model).step((huge, Y)),
        lambda: ga.Trainer(model).step((huge, Y)),
        lambda: ga.fit(model, (huge, Y), iterations=1, progress=False),
    ):
        with pytest.raises(ga.InvalidDataError, match=r"^X has values whose square overflows"):
            run()
    for b, a in zip(before, model_variables(model)):
        np.testing.assert_array_equal(a, b)


def test_gibbs_seed_is_checked():
    d = ga.datasets.load_dataset("wine")
    sampler = ga.sampling.GibbsSampler(
        (d.X_train[:30], d.Y_train[:30]), gpflow.kernels.SquaredExponential(), 3
    )
    with pytest.raises(ValueError, match=r"^seed must be an integer ≥ 0, got -1"):
        sampler.sample(5, seed=-1)


def test_soft_rows_with_a_class_subset_are_an_invalid_data_error():
    """The refusal is raised while the step is traced; it must reach the user as itself, not
    wrapped in TensorFlow's StagingError, so that ``except InvalidDataError`` catches it."""
    model, (X, Y) = make_problem(20, 4, num_inducing=5, seed=0)
    before = model_variables(model)
    soft = np.eye(4)[Y[:, 0]] * 0.7 + 0.075
    with pytest.raises(
        ga.InvalidDataError,
        match=r"^class subsets need integer labels \[N, 1\], "
        r"not rows of class probabilities",
    ):
        ga.CAVI(model, class_subset_size=2).step((X, soft))
    for b, a in zip(before, model_variables(model)):
        np.testing.assert_array_equal(a, b)


def test_fit_with_another_models_trainer_names_the_trainer():
    model, data = make_problem(20, 3, num_inducing=5, seed=0)
    other, _ = make_problem(20, 3, num_inducing=5, seed=1)
    before = model_variables(model)
    with pytest.raises(
        ValueError,
        match=r"^the trainer passed to fit trains another "
        r"LogisticSoftmaxSVGP object, not this model",
    ):
        ga.fit(model, data, iterations=1, trainer=ga.Trainer(other), progress=False)
    for b, a in zip(before, model_variables(model)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_the_bound_certificate_reads_soft_rows_and_refuses_fractional_labels():
    """Soft rows are read as soft and fractional labels refused: cast to int64, soft rows would
    become class 0 and 1.9 class 1."""
    model, (X, Y) = make_problem(30, 3, num_inducing=6, seed=2, scheme="exact")
    ga.CAVI(model).step((X, Y))
    soft = 0.6 * np.eye(3)[Y[:, 0]] + 0.4 * np.eye(3)[(Y[:, 0] + 1) % 3]
    certificate = ga.bound_certificate(model, (X, soft))
    np.testing.assert_allclose(certificate.exact, float(model.exact_elbo((X, soft))), rtol=1e-10)
    assert certificate.augmented < certificate.exact
    fractional = Y.astype(np.float64)
    fractional[3, 0] = 1.9
    with pytest.raises(
        ga.InvalidDataError,
        match=r"^Y must hold integer class labels 0\.\.C-1, "
        r"found non-integer values",
    ):
        ga.bound_certificate(model, (X, fractional))


@pytest.mark.parametrize("scheme", ["exact", "gamma-poisson"])
def test_the_certificate_of_soft_rows_is_the_mix_of_the_hard_labellings_certificates(scheme):
    """Every bound is linear in the label rows, so rows 0.7 e_y + 0.3 e_(y+1) give 0.7 × the
    certificate of labels y plus 0.3 × that of labels y + 1, at the same q(u); the quadrature
    error, an absolute value of such a difference, is at most the same mix."""
    model, (X, Y) = make_problem(40, 3, num_inducing=6, seed=3, scheme=scheme)
    ga.CAVI(model).step((X, Y))
    shifted = (Y + 1) % 3
    soft = 0.7 * np.eye(3)[Y[:, 0]] + 0.3 * np.eye(3)[shifted[:, 0]]
    mixed, first, second = (
        ga.bound_certificate(model, (X, labels)) for labels in (soft, Y, shifted)
    )
    for field in ("augmented", "exact", "gap"):
        expected = 0.7 * getattr(first, field) + 0.3 * getattr(second, field)
        np.testing.assert_allclose(getattr(mixed, field), expected, rtol=1e-10, err_msg=field)
    assert mixed.quadrature_error <= (
        0.7 * first.quadrature_error + 0.3 * second.quadrature_error + 1e-12
    )


def test_an_index_list_as_is_test_is_named_as_such():
    """An .npz whose is_test lists the test rows' indices is told so, not that the mask marks
    too few rows."""
    X = np.random.default_rng(0).normal(size=(60, 2))
    y = np.arange(60) % 3
    with pytest.raises(ga.InvalidDataError, match=r"one entry per row \(60\), got an array of 3 "):
        ga.datasets.from_arrays("d", X, y, np.array([4, 17, 42]))
    with pytest.raises(ga.InvalidDataError, match="an index list"):
        ga.datasets.from_arrays("d", X, y, np.array([4, 17, 42]))
    with pytest.raises(ga.InvalidDataError, match="got an array of 59 bool entries"):
        ga.datasets.from_arrays("d", X, y, np.arange(59) < 10)
    # A mask of 0s and 1s is a mask.
    ones = (np.arange(60) < 12).astype(int)
    assert len(ga.datasets.from_arrays("d", X, y, ones).X_test) == 12


def test_lengthscales_that_do_not_match_the_features_are_named():
    """A kernel with 3 lengthscales on 2 features is named before the first step (unchecked, it
    ends in TensorFlow's "Dimensions must be equal … RealDiv")."""
    Z = np.zeros((4, 2))
    kernel = gpflow.kernels.SquaredExponential(lengthscales=np.ones(3))
    with pytest.raises(
        ValueError, match="SquaredExponential kernel has 3 lengthscales, but the inputs have 2"
    ):
        ga.LogisticSoftmaxSVGP(kernel, Z, 3)
    shared = gpflow.kernels.SharedIndependent(gpflow.kernels.Matern32(lengthscales=np.ones(5)), 3)
    with pytest.raises(ValueError, match="Matern32 kernel has 5 lengthscales"):
        ga.LogisticSoftmaxSVGP(shared, Z, 3)
    # One lengthscale for all, one per feature, and one per active dimension are fine.
    for lengthscales, active in ((1.0, None), (np.ones(2), None), (np.ones(1), [1])):
        kernel = gpflow.kernels.SquaredExponential(lengthscales=lengthscales, active_dims=active)
        ga.LogisticSoftmaxSVGP(kernel, Z, 3)
