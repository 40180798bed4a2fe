r"""
The logistic-softmax likelihood's exact Gaussian expectation and the exact-bound sites.

The exact expectation
=====================
For independent f_c ~ N(m_c, v_c) (the marginals of a mean-field q(u)) the expected log-likelihood
is ``E log σ(f_y) - E log Z`` with Z = Σ_c σ(f_c). The first term is one-dimensional and
Gauss–Hermite integrates it. The second is C-dimensional, but it factorises once the logarithm is
written as a Laplace transform (Frullani's integral, with t = eˢ):

    log x = ∫ (exp(-eˢ) - exp(-x eˢ)) ds        (x > 0, s over the real line)

so with κ = E[Z] (Gauss–Hermite, class by class)

    E log Z = log κ + ∫ (exp(-eˢ) - Π_c φ_c(eˢ / κ)) ds,    φ_c(t) = E exp(-t σ(f_c)),

and every φ_c is again a one-dimensional Gauss–Hermite integral. The s-integral is a smooth
integrand that decays double-exponentially to the right and like e^{2s} to the left (the first
order cancels because Z/κ has mean one), so the trapezoidal rule on a fixed grid is spectrally
accurate. Nothing is random: the expectation is a smooth deterministic function of (m, v), so an
optimiser converges to one point and its derivatives are exact derivatives of one objective.

Its accuracy with the defaults (20 Hermite nodes, grid step 1.0 on [-8, 25]) is measured in
docs/method.md, "An accurate, deterministic expectation" (``tools/expectation_accuracy.py``):
about 1e-4 nats a point, all of it the s-grid's while the marginals' standard deviations are below
2 (the step sets it: exp(-eˢ) is bounded only for |Im s| < π/2), the Hermite nodes' above.

The exact-bound sites. By Bonnet's and Price's theorems the gradient of E log p(y|f) with respect to
the marginal mean is g = E[∂ log p/∂f] and with respect to the variance ½E[∂² log p/∂f²]. A
natural-gradient (conjugate-computation, Khan & Lin 2017) step on the exact ELBO is therefore the
conjugate step with the augmented coefficients replaced by

    quadratic = -2 ∂ℓ/∂v,    linear = ∂ℓ/∂m + quadratic · m,

taken here as exact derivatives of the expectation above, so that the fixed point of the step is a
stationary point of that very objective. ``quadratic`` can be negative (log Z is not convex in
f_c where σ(f_c) < ½); the step then backs off its size until the new precision is positive
definite (:mod:`~gpflow_augmented.updates`), which leaves the fixed point where it is.
"""

from typing import Optional, Tuple

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes
from gpflow.quadrature import hermgauss


__all__ = [
    "DEFAULT_NUM_HERMITE",
    "exact_sites",
    "expected_log_logistic_softmax",
    "expected_log_normaliser",
    "expected_log_sigmoid",
    "log_logistic_softmax",
    "sites_from_derivatives",
    "subset_site_weights",
    "S_MIN",
    "S_MAX",
    "S_STEP",
]


def log_logistic_softmax(F: tf.Tensor, log_weights: Optional[tf.Tensor] = None) -> tf.Tensor:
    """log p(y = k | f) for every k: log θ_k σ(f_k) - log Σ_c θ_c σ(f_c), stable for any finite f
    (θ = 1 if ``log_weights`` [C] is ``None``). [..., C]"""
    log_weighted = -tf.math.softplus(-F)
    if log_weights is not None:
        log_weighted += log_weights
    return log_weighted - tf.reduce_logsumexp(log_weighted, axis=-1, keepdims=True)


DEFAULT_NUM_HERMITE = 20
# The s-grid of Frullani's integral: below -8 the integrand is O(e^{2s} Var(Z)/κ²) < 1e-7, above 25
# Z/κ would have to be below e^{-25}·(a few) for exp(-Z eˢ/κ) not to have vanished.
S_MIN, S_MAX, S_STEP = -8.0, 25.0, 1.0


def _hermite(num: int, dtype: tf.DType) -> Tuple[tf.Tensor, tf.Tensor]:
    """Nodes and weights for E over a standard normal: E h(z) ≈ Σ w h(√2 x)."""
    x, w = hermgauss(num)
    return tf.constant(np.sqrt(2.0) * x, dtype), tf.constant(w / np.sqrt(np.pi), dtype)


def _safe_std(Fvar: tf.Tensor) -> tf.Tensor:
    # A floor keeps d sqrt(v)/dv finite at v = 0; below it the expectation is constant in v.
    floor = 1e-12 if Fvar.dtype == tf.float64 else 1e-6
    return tf.sqrt(tf.maximum(Fvar, floor))


