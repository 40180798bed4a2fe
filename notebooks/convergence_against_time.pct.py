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
# # Convergence against time (paper §5.4, Figure 7; workshop paper, Table B.1)
#
# **The paper's claims.** Our method (LSM) converges about ten times faster than GPflow's
# robust-max model trained by natural gradients (RM), and beats it on test NLL thanks to better
# calibration (MNIST is the exception); the test errors of all methods are similar. The workshop
# version's Table B.1 reports error and NLL after a 100-second training budget (10-fold
# cross-validation, M = 200 fixed k-means++ inducing points, B = 100, SE-ARD kernel, Adam on the
# hyperparameters).
#
# **What we run.** `gpflow_augmented.comparison.compare`: every method from the same kernel,
# inducing points and minibatch stream, on one clock that counts training only (see docs/benchmarks.md's
# comparison section), with the table's settings M = 200 and B = 100 and a 100-second budget, on
# the Table B.1 datasets we have: vehicle, segment and satimage (bundled) and, from the benchmark
# data folder (`GPFLOW_AUGMENTED_DATA`; without it, only the bundled three), DNA and Shuttle. One split
# (the official one where there is one, else a seeded 20 %), not 10 folds, so there are no
# standard deviations. The SEP column is the package's `sep` (`comparison.sep`), which no GPflow
# model provides.
#
# `lsm` is the package's method: the logistic-softmax model trained by closed-form natural-gradient
# steps on the exact bound (the paper's LSM is its augmented bound, our `lsm-negative-multinomial`). `METHODS`
# below runs the table's three methods, `lsm`, `rm` and `sep` (the Heaviside likelihood by stochastic
# EP, the table's SEP-MGPC), and `dirichlet` (Milios et al.'s Dirichlet GP classification, the fast
# method GPyTorch users are pointed to; not in the table). Add `"lsm-negative-multinomial"`, `"softmax"` and
# `"lsm-vi"` for every method of the benchmark in docs/benchmarks.md. In full mode this notebook
# takes about 38 minutes, because the table is defined by its 100-second budget.
#
# **What we measured** (full mode, 2026-11-25, 2 CPU cores, nothing else running, 37 min 35 s; the
# cells below print the numbers of your run). Error / NLL after 100 s, the paper's in brackets:
#
# | dataset | LSM | RM | SEP | Dirichlet | RM/LSM time to a common NLL |
# |---|---|---|---|---|---|
# | vehicle | 0.189 / 0.371 (0.27 / 0.55) | 0.213 / 1.033 (0.19 / 0.71) | **0.154 / 0.283** (0.25 / 0.61) | 0.189 / 0.418 | 8.0× |
# | segment | 0.039 / 0.154 (0.06 / 0.17) | 0.048 / 0.207 (0.04 / 0.19) | **0.037 / 0.139** (0.05 / 0.28) | 0.043 / 0.160 | 5.4× |
# | satimage | 0.105 / **0.264** (0.12 / 0.33) | 0.104 / 0.451 (0.13 / 0.59) | **0.103** / 0.266 (0.10 / 0.40) | 0.112 / 0.301 | 80× |
# | DNA | **0.039 / 0.129** (0.03 / 0.29) | 0.040 / 0.140 (0.06 / 0.19) | 0.042 / 0.132 (0.55 / 1.10) | 0.040 / 0.140 | 1.4× |
# | shuttle | 0.003 / 0.011 (0.00 / 0.06) | 0.003 / 0.025 (0.01 / 0.03) | **0.002 / 0.006** (0.00 / 0.02) | 0.004 / 0.024 | 1.6× |
#
# * **Our LSM is better than the paper's** in NLL on every dataset (by 0.016–0.18 nats), and in
#   error on vehicle, segment and satimage.
# * **Better NLL than RM: confirmed on all 5. "Ten times faster": on one of five** (satimage, 80×);
#   8.0× on vehicle, 5.4× on segment, 1.4–1.6× on DNA and shuttle, measured as the time both need
#   to reach a common test NLL (the worse of the two bests + 0.01). On the previous run of this
#   notebook (2026-11-24) the ratios were 3.2×, 7.5×, 374×, 1.1× and 1.5×: the ratio moves a lot
#   from run to run where one method reaches the target within its first evaluations.
# * **Better NLL than SEP (Table B.1): confirmed on DNA and satimage, by 0.003 and 0.002 nats;
#   reversed on vehicle (SEP 0.283 against 0.371) and segment (0.139 against 0.154); SEP better on
#   shuttle, as in the paper.** Our SEP is far better than the paper's on every dataset (DNA 0.132
#   against 1.10), so the paper's SEP column understates the peer. SEP takes fewer steps than LSM in
#   the same 100 s (1148–2142 against 4880–7229) and its ECE is the lowest on four of five.
# * **Dirichlet**: a higher NLL than LSM on all five (by 0.006–0.047 nats), error within 0.007.
#
# Set `GPFLOW_AUGMENTED_FAST=1` for a short run (a half-second budget on vehicle only).

