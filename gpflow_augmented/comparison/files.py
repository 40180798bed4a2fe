"""The command line's input layer: a data file read by its kind. ``.npz`` (the library's reader), a
LIBSVM text file, or a CSV/TSV table whose first row is decided to be a header or data
(:func:`_decide_header`); a separate test file's classes are checked and its columns matched by
name. :func:`load_file` returns the library's :class:`~gpflow_augmented.datasets.Dataset`."""

import csv
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple, Union, cast

import numpy as np

from ..datasets import Dataset, _class_keys, _names_to_indices, _read_npz, from_arrays
from ..validation import InvalidDataError

__all__ = ["load_file", "read_features"]


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


class _Table(NamedTuple):
    features: np.ndarray
    labels: List[str]
    # The header's names of the feature columns and of the label column, when the file has a header.
    feature_names: Optional[List[str]]
    label_name: Optional[str]
    # How the first row was read, in words, for the command line to print.
    header_rule: str


def _decide_header(path: Path, rows: List[List[str]], header: Optional[bool]) -> Tuple[bool, str]:
    """Whether the first row names the columns. A user's ``header`` decides; otherwise the first
    row is a header when one of its cells differs in kind (name or number) from every cell below it
    in the first 50 rows, or when it numbers the columns (0..W-1 or 1..W, as pandas and numpy write
    unnamed columns) above data that is not all integers. Column numbers above integer data could
    be either, and are refused."""
    if header is not None:
        return header, (
            "the first row read as a header (--header)"
            if header
            else "the first row read as data (--no-header)"
        )
    first, below = rows[0], rows[1:51]
    for i, cell in enumerate(first):
        if below and all(_is_number(row[i]) != _is_number(cell) for row in below):
            kind = "a number above names" if _is_number(cell) else "a name above numbers"
            return True, f"the first row read as a header (column {i + 1}: {kind})"
    if not all(_is_number(cell) for cell in first):
        return False, "the first row read as data"
    values = [float(cell) for cell in first]
    width = len(first)
    if below and values in (
        [float(i) for i in range(width)],
        [float(i) for i in range(1, width + 1)],
    ):
        integers = all(
            float(cell) == round(float(cell)) for row in below for cell in row if _is_number(cell)
        )
        if integers:
            raise InvalidDataError(
                f"{path}: the first row ({','.join(first)}) numbers the columns but could also be "
                "a data row of integers; say which with --header or --no-header "
                "(load_file(..., header=True/False))"
            )
        return True, f"the first row read as a header (the column numbers {first[0]}..{first[-1]})"
    return False, "the first row read as data (all numbers)"


def _read_table(
    path: Path,
    label_column: Union[int, str, None],
    has_labels: bool = True,
    header: Optional[bool] = None,
    label_name: Optional[str] = None,
) -> _Table:
    """Features and label strings of a CSV (``.csv``) or TSV (other suffixes) file, read by the
    standard library's csv module (a UTF-8 byte-order mark is dropped). Whether the first row is a
    header: see :func:`_decide_header`. ``label_column``: a header name, or an index (negative
    from the end), default the last column, or none at all if not ``has_labels``; but the column
    named ``label_name`` (the training file's label column, for a test file) wherever the
    header has one, so that a test file's columns are matched by name, the labels' too."""
    rows = _rows(path, has_labels)
    width = len(rows[0])
    has_header, header_rule = _decide_header(path, rows, header)
    if header is None and len(rows) == 1 and not all(_is_number(cell) for cell in rows[0]):
        has_header = True  # one row of names and nothing below it: a header, not a data row
    names = None
    if has_header:
        names, rows = [cell.strip() for cell in rows[0]], rows[1:]
        if not rows:
            raise InvalidDataError(f"{path}: has a header and no data rows")
    if names is not None and label_name in names:
        label_column = label_name
    column = _label_column_index(path, label_column, names, width, has_labels)
    num_features = width - (column < width)
    if num_features < 1:
        raise InvalidDataError(f"{path}: needs at least one feature column")
    features = np.empty((len(rows), num_features))
    first_row = 2 if names is not None else 1
    for i, row in enumerate(rows):
        cells = row[:column] + row[column + 1 :]
        for j, cell in enumerate(cells):
            try:
                features[i, j] = float(cell)
            except ValueError:
                feature = j if j < column else j + 1
                raise InvalidDataError(
                    f"{path}: row {i + first_row}, column {feature + 1}: {cell!r} is not a number"
                ) from None
    labels = [row[column].strip() for row in rows] if column < width else []
    feature_names = None if names is None else names[:column] + names[column + 1 :]
    label_name = None if names is None or column == width else names[column]
    return _Table(features, labels, feature_names, label_name, header_rule)


