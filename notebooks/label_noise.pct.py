# ---
# jupyter:
#   jupytext:
#     formats: ipynb,pct.py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Label noise: RMGPC and robust-max against logistic-softmax (Hernández-Lobato et al. 2011, supplement Table 1)
#
# **The claim.** On a 5-class linear problem, a robust multi-class GP classifier (RMGPC: the
# robust-max likelihood with a learned share ε of labels flipped at random, trained by EP) is
# slightly worse than softmax-type models when the noise is latent noise near the decision
# boundaries (scenario 1), and much better when labels are flipped at random regardless of the
# boundary (scenario 2, and scenario 3, both kinds). Their test errors in %, mean ± std over 100
# data sets:
#
# | scenario | RMGPC | SMGPC (softmax) | HTPC |
# |---|---|---|---|
# | 1: latent noise, σ = 0.5 | 15.2 ± 2.8 | 13.4 ± 2.4 | 14.5 ± 3.1 |
# | 2: 20 % of labels random | 13.6 ± 3.1 | 22.1 ± 4.1 | 21.5 ± 4.4 |
# | 3: both | 19.4 ± 3.7 | 24.6 ± 4.4 | 24.2 ± 5.0 |
#
# **What we run.** The problem as the supplement states it: w_k, x ~ N(0, I₅), y = argmax_k w_kᵀx,
# 100 training and 1000 (noise-free) test points per data set, new w_k each time, and the linear
# kernel k(x, x') = xᵀx. With this kernel the GP *is* f_k(x) = w_kᵀx, so five inducing points at
# the unit vectors (u_k = w_k) make the sparse model exact. Five models:
#
# * `lsm-negative-multinomial`: `LogisticSoftmaxSVGP` on the negative-multinomial augmented bound, full-batch CAVI (the
#   kernel has no hyperparameters to learn). This notebook was measured before the exact-bound
#   method became the package's `lsm`; it keeps the augmented model it measured;
# * `lsm-vi`: the same likelihood without augmentation (`SVGP` + `LogisticSoftmax`), by Adam, to
#   tell the likelihood from the inference;
# * `softmax`: `SVGP` + `gpflow.likelihoods.Softmax` by Adam, the nearest GPflow model to the
#   supplement's softmax-type SMGPC;
# * `rm`: GPflow's robust-max `SVGP` (`MultiClass`) with its default fixed ε = 10⁻³, natural
#   gradients with the γ warm-up of our baseline;
# * `rm-ε`: the same with ε learned by Adam (learning rate 0.05) along with q(u), under GPflow's
#   Beta(0.2, 5) prior on ε: the closer analogue of RMGPC, which infers ε;
# * `rmgpc`: RMGPC itself, `comparison.rmgpc.RobustMulticlassEP`: the full GP with the noiseless
#   Heaviside likelihood, each point an outlier with probability ρ ~ Beta(1, 9) (our choice of
#   prior: the supplement does not state it), trained by the supplement's EP (damping 0.5).
#
# Each sparse model is built and compiled once and restored to its initial state from a checkpoint
# before every data set; RMGPC holds its training set, so it is built for each.
#
# **What we measured** (full mode, 2026-11-25, 2 CPU cores, 6 min 8 s; the cells below print the
# numbers of your run). Test error in %, mean ± std over 20 data sets per scenario:
#
# | scenario | `lsm-negative-multinomial` | `lsm-vi` | `softmax` | `rm` | `rm-ε` | `rmgpc` | paper: RMGPC | paper: SMGPC |
# |---|---|---|---|---|---|---|---|---|
# | 1 | 18.7 ± 3.4 | 16.4 ± 3.4 | 12.4 ± 3.0 | 15.8 ± 3.8 | 15.8 ± 3.7 | 15.2 ± 5.5 | 15.2 ± 2.8 | 13.4 ± 2.4 |
# | 2 | 28.1 ± 5.3 | 25.5 ± 5.1 | 19.3 ± 4.0 | 12.8 ± 3.5 | 12.1 ± 2.7 | 12.5 ± 2.4 | 13.6 ± 3.1 | 22.1 ± 4.1 |
# | 3 | 27.8 ± 5.6 | 25.3 ± 4.8 | 19.5 ± 3.4 | 19.1 ± 3.7 | 18.4 ± 3.9 | 17.0 ± 3.9 | 19.4 ± 3.7 | 24.6 ± 4.4 |
#
# * **RMGPC itself reproduces the paper's column** to within 2.4 points (15.2, 12.5 and 17.0 %
#   against 15.2, 13.6 and 19.4 %), and the claim's shape holds for it: softmax beats it under
#   latent noise (on 14 of 19 data sets with a difference, sign test p = 0.064), it beats softmax on
#   all 20 when labels are flipped at random (p = 2e-6), and on 14 of 19 with both kinds of noise
#   (p = 0.064; neither p is significant at 20 data sets). Its posterior mean outlier rate E[ρ] is
#   0.09 in scenario 1, 0.19 in scenario 2 (20 % of labels redrawn, 16 % changed) and 0.24 in
#   scenario 3. (The previous run had E[ρ] = 0.64 in scenario 1 and 13.6 % error: one prior
#   factor's cavity Beta turned improper and every later EP step was refused, leaving ρ where the
#   first steps had pushed it. EP now skips such a factor's update.)
# * **GPflow's robust-max comes close to RMGPC** (within 1.6 points in every scenario), and its
#   learned ε follows the noise (0.03, 0.09 and 0.14 in scenarios 1, 2 and 3).
# * **Against softmax, robust-max with learned ε** loses under latent noise (4 of 20, p = 0.012),
#   wins on 19 of 20 with flipped labels, and is not distinguishable with both (12 of 20,
#   p = 0.5); our softmax does better there than the paper's SMGPC.
# * **Logistic-softmax is the least robust model here, in every scenario.** `lsm-negative-multinomial` has
#   18.7, 28.1 and 27.8 % error. Trained without augmentation (`lsm-vi`), the same likelihood has 2.3–2.6
#   points less, still 4–6 points worse than softmax. Most of the gap is the likelihood, and the
#   looser augmented bound adds the rest. Our reading of why (not proven here): the labels come
#   from an argmax of linear functions, which only their differences decide. Softmax sees exactly
#   those differences; σ(f_k) saturates at 1 for every class far on the positive side, so the
#   logistic-softmax cannot rank such classes against each other.
#
# 20 data sets per scenario rather than the supplement's 100 keep the run to about six minutes;
# the comparison is paired (every model sees the same data sets), and a sign test says whether 20
# separate the models. Full-batch CAVI has converged after 30 steps (the test error no longer
# changes); the natural-gradient models get 200 steps (40 of γ warm-up, then γ = 0.1), the
# Adam-trained ones 300 (learning rate 0.05); RMGPC's EP 100 sweeps (converged: its outlier rate
# no longer changes).
#
# Set `GPFLOW_AUGMENTED_FAST=1` for a short run (one data set per scenario, few steps).