# %%
import json


import gpflow_augmented as ga
from gpflow_augmented.comparison import ci_utils, plots
from gpflow_augmented.comparison import compare, time_to_common_nll

OUTPUT = ci_utils.output_dir("convergence_against_time")
METHODS = ["lsm", "rm", "sep", "dirichlet"]
TIME_BUDGET = ci_utils.reduce_in_fast_mode(100.0, 0.5)
NUM_INDUCING = ci_utils.reduce_in_fast_mode(200, 20)
BUNDLED = ci_utils.reduce_in_fast_mode(["vehicle", "segment", "satimage"], ["vehicle"])
FROM_DATA_DIR = ci_utils.reduce_in_fast_mode(["dna", "shuttle"], [])

# Table B.1 of the workshop paper, (error, NLL) after 100 s: SC-MGPC (ours), SVI-MGPC (GPflow RM),
# SEP-MGPC (the Heaviside likelihood by stochastic EP). Dirichlet GP classification is not in it.
PAPER = {
    "dna": {"lsm": (0.03, 0.29), "rm": (0.06, 0.19), "sep": (0.55, 1.10)},
    "satimage": {"lsm": (0.12, 0.33), "rm": (0.13, 0.59), "sep": (0.10, 0.40)},
    "segment": {"lsm": (0.06, 0.17), "rm": (0.04, 0.19), "sep": (0.05, 0.28)},
    "shuttle": {"lsm": (0.00, 0.06), "rm": (0.01, 0.03), "sep": (0.00, 0.02)},
    "vehicle": {"lsm": (0.27, 0.55), "rm": (0.19, 0.71), "sep": (0.25, 0.61)},
}

datasets = [ga.datasets.load_dataset(name) for name in BUNDLED]
for name in FROM_DATA_DIR:
    data_dir = ci_utils.benchmark_data_dir(name)
    if data_dir is None:
        print(f"{name}.npz not found (set GPFLOW_AUGMENTED_DATA): left out")
    else:
        datasets.append(ga.datasets.load_dataset(name, data_dir))

# %% [markdown]
# ## Train every method on every dataset for the budget

# %%
results = {}
for dataset in datasets:
    # One Adam rate for all, as in the paper's table and in the run measured above; without it
    # each method takes its own default rate.
    results[dataset.name] = compare(dataset, METHODS, num_inducing=NUM_INDUCING, batch_size=100,
                                    time_budget=TIME_BUDGET, learning_rate=0.01)
    for method in results[dataset.name].methods:
        print(f"{dataset.name:9s} {method.name:9s} error {method.final_metrics['error']:.4f}  "
              f"NLL {method.final_metrics['nll']:.4f}  ECE {method.final_metrics['ece']:.4f}  "
              f"({method.iterations} steps)")
