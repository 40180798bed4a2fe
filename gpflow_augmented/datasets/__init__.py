"""Small real classification datasets shipped with the package, and a loader for `.npz` folders.

Bundled (UCI/Statlog, as in ``../shared/data``): ``vehicle`` (846 × 18, 4 classes), ``segment``
(2310 × 19, 7 classes), ``satimage`` (6435 × 36, 6 classes, official 4435/2000 split); ``wine``
(178 × 13, 3 classes) comes from scikit-learn's bundled copy. Benchmarks read other datasets from a
folder of ``.npz`` files with arrays ``X``, ``y`` and optionally a boolean ``is_test``.
"""
from pathlib import Path
from typing import NamedTuple, Optional, Union

import numpy as np

__all__ = ["Dataset", "BUNDLED", "load_dataset", "train_test_split"]

_DATA = Path(__file__).parent / "data"
BUNDLED = ("vehicle", "segment", "satimage", "wine")


class Dataset(NamedTuple):
    """Standardised features and integer labels (``Y`` columns [N, 1]) of a train/test split."""

    name: str
    X_train: np.ndarray
    Y_train: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray
    num_classes: int


def _raw(name: str, data_dir: Optional[Union[str, Path]]) -> tuple:
    if name == "wine" and data_dir is None:
        from sklearn.datasets import load_wine

        X, y = load_wine(return_X_y=True)
        return X, y, None
    path = Path(data_dir) / f"{name}.npz" if data_dir is not None else _DATA / f"{name}.npz"
    if not path.exists():
        where = f"in {data_dir}" if data_dir is not None else f"bundled ({', '.join(BUNDLED)})"
        raise FileNotFoundError(f"no dataset {name!r} {where}")
    with np.load(path, allow_pickle=False) as d:
        return d["X"], d["y"], (d["is_test"] if "is_test" in d.files else None)


def train_test_split(
    num_points: int, test_fraction: float, seed: int
) -> np.ndarray:
    """A seeded boolean test mask."""
    rng = np.random.default_rng(seed)
    is_test = np.zeros(num_points, dtype=bool)
    is_test[rng.permutation(num_points)[: int(round(test_fraction * num_points))]] = True
    return is_test


def load_dataset(
    name: str,
    data_dir: Optional[Union[str, Path]] = None,
    *,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> Dataset:
    """Load ``name``, split it (its official split if it has one, else a seeded random one) and
    standardise the features with training statistics (constant columns are left at zero)."""
    X, y, is_test = _raw(name, data_dir)
    if is_test is None:
        is_test = train_test_split(len(y), test_fraction, seed)
    X = np.asarray(X, dtype=np.float64)
    mean, std = X[~is_test].mean(0), X[~is_test].std(0)
    X = (X - mean) / np.where(std > 0, std, 1.0)
    y = np.asarray(y, dtype=np.int64)
    return Dataset(
        name, X[~is_test], y[~is_test, None], X[is_test], y[is_test, None], int(y.max()) + 1
    )
