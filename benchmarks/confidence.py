"""
Where `lsm`'s under-confidence comes from, on validation splits carved from the training data
(the test set is never read).

`lsm` trains at its defaults for the same time at each number of inducing points M. Each model is
then scored twice on the validation points: with q(f)'s whole variance, and with the Nyström
residual k(x, x) − k_xZ K_ZZ⁻¹ k_Zx taken out, the part of the latent variance that no inducing
point explains and no step on q(u) can shrink. The rows give the validation NLL and the mean
confidence (the largest class probability) of each beside the accuracy, the kernel variance, and
the mean latent variance and residual.

Two other predictive rules are scored from the same q(f), to tell the likelihood's averaging over
q(f)'s variance from the latent means themselves: the plug-in p(y | E f), which drops the
variance, and the normalised exp E log p(y = k | f) ∝ exp E log σ(f_k), the per-point likelihood
the ELBO itself fits, whose non-target classes are not lifted by their variance (E log σ(f) ≈ E f
far below 0, where E σ(f) ≈ exp(E f + Var f / 2)).

    python -m benchmarks confidence --data-dir ../shared/data --datasets letter,usps11k,optdigits
"""

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

__all__ = [
    "DEFAULT_DATASETS",
    "DEFAULT_NUM_INDUCING",
    "nystrom_residual",
    "run_confidence",
    "confidence_report",
]

DEFAULT_DATASETS = ("letter", "usps11k", "optdigits")
DEFAULT_NUM_INDUCING = (100, 200)
_VALIDATION_FRACTION = 0.2
# Validation points scored a run, as the stability suite's trace: a seeded sample of larger splits
# keeps kddcup's 79,000 points x 23 classes x the quasi-Monte Carlo samples within memory.
_MAX_SCORED = 20_000


def nystrom_residual(model: Any, X: np.ndarray) -> np.ndarray:
    """k(x, x) − k_xZ K_ZZ⁻¹ k_Zx [N] of the model's kernel and inducing points (one kernel shared
    by the latent GPs), with K_ZZ's jitter as the model's conditional has it."""
    import gpflow
    import tensorflow as tf

    X = tf.convert_to_tensor(X, dtype=gpflow.config.default_float())
    Z = model.inducing_variable
    Kzz = gpflow.covariances.Kuu(Z, model.kernel, jitter=gpflow.config.default_jitter())
    A = tf.linalg.triangular_solve(
        tf.linalg.cholesky(Kzz), gpflow.covariances.Kuf(Z, model.kernel, X), lower=True
    )
    return np.asarray(model.kernel(X, full_cov=False) - tf.reduce_sum(A * A, axis=0))


def _scores(model: Any, X: np.ndarray, Y: np.ndarray, variance: Any) -> Tuple[float, float]:
    """(validation NLL, mean confidence) of the likelihood's predictive at q(f)'s mean and
    ``variance``."""
    mean, _ = model.predict_f(X)
    likelihood = model.likelihood
    nll = -float(np.mean(likelihood.predict_log_density(X, mean, variance, Y)))
    probabilities, _ = likelihood.predict_mean_and_var(X, mean, variance)
    return nll, float(np.mean(np.max(probabilities, axis=1)))


def _rule_scores(model: Any, X: np.ndarray, Y: np.ndarray) -> Tuple[float, float, float]:
    """Validation NLL of the plug-in p(y | E f), and the NLL and mean confidence of the normalised
    exp E log p(y | f) (the likelihood's ``predictive="geometric-mean"``, on a copy that shares
    its parameters)."""
    import copy

    mean, variance = model.predict_f(X)
    plug_in = model.likelihood.log_prob(X, mean, Y)
    geometric_rule = copy.copy(model.likelihood)
    geometric_rule.predictive = "geometric-mean"
    geometric = geometric_rule.predict_log_density(X, mean, variance, Y)
    probabilities, _ = geometric_rule.predict_mean_and_var(X, mean, variance)
    confidence = float(np.mean(np.max(probabilities, axis=1)))
    return -float(np.mean(plug_in)), -float(np.mean(geometric)), confidence


