"""Every notebook in ``notebooks/`` runs top to bottom as a Jupyter notebook (read by jupytext,
executed in a kernel by nbclient, as GPflow tests its own) in fast mode, and the figures it saves
are real PNG images. A notebook that is lost or renamed fails the count.

The notebooks run one after the other in one kernel, its namespace emptied (``%reset -f``) before
each, so that a notebook still fails on any name it does not define itself. In fast mode most of a
notebook's time was the kernel's start-up, importing TensorFlow and GPflow, and AutoGraph's first
conversion of the compiled steps: a kernel for each paid them six times. No notebook changes
global settings (GPflow's config, TensorFlow's seed, Matplotlib's rcParams) that another could
rely on."""

import json
import shutil
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient

from gpflow_augmented.comparison.ci_utils import FAST_MODE_VARIABLE

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.pct.py"))
EXPECTED_NOTEBOOKS = 6
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A kernel of this very interpreter, its spec found first through JUPYTER_PATH, so that a
    "python3" kernel spec installed elsewhere (e.g. by a system Jupyter) cannot run the notebooks
    in a Python without this package; in fast mode, its figures written under ``output``."""
    name = "gpflow-augmented-tests"
    jupyter_path = tmp_path_factory.mktemp("jupyter")
    folder = jupyter_path / "kernels" / name
    folder.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": name,
        "language": "python",
    }
    (folder / "kernel.json").write_text(json.dumps(spec))
    output = tmp_path_factory.mktemp("output")
    with pytest.MonkeyPatch.context() as patch:  # the kernel inherits this environment
        patch.setenv("JUPYTER_PATH", str(jupyter_path))
        patch.setenv(FAST_MODE_VARIABLE, "1")
        patch.setenv("GPFLOW_AUGMENTED_OUTPUT", str(output))
        patch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
        manager = AsyncKernelManager(kernel_name=name)
        run_sync(manager.start_kernel)(cwd=str(tmp_path_factory.mktemp("cwd")))
    yield manager, output
    run_sync(manager.shutdown_kernel)(now=True)


def test_all_notebooks_are_found():
    assert len(NOTEBOOKS) == EXPECTED_NOTEBOOKS, [p.name for p in NOTEBOOKS]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name.split(".")[0] for p in NOTEBOOKS])
def test_notebook_runs_in_fast_mode(path, kernel):
    manager, figure_folder = kernel
    shutil.rmtree(figure_folder)  # only this notebook's figures count
    figure_folder.mkdir()
    notebook = jupytext.read(path)
    assert any(cell.cell_type == "markdown" for cell in notebook.cells)
    notebook.cells.insert(0, nbformat.v4.new_code_cell("%reset -f"))  # the earlier notebooks' names
    client = NotebookClient(notebook, timeout=600, km=manager)
    try:
        client.execute()  # raises CellExecutionError, naming the cell, on any error
    finally:
        if client.kc is not None:
            client.kc.stop_channels()

    printed = "".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )
    assert printed.strip(), "the notebook printed no results"
    figures = sorted(figure_folder.rglob("*.png"))
    saves = path.read_text().count("save_figure(")
    assert len(figures) >= saves > 0, (figures, saves)
    for figure in figures:
        content = figure.read_bytes()
        assert content.startswith(PNG_SIGNATURE) and len(content) > 5000, figure
