"""Every relative link in the README and the user docs leads to a file that exists, and to a heading
of it where the link names one (GitHub's anchors)."""

import re
from pathlib import Path

import pytest

from helpers import shortened

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    ROOT / "GLOSSARY.md",
    *sorted(ROOT.glob("docs/*.md")),
    *sorted(ROOT.glob("benchmarks/*.md")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set:
    lines = page.read_text().splitlines()
    inside_code, found = False, set()
    for line in lines:
        if line.startswith("```"):
            inside_code = not inside_code
        elif not inside_code and line.startswith("#"):
            found.add(anchor(line.lstrip("#")))
    return found


def test_the_anchor_rule_matches_githubs():
    assert anchor(" What it costs") == "what-it-costs"
    assert (
        anchor("How each method's defaults were chosen") == "how-each-methods-defaults-were-chosen"
    )
    assert anchor("The `jit_compile=True` flag: on a CPU") == "the-jit_compiletrue-flag-on-a-cpu"


def broken_links(page: Path) -> list:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            broken.append(target)
    return broken


def test_a_missing_file_or_heading_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-section) [ok](#top) [gone](missing.md) [bad](other.md#no-such) "
        "[web](https://example.com)\n\n# Top\n"
    )
    assert broken_links(page) == ["missing.md", "other.md#no-such"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert not broken_links(page), f"{page.name}: {broken_links(page)}"


PUBLIC_MODULES = [
    "gpflow_augmented",
    "gpflow_augmented.bounds",
    "gpflow_augmented.likelihoods",
    "gpflow_augmented.datasets",
    "gpflow_augmented.metrics",
    "gpflow_augmented.monitoring",
    "gpflow_augmented.distributed",
    "gpflow_augmented.sklearn",
    "gpflow_augmented.comparison",
]


def _generated_docstring(obj) -> str:
    """The docstring Python writes for a named tuple without one, ``Name(field, ...)``."""
    fields = getattr(obj, "_fields", None)
    return f"{obj.__name__}({', '.join(fields)})" if fields is not None else ""


def undocumented(module_name: str) -> list:
    """The public classes, functions, methods and properties of a module's ``__all__`` without a
    docstring of their own or inherited."""
    import importlib
    import inspect

    module = importlib.import_module(module_name)
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not (obj.__doc__ or "").strip() or obj.__doc__ == _generated_docstring(obj):
            missing.append(name)
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                public = not member.startswith("_")
                if public and (inspect.isfunction(value) or isinstance(value, property)):
                    if not (inspect.getdoc(getattr(obj, member)) or "").strip():
                        missing.append(f"{name}.{member}")
    return missing


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(module_name):
    assert not undocumented(module_name)


@pytest.mark.slow
def test_the_reference_builds_without_a_warning(tmp_path):
    """The docs site (user guide, notebooks, the reference from the docstrings) as `.ci/run`'s
    test run builds it: offline, every warning an error."""
    import os
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
        + [str(ROOT / "docs"), str(tmp_path / "html")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    # TensorFlow's native start-up line says WARNING whatever the log level.
    warnings = [
        line
        for line in completed.stderr.splitlines()
        if ("WARNING" in line or "ERROR" in line) and "absl::InitializeLog" not in line
    ]
    assert completed.returncode == 0 and not warnings, "\n".join(warnings or [completed.stderr])
    assert (tmp_path / "html" / "reference" / "training.html").exists()
    assert (tmp_path / "html" / "notebooks" / "getting_started.html").exists()


def readme_python_blocks() -> list:
    """The README's Python code blocks, in order."""
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.slow
def test_the_readmes_python_examples_run(tmp_path, monkeypatch):
    """Each quick start as the README gives it, with the training shortened (iterations, batches)
    and the scikit-learn one given data (it names a user's X, y and X_test)."""
    import gpflow_augmented as ga

    blocks = readme_python_blocks()
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    for number, block in enumerate(blocks):
        block = shortened(block)
        namespace: dict = {}
        if "GPClassifier" in block:
            wine = ga.datasets.load_dataset("wine")
            namespace = {"X": wine.X_train, "y": wine.Y_train[:, 0], "X_test": wine.X_test}
        exec(compile(block, f"README.md python block {number}", "exec"), namespace)
    assert namespace["probabilities"].shape == (len(wine.X_test), 3)
    assert (tmp_path / "satimage-model" / "gpflow_augmented.json").is_file()


def _docs_tables(root, *options):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "docs_tables.py"), "--root", str(root), *options],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_every_table_the_docs_embed_from_a_report_is_the_reports_output(tmp_path):
    """The tables between ``<!-- report: SUMMARIES SECTION -->`` markers are what the report makes
    of the committed summaries (tools/docs_tables.py); a table edited by hand is caught."""
    import shutil

    completed = _docs_tables(ROOT, "--check")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    found = int(completed.stdout.split()[0])
    assert found >= 3, completed.stdout
    # The broken variant: one number of a generated table changed by hand.
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("_build"))
    shutil.copy(ROOT / "README.md", copy / "README.md")
    stability = copy / "docs" / "stability.md"
    text = stability.read_text()
    start = text.index("<!-- report: docs/results/kddcup-20s/")
    table_row = text.index("| kddcup |", start)
    stability.write_text(text[:table_row] + "| kddcup | 4 |" + text[table_row + 13 :])
    drifted = _docs_tables(copy, "--check")
    assert drifted.returncode == 1 and "docs/stability.md" in drifted.stdout
    # and rewriting makes it the report's again
    assert _docs_tables(copy).returncode == 0
    assert stability.read_text() == text


def test_a_table_from_several_results_files_has_their_rows_in_order(tmp_path):
    """A study run as several commands: the marker names each one's results with commas, and
    the table has every file's rows, in the order named (the first file alone is the broken
    variant: it loses the other's row)."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "tools" / "docs_tables.py")
    docs_tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs_tables)
    for name, seed in (("a", 1), ("b", 0)):
        rows = [{"dataset": "d", "seed": seed, "method": "lsm", "kernel_of": "lsm", "steps": 1}]
        rows[0].update(nll=0.1 * (seed + 1), error=0.0, confidence=0.9, accuracy=1.0)
        (tmp_path / f"{name}.json").write_text(json.dumps({"stamp": {}, "rows": rows}))
    text = "<!-- report: a.json,b.json matched -->\nold\n<!-- end report -->\n"
    table = docs_tables.refreshed(text, tmp_path)
    assert table.index("| d | 1 | lsm | lsm | 1 | 0.2000 |") < table.index(
        "| d | 0 | lsm | lsm | 1 |"
    )
