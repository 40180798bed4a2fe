"""The Gibbs sampler of the augmented models against independent answers.

Exact Pólya-Gamma moments, deterministic quadrature on problems small enough for a product grid
(logistic-softmax and binary), the dense-algebra form of the Gaussian conditional, and samplers
with a planted mistake (the paper's printed Poisson rate λσ(f); Pólya-Gamma draws without their
tilt) that these checks must reject.
"""

import functools

import gpflow
import numpy as np
import pytest
from numpy.polynomial.hermite import hermgauss

from gpflow_augmented import InvalidDataError
from gpflow_augmented.likelihoods import BinaryLogistic
from gpflow_augmented.likelihoods.polya_gamma import (
    LocalParameters,
    polya_gamma_moments,
    sample_polya_gamma,
)
from gpflow_augmented.sampling.gibbs import SCANS, GibbsSampler
from gpflow_augmented.sampling.posterior import monte_carlo_standard_error

from helpers import Z_TOLERANCE, printed_rate_gibbs

# The integration tier (the Gibbs sampler's chains against quadrature and exact moments): run by
# --slow or -m integration.
pytestmark = pytest.mark.integration


# -- Pólya-Gamma draws ---------------------------------------------------------------------------


@pytest.mark.parametrize("b", [1.0, 2.0, 5.0])
@pytest.mark.parametrize("c", [0.0, 0.1, 1.0, 10.0])
def test_polya_gamma_draws_match_closed_form_moments(b, c):
    rng = np.random.default_rng(int(100 * b + 10 * c))
    num_draws = 200_000
    omega = sample_polya_gamma(np.full(num_draws, b), np.full(num_draws, c), rng)
    mean, variance = polya_gamma_moments(b, c)
    centred = omega - omega.mean()
    sample_variance = np.mean(centred**2)
    # Standard errors of the sample mean and variance, from the sample's own moments.
    mean_error = np.sqrt(variance / num_draws)
    variance_error = np.sqrt((np.mean(centred**4) - sample_variance**2) / num_draws)
    assert abs(omega.mean() - mean) < Z_TOLERANCE * mean_error
    assert abs(sample_variance - variance) < Z_TOLERANCE * variance_error


@pytest.mark.parametrize("c", [0.0, 5e-4, 0.1, 1.0, 10.0])
def test_polya_gamma_moments_match_the_infinite_convolution(c):
    # PG(b, c) = (1/2π²) Σ_k g_k / d_k with g_k ~ Ga(b, 1), d_k = (k - ½)² + c²/(4π²), hence
    # mean = b/(2π²) Σ 1/d_k and variance = b/(4π⁴) Σ 1/d_k²: a check independent of the closed
    # forms. The tail beyond K terms is ≈ b/(2π² K), removed by adding it back.
    b, K = 3.0, 2_000_000
    d = (np.arange(1, K + 1) - 0.5) ** 2 + c**2 / (4 * np.pi**2)
    series_mean = b / (2 * np.pi**2) * (np.sum(1 / d) + 1 / K)
    series_variance = b / (4 * np.pi**4) * np.sum(1 / d**2)
    mean, variance = polya_gamma_moments(b, c)
    np.testing.assert_allclose(mean, series_mean, rtol=1e-9)
    np.testing.assert_allclose(variance, series_variance, rtol=1e-9)


def test_polya_gamma_zero_shape_is_zero_and_bad_parameters_raise():
    rng = np.random.default_rng(0)
    omega = sample_polya_gamma(np.array([0.0, 1.0, 0.0]), np.array([1.0, 1.0, 50.0]), rng)
    assert omega[0] == 0.0 and omega[2] == 0.0 and omega[1] > 0.0
    with pytest.raises(ValueError, match="integer ≥ 0"):
        sample_polya_gamma(np.array([-1.0]), np.array([0.0]), rng)
    with pytest.raises(ValueError, match="integer ≥ 0"):
        sample_polya_gamma(np.array([2.5]), np.array([0.0]), rng)
    with pytest.raises(ValueError, match="finite"):
        sample_polya_gamma(np.array([1.0]), np.array([np.nan]), rng)


