"""What several test modules share: seeded problems for every kind of model, and the checks and
deliberately broken variants more than one module uses. (conftest.py holds only fixtures.)"""

import gpflow
import numpy as np
import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.likelihoods.logistic_softmax import numpy_sigmoid
from gpflow_augmented.sampling.gibbs import GibbsSampler

# Largest |estimate - truth| / standard error accepted. Every check is seeded; at 4.5 a correct
# sampler fails one of ~100 Gaussian comparisons with probability < 1e-3.
Z_TOLERANCE = 4.5
# float64 round-off of an ELBO of O(N) accumulated over O(N·M²) operations.
MONOTONE_RTOL = 1e-9

# The kinds of model the optimizer and the trainer serve: the multi-class model under each of its
# three schemes, with learned class weights, with class subsets, and the binary model.
MODEL_KINDS = (
    "negative-multinomial",
    "gamma-poisson",
    "exact",
    "exact-weighted",
    "subsets",
    "binary",
)


def make_problem(
    num_data,
    num_classes,
    input_dim=2,
    num_inducing=None,
    seed=0,
    lengthscale=1.0,
    variance=1.0,
    scheme="negative-multinomial",
    whiten=True,
    kernel=None,
    mean_function=None,
    class_weights=False,
):
    """Random clustered data and a model with inducing points on a subset of the inputs."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=2.0, size=(num_classes, input_dim))
    y = rng.integers(0, num_classes, num_data)
    X = centres[y] + rng.normal(size=(num_data, input_dim))
    M = num_data if num_inducing is None else num_inducing
    Z = X[rng.choice(num_data, M, replace=False)].copy()
    if kernel is None:
        kernel = gpflow.kernels.SquaredExponential(variance=variance, lengthscales=lengthscale)
    model = ga.LogisticSoftmaxSVGP(
        kernel,
        Z,
        num_classes,
        num_data=num_data,
        scheme=scheme,
        whiten=whiten,
        mean_function=mean_function,
        likelihood=ga.LogisticSoftmax(
            num_classes, class_weights=class_weights, augmentation=scheme_augmentation(scheme)
        ),
    )
    return model, (X, y[:, None])


def scheme_augmentation(scheme):
    """The likelihood's augmentation that a LogisticSoftmaxSVGP of this scheme needs."""
    if scheme == "gamma-poisson":
        return ga.likelihoods.MeanFieldGammaPoisson()
    return ga.likelihoods.NegativeMultinomial()


def binary_problem(num_data, num_inducing, seed=0, lengthscale=1.0, variance=1.0, whiten=True):
    """Two overlapping clusters with noisy labels in {0, 1}."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, num_data)
    X = np.where(y[:, None] == 1, 1.0, -1.0) + rng.normal(size=(num_data, 2))
    Z = X[rng.choice(num_data, num_inducing, replace=False)].copy()
    kernel = gpflow.kernels.SquaredExponential(variance=variance, lengthscales=lengthscale)
    return ga.BinaryLogisticSVGP(kernel, Z, num_data=num_data, whiten=whiten), (X, y[:, None])


def weighted_problem(scheme):
    """Unbalanced classes, so that the optimal class weights are far from 1."""
    model, (X, y) = make_problem(
        60, 3, num_inducing=12, seed=5, variance=2.0, scheme=scheme, class_weights=True
    )
    y = np.where(np.random.default_rng(0).uniform(size=y.shape) < 0.5, 0, y)
    return model, (X, y)


def model_of_kind(kind, num_data=60, num_inducing=10, seed=3, lengthscale=1.0):
    """(model, data, the optimizer options the kind needs) for one of :data:`MODEL_KINDS`."""
    if kind == "binary":
        model, data = binary_problem(num_data, num_inducing, seed=seed, lengthscale=lengthscale)
        return model, data, {}
    if kind == "subsets":
        model, data = make_problem(
            num_data, 7, num_inducing=num_inducing, seed=seed, lengthscale=lengthscale
        )
        return model, data, {"class_subset_size": 3}
    weighted = kind == "exact-weighted"
    model, data = make_problem(
        num_data,
        3,
        num_inducing=num_inducing,
        seed=seed,
        lengthscale=lengthscale,
        scheme="exact" if weighted else kind,
        class_weights=weighted,
    )
    return model, data, {}


def wine():
    return ga.datasets.load_dataset("wine", test_fraction=0.3, seed=0)


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


def assert_monotone(elbos):
    elbos = np.asarray(elbos)
    drops = elbos[:-1] - elbos[1:]
    assert np.all(drops <= MONOTONE_RTOL * np.abs(elbos[1:])), f"ELBO fell by {drops.max():.3e}"


def cavi_trace(model, data, sweeps=50, compile=False):
    """The ELBO before each of ``sweeps`` full-batch CAVI steps, and after the last."""
    optimizer = ga.CAVI(model, compile=compile)
    elbos = [float(optimizer.step(data)) for _ in range(sweeps)]
    return elbos + [float(model.elbo(data))]


class PrintedRateLogisticSoftmax(ga.LogisticSoftmax):
    """The paper's printed complete conditional n | f, λ ~ Po(λσ(f)): wrong, and must be caught."""

    def _count_means(self, F, rates):
        return rates * numpy_sigmoid(F)


