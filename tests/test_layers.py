"""The package's three layers and their one-way dependencies: the library (``gpflow_augmented``),
``gpflow_augmented.sampling`` and ``gpflow_augmented.comparison``; above them, outside the wheel,
the benchmark studies (``benchmarks/``), which no module of the package imports. The import graph
is read from the source (every import statement, including those inside functions), checked for
cycles and for imports that point up a layer; each check is also shown to catch a planted
violation. Importing the library must not load the layers above it, polyagamma or matplotlib;
the layers load on first use."""

import ast
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Set

import pytest

import gpflow_augmented

PACKAGE_DIR = Path(gpflow_augmented.__file__).parent
# Higher layers may import lower ones only. The command-line entry point belongs to comparison.
LAYER_ORDER = {"library": 0, "sampling": 1, "comparison": 2}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path) -> Dict[str, Set[str]]:
    """Each module of the package at ``root`` -> the package's modules it imports anywhere."""
    modules = {module_name(path, root): path for path in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node.module, node.level)
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    targets.add(submodule if submodule in modules else base)
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def _resolve(name: str, is_package: bool, module: Optional[str], level: int) -> str:
    if level == 0:
        return module or ""
    parts = name.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """A cycle of imports, as the list of its modules, or None."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("sampling", "comparison"):
        return parts[1]
    return "comparison" if parts[-1] == "__main__" else "library"


def upward_imports(graph: Dict[str, Set[str]]) -> List[str]:
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if LAYER_ORDER[layer(target)] > LAYER_ORDER[layer(source)]
    )


# Outside the wheel: the benchmark studies, the maintained tools and the HLO check's XLA client.
OUTSIDE_THE_PACKAGE = ("benchmarks", "tools", "jax", "jaxlib")


def imports_from_outside(root: Path) -> List[str]:
    """``module -> name`` for each import, anywhere in the package at ``root``, of a top-level
    name in :data:`OUTSIDE_THE_PACKAGE`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in OUTSIDE_THE_PACKAGE:
                    found.append(f"{module_name(path, root)} -> {name}")
    return found


def unlisted_public_names(root: Path) -> List[str]:
    """``module.name`` for each name a module of the package at ``root`` defines at its top level
    (a class, a function, an assignment) that is neither private (a leading underscore) nor in
    the module's ``__all__``: the public API is what the ``__all__`` lists say, the rest is
    private."""
    unlisted = []
    for path in sorted(root.rglob("*.py")):
        listed, defined = [], []
        for node in ast.parse(path.read_text()).body:
            targets: List[ast.expr] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.append(node.name)
            elif isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                for name in names:
                    if isinstance(name, ast.Name) and name.id == "__all__":
                        listed = [element.value for element in node.value.elts]  # type: ignore
                    elif isinstance(name, ast.Name):
                        defined.append(name.id)
        module = module_name(path, root)
        unlisted += [
            f"{module}.{name}"
            for name in defined
            if not name.startswith("_") and name not in listed
        ]
    return unlisted


def test_the_package_has_no_import_cycle():
    graph = import_graph(PACKAGE_DIR)
    assert len(graph) > 30 and "gpflow_augmented.comparison.cli" in graph
    assert find_cycle(graph) is None, find_cycle(graph)


def test_no_layer_imports_one_above_it():
    assert upward_imports(import_graph(PACKAGE_DIR)) == []


def test_the_package_imports_nothing_from_the_harness_outside_it():
    assert imports_from_outside(PACKAGE_DIR) == []
    benchmarks = PACKAGE_DIR.parent / "benchmarks"
    assert (benchmarks / "hlo_export.py").exists() and not (
        PACKAGE_DIR / "comparison" / "hlo_export.py"
    ).exists()


def test_every_name_outside_the_all_lists_is_private():
    assert unlisted_public_names(PACKAGE_DIR) == []


