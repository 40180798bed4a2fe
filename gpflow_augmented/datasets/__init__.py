"""Small real classification datasets shipped with the package, and the ``.npz`` loader.

Bundled (UCI/Statlog, as in ``../shared/data``): ``vehicle`` (846 × 18, 4 classes), ``segment``
(2310 × 19, 7 classes), ``satimage`` (6435 × 36, 6 classes, official 4435/2000 split); ``wine``
(178 × 13, 3 classes) comes from scikit-learn's bundled copy. Benchmarks read other datasets from a
folder of ``.npz`` files with arrays ``X``, ``y`` and optionally a boolean ``is_test``. The command
line reads CSV/TSV tables and LIBSVM text files too (:mod:`gpflow_augmented.comparison.files`).
"""

from pathlib import Path
from typing import NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ..validation import InvalidDataError, check_inputs
from .synthetic import imbalanced_separable_data, separated_blobs, synthetic_stream

__all__ = [
    "Dataset",
    "BUNDLED",
    "from_arrays",
    "imbalanced_separable_data",
    "keep_every_class",
    "load_dataset",
    "one_vs_rest",
    "seeded_rows",
    "separated_blobs",
    "synthetic_stream",
    "train_test_split",
]

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
    # The names of classes 0..C-1 when the file gave names (or labels other than 0..C-1).
    class_names: Optional[Tuple[str, ...]] = None
    # How a table file was read (its header, its test file's columns), for the command line.
    description: Optional[str] = None


def _raw(name: str, data_dir: Optional[Union[str, Path]]) -> tuple:
    if name == "wine" and data_dir is None:
        from sklearn.datasets import load_wine

        X, y = load_wine(return_X_y=True)
        return X, y, None
    path = Path(data_dir) / f"{name}.npz" if data_dir is not None else _DATA / f"{name}.npz"
    if not path.exists():
        where = f"in {data_dir}" if data_dir is not None else f"bundled ({', '.join(BUNDLED)})"
        raise FileNotFoundError(f"no dataset {name!r} {where}")
    return _read_npz(path)


def train_test_split(num_points: int, test_fraction: float, seed: int) -> np.ndarray:
    """A seeded boolean test mask."""
    rng = np.random.default_rng(seed)
    is_test = np.zeros(num_points, dtype=bool)
    is_test[rng.permutation(num_points)[: int(round(test_fraction * num_points))]] = True
    return is_test