def _rows(path: Path, has_labels: bool) -> List[List[str]]:
    """The non-empty rows of a CSV (``.csv``) or TSV (other suffixes) file, each as wide as the
    first; a file whose one column holds another separator is refused by name."""
    delimiter = "," if path.suffix.lower() == ".csv" else "\t"
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = [
                row
                for row in csv.reader(handle, delimiter=delimiter)
                if any(cell.strip() for cell in row)
            ]
    except (UnicodeDecodeError, csv.Error) as error:
        raise InvalidDataError(
            f"{path}: not a readable {path.suffix[1:].upper()} file ({error})"
        ) from None
    if not rows:
        raise InvalidDataError(f"{path}: is empty (no rows)")
    if len(rows) < 2 and has_labels:
        raise InvalidDataError(f"{path}: needs a row per point and at least two rows")
    width = len(rows[0])
    if width == 1:
        other = next((d for d in (";", "\t", ",", " ") if d != delimiter and d in rows[0][0]), None)
        if other is not None:
            named = {";": "semicolons", "\t": "tabs", ",": "commas", " ": "spaces"}
            raise InvalidDataError(
                f"{path}: a {path.suffix.lower() or 'table'} file's columns are separated by "
                f"{named[delimiter]}, but its first row is one column holding {named[other]}; "
                "write it with " + ("commas (.csv)" if delimiter == "," else "tabs (.tsv)")
            )
    for number, row in enumerate(rows, start=1):
        if len(row) != width:
            raise InvalidDataError(
                f"{path}: row {number} has {len(row)} columns, row 1 has {width}"
            )
    return rows


def _label_column_index(
    path: Path,
    label_column: Union[int, str, None],
    names: Optional[List[str]],
    width: int,
    has_labels: bool,
) -> int:
    """The index of the labels' column: by header name, by index (negative from the end), the
    last by default, or ``width`` (no column) for a table without labels."""
    if label_column is None:
        return width - 1 if has_labels else width
    if isinstance(label_column, str) and not label_column.lstrip("-").isdigit():
        if names is None or label_column not in names:
            found = "no header row" if names is None else f"columns {', '.join(names)}"
            raise InvalidDataError(f"{path}: no column named {label_column!r} ({found})")
        if names.count(label_column) > 1:
            where = [i + 1 for i, name in enumerate(names) if name == label_column]
            raise InvalidDataError(
                f"{path}: the header names {label_column!r} "
                f"{len(where)} times (columns {', '.join(map(str, where))})"
            )
        return names.index(label_column)
    column = int(label_column)
    if not -width <= column < width:
        raise InvalidDataError(
            f"{path}: label column {column} is outside the file's {width} columns"
        )
    return column % width


def _match_test_columns(path: Path, train: _Table, test_path: Path, test: _Table) -> np.ndarray:
    """The test file's features in the training file's column order: matched by name when both
    files have headers, else by position."""
    if train.feature_names is None or test.feature_names is None:
        return test.features
    for names, where in ((train.feature_names, path), (test.feature_names, test_path)):
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise InvalidDataError(
                f"{where}: the header names column {repeated[0]!r} more than "
                "once, so the test file's columns cannot be matched by name"
            )
    missing = [name for name in train.feature_names if name not in test.feature_names]
    extra = [name for name in test.feature_names if name not in train.feature_names]
    if missing or extra:
        parts = ([f"lacks {', '.join(map(repr, missing))}"] if missing else []) + (
            [f"has {', '.join(map(repr, extra))} that the training file lacks"] if extra else []
        )
        raise InvalidDataError(
            f"{test_path}: its header {' and '.join(parts)} (columns are "
            f"matched by name when both files have a header)"
        )
    order = [test.feature_names.index(name) for name in train.feature_names]
    return test.features[:, order]