@check_shapes("Fmu: [batch...]", "Fvar: [batch...]", "return: [batch...]")
def expected_log_sigmoid(Fmu: tf.Tensor, Fvar: tf.Tensor, num_hermite: int = 40) -> tf.Tensor:
    """E log σ(f) for f ~ N(Fmu, Fvar), by Gauss–Hermite."""
    z, w = _hermite(num_hermite, Fmu.dtype)
    f = Fmu[..., None] + _safe_std(Fvar)[..., None] * z
    return tf.reduce_sum(-tf.math.softplus(-f) * w, axis=-1)


@check_shapes(
    "Fmu: [N, K]",
    "Fvar: [N, K]",
    "log_weights: [K] if log_weights is not None",
    "column_weights: [N, K] if column_weights is not None",
    "return: [N]",
)
def expected_log_normaliser(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    num_hermite: int = DEFAULT_NUM_HERMITE,
    grid_step: float = S_STEP,
    log_weights: Optional[tf.Tensor] = None,
    column_weights: Optional[tf.Tensor] = None,
) -> tf.Tensor:
    """E log Σ_c θ_c σ(f_c) for independent f_c ~ N(Fmu_c, Fvar_c), by Frullani's integral
    (``num_hermite`` nodes per class, trapezoidal rule of step ``grid_step`` on [S_MIN, S_MAX]).
    ``log_weights`` are the classes' log θ_c (θ = 1 if ``None``).

    ``column_weights`` [N, K] make column c of point n stand for that many classes: the class sums
    inside (κ and Σ_c log φ_c) weigh it so. A class subset's estimate is built from them
    (:func:`expected_log_logistic_softmax`)."""
    if (
        tf.executing_eagerly()
        and _grid_size(Fmu.shape, num_hermite, grid_step) <= _EAGER_UNFUSED_LIMIT
    ):
        return _log_normaliser(Fmu, Fvar, column_weights, num_hermite, grid_step, log_weights)
    return _fused_log_normaliser(Fmu, Fvar, column_weights, num_hermite, grid_step, log_weights)


# An XLA compile of the quadrature costs 0.7-1.4 s on a CPU, once per shape; evaluated op by op,
# a grid of this many elements costs about 0.07 s. So an eager call up to this size (a certificate
# on a small training set, an eager CAVI step, one prediction) is evaluated unfused: even ten calls
# at one shape cost less than the compile they avoid. Larger ones, and every call inside a
# compiled step, go through XLA.
_EAGER_UNFUSED_LIMIT = 2**21


def _s_grid(grid_step: float) -> np.ndarray:
    """The T nodes of the trapezoidal rule on [S_MIN, S_MAX]."""
    return np.arange(S_MIN, S_MAX + grid_step / 2, grid_step)


def _grid_size(shape: tf.TensorShape, num_hermite: int, grid_step: float) -> int:
    """The elements of the [N, K, H, T] tensor that the quadrature reduces."""
    return int(np.prod(shape)) * num_hermite * len(_s_grid(grid_step))


def _log_normaliser(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    column_weights: Optional[tf.Tensor],
    num_hermite: int,
    grid_step: float,
    log_weights: Optional[tf.Tensor],
) -> tf.Tensor:
    dtype = Fmu.dtype
    z, w = _hermite(num_hermite, dtype)
    f = Fmu[..., None] + _safe_std(Fvar)[..., None] * z  # [N, K, H]
    log_sigma = -tf.math.softplus(-f)
    if log_weights is not None:  # θ_c σ(f_c): the weights scale each class's Laplace variable
        log_sigma += log_weights[:, None]
    log_counted = tf.math.log(w) + log_sigma
    if column_weights is not None:  # a zero weight gives -inf: the column adds nothing to κ
        log_counted += tf.math.log(column_weights)[..., None]
    # log κ = log Σ_c Σ_h w_h σ_h, in log space: κ is tiny when every latent is very negative.
    log_kappa = tf.reduce_logsumexp(log_counted, axis=[-2, -1])
    # σ_h / κ ≤ 1 / (W · w_h) is bounded for a column of weight W, so the Laplace variable
    # t σ_h / κ is a product of two finite numbers: one exponential per element of the
    # [N, K, H, T] tensor instead of two. Where the product overflows, exp(-inf) = 0 is the right
    # limit and its derivative is 0. The cap (e^44 in float32) only touches nodes whose weight is
    # below e^-44, where the decay is zero at every grid point anyway, and columns of weight zero,
    # which count for nothing; it keeps the factor, and so its gradient, finite.
    log_ratio_cap = 0.5 * np.log(np.finfo(dtype.as_numpy_dtype).max)
    scaled_sigma = tf.exp(tf.minimum(log_sigma - log_kappa[:, None, None], log_ratio_cap))
    s = tf.constant(_s_grid(grid_step), dtype)  # [T]
    # φ_c(t) = Σ_h w_h exp(-t σ_h) ≤ 1 cannot overflow. Where it underflows, Π_c φ_c is zero
    # anyway: the floor only keeps log and its gradient finite there.
    decay = tf.exp(-scaled_sigma[..., None] * tf.exp(s))  # [N, K, H, T]
    phi = tf.einsum("h,nkht->nkt", w, decay)  # [N, K, T]
    log_phi = tf.math.log(tf.maximum(phi, np.finfo(dtype.as_numpy_dtype).tiny))
    if column_weights is not None:
        log_phi *= column_weights[..., None]
    log_product = tf.reduce_sum(log_phi, axis=-2)  # [N, T]
    integrand = tf.exp(-tf.exp(s)) - tf.exp(log_product)
    return log_kappa + grid_step * tf.reduce_sum(integrand, axis=-1)


