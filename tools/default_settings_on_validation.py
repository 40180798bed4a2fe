"""Choose a method's default settings (positive bijector, Adam's learning rate, the exact-bound
methods' warm-start length, a kernel shared by the classes or one per class, ARD lengthscales or one
shared by the inputs) on validation splits, never on test data.

For each dataset and seed, the validation split ``tuning.validation_split`` carves from the training
data (the one ``--tune`` uses), and each method at its other defaults (M = 100, B = 200) once per
setting, under the same time budget. Prints validation error / NLL and, per dataset and method, the
setting with the lowest mean NLL over the seeds; then each setting's geometric-mean NLL against the
first setting's.

    python tools/default_settings_on_validation.py --data-dir ../shared/data --methods lsm --seeds
    0,1 \
        --bijectors softplus,exp --learning-rates own \
        --datasets vehicle,segment,satimage,shuttle,letter,waveform,pendigits,dna,optdigits,usps11k
"""

import argparse
import itertools
import json
import time

import gpflow
import numpy as np

from gpflow_augmented import median_lengthscale
from gpflow_augmented.comparison import baselines, compare, protocol
from gpflow_augmented.comparison.tuning import validation_split
from gpflow_augmented.datasets import load_dataset


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--datasets", required=True)
    parser.add_argument("--methods", required=True)
    parser.add_argument("--bijectors", default="softplus")
    parser.add_argument(
        "--learning-rates",
        default="own",
        help="comma-separated; 'own': each method's default (baselines.method_learning_rate)",
    )
    parser.add_argument(
        "--warm-start",
        default=str(baselines.EXACT_WARM_START),
        help="comma-separated warm-start lengths of the exact-bound methods",
    )
    parser.add_argument(
        "--kernels",
        default="shared",
        help="comma-separated: 'shared' (one kernel for all classes), 'per-class' (one a class), "
        "'isotropic' (one kernel for all classes with one lengthscale for all inputs, not ARD)",
    )
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--time-budget", type=float, default=40.0)
    parser.add_argument("--output", help="a JSON file for every run's scores")
    args = parser.parse_args()
    settings = [
        {
            "positive_bijector": bijector,
            "learning_rate": None if rate == "own" else float(rate),
            "warm_start": int(warm),
            "kernels": kernels,
        }
        for bijector, rate, warm, kernels in itertools.product(
            args.bijectors.split(","),
            args.learning_rates.split(","),
            args.warm_start.split(","),
            args.kernels.split(","),
        )
    ]
    seeds = [int(seed) for seed in args.seeds.split(",")]
    names, methods = args.datasets.split(","), args.methods.split(",")

    rows = []
    for name in names:
        dataset = load_dataset(name, data_dir=args.data_dir)
        for seed in seeds:
            split = validation_split(dataset, 0.2, seed)
            for method, setting in itertools.product(methods, settings):
                started = time.time()
                options = {
                    key: value
                    for key, value in setting.items()
                    if key not in ("warm_start", "kernels")
                }
                # build_method reads the module constant, so every run is built as compare builds it
                baselines.EXACT_WARM_START = setting["warm_start"]
                # the one kernel every method starts from, as compare builds it, but isotropic
                protocol.initial_kernel = (
                    _isotropic_kernel if setting["kernels"] == "isotropic" else _ard_kernel
                )
                result = compare(
                    split,
                    [method],
                    method_options={method: options},
                    seed=seed,
                    batch_size=200,
                    num_inducing=100,
                    time_budget=args.time_budget,
                    per_class_kernels=setting["kernels"] == "per-class",
                    progress=False,
                )
                final = result.methods[0].final_metrics
                lengthscales = _lengthscales(result.methods[0].method.model.kernel)
                rows.append(
                    {
                        "dataset": name,
                        "seed": seed,
                        "method": method,
                        **setting,
                        "setting": _label(setting),
                        "learning_rate": result.methods[0].options["learning_rate"],
                        "error": final["error"],
                        "nll": final["nll"],
                        "iterations": result.methods[0].iterations,
                        "confidence": float(result.methods[0].probabilities.max(axis=1).mean()),
                        "accuracy": 1.0 - final["error"],
                        "kernel_variance": _variance(result.methods[0].method.model.kernel),
                        "lengthscales": lengthscales.tolist(),
                    }
                )
                print(
                    f"{name} seed {seed} {method} {_label(setting)}: "
                    f"validation error {final['error']:.4f} "
                    f"NLL {final['nll']:.4f} confidence {rows[-1]['confidence']:.3f} "
                    f"lengthscales {np.min(lengthscales):.3g}..{np.max(lengthscales):.3g} "
                    f"({result.methods[0].iterations} iterations, "
                    f"{time.time() - started:.0f} s)",
                    flush=True,
                )
    if args.output:
        with open(args.output, "w") as file:
            json.dump(rows, file, indent=1)

    for method in methods:
        mean_nll = np.array(
            [
                [
                    np.mean(
                        [
                            r["nll"]
                            for r in rows
                            if r["dataset"] == name
                            and r["method"] == method
                            and r["setting"] == _label(setting)
                        ]
                    )
                    for setting in settings
                ]
                for name in names
            ]
        )
        for name, row in zip(names, mean_nll):
            means = ", ".join(f"{_label(s)} {nll:.4f}" for s, nll in zip(settings, row))
            print(
                f"{method} {name}: mean validation NLL {means} "
                f"-> {_label(settings[int(np.argmin(row))])}"
            )
        wins = np.bincount(np.argmin(mean_nll, axis=1), minlength=len(settings))
        ratios = np.exp(np.mean(np.log(mean_nll / mean_nll[:, :1]), axis=0))
        for setting, won, ratio in zip(settings, wins, ratios):
            print(
                f"{method} {_label(setting)}: lowest on {won} of {len(names)}, "
                f"geometric-mean NLL {ratio:.3f} x {_label(settings[0])}'s"
            )


