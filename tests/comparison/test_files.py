"""CSV/TSV tables as a new user writes them: headers (or none), byte-order marks, label spellings,
separate test files whose classes or columns differ, and the messages for what cannot be read."""

import numpy as np
import pytest

import gpflow_augmented as ga
from gpflow_augmented.comparison.files import load_file, read_features


def _table(path, rows, bom=False):
    text = "\n".join(",".join(map(str, row)) for row in rows) + "\n"
    path.write_text(("\ufeff" if bom else "") + text, encoding="utf-8")
    return path


def _points(num_points, seed=0):
    """``num_points`` rows of two real-valued features whose class (0, 1, 2) the first one sets."""
    X = np.random.default_rng(seed).normal(size=(num_points, 2))
    y = np.digitize(X[:, 0], [-0.4, 0.4])
    return X, y


def _rows(X, labels):
    return [[f"{a:.6f}", f"{b:.6f}", label] for (a, b), label in zip(X, labels)]


def _all_labels(dataset):
    return np.r_[dataset.Y_train[:, 0], dataset.Y_test[:, 0]]


def test_numeric_labels_compare_as_numbers(tmp_path):
    X, y = _points(60)
    spelled = [
        ["1", "1.0", "1.00"][i % 3] if label == 1 else str(label) for i, label in enumerate(y)
    ]
    dataset = load_file(_table(tmp_path / "spellings.csv", _rows(X, spelled)))
    assert [float(name) for name in dataset.class_names] == [0.0, 1.0, 2.0]
    # the class of each row is its label's value, whatever the spelling
    assert np.bincount(_all_labels(dataset)).tolist() == np.bincount(y).tolist()


@pytest.mark.parametrize("header", [False, True])
def test_a_byte_order_mark_neither_drops_a_row_nor_enters_a_name(header, tmp_path):
    X, y = _points(60)
    rows = ([["x1", "x2", "label"]] if header else []) + _rows(X, y)
    path = _table(tmp_path / "bom.csv", rows, bom=True)
    dataset = load_file(path)
    assert len(dataset.X_train) + len(dataset.X_test) == 60
    if header:
        with pytest.raises(
            ga.InvalidDataError, match=r"no column named 'x0' \(columns x1, x2, label\)$"
        ):
            load_file(path, label_column="x0")
        assert load_file(path, label_column="label").X_train.shape[1] == 2


def test_column_numbers_above_real_data_are_a_header(tmp_path):
    X, y = _points(60)
    # what pandas writes for an unnamed DataFrame: 0, 1, 2 above the data
    path = _table(tmp_path / "pandas.csv", [["0", "1", "2"], *_rows(X, y)])
    dataset = load_file(path)
    assert len(dataset.X_train) + len(dataset.X_test) == 60
    assert "the column numbers 0..2" in dataset.description
    # and when the label column holds names, a number above them marks a header too
    names = np.array(["ant", "bee", "cat"])[y]
    dataset = load_file(_table(tmp_path / "named.csv", [["0", "1", "2"], *_rows(X, names)]))
    assert len(dataset.X_train) + len(dataset.X_test) == 60
    assert dataset.class_names == ("ant", "bee", "cat")
    assert "column 3: a number above names" in dataset.description


def test_column_numbers_above_integer_data_are_refused_unless_the_user_says(tmp_path):
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 5, size=(40, 2))
    labels = counts[:, 0] % 3  # 0, 1 and 2, so the first row's "2" is no class of its own
    rows = [["0", "1", "2"], *[[a, b, label] for (a, b), label in zip(counts, labels)]]
    path = _table(tmp_path / "counts.csv", rows)
    with pytest.raises(
        ga.InvalidDataError,
        match=r"first row \(0,1,2\) numbers the columns but could also be a data row "
        r"of integers; say which with --header or --no-header",
    ):
        load_file(path)
    as_header, as_data = load_file(path, header=True), load_file(path, header=False)
    assert len(as_header.X_train) + len(as_header.X_test) == 40
    assert len(as_data.X_train) + len(as_data.X_test) == 41
    assert "(--no-header)" in as_data.description