# The quadrature is a chain of elementwise maps and reductions over an [N, K, H, T] tensor: XLA
# fuses them (forward and backward) into loops that never store that tensor (docs/method.md, "An
# accurate, deterministic expectation"). It is compiled on its own, so the step around
# it keeps TensorFlow's faster CPU Cholesky. One trace per shape, never a trace generalised to
# unknown shapes (``reduce_retracing``): inside an XLA-compiled step such a trace made XLA take
# q(u)'s values as compile-time constants, so that step recompiled at every call.
_fused_log_normaliser = tf.function(_log_normaliser, jit_compile=True, autograph=False)


@check_shapes(
    "Fmu: [N, K]",
    "Fvar: [N, K]",
    "Y_onehot: [N, K]",
    "log_weights: [K] if log_weights is not None",
    "label_marginals[0]: [N] if label_marginals is not None",
    "label_marginals[1]: [N] if label_marginals is not None",
    "return: [N]",
)
def expected_log_logistic_softmax(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y_onehot: tf.Tensor,
    num_classes: Optional[int] = None,
    num_hermite: int = DEFAULT_NUM_HERMITE,
    grid_step: float = S_STEP,
    log_weights: Optional[tf.Tensor] = None,
    label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    soft_labels: bool = False,
) -> tf.Tensor:
    """E log p(y | f) = log θ_y + E log σ(f_y) - E log Σ_c θ_c σ(f_c) for each point (θ = 1 if
    ``log_weights`` is ``None``). With ``soft_labels`` the rows of ``Y_onehot`` may be any class
    probabilities y, and the expectation is Σ_c y_c (log θ_c + E log σ(f_c)) - E log Σ_c θ_c σ(f_c).

    On a class subset (``num_classes`` > the last axis, ``Y_onehot`` zero where the label is not
    in it) ``label_marginals`` = (mean [N], variance [N]) of each point's observed class are
    needed: the estimate keeps that class exact, observed term and normaliser alike, and counts
    each other column of the subset for (C - 1)/k classes, k the point's other columns. Each sum
    inside the normaliser is then unbiased, and unlike a C/|K| weight on every column, the class
    that dominates a trained model's normaliser is never missed or counted C/|K| times."""
    if num_classes is not None:
        if soft_labels:
            raise ValueError("class subsets need integer labels, not soft labels")
        if label_marginals is None:
            raise ValueError("a class subset's expectation needs the observed classes' marginals")
        if log_weights is not None:
            raise ValueError("class weights are not estimated on class subsets")
        columns_mu, columns_var, column_weights = _label_anchored_columns(
            Fmu, Fvar, Y_onehot, num_classes, *label_marginals
        )
        observed = expected_log_sigmoid(columns_mu[:, -1], columns_var[:, -1])
        return observed - expected_log_normaliser(
            columns_mu, columns_var, num_hermite, grid_step, column_weights=column_weights
        )
    if soft_labels:
        # Σ_c y_c E log σ(f_c): the expected log-likelihood is linear in y.
        observed = tf.reduce_sum(Y_onehot * expected_log_sigmoid(Fmu, Fvar), axis=-1)
    else:  # one class per point: gather its marginals, one 1-D quadrature per point
        m_y = tf.reduce_sum(Y_onehot * Fmu, axis=-1)
        v_y = tf.reduce_sum(Y_onehot * Fvar, axis=-1)
        observed = expected_log_sigmoid(m_y, v_y)
    if log_weights is not None:
        observed += tf.reduce_sum(Y_onehot * log_weights, axis=-1)
    return observed - expected_log_normaliser(Fmu, Fvar, num_hermite, grid_step, log_weights)