def printed_rate_gibbs(data, kernel, num_classes, **options):
    """A Gibbs sampler on :class:`PrintedRateLogisticSoftmax`'s conditionals."""
    likelihood = PrintedRateLogisticSoftmax(num_classes)
    return GibbsSampler(data, kernel, num_classes, likelihood=likelihood, **options)


def factor_cavity(mean, variance, sites, i, k, y):
    """The cavity of EP factor (i, k) of an untied Heaviside model, in numpy: q's marginals of
    f_y and f_k at point i without the factor's two rank-one sites (``sites``: the model's first
    four site parameters as arrays). Returns (m_y, τ_y, m_k, τ_k)."""
    tau_y = 1 / (1 / variance[i, y] - sites[0][i, k])
    m_y = tau_y * (mean[i, y] / variance[i, y] - sites[1][i, k])
    tau_k = 1 / (1 / variance[i, k] - sites[2][i, k])
    m_k = tau_k * (mean[i, k] / variance[i, k] - sites[3][i, k])
    return m_y, tau_y, m_k, tau_k


def separable_problem(num_classes=5, num_data=100, num_inducing=10, seed=1, scheme="exact"):
    """Well-separated clusters: the logistic-softmax ELBO wants a kernel variance far above 1.
    Lengthscales are fixed, so the variance and q(u) are all there is to learn."""
    rng = np.random.default_rng(seed)
    angles = 2 * np.pi * np.arange(num_classes) / num_classes
    centres = 6.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    y = rng.integers(0, num_classes, num_data)
    X = centres[y] + rng.normal(scale=0.7, size=(num_data, 2))
    Z = X[rng.choice(num_data, num_inducing, replace=False)].copy()
    kernel = gpflow.kernels.SquaredExponential(variance=1.0, lengthscales=3.0)
    gpflow.set_trainable(kernel.lengthscales, False)
    model = ga.LogisticSoftmaxSVGP(kernel, Z, num_classes, num_data=num_data, scheme=scheme)
    return model, (X, y[:, None])


def cavi_proposal(cavi, X, Y, step_size, subset=None):
    """(q_mu, q_sqrt) after one step of ``cavi`` of size ``step_size`` on the batch (of the
    ClassSubset given), and the batch ELBO before it, nothing validated or assigned: the natural
    step on the model's bound's sites."""
    from gpflow_augmented.class_subsets import as_class_subset
    from gpflow_augmented.updates import batch_statistics

    model = cavi.model
    X = tf.convert_to_tensor(X, dtype=gpflow.default_float())
    geometry = model.batch_geometry(X, as_class_subset(subset, model.num_classes), Y)
    sites = model.bound.sites(model.likelihood, geometry, Y, cavi._in_warm_start())
    scale = cavi._batch_scale(X)
    statistics, _, _ = batch_statistics(geometry, *sites, scale=scale)
    return cavi._natural_step(geometry, statistics, step_size, scale)


#: Long runs in the README's and the docstrings' examples, shortened to what shows the code runs.
SHORTER = [
    ("iterations=1000", "iterations=3"),
    (".take(1000)", ".take(3)"),
    (".take(100)", ".take(2)"),
    ("range(1000)", "range(3)"),
    ("GPClassifier()", "GPClassifier(iterations=3)"),
    ("inducing_points(X, 100)", "inducing_points(X, 20)"),
]


def shortened(code: str) -> str:
    """An example's code with its long runs shortened (:data:`SHORTER`)."""
    for long, short in SHORTER:
        code = code.replace(long, short)
    return code


def lsm_model(X, num_classes, num_inducing):
    """The default model (`lsm`) on ``X``: SE-ARD from the median distance, k-means inducing
    points, a constant prior mean."""
    return ga.LogisticSoftmaxSVGP(
        ga.initial_kernel(X),
        ga.inducing_points(X, num_inducing, seed=0),
        num_classes,
        num_data=len(X),
        mean_function=gpflow.mean_functions.Constant(),
    )
