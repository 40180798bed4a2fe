"""A trained model kept as a tf.saved_model: it reloads in a fresh process, without this package,
with predictions equal to the trained model's; the predict command writes them as CSV."""

import json
import os
import subprocess
import sys

import gpflow
import numpy as np
import pytest

import gpflow_augmented as ga
from gpflow_augmented.export import read_metadata
from gpflow_augmented.comparison.cli import main


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = ga.datasets.load_dataset("wine")
    model = ga.LogisticSoftmaxSVGP(
        ga.initial_kernel(d.X_train), d.X_train[:15].copy(), 3, num_data=len(d.X_train)
    )
    ga.fit(model, (d.X_train, d.Y_train), iterations=20, batch_size=None, progress=False)
    raw = d.X_test * 2.5 + 7.0  # "raw" rows, standardised inside the export
    path = ga.export_model(
        model,
        tmp_path_factory.mktemp("m") / "wine-model",
        feature_mean=np.full(13, 7.0),
        feature_scale=np.full(13, 2.5),
        class_names=["barolo", "grignolino", "barbera"],
    )
    return model, d, raw, path


@pytest.mark.integration
def test_a_fresh_process_reloads_the_export_with_tensorflow_alone(trained, tmp_path):
    model, d, raw, path = trained
    expected = model.predict_y(d.X_test)[0].numpy()
    np.save(tmp_path / "raw.npy", raw)
    script = (
        "import sys, numpy as np, tensorflow as tf\n"
        "assert 'gpflow_augmented' not in sys.modules\n"
        f"m = tf.saved_model.load({str(path)!r})\n"
        f"X = np.load({str(tmp_path / 'raw.npy')!r})\n"
        f"np.save({str(tmp_path / 'p.npy')!r}, m.predict_y(X)['mean'].numpy())\n"
        "sig = m.signatures['predict_y'](X=tf.constant(X))\n"
        f"np.save({str(tmp_path / 's.npy')!r}, sig['mean'].numpy())\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    for name in ("p.npy", "s.npy"):
        np.testing.assert_allclose(np.load(tmp_path / name), expected, rtol=1e-12, atol=1e-12)
    assert json.loads((path / "gpflow_augmented.json").read_text())["class_names"] == [
        "barolo",
        "grignolino",
        "barbera",
    ]


@pytest.mark.integration
def test_predict_command_writes_probabilities_as_csv(trained, tmp_path):
    model, d, raw, path = trained
    table = tmp_path / "rows.csv"
    table.write_text("\n".join(",".join(f"{v!r}" for v in row) + ",x" for row in raw) + "\n")
    out = tmp_path / "probabilities.csv"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpflow_augmented",
            "predict",
            str(path),
            str(table),
            "--label-column",
            "-1",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
    )
    assert completed.returncode == 0 and completed.stderr == "", completed.stderr[-2000:]
    lines = out.read_text().splitlines()
    assert lines[0] == "barolo,grignolino,barbera"
    written = np.array([[float(v) for v in line.split(",")] for line in lines[1:]])
    np.testing.assert_allclose(
        written, model.predict_y(d.X_test)[0].numpy(), rtol=1e-12, atol=1e-12
    )


def test_predict_refuses_what_it_cannot_use(trained, tmp_path, capsys):
    _, _, raw, path = trained
    narrow = tmp_path / "narrow.csv"
    narrow.write_text("\n".join(",".join(map(str, row[:5])) for row in raw) + "\n")
    assert main(["predict", str(path), str(narrow)]) == 2
    assert "has 5 feature columns, the model takes 13" in capsys.readouterr().err
    assert main(["predict", str(tmp_path), str(narrow)]) == 2
    assert "not a folder written by export_model" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^class_names has 2 names, the model predicts 3"):
        ga.export_model(trained[0], tmp_path / "x", class_names=["a", "b"])