def keep_every_class(labels: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The boolean mask ``keep`` over points with these integer ``labels``, with the first point
    of each class it drops whole kept (kddcup has a class with one training point)."""
    keep = keep.copy()
    for label in np.setdiff1d(labels, labels[keep]):
        keep[np.flatnonzero(labels == label)[0]] = True
    return keep


def seeded_rows(num_points: int, size: int, seed: int) -> np.ndarray:
    """Sorted indices of a seeded sample of ``size`` of ``num_points`` rows (all of them where
    there are no more)."""
    if num_points <= size:
        return np.arange(num_points)
    return np.sort(np.random.default_rng(seed).choice(num_points, size, replace=False))


def from_arrays(
    name: str,
    X: np.ndarray,
    y: np.ndarray,
    is_test: Optional[np.ndarray] = None,
    *,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> Dataset:
    """Check ``X`` [N, D] and labels ``y`` (integers 0..C-1, C ≥ 2, or class names, which are
    mapped to 0..C-1 in sorted order and kept in ``class_names``), split them (by ``is_test`` if
    given, else a seeded random split) and standardise the features with training statistics
    (constant columns are left at zero)."""
    X, y = np.asarray(X), np.asarray(y)
    class_names = None
    if y.dtype.kind in "USO":  # class names as strings
        y = y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y
        class_names, y = _names_to_indices(y.astype(str))
    check_inputs(X, prefix=f"{name}: ", check_overflow=False)  # standardised below
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise InvalidDataError(f"{name}: X must be a non-empty 2-D array [N, D], got {X.shape}")
    y = y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y
    if y.ndim != 1 or len(y) != len(X):
        raise InvalidDataError(f"{name}: y must hold one label per row of X, got shape {y.shape}")
    numeric = np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)
    if not numeric or not np.all(np.isfinite(y)) or np.any(y != np.round(y)) or y.min() < 0:
        raise InvalidDataError(f"{name}: labels must be integers 0..C-1")
    y = y.astype(np.int64)
    num_classes = int(y.max()) + 1
    if num_classes < 2:
        raise InvalidDataError(f"{name}: needs at least 2 classes, found labels 0..{y.max()}")
    absent = np.setdiff1d(np.arange(num_classes), y)
    if absent.size:
        # Class k is absent from the whole dataset: C = max + 1 would give it a latent GP with
        # no data. The usual cause is 1-based labels.
        hint = (
            f"the labels look 1-based ({y.min()}..{y.max()}): subtract 1"
            if absent.tolist() == list(range(y.min()))
            else "map the labels to 0..C-1 first"
        )
        raise InvalidDataError(
            f"{name}: no point has label {', '.join(map(str, absent[:5]))}"
            f"{' …' if absent.size > 5 else ''}; labels must be 0..C-1 with every class present "
            f"({hint})"
        )
    if is_test is None:
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
        is_test = train_test_split(len(y), test_fraction, seed)
        if is_test.all() or not is_test.any():
            raise InvalidDataError(
                f"{name}: a test fraction of {test_fraction:g} of {len(y)} rows leaves "
                f"{'no training' if is_test.all() else 'no test'} point; choose a fraction "
                f"between {1 / len(y):.3g} and {1 - 1 / len(y):.3g}"
            )
    is_test = _test_mask(name, is_test, len(y))
    if is_test.all() or not is_test.any():
        raise InvalidDataError(f"{name}: is_test must mark some, not all, of the {len(y)} rows")
    untrained = np.setdiff1d(np.arange(num_classes), y[~is_test])
    if untrained.size:
        shown = ", ".join(
            (repr(class_names[k]) if class_names else str(k)) + f" ({np.sum(y == k)} rows)"
            for k in untrained[:5]
        )
        raise InvalidDataError(
            f"{name}: class {shown} has no training point, only test points; a class needs "
            "training data (another split, or drop the class)"
        )
    X = _standardised(np.asarray(X, dtype=np.float64), ~is_test, name)
    return Dataset(
        name, X[~is_test], y[~is_test, None], X[is_test], y[is_test, None], num_classes, class_names
    )


def _test_mask(name: str, is_test: np.ndarray, num_rows: int) -> np.ndarray:
    """``is_test`` as a boolean mask [num_rows]: a mask of booleans, or of 0s and 1s, one entry
    per row; anything else (an index list, a mask of another length) is refused by name."""
    mask = np.asarray(is_test).reshape(-1)
    is_mask = mask.dtype == bool or (
        np.issubdtype(mask.dtype, np.number) and bool(np.isin(mask, (0, 1)).all())
    )
    if is_mask and len(mask) == num_rows:
        return mask.astype(bool)
    kind = f"an array of {len(mask)} {mask.dtype} entries"
    hint = ""
    if np.issubdtype(mask.dtype, np.integer) and not is_mask:
        hint = "; an index list? make it a mask: mask = np.zeros(N, bool); mask[indices] = True"
    raise InvalidDataError(
        f"{name}: is_test must be a boolean mask with one entry per row ({num_rows}), got "
        f"{kind}{hint}"
    )


def _class_keys(labels: Union[Sequence[str], np.ndarray]) -> list:
    """What identifies each label's class: its value when every label is a finite number (so "1"
    and "1.0" are one class), else its text."""
    try:
        values = [float(label) for label in labels]
    except ValueError:
        return list(labels)
    return values if all(np.isfinite(values)) else list(labels)


def _names_to_indices(
    labels: Union[Sequence[str], np.ndarray],
) -> Tuple[Tuple[str, ...], np.ndarray]:
    """Class names in sorted order (numerically if every name is a number) and each label's
    index among them. Numeric labels are one class per value, named by their first spelling."""
    keys = _class_keys(labels)
    first_spelling: dict = {}
    for key, label in zip(keys, labels):
        first_spelling.setdefault(key, label)
    order = sorted(first_spelling)
    index = {key: i for i, key in enumerate(order)}
    return (
        tuple(first_spelling[key] for key in order),
        np.array([index[key] for key in keys], dtype=np.int64),
    )


def _standardised(X: np.ndarray, train: np.ndarray, name: str) -> np.ndarray:
    """Zero mean and unit variance on the training rows; a column constant there stays at zero
    (it adds nothing to an SE-ARD kernel's distances, and its lengthscale gets no gradient)."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean, std = X[train].mean(0), X[train].std(0)
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std))):
        # Finite values near the float64 limit overflow the sums: standardise each column
        # divided by its largest magnitude, which is the same transformation.
        magnitude = np.abs(X[train]).max(0)
        X = X / np.where(magnitude > 0, magnitude, 1.0)
        mean, std = X[train].mean(0), X[train].std(0)
    if not np.any(std > 0):
        raise InvalidDataError(
            f"{name}: every feature is constant on the training split ({X.shape[1]} columns); "
            "there is nothing to classify by"
        )
    return (X - mean) / np.where(std > 0, std, 1.0)


def load_dataset(
    name: str,
    data_dir: Optional[Union[str, Path]] = None,
    *,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> Dataset:
    """Load ``name`` (bundled, or ``<data_dir>/<name>.npz``), split it (its official split if it
    has one, else a seeded random one) and standardise it, as :func:`from_arrays`."""
    X, y, is_test = _raw(name, data_dir)
    return from_arrays(name, X, y, is_test, test_fraction=test_fraction, seed=seed)


def _read_npz(
    path: Path, labels_required: bool = True
) -> Tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]:
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as d:
            missing = [key for key in ("X", "y")[: 1 + labels_required] if key not in d.files]
            if missing:
                raise InvalidDataError(f"{path}: no array {missing[0]!r} (found {d.files})")
            return (
                d["X"],
                d["y"] if "y" in d.files else None,
                d["is_test"] if "is_test" in d.files else None,
            )
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        reason = "empty file" if path.stat().st_size == 0 else str(error)
        raise InvalidDataError(f"{path}: not a readable .npz file ({reason})") from None


def one_vs_rest(dataset: Dataset, positive_class: int) -> Dataset:
    """A binary task from a multi-class one: label 1 for ``positive_class``, 0 for the rest.

    The split and the standardisation are those of ``dataset``; the name records the task, e.g.
    ``satimage-3-vs-rest``.
    """
    if not 0 <= int(positive_class) < dataset.num_classes:
        raise ValueError(
            f"positive_class must be in 0..{dataset.num_classes - 1}, got {positive_class!r}"
        )
    return Dataset(
        f"{dataset.name}-{int(positive_class)}-vs-rest",
        dataset.X_train,
        (dataset.Y_train == positive_class).astype(np.int64),
        dataset.X_test,
        (dataset.Y_test == positive_class).astype(np.int64),
        2,
    )