def _scored_points(split: Any, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """The validation points a row scores: all of them, or a seeded sample of ``_MAX_SCORED``."""
    from gpflow_augmented.datasets import seeded_rows

    rows = seeded_rows(len(split.X_test), _MAX_SCORED, seed)
    return split.X_test[rows], split.Y_test[rows]


def _row(model: Any, split: Any, iterations: int, seed: int) -> Dict[str, Any]:
    X, Y = _scored_points(split, seed)
    _, variance = model.predict_f(X)
    residual = nystrom_residual(model, X)
    nll, confidence = _scores(model, X, Y, variance)
    # Floored above 0: where the inducing points explain nothing more than the residual.
    without = np.maximum(np.asarray(variance) - residual[:, None], 1e-12)
    nll_without, confidence_without = _scores(model, X, Y, without)
    probabilities, _ = model.predict_y(X)
    error = float(np.mean(np.argmax(probabilities, axis=1) != Y[:, 0]))
    nll_plug_in, nll_geometric, confidence_geometric = _rule_scores(model, X, Y)
    return {
        "num_inducing": int(model.inducing_variable.num_inducing),
        "steps": int(iterations),
        "kernel_variance": float(model.kernel.variance.numpy()),
        "latent_variance": float(np.mean(variance)),
        "residual": float(np.mean(residual)),
        "accuracy": 1.0 - error,
        "nll": nll,
        "confidence": confidence,
        "nll_without_residual": nll_without,
        "confidence_without_residual": confidence_without,
        "nll_plug_in": nll_plug_in,
        "nll_geometric": nll_geometric,
        "confidence_geometric": confidence_geometric,
    }


def run_confidence(
    output: str,
    data_dir: Optional[str],
    datasets: Sequence[str] = DEFAULT_DATASETS,
    seeds: Sequence[int] = (0,),
    time_budget: float = 40.0,
    num_inducing: Sequence[int] = DEFAULT_NUM_INDUCING,
) -> List[Dict[str, Any]]:
    """Every dataset, seed and M's row, written to ``output``/confidence.json (with the machine,
    the versions and the date) and confidence.md."""
    from gpflow_augmented.comparison.protocol import compare
    from .matched import write_study
    from gpflow_augmented.comparison.tuning import validation_split
    from gpflow_augmented.datasets import load_dataset

    rows = []
    for name in datasets:
        for seed in seeds:
            dataset = load_dataset(name, data_dir, seed=seed)
            split = validation_split(dataset, _VALIDATION_FRACTION, seed)
            for M in num_inducing:
                trained: Dict[str, Any] = {}
                result = compare(
                    split,
                    ["lsm"],
                    seed=seed,
                    time_budget=time_budget,
                    num_inducing=M,
                    callback=lambda method, entry, _: trained.__setitem__("lsm", method),
                )
                row = _row(trained["lsm"].model, split, result.methods[0].iterations, seed)
                rows.append({"dataset": name, "seed": seed, **row})
    write_study(Path(output), "confidence", rows, confidence_report(rows), time_budget)
    return rows


def confidence_report(rows: Sequence[Dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| dataset | seed | M | steps | kernel variance | latent variance | residual | accuracy "
        "| NLL | confidence | NLL, no residual | confidence, no residual | NLL, p(y given E f) "
        "| NLL, exp E log p | confidence, exp E log p |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        # Studies written before the rule's confidence was scored have none.
        geometric = "-" if "confidence_geometric" not in r else f"{r['confidence_geometric']:.3f}"
        lines.append(
            f"| {r['dataset']} | {r['seed']} | {r['num_inducing']} | {r['steps']} | "
            f"{r['kernel_variance']:.1f} | {r['latent_variance']:.2f} | {r['residual']:.2f} | "
            f"{r['accuracy']:.3f} | {r['nll']:.4f} | {r['confidence']:.3f} | "
            f"{r['nll_without_residual']:.4f} | {r['confidence_without_residual']:.3f} | "
            f"{r['nll_plug_in']:.4f} | {r['nll_geometric']:.4f} | {geometric} |"
        )
    return "\n".join(lines)