def read_features(
    path: Union[str, Path],
    label_column: Union[int, str, None] = None,
    header: Optional[bool] = None,
) -> np.ndarray:
    """The feature rows [N, D] of a ``.csv``/``.tsv`` table (without ``label_column``, if the
    table has one) or of an ``.npz`` file's ``X``, as given (not standardised): the input of an
    exported model's ``predict``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if path.suffix == ".npz":
        X = _read_npz(path, labels_required=False)[0]
    else:
        X = _read_table(
            path, label_column, has_labels=label_column is not None, header=header
        ).features
    X = np.asarray(X)
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.number) or not np.all(np.isfinite(X)):
        raise InvalidDataError(f"{path}: the features must be a 2-D table of finite numbers")
    return X.astype(np.float64)


def load_file(
    path: Union[str, Path],
    test_path: Optional[Union[str, Path]] = None,
    *,
    test_fraction: float = 0.2,
    seed: int = 0,
    zero_based: bool = False,
    label_column: Union[int, str, None] = None,
    header: Optional[bool] = None,
) -> Dataset:
    """Load a ``.npz`` file (arrays ``X``, ``y``, optional boolean ``is_test``) or a LIBSVM text
    file, with an optional separate test file of the same kind.

    LIBSVM labels are arbitrary numbers; they are mapped to 0..C-1 in sorted order over the
    training and test files together. ``.npz`` labels must already be 0..C-1 (or be class
    names). LIBSVM feature indices start at 1 unless ``zero_based``.

    A ``.csv`` or ``.tsv`` file has one point per row, an optional header and the labels in
    ``label_column`` (a name or an index; default the last column); labels are class names or
    numbers, mapped to 0..C-1 in sorted order (``Dataset.class_names``; numbers compare as
    numbers, so "1" and "1.0" are one class). Whether the first row is a header is decided as
    :func:`_decide_header` says unless ``header`` is given; ``Dataset.description`` says how it was
    read. With a separate test file, every test class must be a training class, and when both
    files have a header their columns are matched by name.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if test_path is not None and not Path(test_path).is_file():
        raise FileNotFoundError(f"no such file: {test_path}")
    name = path.stem
    if path.suffix.lower() in (".csv", ".tsv", ".tab"):
        train = _read_table(path, label_column, header=header)
        X, labels, is_test = train.features, train.labels, None
        read = [f"{path.name}: {train.header_rule}"]
        if test_path is not None:
            test_path = Path(test_path)
            test = _read_table(test_path, label_column, header=header, label_name=train.label_name)
            read.append(
                f"{test_path.name}: {test.header_rule}"
                + (
                    ", its columns matched by name"
                    if train.feature_names is not None and test.feature_names is not None
                    else ""
                )
            )
            _check_test_classes(path, train.labels, test_path, test.labels)
            X_test = _match_test_columns(path, train, test_path, test)
            X, _, is_test = _stack(X, np.zeros(len(X)), X_test, np.zeros(len(X_test)), name)
            labels = labels + test.labels
        dataset = from_arrays(
            name, X, np.array(labels, dtype=str), is_test, test_fraction=test_fraction, seed=seed
        )
        return dataset._replace(description="; ".join(read))
    if path.suffix == ".npz":
        X, npz_labels, is_test = _read_npz(path)
        y = cast(np.ndarray, npz_labels)  # labels are required: _read_npz refused a file without
        if test_path is not None:
            X_test, test_labels, _ = _read_npz(Path(test_path))
            X, y, is_test = _stack(X, y, X_test, cast(np.ndarray, test_labels), name)
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


def _check_test_classes(
    path: Path, train_labels: List[str], test_path: Path, test_labels: List[str]
) -> None:
    """A class with no training point would get a latent GP fitted to nothing; refuse it by name."""
    keys = _class_keys(train_labels + test_labels)
    train_classes = set(keys[: len(train_labels)])
    unseen: dict = {}
    for label, key in zip(test_labels, keys[len(train_labels) :]):
        if key not in train_classes:
            unseen[label] = unseen.get(label, 0) + 1
    if unseen:
        shown = ", ".join(f"{label!r} ({count} rows)" for label, count in list(unseen.items())[:5])
        raise InvalidDataError(
            f"{test_path}: class{'es' if len(unseen) > 1 else ''} {shown} "
            f"{'are' if len(unseen) > 1 else 'is'} not in the training file {path.name} "
            f"(its classes: {', '.join(_names_to_indices(train_labels)[0][:12])})"
        )


def _stack(
    X: np.ndarray, y: np.ndarray, X_test: np.ndarray, y_test: np.ndarray, name: str
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    if np.ndim(X) != 2 or np.ndim(X_test) != 2 or X.shape[1] != X_test.shape[1]:
        raise InvalidDataError(
            f"{name}: training and test features differ in shape ({np.shape(X)} vs "
            f"{np.shape(X_test)})"
        )
    is_test = np.r_[np.zeros(len(X), bool), np.ones(len(X_test), bool)]
    return np.vstack([X, X_test]), np.r_[np.reshape(y, -1), np.reshape(y_test, -1)], is_test
