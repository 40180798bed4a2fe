"""Small real classification datasets shipped with the package, and loaders for `.npz`, CSV/TSV and
LIBSVM files.

Bundled (UCI/Statlog, as in ``../shared/data``): ``vehicle`` (846 × 18, 4 classes), ``segment``
(2310 × 19, 7 classes), ``satimage`` (6435 × 36, 6 classes, official 4435/2000 split); ``wine``
(178 × 13, 3 classes) comes from scikit-learn's bundled copy. Benchmarks read other datasets from a
folder of ``.npz`` files with arrays ``X``, ``y`` and optionally a boolean ``is_test``;
:func:`load_file` reads one such file, a CSV/TSV table or a LIBSVM text file, for the command-line
tool.
"""
import csv
from pathlib import Path
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ..validation import InvalidDataError, check_inputs
from .synthetic import synthetic_stream

__all__ = [
    "Dataset",
    "BUNDLED",
    "from_arrays",
    "load_dataset",
    "load_file",
    "one_vs_rest",
    "read_features",
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


def train_test_split(
    num_points: int, test_fraction: float, seed: int
) -> np.ndarray:
    """A seeded boolean test mask."""
    rng = np.random.default_rng(seed)
    is_test = np.zeros(num_points, dtype=bool)
    is_test[rng.permutation(num_points)[: int(round(test_fraction * num_points))]] = True
    return is_test


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
        hint = (f"the labels look 1-based ({y.min()}..{y.max()}): subtract 1"
                if absent.tolist() == list(range(y.min())) else
                "map the labels to 0..C-1 first")
        raise InvalidDataError(
            f"{name}: no point has label {', '.join(map(str, absent[:5]))}"
            f"{' …' if absent.size > 5 else ''}; labels must be 0..C-1 with every class present "
            f"({hint})"
        )
    if is_test is None:
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
        is_test = train_test_split(len(y), test_fraction, seed)
    is_test = np.asarray(is_test, dtype=bool).reshape(-1)
    if len(is_test) != len(y) or is_test.all() or not is_test.any():
        raise InvalidDataError(f"{name}: is_test must mark some, not all, of the {len(y)} rows")
    X = _standardised(np.asarray(X, dtype=np.float64), ~is_test, name)
    return Dataset(name, X[~is_test], y[~is_test, None], X[is_test], y[is_test, None], num_classes,
                   class_names)


def _names_to_indices(labels: Sequence[str]) -> Tuple[Tuple[str, ...], np.ndarray]:
    """Class names in sorted order (numerically if every name is a number) and each label's
    index among them."""
    names = sorted(set(labels))
    try:
        names = sorted(names, key=float)
    except ValueError:
        pass
    index = {name: i for i, name in enumerate(names)}
    return tuple(names), np.array([index[label] for label in labels], dtype=np.int64)


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


def _read_libsvm(path: Path, zero_based: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """LIBSVM's feature indices start at 1. scikit-learn's default ("auto") re-reads the whole
    file as 0-based when one index is 0, shifting every feature; here that is refused unless
    ``zero_based`` says so."""
    from sklearn.datasets import load_svmlight_file

    try:
        X, y = load_svmlight_file(str(path), zero_based=zero_based)
    except (ValueError, UnicodeDecodeError) as error:
        if not zero_based and "invalid index 0" in str(error).lower():
            raise InvalidDataError(
                f"{path}: feature index 0 found, but LIBSVM indices start at 1; if the whole "
                "file counts from 0, say so (load_file(..., zero_based=True), or "
                "--zero-based on the command line)"
            ) from None
        raise InvalidDataError(f"{path}: not a LIBSVM file ({error})") from None
    return X.toarray(), y


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_table(path: Path, label_column: Union[int, str, None],
                has_labels: bool = True) -> Tuple[np.ndarray, List[str]]:
    """Features and label strings of a CSV (``.csv``) or TSV (other suffixes) file, read by the
    standard library's csv module. The first row is a header if it has a name above a column
    of numbers. ``label_column``: a header name, or an index (negative from the end); default the
    last column, or none at all if not ``has_labels``."""
    delimiter = "," if path.suffix.lower() == ".csv" else "\t"
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = [row for row in csv.reader(handle, delimiter=delimiter)
                    if any(cell.strip() for cell in row)]
    except (UnicodeDecodeError, csv.Error) as error:
        raise InvalidDataError(f"{path}: not a readable {path.suffix[1:].upper()} file "
                               f"({error})") from None
    if len(rows) < 2:
        raise InvalidDataError(f"{path}: needs a row per point and at least two rows")
    width = len(rows[0])
    for number, row in enumerate(rows, start=1):
        if len(row) != width:
            raise InvalidDataError(f"{path}: row {number} has {len(row)} columns, row 1 has "
                                   f"{width}")
    sample = rows[1:51]
    header = None
    if any(not _is_number(cell) and all(_is_number(row[i]) for row in sample)
           for i, cell in enumerate(rows[0])):
        header, rows = [cell.strip() for cell in rows[0]], rows[1:]
    if label_column is None:
        column = width - 1 if has_labels else width  # width: no column is the labels
    elif isinstance(label_column, str) and not label_column.lstrip("-").isdigit():
        if header is None or label_column not in header:
            found = "no header row" if header is None else f"columns {', '.join(header)}"
            raise InvalidDataError(f"{path}: no column named {label_column!r} ({found})")
        column = header.index(label_column)
    else:
        column = int(label_column)
        if not -width <= column < width:
            raise InvalidDataError(f"{path}: label column {column} is outside the file's "
                                   f"{width} columns")
        column %= width
    num_features = width - (column < width)
    if num_features < 1:
        raise InvalidDataError(f"{path}: needs at least one feature column")
    features = np.empty((len(rows), num_features))
    first_row = 2 if header is not None else 1
    for i, row in enumerate(rows):
        cells = row[:column] + row[column + 1:]
        for j, cell in enumerate(cells):
            try:
                features[i, j] = float(cell)
            except ValueError:
                feature = j if j < column else j + 1
                raise InvalidDataError(
                    f"{path}: row {i + first_row}, column {feature + 1}: {cell!r} is not a number"
                ) from None
    return features, [row[column].strip() for row in rows] if column < width else []


def read_features(path: Union[str, Path], label_column: Union[int, str, None] = None) -> np.ndarray:
    """The feature rows [N, D] of a ``.csv``/``.tsv`` table (without ``label_column``, if the
    table has one) or of an ``.npz`` file's ``X``, as given (not standardised): the input of an
    exported model's ``predict``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if path.suffix == ".npz":
        X = _read_npz(path)[0]
    else:
        X = _read_table(path, label_column, has_labels=label_column is not None)[0]
    X = np.asarray(X)
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.number) or not np.all(np.isfinite(X)):
        raise InvalidDataError(f"{path}: the features must be a 2-D table of finite numbers")
    return X.astype(np.float64)


def _read_npz(path: Path) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as d:
            missing = [key for key in ("X", "y") if key not in d.files]
            if missing:
                raise InvalidDataError(f"{path}: no array {missing[0]!r} (found {d.files})")
            return d["X"], d["y"], (d["is_test"] if "is_test" in d.files else None)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        reason = "empty file" if path.stat().st_size == 0 else str(error)
        raise InvalidDataError(f"{path}: not a readable .npz file ({reason})") from None


def load_file(
    path: Union[str, Path],
    test_path: Optional[Union[str, Path]] = None,
    *,
    test_fraction: float = 0.2,
    seed: int = 0,
    zero_based: bool = False,
    label_column: Union[int, str, None] = None,
) -> Dataset:
    """Load a ``.npz`` file (arrays ``X``, ``y``, optional boolean ``is_test``) or a LIBSVM text
    file, with an optional separate test file of the same kind.

    LIBSVM labels are arbitrary numbers; they are mapped to 0..C-1 in sorted order over the
    training and test files together. ``.npz`` labels must already be 0..C-1 (or be class
    names). LIBSVM feature indices start at 1 unless ``zero_based``.

    A ``.csv`` or ``.tsv`` file has one point per row, an optional header and the labels in
    ``label_column`` (a name or an index; default the last column); labels are class names or
    numbers, mapped to 0..C-1 in sorted order (``Dataset.class_names``).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if test_path is not None and not Path(test_path).is_file():
        raise FileNotFoundError(f"no such file: {test_path}")
    name = path.stem
    if path.suffix.lower() in (".csv", ".tsv", ".tab"):
        X, labels = _read_table(path, label_column)
        is_test = None
        if test_path is not None:
            X_test, test_labels = _read_table(Path(test_path), label_column)
            X, _, is_test = _stack(X, np.zeros(len(X)), X_test, np.zeros(len(X_test)), name)
            labels = labels + test_labels
        return from_arrays(name, X, np.array(labels, dtype=str), is_test,
                           test_fraction=test_fraction, seed=seed)
    if path.suffix == ".npz":
        X, y, is_test = _read_npz(path)
        if test_path is not None:
            X_test, y_test, _ = _read_npz(Path(test_path))
            X, y, is_test = _stack(X, y, X_test, y_test, name)
        return from_arrays(name, X, y, is_test, test_fraction=test_fraction, seed=seed)

    X, y = _read_libsvm(path, zero_based)
    is_test = None
    if test_path is not None:
        X_test, y_test = _read_libsvm(Path(test_path), zero_based)
        width = max(X.shape[1], X_test.shape[1])  # LIBSVM omits trailing zero features
        X = np.pad(X, ((0, 0), (0, width - X.shape[1])))
        X_test = np.pad(X_test, ((0, 0), (0, width - X_test.shape[1])))
        X, y, is_test = _stack(X, y, X_test, y_test, name)
    _, y = np.unique(y, return_inverse=True)
    return from_arrays(name, X, y, is_test, test_fraction=test_fraction, seed=seed)


def _stack(X: np.ndarray, y: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
           name: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    if np.ndim(X) != 2 or np.ndim(X_test) != 2 or X.shape[1] != X_test.shape[1]:
        raise InvalidDataError(
            f"{name}: training and test features differ in shape ({np.shape(X)} vs "
            f"{np.shape(X_test)})"
        )
    is_test = np.r_[np.zeros(len(X), bool), np.ones(len(X_test), bool)]
    return np.vstack([X, X_test]), np.r_[np.reshape(y, -1), np.reshape(y_test, -1)], is_test


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

