"""Every notebook in ``notebooks/`` runs top to bottom as a Jupyter notebook (read by jupytext,
executed in a kernel by nbclient, as GPflow tests its own) in fast mode, and the figures it saves
are real PNG images. A notebook that is lost or renamed fails the count."""
import json
import sys
from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

from gpflow_augmented.comparison.ci_utils import FAST_MODE_VARIABLE

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.pct.py"))
EXPECTED_NOTEBOOKS = 6
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def kernel_spec(tmp_path_factory):
    """A kernel spec of this very interpreter, found first through JUPYTER_PATH, so that a
    "python3" kernel spec installed elsewhere (e.g. by a system Jupyter) cannot run the notebooks
    in a Python without this package."""
    name = "gpflow-augmented-tests"
    folder = tmp_path_factory.mktemp("jupyter") / "kernels" / name
    folder.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": name, "language": "python"}
    (folder / "kernel.json").write_text(json.dumps(spec))
    return name, str(folder.parent.parent)


def test_all_notebooks_are_found():
    assert len(NOTEBOOKS) == EXPECTED_NOTEBOOKS, [p.name for p in NOTEBOOKS]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name.split(".")[0] for p in NOTEBOOKS])
def test_notebook_runs_in_fast_mode(path, tmp_path, monkeypatch, kernel_spec):
    name, jupyter_path = kernel_spec
    monkeypatch.setenv("JUPYTER_PATH", jupyter_path)
    monkeypatch.setenv(FAST_MODE_VARIABLE, "1")
    monkeypatch.setenv("GPFLOW_AUGMENTED_OUTPUT", str(tmp_path / "output"))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    notebook = jupytext.read(path)
    assert any(cell.cell_type == "markdown" for cell in notebook.cells)
    client = NotebookClient(notebook, timeout=600, kernel_name=name,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any error

    printed = "".join(output.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                      for output in cell.get("outputs", []))
    assert printed.strip(), "the notebook printed no results"
    figures = sorted((tmp_path / "output").rglob("*.png"))
    saves = path.read_text().count("save_figure(")
    assert len(figures) >= saves > 0, (figures, saves)
    for figure in figures:
        content = figure.read_bytes()
        assert content.startswith(PNG_SIGNATURE) and len(content) > 5000, figure