_ard_kernel = protocol.initial_kernel


def _isotropic_kernel(X: np.ndarray) -> gpflow.kernels.SquaredExponential:
    """The comparison's starting kernel (variance 1, the median distance), one lengthscale."""
    return gpflow.kernels.SquaredExponential(variance=1.0, lengthscales=median_lengthscale(X))


def _kernels(kernel):
    return getattr(kernel, "kernels", [kernel])


def _lengthscales(kernel) -> np.ndarray:
    return np.concatenate([np.atleast_1d(k.lengthscales.numpy()) for k in _kernels(kernel)])


def _variance(kernel) -> float:
    return float(np.mean([k.variance.numpy() for k in _kernels(kernel)]))


def settings_table(rows) -> str:
    """A markdown table of the runs ``rows`` (this tool's ``--output``): per dataset and method,
    each setting's validation NLL (the mean over seeds), as a ratio to the method's first setting,
    mean confidence / accuracy, steps, and the lengthscales' range at the end."""
    lines = [
        "| dataset | method | kernel | bijector | learning rate | seeds | NLL | ÷ first "
        "| confidence / accuracy | steps | lengthscales |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict = {}
    for row in rows:
        key = (row["dataset"], row["method"])
        groups.setdefault(key, {}).setdefault(row["setting"], []).append(row)
    for (dataset, method), settings in groups.items():
        first = np.mean([r["nll"] for r in next(iter(settings.values()))])
        for runs in settings.values():
            nll = float(np.mean([r["nll"] for r in runs]))
            values = [x for r in runs for x in r.get("lengthscales", [])]
            span = (
                "-"
                if not values
                else _short(min(values))
                if min(values) == max(values)
                else f"{_short(min(values))}–{_short(max(values))}"
            )
            lines.append(
                f"| {dataset} | {method} | {runs[0]['kernels']} | {runs[0]['positive_bijector']} "
                f"| {runs[0]['learning_rate']:g} | {len(runs)} | {nll:.4f} | {nll / first:.3f} "
                f"| {np.mean([r['confidence'] for r in runs]):.3f} / "
                f"{np.mean([r['accuracy'] for r in runs]):.3f} "
                f"| {np.mean([r['iterations'] for r in runs]):.0f} | {span} |"
            )
    return "\n".join(lines) + "\n"


def _short(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def _label(setting) -> str:
    rate = setting["learning_rate"]
    return (
        f"{setting['positive_bijector']} lr {'own' if rate is None else format(rate, 'g')} "
        f"warm start {setting['warm_start']}"
        + ("" if setting["kernels"] == "shared" else f", {setting['kernels']} kernels")
    )


if __name__ == "__main__":
    main()
