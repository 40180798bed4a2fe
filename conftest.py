import logging
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# scikit-learn's estimator checks include one that its array-API dispatch leaves NumPy input's
# results unchanged; it runs only where SciPy was imported with its array API enabled.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

# TensorFlow prints its start-up lines (oneDNN, CUDA) before any log level applies; the test run
# keeps them out of its output as the command-line tool does (gpflow_augmented._quiet).
_stderr, _null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
os.dup2(_null, 2)
try:
    import gpflow  # noqa: F401  (loaded here, with TensorFlow, while fd 2 is closed)
    import tensorflow as tf

    import gpflow_augmented  # noqa: F401
finally:
    os.dup2(_stderr, 2)
    os.close(_stderr)
    os.close(_null)

# check_shapes imports TensorFlow: it comes after TensorFlow was loaded quietly above.
from check_shapes import (  # noqa: E402
    ShapeCheckingState,
    get_enable_check_shapes,
    set_enable_check_shapes,
)


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


@pytest.fixture
def shapes_checked_while_tracing():
    """Check shapes also while tracing tf.functions, not only eagerly (the library default). It
    doubles the cost of tracing, so the tests that trace every kind of model's compiled step ask
    for it; the others run with the default."""
    previous = get_enable_check_shapes()
    set_enable_check_shapes(ShapeCheckingState.ENABLED)
    try:
        yield
    finally:
        set_enable_check_shapes(previous)


@pytest.fixture(autouse=True)
def _seed():
    tf.random.set_seed(20261122)
    np.random.seed(20261122)


def pytest_addoption(parser):
    parser.addoption(
        "--slow",
        action="store_true",
        help="run every test: also the integration tier and the tests marked slow "
        "(CI's test command)",
    )


def pytest_collection_modifyitems(config, items):
    """The default run is the unit tier: the tests marked ``integration`` (whole programs: the
    command line, subprocesses, servers, the samplers against each other, scikit-learn's
    estimator checks) or ``slow`` (benchmark-style runs, the notebooks) are deselected, not
    skipped. ``--slow`` runs all but the ``jax`` tests (the HLO check by another XLA client,
    which needs an environment of its own); ``-m`` picks a tier (``-m integration``, ``-m jax``)."""
    if config.getoption("markexpr"):
        return
    tiers = ("jax",) if config.getoption("--slow") else ("jax", "integration", "slow")
    later = [item for item in items if any(item.get_closest_marker(t) for t in tiers)]
    if later:
        config.hook.pytest_deselected(items=later)
        items[:] = [item for item in items if not any(item.get_closest_marker(t) for t in tiers)]


@pytest.fixture
def ctrl_c_while_autograph_converts(monkeypatch):
    """Ctrl-C landing where it lands on a slow machine while AutoGraph converts a function (the
    user's own, e.g. a compiled callback; the package's steps are traced without AutoGraph):
    after a source-mapping context has pushed itself and before its ``__exit__`` is armed. The
    enclosing context then finds the stack unbalanced and raises ``AssertionError('Concurrent
    access?')`` with the interrupt as its context (TensorFlow 2.x, ``tf_stack``). Interrupts the
    third such entry after the fixture starts; the test's own thread stack is restored
    afterwards."""
    from tensorflow.python.util import tf_stack

    key = tf_stack._get_thread_key()
    saved = list(tf_stack._source_mapper_stacks[key])
    original = tf_stack.StackTraceMapper.update
    entries = []

    def interrupted_update(self):
        entries.append(self)
        if len(entries) == 3:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(tf_stack.StackTraceMapper, "update", interrupted_update)
    yield entries
    tf_stack._source_mapper_stacks[key][:] = saved


@pytest.fixture
def ctrl_c_while_tracing(monkeypatch):
    """Ctrl-C landing while TensorFlow traces a step into a graph, as on a slow machine: at the
    third operation created in a function graph after the fixture starts. Yields the operations'
    types seen until then."""
    from tensorflow.python.framework import func_graph

    original = func_graph.FuncGraph._create_op_internal
    created = []

    def interrupted(self, op_type, *args, **kwargs):
        created.append(op_type)
        if len(created) == 3:
            raise KeyboardInterrupt
        return original(self, op_type, *args, **kwargs)

    monkeypatch.setattr(func_graph.FuncGraph, "_create_op_internal", interrupted)
    yield created


@pytest.fixture
def python_sigint_handler():
    """Python's own SIGINT handler in place for the test, as at a terminal: a shell's background job
    (`.ci/run &`) inherits SIGINT ignored, and a test runner's worker may have another handler."""
    import signal

    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, saved)


@pytest.fixture
def ctrl_c_replaced_by_an_error(python_sigint_handler):
    """A function that sends this process SIGINT, lets the KeyboardInterrupt be swallowed, then
    raises an unrelated error with no trace of it (no cause, no context): Ctrl-C as it may leave
    TensorFlow, with Python's own SIGINT handler in place."""
    import signal

    def replaced(message: str = "an error in the interrupt's place") -> None:
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass
        raise RuntimeError(message)

    return replaced