def _planted_package(tmp_path: Path, files: Dict[str, str]) -> Path:
    root = tmp_path / "gpflow_augmented"
    for relative, text in {"__init__.py": "", **files}.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checks_catch_a_planted_cycle_and_an_upward_import(tmp_path):
    root = _planted_package(
        tmp_path,
        {
            "models.py": "def f():\n    from .training import fit\n",
            "training.py": "from . import models\n",
            "monitoring.py": "from .comparison.protocol import compare\n",
            "comparison/__init__.py": "",
            "comparison/protocol.py": "from ..models import f\n",
        },
    )
    graph = import_graph(root)
    assert find_cycle(graph) in (
        ["gpflow_augmented.models", "gpflow_augmented.training", "gpflow_augmented.models"],
        ["gpflow_augmented.training", "gpflow_augmented.models", "gpflow_augmented.training"],
    )
    assert upward_imports(graph) == [
        "gpflow_augmented.monitoring -> gpflow_augmented.comparison.protocol"
    ]


def test_the_check_catches_a_planted_public_name_missing_from_all(tmp_path):
    root = _planted_package(
        tmp_path,
        {
            "models.py": '__all__ = ["Model"]\nclass Model: ...\ndef helper(): ...\n'
            "_CACHE = {}\nLIMIT: int = 3\nA, _B = 1, 2\n",
        },
    )
    assert unlisted_public_names(root) == [
        "gpflow_augmented.models.helper",
        "gpflow_augmented.models.LIMIT",
        "gpflow_augmented.models.A",
    ]


def test_the_check_catches_a_planted_import_of_the_harness(tmp_path):
    root = _planted_package(
        tmp_path,
        {
            "models.py": "def f():\n    from benchmarks.hlo_export import export_steps\n",
            "comparison/__init__.py": "import jax.numpy\n",
        },
    )
    assert imports_from_outside(root) == [
        "gpflow_augmented.comparison -> jax.numpy",
        "gpflow_augmented.models -> benchmarks.hlo_export",
    ]


@pytest.mark.integration
def test_importing_the_library_loads_no_layer_above_it_nor_their_dependencies():
    # TensorFlow 2.21 itself loads matplotlib (keras.src.visualization imports pyplot when it is
    # installed), so what counts is what importing the package adds to what TF and GPflow load.
    script = (
        "import json, sys\n"
        "import tensorflow, gpflow\n"
        "before = set(sys.modules)\n"
        "import gpflow_augmented\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    added = json.loads(completed.stdout.strip().splitlines()[-1])
    assert "gpflow_augmented.models" in added
    for unwanted in (
        "gpflow_augmented.sampling",
        "gpflow_augmented.comparison",
        "polyagamma",
        "matplotlib",
        "tqdm",
    ):
        assert not [
            name
            for name in added
            if name.split(".")[0 : len(unwanted.split("."))] == unwanted.split(".")
        ], unwanted


def test_a_layer_loads_on_first_use_without_a_warning_and_an_unknown_name_fails():
    import importlib

    with pytest.raises(AttributeError, match="no attribute 'GibbsSampler'"):
        gpflow_augmented.GibbsSampler  # in gpflow_augmented.sampling, never at the top level
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("gpflow_augmented.gibbs")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gpflow_augmented.comparison.__name__ == "gpflow_augmented.comparison"


def test_the_exports_are_sorted_and_all_exist():
    exported = gpflow_augmented.__all__
    assert exported == sorted(exported)
    assert [name for name in exported if not hasattr(gpflow_augmented, name)] == []


@pytest.mark.allow_autograph_warnings
def test_the_autograph_guard_sees_a_function_autograph_cannot_convert(_no_autograph_warnings):
    import tensorflow as tf

    # Two lambdas on one line: AutoGraph cannot tell which source is which, warns, runs as-is.
    _double, triple = (lambda x: x * 2), (lambda x: x * 3)
    assert float(tf.function(triple)(tf.constant(3.0))) == 9.0  # it ran unconverted
    assert any("could not transform" in message for message in _no_autograph_warnings.messages)