# -- the Gaussian conditional -----------------------------------------------------------------


def test_gaussian_block_matches_the_dense_conditional():
    # v | ω, n ~ N(B⁻¹Aκ, B⁻¹), B = I + A diag(ω) Aᵀ, written here with dense inverses.
    rng = np.random.default_rng(1)
    X = rng.normal(size=(6, 2))
    Y = np.array([[0], [1], [2], [0], [1], [2]])
    sampler = GibbsSampler((X, Y), gpflow.kernels.SquaredExponential(variance=2.0), 3)
    A = sampler.projection.numpy()  # [C, M, N]
    omega = rng.uniform(0.05, 2.0, size=(1, 3, 6))
    counts = rng.poisson(1.0, size=(1, 3, 6)).astype(float)
    num_draws = 40_000
    auxiliaries = LocalParameters(
        gamma=np.repeat(counts, num_draws, 0),
        theta=np.repeat(omega, num_draws, 0),
        c=np.zeros((num_draws, 3, 6)),  # the tilt: the Gaussian block does not read it
    )
    draws = sampler.draw_whitened(auxiliaries, rng)[0]
    kappa = (sampler.labels_onehot - counts[0]) / 2
    for c in range(3):
        precision = np.eye(6) + A[c] @ np.diag(omega[0, c]) @ A[c].T
        covariance = np.linalg.inv(precision)
        mean = covariance @ A[c] @ kappa[c]
        sd = np.sqrt(np.diag(covariance))
        assert np.all(np.abs(draws[:, c].mean(0) - mean) < Z_TOLERANCE * sd / np.sqrt(num_draws))
        # Entries of the sample covariance have standard error ≤ sqrt(2/n)·sd_i·sd_j.
        sample_covariance = np.cov(draws[:, c].T)
        bound = Z_TOLERANCE * np.sqrt(2.0 / num_draws) * np.outer(sd, sd)
        assert np.all(np.abs(sample_covariance - covariance) < bound)


# -- exact posterior by quadrature ----------------------------------------------------------------


def quadrature_posterior(
    kernel, X, Y, x_new, num_classes, points_per_dim, binary=False, mean=(0.0,)
):
    """Posterior mean of f at X, and mean, variance and predictive probabilities at ``x_new``, by
    a Gauss–Hermite product rule over the whitened joint prior of (f(X), f(x_new)) for every
    latent GP: one per class (logistic-softmax), or one in all (``binary``: p(1 | f) = σ(f)),
    each with its constant prior ``mean``."""
    inputs = np.vstack([X, x_new])
    n = len(inputs)
    K = kernel(inputs).numpy() + 1e-10 * np.eye(n)
    L = np.linalg.cholesky(K)
    nodes, weights = hermgauss(points_per_dim)
    nodes, weights = np.sqrt(2.0) * nodes, weights / np.sqrt(np.pi)
    num_latent = 1 if binary else num_classes
    dims = n * num_latent
    grid = np.stack(np.meshgrid(*[nodes] * dims, indexing="ij"), -1).reshape(-1, dims)
    log_w = np.sum(np.log(np.stack(np.meshgrid(*[weights] * dims, indexing="ij"), -1)), -1)
    f = np.einsum("ij,pcj->pci", L, grid.reshape(-1, num_latent, n))  # [P, K, n]
    f += np.asarray(mean, dtype=float)[:, None]
    if binary:
        log_lik = -np.logaddexp(0.0, np.concatenate([f, -f], axis=1))  # [P, 2, n]
    else:
        log_sigmoid = -np.logaddexp(0.0, -f)
        log_lik = log_sigmoid - np.logaddexp.reduce(log_sigmoid, axis=1, keepdims=True)
    labels = np.asarray(Y)[:, 0]
    log_w = log_w.reshape(-1) + sum(log_lik[:, labels[i], i] for i in range(len(X)))
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    f_new = f[:, :, -1]
    mean_new = w @ f_new
    return {
        "train_mean": np.einsum("p,pci->ic", w, f[:, :, :-1]),
        "mean": mean_new,
        "variance": w @ np.square(f_new) - np.square(mean_new),
        "probabilities": w @ np.exp(log_lik[:, :, -1]),
    }