(OUTPUT / "results.json").write_text(json.dumps({n: r.to_json() for n, r in results.items()}))

# %% [markdown]
# ## Figure 7: test error and NLL against training time (log axis)

# %%
for name, result in results.items():
    figure = plots.traces_figure({m.name: m.trace for m in result.methods}, title=name)
    plots.save_figure(figure, OUTPUT / f"figure7_{name}.png")
figure

# %% [markdown]
# ## Table B.1: after the budget, beside the paper's numbers
#
# Ours are measured on the whole test set at the end of the budget; the paper's are means over
# 10 folds.

# %%
print(f"{'dataset':9s} {'method':9s} {'error':>7s} {'paper':>6s} {'NLL':>7s} {'paper':>6s}")
for name, result in results.items():
    for method in result.methods:
        paper = PAPER.get(name, {}).get(method.name)
        paper_error, paper_nll = (f"{v:6.2f}" for v in paper) if paper else ("     -",) * 2
        print(f"{name:9s} {method.name:9s} {method.final_metrics['error']:7.3f} {paper_error} "
              f"{method.final_metrics['nll']:7.3f} {paper_nll}")

# %% [markdown]
# ## The claims, checked on this run
#
# *Faster*: the ratio of the training times RM and LSM need to reach a common test NLL, the worse
# of their two best NLLs plus 0.01 nats (`None` if one never gets there within the budget).
# *Better NLL*: the final NLLs. *Similar error*: the final errors.

# %%
for name, result in results.items():
    by_name = {m.name: m for m in result.methods}
    if not {"lsm", "rm"} <= set(by_name):
        continue
    lsm, rm = by_name["lsm"], by_name["rm"]
    target, t_lsm, t_rm = time_to_common_nll(lsm.trace, rm.trace)
    ratio = f"{t_rm / t_lsm:.1f}×" if t_lsm and t_rm else "n/a"
    seconds = lambda t: "never" if t is None else f"{t:.2f} s"
    print(f"{name:9s} to NLL {target:.3f}: LSM {seconds(t_lsm)}, RM {seconds(t_rm)}, RM/LSM {ratio}; "
          f"final NLL LSM {lsm.final_metrics['nll']:.3f} vs RM {rm.final_metrics['nll']:.3f} "
          f"({'LSM' if lsm.final_metrics['nll'] < rm.final_metrics['nll'] else 'RM'} better); "
          f"error LSM {lsm.final_metrics['error']:.3f} vs RM {rm.final_metrics['error']:.3f}")

# %% [markdown]
# *The published peers.* Table B.1's SEP column says the paper's method beats SEP in NLL on DNA,
# satimage, segment and vehicle and loses on shuttle. The same comparison on this run, `lsm`
# against `sep` and `dirichlet`: the final NLLs and errors, and the ratio of the times to a common
# NLL (the peer's time over ours; above 1, ours is sooner).

# %%
for name, result in results.items():
    by_name = {m.name: m for m in result.methods}
    if "lsm" not in by_name:
        continue
    lsm = by_name["lsm"]
    for peer_name in ("sep", "dirichlet"):
        if peer_name not in by_name:
            continue
        peer = by_name[peer_name]
        target, t_lsm, t_peer = time_to_common_nll(lsm.trace, peer.trace)
        ratio = f"{t_peer / t_lsm:.2g}×" if t_lsm and t_peer else "n/a"
        better = "LSM" if lsm.final_metrics["nll"] < peer.final_metrics["nll"] else peer_name
        print(f"{name:9s} {peer_name:9s} NLL LSM {lsm.final_metrics['nll']:.3f} vs "
              f"{peer.final_metrics['nll']:.3f} ({better} better); error LSM "
              f"{lsm.final_metrics['error']:.3f} vs {peer.final_metrics['error']:.3f}; "
              f"to NLL {target:.3f}: {peer_name}/LSM {ratio}")
