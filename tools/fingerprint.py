"""Seeded training runs whose every parameter is saved, to prove that a refactor leaves behaviour
unchanged: ``--against REV`` runs the cases on revision REV (a temporary git worktree, imported
first through ``PYTHONPATH``) and on this checkout, on this machine, and compares them; nothing
outside the repository is needed. ``--save before.npz`` on the old code and ``--compare
before.npz`` on the new one do the same in two steps.

    python tools/fingerprint.py --against main
    python tools/fingerprint.py --save /tmp/before.npz
    python tools/fingerprint.py --compare /tmp/before.npz

Each case trains a model on satimage (bundled) and records every parameter of the model and the
ELBO trace; ``--compare`` prints the largest absolute difference per case and exits 1 if any exceeds
``--tolerance`` (default 1e-12). The cases cover:

* ``fit`` on every scheme and each optional path of the step (class weights, class subsets, a prior
  mean, unwhitened q(u), the exact bound for the hyperparameters, the binary model, the full batch
  with its line search), with the bound certificate of the full-batch run;
* ``CAVI`` driven directly (its own step, not ``Trainer``'s fused one), on minibatches and on the
  full batch;
* every comparison method (``method/<name>``), built as ``compare`` builds it, on the same fixed
  minibatches;
* the Gibbs sampler's two scans.

``--cases PATTERN`` runs only the cases whose name contains PATTERN.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import gpflow
import tensorflow as tf

import gpflow_augmented as ga
from gpflow_augmented.comparison import baselines

try:  # the method kinds' module; revisions before it kept positive_parameters in baselines
    from gpflow_augmented.comparison import methods
except ImportError:
    methods = baselines  # type: ignore[assignment]
from gpflow_augmented.datasets import load_dataset, one_vs_rest
from gpflow_augmented.sampling import GibbsSampler


def _satimage():
    data = load_dataset("satimage")
    return data.X_train, data.Y_train, data.num_classes


def _multiclass(iterations: int, **options) -> Callable[[], Dict[str, np.ndarray]]:
    fit_options = {
        key: options.pop(key)
        for key in ("class_subset_size", "hyperparameter_bound")
        if key in options
    }
    batch_size = options.pop("batch_size", 200)
    class_weights = options.pop("class_weights", False)

    def run() -> Dict[str, np.ndarray]:
        X, Y, C = _satimage()
        augmentation = (
            ga.likelihoods.MeanFieldGammaPoisson()
            if options.get("scheme") == "gamma-poisson"
            else None
        )
        likelihood = ga.LogisticSoftmax(C, class_weights=class_weights, augmentation=augmentation)
        model = ga.LogisticSoftmaxSVGP(
            ga.initial_kernel(X),
            ga.inducing_points(X, 50, seed=0),
            C,
            num_data=len(X),
            likelihood=likelihood,
            **options,
        )
        result = ga.fit(
            model,
            (X, Y),
            iterations=iterations,
            batch_size=batch_size,
            seed=0,
            progress=False,
            **fit_options,
        )
        values = _record(model, result.elbo)
        if result.certificate is not None:
            for field, value in result.certificate.as_dict().items():
                values[f"certificate.{field}"] = np.asarray(value)
        return values

    return run


def _cavi(
    iterations: int, batch_size: Optional[int] = 200, **options
) -> Callable[[], Dict[str, np.ndarray]]:
    """``CAVI`` stepped directly, without ``Trainer``: q(u) (and σ² where it applies) only;
    ``batch_size=None``: the full batch, at ρ = 1."""
    scheme = options.pop("scheme", "exact")

    def run() -> Dict[str, np.ndarray]:
        X, Y, C = _satimage()
        model = ga.LogisticSoftmaxSVGP(
            ga.initial_kernel(X),
            ga.inducing_points(X, 50, seed=0),
            C,
            num_data=len(X),
            scheme=scheme,
            mean_function=gpflow.mean_functions.Constant(),
        )
        cavi = ga.CAVI(model, 1.0 if batch_size is None else ga.RobbinsMonro(), **options)
        elbos = [cavi.step(batch).numpy() for batch in _batches(X, Y, iterations, batch_size)]
        return _record(model, np.array(elbos))

    return run


def _batches(
    X: np.ndarray, Y: np.ndarray, count: int, batch_size: Optional[int]
) -> List[Tuple[tf.Tensor, tf.Tensor]]:
    """``count`` batches: the whole set each time (``None``), or ``fit``'s seeded minibatches."""
    if batch_size is None:
        return [(tf.constant(X), tf.constant(Y))] * count
    return list(ga.minibatches(X, Y, batch_size, seed=0).take(count))


def _method(name: str, iterations: int = 20) -> Callable[[], Dict[str, np.ndarray]]:
    """Comparison method ``name`` built as ``compare`` builds it (its own rate and positive
    bijector), stepped on fixed minibatches (a full-GP method: on 200 points, full batch)."""

    def run() -> Dict[str, np.ndarray]:
        data = load_dataset("satimage")
        if name in baselines.BINARY_METHODS:
            data = one_vs_rest(data, positive_class=0)
        X, Y = data.X_train, data.Y_train
        full_gp = name in baselines.FULL_GP_METHODS
        if full_gp:
            X, Y = X[:200], Y[:200]
        tf.random.set_seed(0)  # softmax's expectation is Monte Carlo
        with methods.positive_parameters(baselines.method_positive_bijector(name)):
            method = baselines.build_method(
                name,
                ga.initial_kernel(X),
                ga.inducing_points(X, 50, seed=0),
                data.num_classes,
                len(X),
                full_batch=full_gp,
                data=(X, Y) if full_gp else None,
            )
        elbos = [
            np.asarray(method.step(Xb, Yb))
            for Xb, Yb in _batches(X, Y, iterations, None if full_gp else 200)
        ]
        return _record(method.model, np.array(elbos))

    return run