TINY_PROBLEMS = {
    "N=1,C=3": (np.array([[0.0]]), np.array([[2]]), np.array([[0.7]]), 3),
    "N=2,C=2": (np.array([[0.0], [1.0]]), np.array([[0], [1]]), np.array([[0.3]]), 2),
    # The binary likelihood, one latent GP: its Gibbs sampler is X-GPC's (ω | f ~ PG(1, |f|)).
    "binary N=3": (
        np.array([[0.0], [1.0], [2.5]]),
        np.array([[0], [1], [1]]),
        np.array([[0.5]]),
        2,
    ),
}


def _binary(problem):
    return problem.startswith("binary")


class UntiltedBinaryLogistic(BinaryLogistic):
    """A planted mistake: ω drawn from PG(1, 0), its prior, instead of PG(1, |f|)."""

    def draw_auxiliaries(self, F, Y_rows, state, rng, scan="blocked"):
        return super().draw_auxiliaries(np.zeros_like(F), Y_rows, state, rng, scan)


def gibbs(data, kernel, num_classes, **options):
    return GibbsSampler(data, kernel, num_classes, **options)


def binary_gibbs(data, kernel, num_classes, **options):
    return GibbsSampler(data, kernel, num_classes, likelihood=BinaryLogistic(), **options)


def untilted_binary_gibbs(data, kernel, num_classes, **options):
    return GibbsSampler(data, kernel, num_classes, likelihood=UntiltedBinaryLogistic(), **options)


def _tiny_kernel():
    return gpflow.kernels.SquaredExponential(variance=4.0, lengthscales=1.0)


@functools.lru_cache(maxsize=None)
def _quadrature(problem, mean=(0.0,)):
    """The exact posterior of a tiny problem and the rule's error estimate, computed once for the
    scans and the printed-rate sampler that are compared with it (the 12⁶-point grid is costly)."""
    X, Y, x_new, C = TINY_PROBLEMS[problem]
    binary = _binary(problem)
    # Four dimensions for the binary problem (against six): room for a finer rule.
    fine, coarse = (20, 16) if binary else (12, 10)
    exact = quadrature_posterior(_tiny_kernel(), X, Y, x_new, C, fine, binary, mean)
    coarser = quadrature_posterior(_tiny_kernel(), X, Y, x_new, C, coarse, binary, mean)
    return exact, {k: np.max(np.abs(exact[k] - coarser[k])) for k in exact}


def _tiny_comparison(problem, make_sampler, scan, seed, mean=None):
    """z-scores of the sampler's estimates against quadrature; ``mean``: a constant prior mean
    for each latent GP, given to both."""
    X, Y, x_new, C = TINY_PROBLEMS[problem]
    exact, quadrature_error = _quadrature(problem, (0.0,) if mean is None else mean)
    options = {"scan": scan}
    if mean is not None:
        options["mean_function"] = gpflow.mean_functions.Constant(np.array(mean))
    # 16 chains × 1500 draws: as many draws as 4 × 6000 and as many effective ones (the fewest,
    # systematic scan with N=2, C=2: 1800-4400 over six seeds, against 1400-4100), in 1800 sweeps
    # instead of 6500. The chains are vectorised, so a sweep costs about the same for 4 or 16 on
    # these problems; 1500 draws per chain stay long against that scan's slow direction (32 × 1000
    # gave one seed only 380 effective draws).
    samples = make_sampler((X, Y), _tiny_kernel(), C, **options).sample(
        1500, num_chains=16, num_burnin=300, seed=seed
    )
    train_means, _ = samples.latent_conditionals(X)
    new_means, residual = samples.latent_conditionals(x_new)
    draws = {
        "train_mean": train_means,
        "mean": new_means,
        "probabilities": samples.predictive_draws(x_new),
    }
    z_scores = {}
    for name, values in draws.items():
        estimate = values.mean(axis=(0, 1))
        error = monte_carlo_standard_error(values)
        z_scores[name] = np.max(np.abs(estimate - exact[name]) / error)
    _, variance = samples.predict_f(x_new)
    return z_scores, quadrature_error, np.max(np.abs(variance - exact["variance"]))


