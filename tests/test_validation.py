"""Bad input: a clear error naming the problem, raised before anything changes."""

import json

import gpflow
import numpy as np
import pytest

import gpflow_augmented as ga
from helpers import make_problem, model_variables


def bad_batches(X, Y):
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    X_inf = X.copy()
    X_inf[0, 0] = np.inf
    return {
        "label equal to C": (X, np.where(np.arange(len(Y))[:, None] == 2, 3, Y), "labels must"),
        "negative label": (X, np.where(np.arange(len(Y))[:, None] == 0, -1, Y), "labels must"),
        "non-integer label": (X, Y + 0.5, "integer"),
        "NaN in X": (X_nan, Y, "NaN or inf"),
        "inf in X": (X_inf, Y, "NaN or inf"),
        "Y not a column": (X, Y[:, 0], "column"),
        "X wrong width": (X[:, :1], Y, "columns"),
        "rows differ": (X[:-1], Y, "rows"),
        "empty batch": (X[:0], Y[:0], "empty"),
    }


@pytest.mark.parametrize("case", list(bad_batches(np.zeros((5, 2)), np.zeros((5, 1), int))))
@pytest.mark.slow
def test_bad_batch_raises_and_changes_nothing(case):
    model, (X, Y) = make_problem(20, 3, num_inducing=5, seed=0)
    optimizer = ga.CAVI(model)
    optimizer.step((X, Y))  # a good step first: the state to protect is not the initial one
    before = model_variables(model) + [optimizer.iteration.numpy()]
    Xb, Yb, message = bad_batches(X, Y)[case]
    with pytest.raises(ga.InvalidDataError, match=message):
        optimizer.step((Xb, Yb))
    with pytest.raises(ga.InvalidDataError, match=message):
        model.elbo((Xb, Yb))
    with pytest.raises(ga.InvalidDataError, match=message):
        ga.fit(model, (Xb, Yb), iterations=1, progress=False)
    after = model_variables(model) + [optimizer.iteration.numpy()]
    for b, a in zip(before, after):
        np.testing.assert_array_equal(a, b)


def test_device_side_check_catches_labels_that_pass_static_checks():
    # Under tf.function the labels' values are only known on the device: the step itself must
    # refuse them (this is the path a compiled training loop takes).
    model, (X, Y) = make_problem(20, 3, num_inducing=5, seed=0)
    optimizer = ga.CAVI(model)
    before = model_variables(model)
    status = optimizer._step_fn(X, np.full_like(Y, 7))[1]
    assert int(status) != 0
    for b, a in zip(before, model_variables(model)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("num_classes", [1, 0, 2.5, True, float("nan"), None, "3"])
def test_fewer_than_two_classes_rejected(num_classes):
    with pytest.raises(ValueError, match="num_classes"):
        ga.LogisticSoftmaxSVGP(gpflow.kernels.SquaredExponential(), np.zeros((3, 1)), num_classes)
    with pytest.raises(ValueError, match="num_classes"):
        ga.LogisticSoftmax(num_classes)


def test_bad_constructor_arguments():
    k, Z = gpflow.kernels.SquaredExponential(), np.zeros((3, 1))
    with pytest.raises(ValueError, match="scheme"):
        ga.LogisticSoftmaxSVGP(k, Z, 3, scheme="laplace")
    with pytest.raises(ValueError, match="kernels"):
        ga.LogisticSoftmaxSVGP(gpflow.kernels.SeparateIndependent([k, k]), Z, 3)
    with pytest.raises(ValueError, match="step_size"):
        ga.CAVI(ga.LogisticSoftmaxSVGP(k, Z, 3), step_size=1.5)
    with pytest.raises(ValueError, match="exact bound"):
        ga.CAVI(
            ga.LogisticSoftmaxSVGP(k, Z, 3, scheme="negative-multinomial"), warm_start_iterations=5
        )
    with pytest.raises(ValueError, match="warm_start_iterations"):
        ga.CAVI(ga.LogisticSoftmaxSVGP(k, Z, 3, scheme="exact"), warm_start_iterations=-1)


@pytest.mark.slow
def test_failed_cholesky_is_a_clear_error_and_keeps_parameters():
    model, (X, Y) = make_problem(20, 3, num_inducing=5, seed=0)
    optimizer = ga.CAVI(model)
    optimizer.step((X, Y))
    q_mu, q_sqrt = model.q_mu.numpy(), model.q_sqrt.numpy()
    model.inducing_variable.Z.assign(
        np.zeros_like(model.inducing_variable.Z.numpy())
    )  # singular Kmm
    gpflow.config.set_default_jitter(0.0)
    try:
        for jit in (False, True):
            with pytest.raises(ga.NumericalError, match="unchanged"):
                ga.CAVI(model, jit_compile=jit).step((X, Y))
    finally:
        gpflow.config.set_default_jitter(1e-6)
    np.testing.assert_array_equal(model.q_mu.numpy(), q_mu)
    np.testing.assert_array_equal(model.q_sqrt.numpy(), q_sqrt)


@pytest.mark.parametrize(
    "text, message",
    [
        (None, "TF_CONFIG is not set"),
        ("{cluster", "TF_CONFIG is not JSON"),
        ('{"task": {"type": "worker", "index": 0}}', 'no "cluster"'),
        ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0}}', "job 'ps'"),
        ('{"cluster": {"worker": ["host"]}, "task": {"type": "worker", "index": 0}}', "host:port"),
        (
            '{"cluster": {"worker": ["a:1", "a:1"]}, "task": {"type": "worker", "index": 0}}',
            "twice",
        ),
        (
            '{"cluster": {"worker": ["a:1"]}, "task": {"type": "evaluator", "index": 0}}',
            "task must",
        ),
        (
            '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}',
            "0 to 1",
        ),
        ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker"}}', "0 to 1"),
    ],
)
def test_a_bad_tf_config_gets_one_clear_error_before_any_strategy(text, message, monkeypatch):
    with pytest.raises(ValueError, match=message):
        ga.distributed.check_tf_config(text)
    if text is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", text)
    with pytest.raises(ValueError, match=message):
        ga.distributed.multi_worker_strategy()


def test_a_good_tf_config_is_read():
    text = (
        '{"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, "task": {"type": "worker", "index": 0}}'
    )
    assert ga.distributed.check_tf_config(text)["cluster"]["chief"] == ["a:1"]


def test_exactly_one_task_of_a_cluster_is_the_chief():
    """With a "chief" job, only its task acts as the chief in the multi-worker example, not
    worker 0 too (two chiefs would both write the checkpoint, and crash at the first save)."""

    def chief(cluster, task_type, index):
        text = json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})
        return ga.distributed.is_chief(ga.distributed.check_tf_config(text))

    with_chief = {"chief": ["a:1"], "worker": ["b:2", "c:3"]}
    assert [chief(with_chief, *task) for task in (("chief", 0), ("worker", 0), ("worker", 1))] == [
        True,
        False,
        False,
    ]
    workers = {"worker": ["b:2", "c:3"]}
    assert [chief(workers, "worker", i) for i in (0, 1)] == [True, False]


def test_a_taken_port_is_named_before_tensorflow_starts_its_server(monkeypatch):
    """A worker whose port another process holds is told which port, not TensorFlow's 20-line
    "Could not start gRPC server"."""
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        config = {
            "cluster": {"worker": [f"127.0.0.1:{port}", "127.0.0.1:1"]},
            "task": {"type": "worker", "index": 0},
        }
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))
        with pytest.raises(
            ValueError, match=f"listen on 127.0.0.1:{port}, but port {port} is in use"
        ):
            ga.distributed.multi_worker_strategy()