def test_a_data_first_row_is_still_data(tmp_path):
    X, y = _points(30)
    dataset = load_file(_table(tmp_path / "plain.csv", _rows(X, y)))
    assert len(dataset.X_train) + len(dataset.X_test) == 30
    assert dataset.description == "plain.csv: the first row read as data (all numbers)"


@pytest.mark.parametrize(
    "test_labels, unseen",
    [
        (["ant", "bee", "fox"], "'fox' (4 rows)"),  # a class the training file lacks
        (["ant", "bee", "cat", "dog"], "'cat' (3 rows), 'dog' (3 rows)"),  # 4 classes against 2
    ],
)
def test_a_test_class_missing_from_the_training_file_is_refused_by_name(
    test_labels, unseen, tmp_path
):
    X, _ = _points(40)
    train = _table(
        tmp_path / "train.csv", [["x1", "x2", "label"], *_rows(X[:28], ["ant", "bee"] * 14)]
    )
    cycled = [test_labels[i % len(test_labels)] for i in range(12)]
    test = _table(tmp_path / "test.csv", [["x1", "x2", "label"], *_rows(X[28:], cycled)])
    with pytest.raises(
        ga.InvalidDataError,
        match=r"^.*test\.csv: class(es)? "
        + unseen.replace("(", r"\(").replace(")", r"\)")
        + r" (is|are) not in the training file train\.csv",
    ):
        load_file(train, test)


def test_a_class_with_only_test_points_is_refused_in_any_split():
    X, y = _points(40)
    is_test = y == 2  # every point of class 2 in the test split
    with pytest.raises(ga.InvalidDataError, match=r"class 2 \(\d+ rows\) has no training point"):
        ga.datasets.from_arrays("split", X, y, is_test)
    with pytest.raises(
        ga.InvalidDataError, match=r"class 'cat' \(\d+ rows\) has no training point"
    ):
        ga.datasets.from_arrays("split", X, np.array(["ant", "bee", "cat"])[y], is_test)


def test_test_columns_are_matched_by_name(tmp_path):
    X, y = _points(60)
    X[:, 1] *= 50.0  # the two features on different scales, so swapping them shows
    train = _table(tmp_path / "train.csv", [["x1", "x2", "label"], *_rows(X[:45], y[:45])])
    swapped = [[b, a, label] for a, b, label in _rows(X[45:], y[45:])]
    reordered = _table(tmp_path / "reordered.csv", [["x2", "x1", "label"], *swapped])
    in_order = _table(tmp_path / "in_order.csv", [["x1", "x2", "label"], *_rows(X[45:], y[45:])])
    matched = load_file(train, reordered)
    np.testing.assert_allclose(matched.X_test, load_file(train, in_order).X_test, atol=1e-12)
    assert "reordered.csv: the first row read as a header" in matched.description
    assert "its columns matched by name" in matched.description
    # the label column is found by name too
    label_first = _table(
        tmp_path / "label_first.csv",
        [["label", "x1", "x2"], *[[label, a, b] for a, b, label in _rows(X[45:], y[45:])]],
    )
    np.testing.assert_allclose(load_file(train, label_first).X_test, matched.X_test, atol=1e-12)


@pytest.mark.parametrize(
    "test_header, message",
    [
        (["x1", "x3", "label"], r"its header lacks 'x2' and has 'x3' that the training file lacks"),
        (["x1", "x2", "x3", "label"], r"its header has 'x3' that the training file lacks"),
    ],
)
def test_test_columns_with_other_names_are_refused(test_header, message, tmp_path):
    X, y = _points(40)
    train = _table(tmp_path / "train.csv", [["x1", "x2", "label"], *_rows(X[:30], y[:30])])
    # as many feature cells as the header names, the label last
    rows = [[*row[:2], *row[: len(test_header) - 3], row[2]] for row in _rows(X[30:], y[30:])]
    test = _table(tmp_path / "test.csv", [test_header, *rows])
    with pytest.raises(ga.InvalidDataError, match=message):
        load_file(train, test)