# %%
import tempfile

import gpflow
import numpy as np
import tensorflow as tf

from gpflow_augmented import metrics
from gpflow_augmented.comparison import ci_utils, plots
from gpflow_augmented.comparison.baselines import build_method
from gpflow_augmented.comparison.methods import NaturalGradientMethod
from gpflow_augmented.comparison.rmgpc import RobustMulticlassEP
from gpflow_augmented.comparison.sep import ExpectationPropagation

OUTPUT = ci_utils.output_dir("label_noise")
NUM_DATASETS = ci_utils.reduce_in_fast_mode(20, 1)
CAVI_STEPS = ci_utils.reduce_in_fast_mode(30, 5)
NATURAL_GRADIENT_STEPS = ci_utils.reduce_in_fast_mode(200, 5)
ADAM_STEPS = ci_utils.reduce_in_fast_mode(300, 5)
EP_STEPS = ci_utils.reduce_in_fast_mode(100, 5)
NUM_CLASSES, DIMENSION, NUM_TRAIN, NUM_TEST = 5, 5, 100, 1000
SCENARIOS = {1: "latent noise near the boundaries", 2: "20 % of labels random", 3: "both"}


def linear_problem(scenario, rng):
    weights = rng.standard_normal((DIMENSION, NUM_CLASSES))
    X = rng.standard_normal((NUM_TRAIN + NUM_TEST, DIMENSION))
    latent = X @ weights
    y = latent.argmax(1)
    train = slice(0, NUM_TRAIN)
    if scenario in (1, 3):
        noisy = latent[train] + 0.5 * rng.standard_normal((NUM_TRAIN, NUM_CLASSES))
        y[train] = noisy.argmax(1)
    if scenario in (2, 3):
        flipped = rng.random(NUM_TRAIN) < 0.2
        y[train][flipped] = rng.integers(NUM_CLASSES, size=flipped.sum())
    return X[train], y[train, None], X[NUM_TRAIN:], y[NUM_TRAIN:, None]


# %% [markdown]
# The three models, each built once, with its initial state saved.

# %%
def linear_method(name):
    kernel = gpflow.kernels.Linear(variance=1.0)
    gpflow.set_trainable(kernel.variance, False)
    base = "rm" if name == "rm-ε" else name
    method = build_method(base, kernel, np.eye(DIMENSION), NUM_CLASSES, NUM_TRAIN,
                          learning_rate=0.05, full_batch=True)
    if name == "rm-ε":
        # set before the optimizers are built, so Adam has a slot for ε
        gpflow.set_trainable(method.model.likelihood.invlink.epsilon, True)
        method = NaturalGradientMethod(name, method.model, learning_rate=0.05)
    return method