@pytest.mark.parametrize(
    "problem, scan",
    [(p, s) for p in TINY_PROBLEMS for s in SCANS if not (_binary(p) and s != SCANS[0])],
)
def test_gibbs_matches_quadrature(problem, scan):
    make_sampler = binary_gibbs if _binary(problem) else gibbs
    z_scores, quadrature_error, variance_error = _tiny_comparison(problem, make_sampler, scan, 0)
    # 12 vs 10 nodes per dimension agree far below the Monte Carlo errors (~1e-2), so the rule
    # is exact for this purpose; the second moment converges slowest.
    assert max(quadrature_error[k] for k in ("train_mean", "mean", "probabilities")) < 1e-3
    assert quadrature_error["variance"] < 1e-2
    assert max(z_scores.values()) < Z_TOLERANCE, z_scores
    # The variance estimate's error is not covered by the mean's standard error; with ≥ 1000
    # effective draws its relative error is ~5 %.
    assert variance_error < 0.1


@pytest.mark.parametrize("problem", list(TINY_PROBLEMS))
def test_a_planted_mistake_fails_quadrature(problem):
    """The printed Poisson rate for the logistic-softmax, Pólya-Gamma draws without their tilt for
    the binary likelihood."""
    make_sampler = untilted_binary_gibbs if _binary(problem) else printed_rate_gibbs
    z_scores, _, _ = _tiny_comparison(problem, make_sampler, "blocked", 0)
    assert max(z_scores.values()) > 2 * Z_TOLERANCE, z_scores


#: a constant prior mean for each of the three classes, far enough from zero that a sampler
#: centring f's Gaussian block on zero instead of on it is rejected
CLASS_MEANS = (1.5, -1.0, 0.5)


class MeanLeftOutOfTheBlock(GibbsSampler):
    """A planted mistake: f offset by the prior mean m, but its Gaussian block drawn with κ, as
    if the prior were centred on zero, instead of κ - ω m."""

    def draw_whitened(self, auxiliaries, rng):
        mean, self.prior_mean = self.prior_mean, np.zeros_like(self.prior_mean)
        try:
            v, f = super().draw_whitened(auxiliaries, rng)
        finally:
            self.prior_mean = mean
        return v, mean + f


@pytest.mark.parametrize("make_sampler, holds", [(gibbs, True), (MeanLeftOutOfTheBlock, False)])
def test_a_prior_mean_matches_quadrature(make_sampler, holds):
    """A constant prior mean for each class (``lsm``'s model has one): the sampler targets
    f = m + Aᵀv exactly, and one that leaves m out of the Gaussian block is rejected."""
    z_scores, quadrature_error, _ = _tiny_comparison(
        "N=1,C=3", make_sampler, "blocked", 0, CLASS_MEANS
    )
    assert max(quadrature_error[k] for k in ("train_mean", "mean", "probabilities")) < 1e-3
    if holds:
        assert max(z_scores.values()) < Z_TOLERANCE, z_scores
    else:
        assert max(z_scores.values()) > 2 * Z_TOLERANCE, z_scores


# -- sampler mechanics ------------------------------------------------------------------------


def _small_problem():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(12, 2))
    Y = rng.integers(0, 3, size=(12, 1))
    return (X, Y), gpflow.kernels.SquaredExponential()


def test_same_seed_same_draws_other_seed_other_draws():
    data, kernel = _small_problem()
    sampler = GibbsSampler(data, kernel, 3)
    first = sampler.sample(20, num_chains=2, num_burnin=5, seed=7).whitened
    again = sampler.sample(20, num_chains=2, num_burnin=5, seed=7).whitened
    other = sampler.sample(20, num_chains=2, num_burnin=5, seed=8).whitened
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)


def test_burnin_and_thinning_keep_the_right_sweeps():
    data, kernel = _small_problem()
    sampler = GibbsSampler(data, kernel, 3)
    everything = sampler.sample(12, num_chains=2, num_burnin=0, seed=4).whitened
    kept = sampler.sample(3, num_chains=2, num_burnin=3, thinning=3, seed=4).whitened
    # Sweeps 0..11; burn-in drops 0..2; thinning by 3 keeps 5, 8, 11.
    np.testing.assert_array_equal(kept, everything[:, [5, 8, 11]])