def _other_columns_weight(Y_onehot: tf.Tensor, num_classes: int) -> tf.Tensor:
    """(C - 1)/k [N]: how many of a point's other classes each of its k other columns stands for."""
    subset_size = tf.cast(tf.shape(Y_onehot)[-1], Y_onehot.dtype)
    others = subset_size - tf.reduce_sum(Y_onehot, axis=-1)
    return (tf.cast(num_classes, Y_onehot.dtype) - 1) / others


def _label_anchored_columns(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y_onehot: tf.Tensor,
    num_classes: int,
    label_mean: tf.Tensor,
    label_var: tf.Tensor,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The subset's columns with the observed class's appended last, and their weights: 1 for
    that class, 0 for its own column in the subset, (C - 1)/k for the others."""
    in_subset = tf.reduce_sum(Y_onehot, axis=-1) > 0
    # Taken from the subset's column when the label is in it, so that its derivative reaches it.
    m_y = tf.where(in_subset, tf.reduce_sum(Y_onehot * Fmu, axis=-1), label_mean)
    v_y = tf.where(in_subset, tf.reduce_sum(Y_onehot * Fvar, axis=-1), label_var)
    others = (1 - Y_onehot) * _other_columns_weight(Y_onehot, num_classes)[:, None]
    ones = tf.ones_like(m_y)[:, None]
    return (
        tf.concat([Fmu, m_y[:, None]], axis=-1),
        tf.concat([Fvar, v_y[:, None]], axis=-1),
        tf.concat([others, ones], axis=-1),
    )


@check_shapes("Y_onehot: [N, K]", "return: [N, K]")
def subset_site_weights(Y_onehot: tf.Tensor, num_classes: int) -> tf.Tensor:
    """How many classes each column of a subset's expectation stands for (1 for the observed
    class): a class's site is its own derivative, so the step divides this weight out."""
    others = _other_columns_weight(Y_onehot, num_classes)[:, None]
    return tf.where(Y_onehot > 0, tf.ones_like(Y_onehot), others)


@check_shapes(
    "Fmu: [N, K]",
    "Fvar: [N, K]",
    "Y_onehot: [N, K]",
    "log_weights: [K] if log_weights is not None",
    "label_marginals[0]: [N] if label_marginals is not None",
    "label_marginals[1]: [N] if label_marginals is not None",
    "return[0]: [N]",
    "return[1]: [N, K]",
    "return[2]: [N, K]",
)
def exact_sites(
    Fmu: tf.Tensor,
    Fvar: tf.Tensor,
    Y_onehot: tf.Tensor,
    num_classes: Optional[int] = None,
    num_hermite: int = DEFAULT_NUM_HERMITE,
    log_weights: Optional[tf.Tensor] = None,
    label_marginals: Optional[Tuple[tf.Tensor, tf.Tensor]] = None,
    soft_labels: bool = False,
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(E log p(y|f) [N], linear [N, K], quadratic [N, K]): the exact expected log-likelihood and
    the coefficients of f and -f²/2 of its natural-gradient site (module docstring). On a class
    subset these are derivatives of its estimate; :func:`subset_site_weights` turns them into
    each class's own.

    The marginals are treated as constants (the sites are what the natural step consumes); use
    :func:`expected_log_logistic_softmax` where the expectation must be differentiated."""
    Fmu, Fvar = tf.stop_gradient(Fmu), tf.stop_gradient(Fvar)
    if label_marginals is not None:
        label_marginals = tuple(tf.stop_gradient(m) for m in label_marginals)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch([Fmu, Fvar])
        expected = expected_log_logistic_softmax(
            Fmu,
            Fvar,
            Y_onehot,
            num_classes,
            num_hermite,
            log_weights=log_weights,
            label_marginals=label_marginals,
            soft_labels=soft_labels,
        )
        # Points are independent, so the gradient of the sum holds each point's own derivatives.
        total = tf.reduce_sum(expected)
    d_mean, d_var = tape.gradient(total, [Fmu, Fvar])
    return (expected, *sites_from_derivatives(Fmu, d_mean, d_var))


@check_shapes(
    "Fmu: [N, K]",
    "d_mean: [N, K]",
    "d_var: [N, K]",
    "return[0]: [N, K]",
    "return[1]: [N, K]",
)
def sites_from_derivatives(
    Fmu: tf.Tensor, d_mean: tf.Tensor, d_var: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor]:
    """(linear, quadratic) of the natural-gradient site from the derivatives of a point's expected
    log-likelihood with respect to its marginal mean and variance (module docstring)."""
    quadratic = -2.0 * d_var
    return d_mean + quadratic * Fmu, quadratic