def rmgpc(X, Y):
    """RMGPC trained on (X, Y) by EP: the model and its posterior mean of the outlier rate ρ."""
    kernel = gpflow.kernels.Linear(variance=1.0)
    gpflow.set_trainable(kernel.variance, False)
    model = RobustMulticlassEP((X, Y), kernel, NUM_CLASSES)
    step = tf.function(ExpectationPropagation(model, damping=0.5).step)
    for _ in range(EP_STEPS):
        step()
    a, b = model.outlier_rate_posterior()
    return model, float(a / (a + b))


checkpoint_dir = tempfile.mkdtemp()
SOFTMAX_TYPE, ROBUST = ["lsm-negative-multinomial", "lsm-vi", "softmax"], ["rm", "rm-ε"]
methods = {name: linear_method(name) for name in SOFTMAX_TYPE + ROBUST}
initial_state = {name: m.checkpoint().write(f"{checkpoint_dir}/{name}") for name, m in methods.items()}
steps = {"lsm-negative-multinomial": CAVI_STEPS, "lsm-vi": ADAM_STEPS, "softmax": ADAM_STEPS,
         "rm": NATURAL_GRADIENT_STEPS, "rm-ε": NATURAL_GRADIENT_STEPS}

# %% [markdown]
# ## Every scenario, every data set

# %%
rng = np.random.default_rng(2011)
errors = {scenario: {name: [] for name in [*methods, "rmgpc"]} for scenario in SCENARIOS}
epsilons = {scenario: [] for scenario in SCENARIOS}
outlier_rates = {scenario: [] for scenario in SCENARIOS}
for scenario in SCENARIOS:
    for _ in range(NUM_DATASETS):
        X, Y, X_test, Y_test = linear_problem(scenario, rng)
        X, Y = tf.constant(X), tf.constant(Y)
        for name, method in methods.items():
            method.checkpoint().read(initial_state[name]).assert_consumed()
            for _ in range(steps[name]):
                method.step(X, Y)
            probabilities, _ = method.model.predict_y(X_test)
            errors[scenario][name].append(metrics.error_rate(probabilities.numpy(), Y_test))
        epsilons[scenario].append(float(methods["rm-ε"].model.likelihood.invlink.epsilon.numpy()))
        model, outlier_rate = rmgpc(X, Y)
        probabilities, _ = model.predict_y(X_test)
        errors[scenario]["rmgpc"].append(metrics.error_rate(probabilities.numpy(), Y_test))
        outlier_rates[scenario].append(outlier_rate)
    print(f"scenario {scenario} ({SCENARIOS[scenario]}): " + ", ".join(
        f"{name} {100 * np.mean(e):.1f} ± {100 * np.std(e):.1f} %"
        for name, e in errors[scenario].items())
        + f"; learned ε {np.mean(epsilons[scenario]):.3f}, RMGPC's E[ρ] "
        f"{np.mean(outlier_rates[scenario]):.3f}")

# %% [markdown]
# ## Table 1 beside ours, and the claim checked on this run
#
# The claim's shape: a robust model is worse than a softmax-type model in scenario 1 and better in
# scenarios 2 and 3. Per scenario we count the data sets on which RMGPC, and robust-max with
# learned ε, has the lower test error than each softmax-type model, with a two-sided sign test's
# p-value.

# %%
from scipy.stats import binomtest

PAPER = {1: (15.2, 13.4), 2: (13.6, 22.1), 3: (19.4, 24.6)}
for scenario in SCENARIOS:
    for robust_name in ("rmgpc", "rm-ε"):
        robust = np.array(errors[scenario][robust_name])
        cells = []
        for name in SOFTMAX_TYPE:
            other = np.array(errors[scenario][name])
            wins, losses = int(np.sum(robust < other)), int(np.sum(robust > other))
            p = binomtest(wins, wins + losses).pvalue if wins + losses else 1.0
            cells.append(f"vs {name}: better on {wins}, worse on {losses} (p = {p:.2g})")
        print(f"scenario {scenario}: paper RMGPC {PAPER[scenario][0]} % vs SMGPC "
              f"{PAPER[scenario][1]} %; ours, {robust_name} " + "; ".join(cells))

# %%
from matplotlib.figure import Figure

figure = Figure(figsize=(13, 3.6), layout="constrained")
for ax, scenario in zip(figure.subplots(1, 3, sharey=True), SCENARIOS):
    ax.boxplot([100 * np.array(e) for e in errors[scenario].values()])
    ax.set_xticks(range(1, len(errors[scenario]) + 1), list(errors[scenario]), rotation=45)
    ax.set(title=f"scenario {scenario}: {SCENARIOS[scenario]}", ylabel="test error (%)")
plots.save_figure(figure, OUTPUT / "label_noise_errors.png")
figure