def _gibbs(scan: str) -> Dict[str, np.ndarray]:
    X, Y, C = _satimage()
    X, Y = X[:300], Y[:300]
    sampler = GibbsSampler(
        (X, Y), ga.initial_kernel(X), C, ga.inducing_points(X, 20, seed=0), scan=scan
    )
    samples = sampler.sample(5, num_chains=2, num_burnin=5, seed=0)
    return {"whitened": np.asarray(samples.whitened)}


def _binary(iterations: int) -> Dict[str, np.ndarray]:
    data = one_vs_rest(load_dataset("satimage"), positive_class=0)
    X, Y = data.X_train, data.Y_train
    model = ga.BinaryLogisticSVGP(
        ga.initial_kernel(X), ga.inducing_points(X, 50, seed=0), num_data=len(X)
    )
    result = ga.fit(model, (X, Y), iterations=iterations, batch_size=200, seed=0, progress=False)
    return _record(model, result.elbo)


def _record(model: gpflow.models.GPModel, elbo: np.ndarray) -> Dict[str, np.ndarray]:
    values = {
        name: np.asarray(value.numpy())
        for name, value in gpflow.utilities.parameter_dict(model).items()
    }
    values["elbo"] = np.asarray(elbo)
    return values


CASES = {
    "exact-200": _multiclass(200),
    "collapsed": _multiclass(60, scheme="negative-multinomial"),
    "paper": _multiclass(60, scheme="gamma-poisson"),
    "class-weights": _multiclass(60, scheme="negative-multinomial", class_weights=True),
    "exact-class-weights": _multiclass(60, class_weights=True),
    "class-subsets": _multiclass(60, class_subset_size=3),
    "collapsed-subsets": _multiclass(60, scheme="negative-multinomial", class_subset_size=3),
    "mean-unwhitened": _multiclass(
        60, mean_function=gpflow.mean_functions.Constant(), whiten=False
    ),
    "collapsed-exact-hyper": _multiclass(
        60,
        scheme="negative-multinomial",
        # ExactBound() since the bounds became objects; the string before (the baseline's code)
        hyperparameter_bound=ga.ExactBound() if hasattr(ga, "ExactBound") else "exact",
    ),
    "binary": lambda: _binary(60),
    "fit-exact-full": _multiclass(20, batch_size=None),
    "cavi-exact-mini": _cavi(30, warm_start_iterations=5, update_variance=None),
    "cavi-exact-full": _cavi(10, batch_size=None, warm_start_iterations=5),
    "cavi-nm": _cavi(20, scheme="negative-multinomial"),
    # No warm start, pinned: the default was 0 when the baseline was saved (the bound's since).
    "cavi-exact-subsets": _cavi(20, class_subset_size=3, seed=0, warm_start_iterations=0),
    **{f"method/{name}": _method(name) for name in baselines.METHODS},
    "gibbs-blocked": lambda: _gibbs("blocked"),
    "gibbs-systematic": lambda: _gibbs("systematic"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--save")
    action.add_argument("--compare")
    action.add_argument(
        "--against", metavar="REV", help="a git revision to compare this checkout to"
    )
    parser.add_argument("--tolerance", type=float, default=1e-12)
    parser.add_argument("--cases", default="", help="only the cases whose name contains this")
    args = parser.parse_args()
    if args.against:
        with tempfile.TemporaryDirectory() as folder:
            args.compare = str(Path(folder) / "before.npz")
            _save_at_revision(args.against, args.compare, args.cases, Path(folder) / "tree")
            return _compare(args)
    return _compare(args) if args.compare else _save(args)


def _save_at_revision(revision: str, path: str, cases: str, tree: Path) -> None:
    """This script's cases run on ``revision``'s package (a worktree first on the import path)."""
    root = Path(__file__).resolve().parents[1]
    subprocess.run(
        ["git", "-C", str(root), "worktree", "add", "-q", "--detach", str(tree), revision],
        check=True,
    )
    try:
        subprocess.run(
            [sys.executable, __file__, "--save", path, "--cases", cases],
            env={**os.environ, "PYTHONPATH": str(tree)},
            cwd=tree,
            check=True,
        )
    finally:
        subprocess.run(
            ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)], check=True
        )


def _results(pattern: str) -> Tuple[List[str], Dict[str, np.ndarray]]:
    cases = [case for case in CASES if pattern in case]
    results = {}
    for case in cases:
        for name, value in CASES[case]().items():
            results[f"{case}/{name}"] = value
    return cases, results


def _save(args: argparse.Namespace) -> int:
    cases, results = _results(args.cases)
    np.savez(args.save, **results)
    print(f"saved {len(results)} arrays from {len(cases)} cases to {args.save}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    cases, results = _results(args.cases)
    reference = dict(np.load(args.compare))
    worst = 0.0
    for case in cases:
        keys = sorted(k for k in reference if k.startswith(case + "/"))
        new_keys = sorted(k for k in results if k.startswith(case + "/"))
        if keys != new_keys:
            print(f"{case}: parameters differ: {sorted(set(keys) ^ set(new_keys))}")
            worst = np.inf
            continue
        difference = max(
            float(np.max(np.abs(reference[k] - results[k]), initial=0.0)) for k in keys
        )
        worst = max(worst, difference)
        print(f"{case:24s} max |Δ| = {difference:.3g} over {len(keys)} arrays")
    print(f"largest difference {worst:.3g} (tolerance {args.tolerance:g})")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