def test_a_duplicated_label_name_is_refused_by_name(tmp_path):
    X, y = _points(20)
    path = _table(tmp_path / "dup.csv", [["x", "x", "label"], *_rows(X, y)])
    with pytest.raises(ga.InvalidDataError, match=r"the header names 'x' 2 times \(columns 1, 2\)"):
        load_file(path, label_column="x")


def test_semicolons_in_a_csv_are_named(tmp_path):
    X, y = _points(20)
    path = tmp_path / "semicolons.csv"
    path.write_text(
        "\n".join(
            ";".join(row)
            for row in [["x1", "x2", "label"], *[[str(c) for c in r] for r in _rows(X, y)]]
        )
    )
    with pytest.raises(
        ga.InvalidDataError,
        match=r"columns are separated by commas, but its first "
        r"row is one column holding semicolons",
    ):
        load_file(path)


def test_predict_reads_one_row_and_an_npz_of_features_only(tmp_path):
    one_row = tmp_path / "one.csv"
    one_row.write_text("0.5,1.5\n")
    np.testing.assert_array_equal(read_features(one_row), [[0.5, 1.5]])
    features_only = tmp_path / "features.npz"
    np.savez(features_only, X=np.ones((3, 2)))
    np.testing.assert_array_equal(read_features(features_only), np.ones((3, 2)))


def test_a_test_fraction_too_small_for_the_data_is_named(tmp_path):
    X, y = _points(60)
    with pytest.raises(
        ga.InvalidDataError,
        match=r"a test fraction of 0.0001 of 60 rows leaves no "
        r"test point; choose a fraction between",
    ):
        load_file(_table(tmp_path / "t.csv", _rows(X, y)), test_fraction=0.0001)


def test_predicts_input_of_no_rows_or_a_header_alone_is_named(tmp_path):
    """predict reads one row as well as many; an empty file and a header with no data rows are
    each named as such."""
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ga.InvalidDataError, match="empty.csv: is empty"):
        read_features(empty)
    header_only = _table(tmp_path / "header.csv", [["a", "b"]])
    with pytest.raises(ga.InvalidDataError, match="has a header and no data rows"):
        read_features(header_only)
    np.testing.assert_array_equal(read_features(_table(tmp_path / "one.csv", [[1, 2]])), [[1, 2]])


def test_an_index_label_column_is_matched_by_name_in_a_test_file_with_a_header(tmp_path):
    """--label-column 0 names a column of the training file: in a test file whose header puts
    another column first it is found by name, not applied by position."""
    X, y = _points(60)
    names = np.array(["cat", "dog", "emu"])[y]
    train = _table(
        tmp_path / "train.csv",
        [["label", "a", "b"], *[[n, f"{p:.6f}", f"{q:.6f}"] for (p, q), n in zip(X[:40], names)]],
    )
    test = _table(
        tmp_path / "test.csv",
        [
            ["b", "label", "a"],
            *[[f"{q:.6f}", n, f"{p:.6f}"] for (p, q), n in zip(X[40:], names[40:])],
        ],
    )
    dataset = load_file(train, test, label_column=0)
    in_order = _table(
        tmp_path / "ordered.csv",
        [
            ["label", "a", "b"],
            *[[n, f"{p:.6f}", f"{q:.6f}"] for (p, q), n in zip(X[40:], names[40:])],
        ],
    )
    expected = load_file(train, in_order, label_column=0)
    np.testing.assert_allclose(dataset.X_test, expected.X_test, atol=1e-12)
    np.testing.assert_array_equal(dataset.Y_test, expected.Y_test)
