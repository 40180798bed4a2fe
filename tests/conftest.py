import logging
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# TensorFlow prints its start-up lines (oneDNN, CUDA) before any log level applies; the test run
# keeps them out of its output as the command-line tool does (gpflow_augmented._quiet).
_stderr, _null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
os.dup2(_null, 2)
try:
    import gpflow
    import tensorflow as tf

    import gpflow_augmented as ga
finally:
    os.dup2(_stderr, 2)
    os.close(_stderr)
    os.close(_null)

import numpy as np
import pytest
from check_shapes import ShapeCheckingState, set_enable_check_shapes

# Check shapes also while tracing tf.functions (the library default checks eagerly only).
set_enable_check_shapes(ShapeCheckingState.ENABLED)


class _AutoGraphWarnings(logging.Handler):
    """Collects TensorFlow's "AutoGraph could not transform" warnings: a function AutoGraph
    cannot convert runs as-is, so its Python control flow is frozen at trace time."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "AutoGraph could not transform" in message:
            self.messages.append(message.splitlines()[0])


@pytest.fixture(autouse=True)
def _no_autograph_warnings(request):
    """GPflow's guard: a test fails if anything it compiled fell back from AutoGraph (opt out
    with ``@pytest.mark.allow_autograph_warnings``)."""
    handler = _AutoGraphWarnings()
    logger = tf.get_logger()
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
    if request.node.get_closest_marker("allow_autograph_warnings") is None:
        assert not handler.messages, handler.messages


@pytest.fixture(autouse=True)
def _seed():
    tf.random.set_seed(20261122)
    np.random.seed(20261122)


def make_problem(num_data, num_classes, input_dim=2, num_inducing=None, seed=0, lengthscale=1.0,
                 variance=1.0, scheme="negative-multinomial", whiten=True, kernel=None, mean_function=None,
                 class_weights=False):
    """Random clustered data and a model with inducing points on a subset of the inputs."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=2.0, size=(num_classes, input_dim))
    y = rng.integers(0, num_classes, num_data)
    X = centres[y] + rng.normal(size=(num_data, input_dim))
    M = num_data if num_inducing is None else num_inducing
    Z = X[rng.choice(num_data, M, replace=False)].copy()
    if kernel is None:
        kernel = gpflow.kernels.SquaredExponential(variance=variance, lengthscales=lengthscale)
    model = ga.LogisticSoftmaxSVGP(kernel, Z, num_classes, num_data=num_data, scheme=scheme,
                                   whiten=whiten, mean_function=mean_function,
                                   likelihood=ga.LogisticSoftmax(num_classes,
                                                                 class_weights=class_weights))
    return model, (X, y[:, None])


def wine():
    d = ga.datasets.load_dataset("wine", test_fraction=0.3, seed=0)
    return d


def model_variables(model):
    return [v.numpy().copy() for v in model.variables]


def variational_gradient_norm(model, data):
    """The largest |∂ELBO/∂θ| over q(u)'s unconstrained parameters: zero at the CAVI fixed point."""
    data = (tf.constant(data[0]), tf.constant(data[1]))
    variables = [model.q_mu.unconstrained_variable, model.q_sqrt.unconstrained_variable]
    with tf.GradientTape() as tape:
        tape.watch(variables)
        elbo = model.elbo(data)
    return max(float(tf.reduce_max(tf.abs(g))) for g in tape.gradient(elbo, variables))