def test_predict_refuses_a_folder_whose_metadata_does_not_fit_its_model(trained, tmp_path, capsys):
    """Metadata edited after the export so that it no longer fits the model is named as such, not
    left to tf.function's binding TypeError."""
    import shutil

    _, _, raw, path = trained
    copy = tmp_path / "edited-model"
    shutil.copytree(path, copy)
    metadata = json.loads((copy / "gpflow_augmented.json").read_text())
    (copy / "gpflow_augmented.json").write_text(json.dumps({**metadata, "input_dim": 12}))
    rows = tmp_path / "rows.csv"
    rows.write_text("\n".join(",".join(map(str, row[:12])) for row in raw) + "\n")
    assert main(["predict", str(copy), str(rows)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"gpflow-augmented: error: {copy}: gpflow_augmented.json says input_dim 12, but the saved "
        "model takes 13 features; the folder's files do not belong together (export the model "
        "again)"
    )
    (copy / "gpflow_augmented.json").write_text('{"input_dim": 13, "class_na')
    assert main(["predict", str(copy), str(rows)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .startswith(f"gpflow-augmented: error: {copy / 'gpflow_augmented.json'}: not readable JSON")
    )
    (copy / "gpflow_augmented.json").write_text(json.dumps({**metadata, "class_names": ["a", "b"]}))
    wide = tmp_path / "wide.csv"
    wide.write_text("\n".join(",".join(map(str, row)) for row in raw) + "\n")
    assert main(["predict", str(copy), str(wide)]) == 2
    assert "gpflow_augmented.json names 2 classes, the saved model predicts 3" in (
        capsys.readouterr().err
    )


def test_a_failed_export_leaves_the_earlier_export_and_no_partial_folder(trained, tmp_path):
    """The class names are checked before anything is written: a failed export over a working one
    leaves it whole, and a failed export into a new folder leaves nothing."""
    model, d, raw, _ = trained
    good = ga.export_model(model, tmp_path / "m", class_names=["a", "b", "c"])
    files = sorted(p.relative_to(good) for p in good.rglob("*"))
    metadata = (good / "gpflow_augmented.json").read_text()
    other = ga.LogisticSoftmaxSVGP(
        gpflow.kernels.SquaredExponential(lengthscales=np.ones(4)), np.eye(4), 3
    )
    with pytest.raises(ValueError, match="class_names has 2 names, the model predicts 3"):
        ga.export_model(other, good, class_names=["x", "y"])
    assert sorted(p.relative_to(good) for p in good.rglob("*")) == files
    assert (good / "gpflow_augmented.json").read_text() == metadata
    assert read_metadata(good)["input_dim"] == 13
    with pytest.raises(ValueError, match="class_names has 2 names"):
        ga.export_model(other, tmp_path / "new", class_names=["x", "y"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    # A later export that succeeds replaces the earlier one whole.
    ga.export_model(other, good)
    assert read_metadata(good)["input_dim"] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_export_refuses_a_bare_string_of_names_and_a_folder_of_other_files(trained, tmp_path):
    model = trained[0]
    with pytest.raises(TypeError, match="class_names must be a list of 3 names, not one string"):
        ga.export_model(model, tmp_path / "m", class_names="abc")
    assert not (tmp_path / "m").exists()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    with pytest.raises(ValueError, match="holds files that are not an export"):
        ga.export_model(model, tmp_path / "notes")
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file; export_model writes a folder"):
        ga.export_model(model, tmp_path / "file")


@pytest.mark.integration
def test_predict_cannot_write_its_output_in_one_line_and_leaves_no_partial_file(
    trained, tmp_path, capsys, monkeypatch
):
    """predict --output onto a folder, a read-only file system or a full disk is named in one
    line and leaves no .partial file (compare's results.json is written the same way)."""
    import errno

    from gpflow_augmented.comparison import runs

    _, _, raw, path = trained
    rows = tmp_path / "rows.csv"
    rows.write_text("\n".join(",".join(map(str, row)) for row in raw[:3]) + "\n")
    (tmp_path / "folder").mkdir()
    assert main(["predict", str(path), str(rows), "--output", str(tmp_path / "folder")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"gpflow-augmented: error: {tmp_path / 'folder'}: a folder is in the way"

    def read_only(source, target):
        raise OSError(errno.EROFS, "Read-only file system", str(target))

    monkeypatch.setattr(runs.os, "replace", read_only)
    assert main(["predict", str(path), str(rows), "--output", str(tmp_path / "p.csv")]) == 2
    assert capsys.readouterr().err.strip().endswith("p.csv: Read-only file system")
    monkeypatch.undo()

    def full_disk(handle):
        handle.write("mean")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        runs.write_atomically(tmp_path / "q.csv", full_disk)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "rows.csv"]


def test_the_documented_one_liner_predicts_and_a_wrong_width_is_named(trained, tmp_path):
    """``ga.load_model(path).predict_y(X)`` in one expression predicts (not "Called a function
    referencing variables which have been deleted"), and a row of the wrong width is named."""
    import gc

    model, d, raw, path = trained
    expected = model.predict_y(d.X_test)[0].numpy()
    gc.collect()
    probabilities = ga.load_model(path).predict_y(raw)["mean"].numpy()
    np.testing.assert_allclose(probabilities, expected, rtol=1e-12, atol=1e-12)
    mean = ga.load_model(path).predict_f(raw[:2])["mean"]
    assert mean.shape == (2, 3)
    with pytest.raises(
        ValueError, match=r"expects rows of 13 features, got an array of shape \(4, 12\)"
    ):
        ga.load_model(path).predict_y(raw[:4, :12])
