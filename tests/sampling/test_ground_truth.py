"""The exact posterior on the real wine data (3 classes, 142 training points, full GP, fixed
hyperparameters): the Gibbs sampler against an independent NUTS sampler of the non-augmented
model, and the variational methods against both (the paper's Figure 5)."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from sklearn.cluster import kmeans_plusplus

from gpflow_augmented.comparison import plots
from gpflow_augmented.comparison.methods import ExpectationPropagationMethod
from gpflow_augmented.comparison.sep import HeavisideSEP
from gpflow_augmented.sampling.ground_truth import compare_with_gibbs
from gpflow_augmented.sampling.gibbs import GibbsSampler
from gpflow_augmented.sampling.nuts import NutsSampler
from gpflow_augmented.sampling.posterior import monte_carlo_standard_error

from helpers import Z_TOLERANCE, printed_rate_gibbs

# The integration tier (the samplers against each other and against the variational methods): run by
# --slow or -m integration.
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wine_comparison():
    # The default 4 × 5000 Gibbs draws are what R-hat < 1.01 needs with a margin: its max split
    # R-hat measured 1.0044 here; after 300 burn-in sweeps, 1.0051 and 1.0089 (two seeds) with
    # 4 × 4000 draws and 1.0109 with 4 × 3000.
    comparison = compare_with_gibbs(seed=0)
    print("\n" + comparison.report())
    return comparison


def assert_within_standard_errors(difference, error):
    worst = np.max(difference / error)
    assert worst < Z_TOLERANCE, f"max |Δp| = {difference.max():.4f} is {worst:.1f} standard errors"


def assert_samplers_agree(first, second, X):
    """Every predictive probability agrees within Z_TOLERANCE combined standard errors."""
    first_draws, second_draws = first.predictive_draws(X), second.predictive_draws(X)
    difference = np.abs(first_draws.mean(axis=(0, 1)) - second_draws.mean(axis=(0, 1)))
    error = np.hypot(
        monte_carlo_standard_error(first_draws), monte_carlo_standard_error(second_draws)
    )
    assert_within_standard_errors(difference, error)
    return difference


def test_gibbs_agrees_with_the_non_augmented_sampler(wine_comparison):
    # The comparison holds what assert_samplers_agree would compute again from the 24 000 draws:
    # each sampler's mean predictive draw (its summary) and their combined Monte Carlo standard
    # error, the root sum of squares of monte_carlo_standard_error.
    summaries = wine_comparison.summaries
    difference = np.abs(summaries["gibbs"].probabilities - summaries["nuts"].probabilities)
    assert_within_standard_errors(difference, wine_comparison.sampler_standard_error)
    print(f"Gibbs vs NUTS: max |Δp| {difference.max():.4f}, mean {difference.mean():.4f}")
    assert difference.max() < 0.02


def test_printed_poisson_rate_fails_the_same_check(wine_comparison):
    dataset = wine_comparison.dataset
    # 4 × 150 draws are plenty: its bias (max |Δp| 0.28) measures 103 standard errors (152 with
    # 4 × 500 draws), where the check fails at 4.5.
    printed = printed_rate_gibbs(
        (dataset.X_train, dataset.Y_train), wine_comparison.kernel, dataset.num_classes
    ).sample(150, num_chains=4, num_burnin=100, seed=1)
    with pytest.raises(AssertionError, match="standard errors"):
        assert_samplers_agree(printed, wine_comparison.samples["nuts"], dataset.X_test)
    wrong, _ = printed.predict_y(dataset.X_test)
    off_by = np.max(np.abs(wrong - wine_comparison.summaries["nuts"].probabilities))
    print(f"printed rate λσ(f): max |Δp| {off_by:.3f} from NUTS")
    assert off_by > 0.1


def test_chains_have_converged(wine_comparison):
    for name, diagnostics in wine_comparison.diagnostics.items():
        print(
            f"{name}: max split R-hat {diagnostics.max_rhat:.4f}, min ESS {diagnostics.min_ess:.0f}"
        )
        assert diagnostics.max_rhat < 1.01, name
        # 4 chains × 5000 (Gibbs) or 1000 (NUTS) draws; the slowest direction (all classes'
        # latents shifted together) still has hundreds of effective draws.
        assert diagnostics.min_ess > 400, name


def test_variational_methods_against_the_ground_truth(wine_comparison):
    table = wine_comparison.discrepancies()
    max_probability_error = {name: table[name]["probabilities"][1] for name in table}
    assert max_probability_error["negative-multinomial"] < 0.05
    # The negative-multinomial bound is tighter than the paper's mean-field (Gamma–Poisson) one
    # (likelihoods/test_augmentations.py), and the non-augmented VI posterior is closer still.
    assert max_probability_error["vi"] < max_probability_error["negative-multinomial"]
    assert max_probability_error["negative-multinomial"] < max_probability_error["gamma-poisson"]
    # The exact-bound CAVI fixed point is the non-augmented VI optimum (test_exact_bound): what
    # separates them from Gibbs is the Gaussian q(f), not the optimiser.
    exact, vi = (wine_comparison.summaries[name].probabilities for name in ("exact", "vi"))
    assert np.max(np.abs(exact - vi)) < 1e-2
    assert max_probability_error["exact"] < max_probability_error["negative-multinomial"]


def test_figure_5(wine_comparison, tmp_path):
    figure = plots.ground_truth_figure(wine_comparison.summaries)
    assert np.asarray(figure.axes).size == 12
    path = plots.save_figure(figure, tmp_path / "ground_truth.png")
    assert path.stat().st_size > 10_000


def test_inducing_point_samplers_agree(wine_comparison):
    # Both samplers target the projected-process model f = μ + K_xz K_zz⁻¹ u with M = 20 inducing
    # inputs and a constant prior mean for each class (as `lsm` learns one); they must agree with
    # each other (not with the full GP).
    dataset = wine_comparison.dataset
    data = (dataset.X_train, dataset.Y_train)
    Z, _ = kmeans_plusplus(dataset.X_train, 20, random_state=0)
    options = dict(
        inducing_variable=Z, mean_function=gpflow.mean_functions.Constant([1.0, -0.5, 0.0])
    )
    gibbs = GibbsSampler(data, wine_comparison.kernel, 3, **options).sample(
        3000, num_burnin=300, seed=2
    )
    nuts = NutsSampler(data, wine_comparison.kernel, 3, **options).sample(
        500, num_burnin=300, seed=3
    )
    assert_samplers_agree(gibbs, nuts, dataset.X_test)


# (max, mean) |Δp| from Gibbs's predictive: measured 0.31 and 0.14, the Heaviside model's learned
# σ² (0.001) making it far more confident than the logistic-softmax model at the fixed kernel
SEP_TOLERANCE = (0.35, 0.16)


def test_sep_predictive_against_the_ground_truth(wine_comparison):
    """Stochastic EP for the Heaviside model (the UAI paper's SEP baseline) on the same data, the
    same fixed kernel and no inducing-point approximation (Z = X), σ² learned from EP's estimate
    of log p(y). Its model is not the logistic-softmax model the samplers draw from, so its
    distance from them is the models' difference as well as EP's error; SEP_TOLERANCE states it.
    Measured: max |Δp| 0.31, mean 0.14; the same predicted class on 35 of 36 test points; test NLL
    0.095 (SEP) against 0.333 (Gibbs), whose model is under-confident at this fixed kernel."""
    dataset = wine_comparison.dataset
    kernel = gpflow.utilities.deepcopy(wine_comparison.kernel)
    gpflow.set_trainable(kernel, False)
    model = HeavisideSEP(kernel, dataset.X_train, dataset.num_classes)
    method = ExpectationPropagationMethod("sep", model, 0.05, damping=0.5)
    X, Y = tf.constant(dataset.X_train), tf.constant(dataset.Y_train)
    for _ in range(300):
        method.step(X, Y)
    probabilities = model.predict_y(dataset.X_test)[0].numpy()
    difference = np.abs(probabilities - wine_comparison.summaries["gibbs"].probabilities)
    exact_difference = np.abs(
        wine_comparison.summaries["exact"].probabilities
        - wine_comparison.summaries["gibbs"].probabilities
    )
    gibbs = wine_comparison.summaries["gibbs"].probabilities
    same_class = np.mean(probabilities.argmax(1) == gibbs.argmax(1))
    labels = dataset.Y_test[:, 0]
    nll = {
        name: -np.mean(np.log(p[np.arange(len(labels)), labels]))
        for name, p in (("sep", probabilities), ("gibbs", gibbs))
    }
    print(
        f"SEP vs Gibbs: max |Δp| {difference.max():.4f}, mean {difference.mean():.4f} "
        f"(σ² = {model.likelihood.noise_variance.numpy():.3f}), same class {same_class:.3f}, "
        f"test NLL SEP {nll['sep']:.4f} Gibbs {nll['gibbs']:.4f}; exact-bound CAVI: max "
        f"{exact_difference.max():.4f}, mean {exact_difference.mean():.4f}"
    )
    assert method.failed_steps == 0
    assert difference.max() < SEP_TOLERANCE[0] and difference.mean() < SEP_TOLERANCE[1]
    # the models disagree on confidence, not on the class: 35 of the 36 test points (measured)
    assert same_class >= 0.95 and nll["sep"] < nll["gibbs"]
