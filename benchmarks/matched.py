"""
`lsm` against its peers at matched hyperparameters, on validation splits carved from the training
data (the test set is never read).

Each method is first trained at its defaults for the same time (``compare``). Then `lsm`'s q(u)
and prior mean are refitted at each peer's kernel, and each peer's q(u) at `lsm`'s kernel, the
kernel held fixed, for as many steps as the method made at its own. A gap that stays when the
kernels are swapped lies in the likelihood and its q(u); one that closes lies in the
hyperparameters. Each row also gives the mean confidence (the largest class probability) beside
the accuracy.

With ``--exact-draws S`` a row ``gibbs`` adds the exact posterior of `lsm`'s own model at its
learned kernel, prior mean and inducing inputs (the Gibbs sampler of the projected-process model
f = μ + K_xz K_zz⁻¹ u, four chains of S draws after S / 2 sweeps of burn-in). Two chains start
from draws of `lsm`'s q(u), two from the prior, and each pair's NLL is given beside the pooled
one: chains from both ends that meet (and a probability R-hat near 1) are the exact posterior.
Where it scores as `lsm`'s q(u) does, the Gaussian q(u) and its steps lose nothing, and a gap to a
peer at the same kernel lies in the logistic-softmax likelihood itself. The sampler's sweeps slow
down as the training set grows; ``--train-points N`` runs the whole study (the methods' training,
the refits and the chains) on a seeded subsample of N training points, where chains can meet in
minutes. The validation points are the same either way.

    python -m benchmarks matched --data-dir ../shared/data --datasets optdigits,usps11k,letter
"""

import datetime
import json
import logging
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

__all__ = [
    "DEFAULT_DATASETS",
    "DEFAULT_PEERS",
    "exact_report",
    "matched_report",
    "matched_tables",
    "run_matched",
    "write_study",
]

DEFAULT_DATASETS = ("optdigits", "usps11k", "letter")
DEFAULT_PEERS = ("rm", "sep")
_VALIDATION_FRACTION = 0.2
#: Chains of the exact posterior's sampler; split R-hat is taken over them.
_EXACT_CHAINS = 4
#: Validation points whose latent means and probabilities the R-hat is taken over.
_RHAT_POINTS = 200


def _training_subsample(split: Any, points: int, seed: int) -> Any:
    """``split`` with a seeded ``points`` of its training points (every class keeps at least
    one); unchanged when it has no more than that."""
    from gpflow_augmented.datasets import keep_every_class

    if points >= len(split.X_train):
        return split
    rng = np.random.default_rng(seed)
    drawn = np.zeros(len(split.X_train), bool)
    drawn[rng.choice(len(drawn), points, replace=False)] = True
    keep = keep_every_class(split.Y_train[:, 0], drawn)
    return split._replace(X_train=split.X_train[keep], Y_train=split.Y_train[keep])


def _kernel_values(kernel: Any) -> Dict[str, Any]:
    return {
        "lengthscales": np.array(kernel.lengthscales.numpy(), dtype=float),
        "variance": float(kernel.variance.numpy()),
    }


def _fixed_kernel(values: Dict[str, Any]) -> Any:
    """An SE-ARD kernel at ``values``, neither part trainable (nor updated in closed form)."""
    import gpflow
    from gpflow.utilities import set_trainable

    kernel = gpflow.kernels.SquaredExponential(
        variance=values["variance"], lengthscales=values["lengthscales"]
    )
    set_trainable(kernel, False)
    return kernel


def _refit(name: str, values: Dict[str, Any], Z: np.ndarray, split: Any, steps: int, seed: int):
    """Method ``name`` built at the fixed kernel ``values`` and stepped ``steps`` times on the
    split's training minibatches (its own optimiser on what stays trainable)."""
    from gpflow_augmented.comparison.baselines import build_method
    from gpflow_augmented.training import minibatches

    method = build_method(name, _fixed_kernel(values), Z, split.num_classes, len(split.X_train))
    for X, Y in minibatches(split.X_train, split.Y_train, 200, seed).take(steps):
        method.step(X, Y)
    return method


def _row(evaluator: Any, method: Any, kernel_of: str, steps: int) -> Dict[str, Any]:
    import tensorflow as tf

    # One compiled prediction a model, by design; TensorFlow counts the traces of all models'
    # predictions together (Evaluator.predictions) and would warn of retracing from the fifth.
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        metrics = evaluator(method.model)
    finally:
        logger.setLevel(level)
    confidence = float(np.mean(np.max(evaluator.latest_probabilities, axis=1)))
    return {
        "method": method.name,
        "kernel_of": kernel_of,
        "steps": int(steps),
        "nll": metrics["nll"],
        "error": metrics["error"],
        "confidence": confidence,
        "accuracy": 1.0 - metrics["error"],
        "kernel_variance": float(method.model.kernel.variance.numpy()),
    }