def test_a_chain_starts_where_it_is_told():
    """The first sweep's auxiliaries are drawn given f = μ(X) + Aᵀv₀ of the given start v₀."""
    data, kernel = _small_problem()
    sampler = GibbsSampler(data, kernel, 3, inducing_variable=data[0][:4])
    start = np.random.default_rng(1).normal(size=(2, 3, 4)) + 5.0
    seen = []
    draw = sampler.likelihood.draw_auxiliaries

    def recording(f, *args):
        seen.append(np.array(f))
        return draw(f, *args)

    sampler.likelihood.draw_auxiliaries = recording
    sampler.sample(1, num_chains=2, num_burnin=0, seed=0, initial_whitened=start)
    A = sampler.projection.numpy()
    expected = sampler.prior_mean + np.einsum("cmn,scm->scn", A, start)
    np.testing.assert_allclose(seen[0], expected, rtol=1e-12)
    with pytest.raises(ValueError, match=r"\[num_chains, K, M\] = \[2, 3, 4\]"):
        sampler.sample(1, num_chains=2, initial_whitened=start[:, :2])
    with pytest.raises(ValueError, match="NaN"):
        sampler.sample(1, num_chains=2, initial_whitened=np.full((2, 3, 4), np.nan))


def test_inducing_points_sample_the_projected_model():
    # With Z ⊂ X the sampler targets p(u | y) under f = K_xz K_zz⁻¹ u; its dimension is M.
    data, kernel = _small_problem()
    samples = GibbsSampler(data, kernel, 3, inducing_variable=data[0][:4]).sample(
        10, num_chains=2, num_burnin=2, seed=0
    )
    assert samples.whitened.shape == (2, 10, 3, 4)
    mean, variance = samples.predict_f(data[0])
    assert mean.shape == (12, 3) and np.all(variance > 0)


@pytest.mark.parametrize(
    "Y, message",
    [
        (np.array([[0], [1], [3]]), "labels"),
        (np.array([0, 1, 2]), r"\[N, 1\]"),
    ],
)
def test_bad_labels_raise(Y, message):
    X = np.zeros((3, 2))
    with pytest.raises(InvalidDataError, match=message):
        GibbsSampler((X, Y), gpflow.kernels.SquaredExponential(), 3)


def test_bad_features_and_arguments_raise():
    X = np.array([[0.0, np.nan], [1.0, 0.0]])
    with pytest.raises(InvalidDataError, match="NaN"):
        GibbsSampler((X, np.array([[0], [1]])), gpflow.kernels.SquaredExponential(), 2)
    data, kernel = _small_problem()
    with pytest.raises(ValueError, match="num_classes"):
        GibbsSampler(data, kernel, 1)
    with pytest.raises(ValueError, match="scan"):
        GibbsSampler(data, kernel, 3, scan="random")
    with pytest.raises(ValueError, match="thinning"):
        GibbsSampler(data, kernel, 3).sample(5, thinning=0)
    with pytest.raises(ValueError, match="at least 2 chains"):
        GibbsSampler(data, kernel, 3).sample(5, num_chains=1, num_burnin=0).diagnostics(data[0])


def test_a_prior_mean_of_the_wrong_kind_or_shape_raises():
    data, kernel = _small_problem()
    with pytest.raises(TypeError, match="MeanFunction"):
        GibbsSampler(data, kernel, 3, mean_function=lambda X: X[:, :1])
    with pytest.raises(ValueError, match=r"\[N, 1\] or \[N, 3\]"):
        GibbsSampler(data, kernel, 3, mean_function=gpflow.mean_functions.Constant(np.zeros(2)))
    # one column is every class's mean, K columns each class's own
    for c in (np.ones(1), np.arange(3.0)):
        sampler = GibbsSampler(data, kernel, 3, mean_function=gpflow.mean_functions.Constant(c))
        assert np.all(sampler.prior_mean == np.broadcast_to(c, (len(data[0]), 3)).T)


