"""Seeded training runs whose every parameter is saved, to prove that a refactor leaves behaviour
unchanged: ``--save before.npz`` on the old code, ``--compare before.npz`` on the new one.

    python tools/fingerprint.py --save /tmp/before.npz
    python tools/fingerprint.py --compare /tmp/before.npz

Each case trains a model on satimage (bundled) with ``fit`` and records every parameter of the
model and the ELBO trace; ``--compare`` prints the largest absolute difference per case and exits 1
if any exceeds ``--tolerance`` (default 1e-12). The cases cover every scheme and each optional
path of the step (class weights, class subsets, a prior mean, unwhitened q(u), the exact bound for
the hyperparameters, the binary model), so a change in any of them shows.
"""
import argparse
import os
import sys
import warnings
from typing import Callable, Dict

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import gpflow
import gpflow_augmented as ga
from gpflow_augmented.datasets import load_dataset, one_vs_rest


def _satimage():
    data = load_dataset("satimage")
    return data.X_train, data.Y_train, data.num_classes


def _multiclass(iterations: int, **options) -> Callable[[], Dict[str, np.ndarray]]:
    fit_options = {key: options.pop(key) for key in ("class_subset_size", "hyperparameter_bound")
                   if key in options}
    class_weights = options.pop("class_weights", False)

    def run() -> Dict[str, np.ndarray]:
        X, Y, C = _satimage()
        likelihood = ga.LogisticSoftmax(C, class_weights=class_weights)
        model = ga.LogisticSoftmaxSVGP(
            ga.initial_kernel(X), ga.inducing_points(X, 50, seed=0), C, num_data=len(X),
            likelihood=likelihood, **options,
        )
        result = ga.fit(model, (X, Y), iterations=iterations, batch_size=200, seed=0,
                        progress=False, **fit_options)
        return _record(model, result.elbo)

    return run


def _binary(iterations: int) -> Dict[str, np.ndarray]:
    data = one_vs_rest(load_dataset("satimage"), positive_class=0)
    X, Y = data.X_train, data.Y_train
    model = ga.BinaryLogisticSVGP(ga.initial_kernel(X), ga.inducing_points(X, 50, seed=0),
                                  num_data=len(X))
    result = ga.fit(model, (X, Y), iterations=iterations, batch_size=200, seed=0, progress=False)
    return _record(model, result.elbo)


def _record(model: gpflow.models.GPModel, elbo: np.ndarray) -> Dict[str, np.ndarray]:
    values = {name: np.asarray(value.numpy())
              for name, value in gpflow.utilities.parameter_dict(model).items()}
    values["elbo"] = np.asarray(elbo)
    return values


CASES = {
    "exact-200": _multiclass(200),
    "collapsed": _multiclass(60, scheme="collapsed"),
    "paper": _multiclass(60, scheme="paper"),
    "class-weights": _multiclass(60, scheme="collapsed", class_weights=True),
    "exact-class-weights": _multiclass(60, class_weights=True),
    "class-subsets": _multiclass(60, class_subset_size=3),
    "collapsed-subsets": _multiclass(60, scheme="collapsed", class_subset_size=3),
    "mean-unwhitened": _multiclass(
        60, mean_function=gpflow.mean_functions.Constant(), whiten=False),
    "collapsed-exact-hyper": _multiclass(60, scheme="collapsed", hyperparameter_bound="exact"),
    "binary": lambda: _binary(60),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--save")
    action.add_argument("--compare")
    parser.add_argument("--tolerance", type=float, default=1e-12)
    args = parser.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)
    results = {}
    for case, run in CASES.items():
        for name, value in run().items():
            results[f"{case}/{name}"] = value
    if args.save:
        np.savez(args.save, **results)
        print(f"saved {len(results)} arrays from {len(CASES)} cases to {args.save}")
        return 0
    reference = dict(np.load(args.compare))
    worst = 0.0
    for case in CASES:
        keys = sorted(k for k in reference if k.startswith(case + "/"))
        new_keys = sorted(k for k in results if k.startswith(case + "/"))
        if keys != new_keys:
            print(f"{case}: parameters differ: {sorted(set(keys) ^ set(new_keys))}")
            worst = np.inf
            continue
        difference = max(float(np.max(np.abs(reference[k] - results[k]), initial=0.0))
                         for k in keys)
        worst = max(worst, difference)
        print(f"{case:24s} max |Δ| = {difference:.3g} over {len(keys)} arrays")
    print(f"largest difference {worst:.3g} (tolerance {args.tolerance:g})")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