def _exact_row(split: Any, lsm: Any, draws: int, seed: int) -> Dict[str, Any]:
    """The exact posterior of ``lsm``'s model (kernel, prior mean and inducing inputs fixed at
    what it learned), sampled by Gibbs and scored as :func:`_row` scores a model, with its
    sampling time and the largest split R-hats over the first validation points."""
    from gpflow_augmented.metrics import error_rate
    from gpflow_augmented.sampling import GibbsSampler

    model = lsm.model
    sampler = GibbsSampler(
        (split.X_train, split.Y_train),
        model.kernel,
        split.num_classes,
        inducing_variable=np.array(model.inducing_variable.Z.numpy()),
        mean_function=model.mean_function,
    )
    starts = _chain_starts(model, seed)
    start = time.perf_counter()
    samples = sampler.sample(
        draws, num_chains=_EXACT_CHAINS, num_burnin=draws // 2, seed=seed, initial_whitened=starts
    )
    seconds = time.perf_counter() - start
    diagnostics = samples.diagnostics(split.X_test[:_RHAT_POINTS])
    labels = np.asarray(split.Y_test)[:, 0].astype(int)
    half = _EXACT_CHAINS // 2
    # each pair's predictive once; as the pairs hold as many draws, the pooled one is their mean
    by_origin = {
        origin: sampler.posterior(chains).predict_y(split.X_test)[0]
        for origin, chains in (("q", samples.whitened[:half]), ("prior", samples.whitened[half:]))
    }
    probabilities = (by_origin["q"] + by_origin["prior"]) / 2
    error = error_rate(probabilities, split.Y_test)
    by_start = {f"nll_from_{origin}": _label_nll(p, labels) for origin, p in by_origin.items()}
    return {
        "method": "gibbs",
        "kernel_of": "lsm",
        "steps": int(draws),
        "nll": _label_nll(probabilities, labels),
        "error": error,
        "confidence": float(np.mean(np.max(probabilities, axis=1))),
        "accuracy": 1.0 - error,
        "kernel_variance": float(model.kernel.variance.numpy()),
        "sampling_seconds": seconds,
        # the latents' R-hat apart from the probabilities': a direction the likelihood barely
        # sees (all classes' latents shifted together) can mix slowly without moving a prediction
        "latent_rhat": float(np.max(diagnostics.latent_rhat)),
        "probability_rhat": float(np.max(diagnostics.probability_rhat)),
        # the largest can be one slow point of many; the median says how typical it is
        "probability_rhat_median": float(np.median(diagnostics.probability_rhat)),
        **by_start,
    }