def test_float32_runs_and_agrees_with_float64():
    from gpflow.config import Config, as_context

    data, _ = _small_problem()
    x_new = np.array([[0.3, -0.2]])
    probabilities = {}
    for dtype in (np.float64, np.float32):
        with as_context(Config(float=dtype, jitter=1e-4)):
            kernel = gpflow.kernels.SquaredExponential()
            samples = GibbsSampler(data, kernel, 3).sample(300, num_burnin=50, seed=5)
            probabilities[dtype], _ = samples.predict_y(x_new)
            mean, variance = samples.predict_f(x_new)
            assert np.all(np.isfinite(mean)) and np.all(variance > 0)
    # The same seed draws the same random numbers; float32 rounding makes the chains drift apart
    # slowly, so the two estimates agree to well within their Monte Carlo error (~0.01).
    np.testing.assert_allclose(probabilities[np.float32], probabilities[np.float64], atol=0.02)


def test_predictions_have_gpflow_shapes_and_chunk_consistently(monkeypatch):
    data, kernel = _small_problem()
    samples = GibbsSampler(data, kernel, 3).sample(50, num_chains=2, num_burnin=10, seed=0)
    p, p_var = samples.predict_y(data[0])
    assert p.shape == (len(data[0]), 3)
    np.testing.assert_allclose(p_var, p * (1 - p))
    log_density = samples.predict_log_density(data)
    np.testing.assert_allclose(log_density, np.log(p[np.arange(12), data[1][:, 0]]))
    mean, variance = samples.predict_f(data[0])
    # Row chunks must not change the answer: one row at a time against everything at once.
    monkeypatch.setattr(
        "gpflow_augmented.sampling.posterior._PREDICTIVE_CHUNK_ELEMENTS", 2 * 50 * 3
    )
    assert len(samples._row_chunks(data[0])) == 12
    chunked_mean, chunked_variance = samples.predict_f(data[0])
    np.testing.assert_allclose(chunked_mean, mean)
    np.testing.assert_allclose(chunked_variance, variance)


def test_diagnostics_in_blocks_of_series_equal_tfps_over_all_at_once(monkeypatch):
    """Split R-hat and ESS are per series, so blocks of series (bounded memory: the FFT behind ESS
    needs ~200 bytes a draw) must give tfp's answer over the whole array, in the array's order."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    from gpflow_augmented.sampling import posterior

    rng = np.random.default_rng(3)
    # [3 chains, 40 draws, 5, 7]: AR(1) series with a different mixing and offset each, so that a
    # series put in another's place changes the answer
    phi = rng.uniform(0.0, 0.9, size=(5, 7))
    draws = np.empty((3, 40, 5, 7))
    draws[:, 0] = rng.standard_normal((3, 5, 7))
    for t in range(1, 40):
        draws[:, t] = phi * draws[:, t - 1] + rng.standard_normal((3, 5, 7))
    draws += rng.uniform(-0.5, 0.5, size=(3, 1, 5, 7))
    states = tf.constant(np.swapaxes(draws, 0, 1))
    ess = tfp.mcmc.effective_sample_size(
        states, cross_chain_dims=1, filter_beyond_positive_pairs=True
    ).numpy()
    rhat = tfp.mcmc.potential_scale_reduction(
        states, independent_chain_ndims=1, split_chains=True
    ).numpy()
    blocks = []
    original = posterior._split_rhat_of_block

    def counted(block):
        blocks.append(block.shape[2])
        return original(block)

    monkeypatch.setattr(posterior, "_DIAGNOSTIC_CHUNK_ELEMENTS", 3 * 40 * 4)
    monkeypatch.setattr(posterior, "_split_rhat_of_block", counted)
    np.testing.assert_allclose(posterior._effective_sample_size(draws), ess, rtol=1e-12)
    np.testing.assert_allclose(posterior._split_rhat(draws), rhat, rtol=1e-12)
    assert blocks == [4] * 8 + [3]  # 35 series, 4 a block
    assert posterior._effective_sample_size(draws[:, :, :0]).shape == (0, 7)  # as tfp's