def _label_nll(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """The mean negative log probability [N, C] of each point's label."""
    from gpflow_augmented.metrics import mean_nll

    return mean_nll(np.log(probabilities[np.arange(len(labels)), labels]))


def _chain_starts(model: Any, seed: int) -> np.ndarray:
    """[chains, K, M] whitened starts: the first half drawn from ``model``'s q(u), the rest from
    the prior N(0, I)."""
    from gpflow_augmented.projection import kuu_cholesky, whitened_q

    rng = np.random.default_rng(seed)
    L = kuu_cholesky(model.kernel, model.inducing_variable)
    mu, sqrt = whitened_q(L, model.q_mu, model.q_sqrt, model.whiten)
    mu, sqrt = np.asarray(mu).T, np.asarray(sqrt)  # [K, M], [K, M, M]
    half = _EXACT_CHAINS // 2
    starts = rng.standard_normal((_EXACT_CHAINS, *mu.shape))
    starts[:half] = mu[None] + np.einsum("kmn,skn->skm", sqrt, starts[:half])
    return starts


def _matched_rows(
    split: Any, peers: Sequence[str], seed: int, time_budget: float, exact_draws: int = 0
) -> List[dict]:
    """One dataset and seed: each method at its own kernel, then the swapped fits, then (with
    ``exact_draws``) the exact posterior at `lsm`'s."""
    from gpflow_augmented.comparison.protocol import compare
    from gpflow_augmented.metrics import Evaluator

    trained: Dict[str, Any] = {}
    result = compare(
        split,
        ["lsm", *peers],
        seed=seed,
        time_budget=time_budget,
        callback=lambda method, entry, evaluator: trained.__setitem__(method.name, method),
    )
    steps = {method.name: method.iterations for method in result.methods}
    evaluator = Evaluator(split.X_test, split.Y_test)
    rows = [_row(evaluator, trained[name], name, steps[name]) for name in ["lsm", *peers]]
    kernels = {name: _kernel_values(method.model.kernel) for name, method in trained.items()}
    Z = np.array(trained["lsm"].model.inducing_variable.Z.numpy())
    for peer in peers:
        lsm = _refit("lsm", kernels[peer], Z, split, steps["lsm"], seed)
        rows.append(_row(evaluator, lsm, peer, steps["lsm"]))
        other = _refit(peer, kernels["lsm"], Z, split, steps[peer], seed)
        rows.append(_row(evaluator, other, "lsm", steps[peer]))
    if exact_draws:
        rows.append(_exact_row(split, trained["lsm"], exact_draws, seed))
    return rows


def run_matched(
    output: str,
    data_dir: Optional[str],
    datasets: Sequence[str] = DEFAULT_DATASETS,
    peers: Sequence[str] = DEFAULT_PEERS,
    seeds: Sequence[int] = (0,),
    time_budget: float = 40.0,
    exact_draws: int = 0,
    train_points: Optional[int] = None,
) -> List[Dict[str, Any]]:
    """Every dataset and seed's rows (:func:`_matched_rows`), on ``train_points`` of the training
    points when given, written to ``output``/matched.json (with the machine, the versions and the
    date) and matched.md."""
    from gpflow_augmented.comparison.tuning import validation_split
    from gpflow_augmented.datasets import load_dataset

    rows = []
    for name in datasets:
        for seed in seeds:
            dataset = load_dataset(name, data_dir, seed=seed)
            split = validation_split(dataset, _VALIDATION_FRACTION, seed)
            if train_points is not None:
                split = _training_subsample(split, train_points, seed)
            for row in _matched_rows(split, peers, seed, time_budget, exact_draws):
                rows.append(
                    {"dataset": name, "seed": seed, "train_points": len(split.X_train), **row}
                )
    write_study(Path(output), "matched", rows, matched_tables(rows), time_budget)
    return rows


def matched_tables(rows: Sequence[Dict[str, Any]]) -> str:
    """The matched table, and the exact posterior's when it was sampled."""
    exact = any(row["method"] == "gibbs" for row in rows)
    return matched_report(rows) + (f"\n\n{exact_report(rows)}" if exact else "")


def write_study(
    folder: Path, name: str, rows: List[Dict[str, Any]], table: str, time_budget: float
) -> None:
    """A validation study's rows as ``folder``/<name>.json, stamped with the machine, the versions,
    the date and the budget, and its ``table`` as <name>.md."""
    from gpflow_augmented.comparison.runs import machine

    folder.mkdir(parents=True, exist_ok=True)
    stamp = {**machine(), "measured": datetime.date.today().isoformat(), "time_budget": time_budget}
    (folder / f"{name}.json").write_text(json.dumps({"stamp": stamp, "rows": rows}, indent=1))
    (folder / f"{name}.md").write_text(table + "\n")


def matched_report(rows: Sequence[Dict[str, Any]]) -> str:
    """The rows as a Markdown table: validation NLL and error, mean confidence against
    accuracy."""
    lines = [
        "| dataset | seed | method | kernel of | steps | NLL | error | confidence | accuracy |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['dataset']} | {row['seed']} | {row['method']} | {row['kernel_of']} | "
            f"{row['steps']} | {row['nll']:.4f} | {row['error']:.4f} | "
            f"{row['confidence']:.3f} | {row['accuracy']:.3f} |"
        )
    return "\n".join(lines)


def exact_report(rows: Sequence[Dict[str, Any]]) -> str:
    """The ``gibbs`` rows as a Markdown table beside `lsm`'s q(u) at its own kernel (the same
    dataset and seed): validation NLL, that of each pair of chains, confidence against accuracy,
    and the R-hats that say whether the chains have met."""
    own = {
        (row["dataset"], row["seed"]): row
        for row in rows
        if row["method"] == "lsm" and row["kernel_of"] == "lsm"
    }
    lines = [
        "| dataset | seed | training points | draws a chain | q(u) NLL | exact NLL | "
        "from q(u)'s starts | from the prior's | q(u) confidence / accuracy | "
        "exact confidence / accuracy | probability R-hat, largest / median | latent R-hat | "
        "sampling s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if row["method"] != "gibbs":
            continue
        q = own[(row["dataset"], row["seed"])]
        median = row.get("probability_rhat_median")
        lines.append(
            f"| {row['dataset']} | {row['seed']} | {row.get('train_points', '–')} | "
            f"{row['steps']} | {q['nll']:.4f} | {row['nll']:.4f} | {row['nll_from_q']:.4f} | "
            f"{row['nll_from_prior']:.4f} | {q['confidence']:.3f} / {q['accuracy']:.3f} | "
            f"{row['confidence']:.3f} / {row['accuracy']:.3f} | {row['probability_rhat']:.2f} / "
            f"{'–' if median is None else f'{median:.2f}'} | {row['latent_rhat']:.2f} | "
            f"{row['sampling_seconds']:.0f} |"
        )
    return "\n".join(lines)
