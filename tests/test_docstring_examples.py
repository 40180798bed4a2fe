"""Every code example in the package's docstrings runs.

An example is a reST literal block: the indented paragraph after a line that ends in ``::`` (an
indented paragraph without it, as the modules' formulas are, is not code). Each runs with the names
a reader of the docs may assume: ``ga``, ``gpflow``, ``tf``, ``np``, the module's own names, data
``X`` [N, D], ``Y`` [N, 1] (``y`` [N]), ``X_test``, ``Y_test``, and ``model``, a
``LogisticSoftmaxSVGP`` on them, with the training shortened (``helpers.shortened``) and in a fresh
folder.
"""

import importlib
import inspect
import pkgutil
import textwrap
from typing import Dict, List

import numpy as np
import pytest

from helpers import shortened

#: Where the package's examples are: the sweep must find at least these (so that it cannot pass by
#: finding nothing).
KNOWN_EXAMPLES = {
    "gpflow_augmented.cavi.CAVI",
    "gpflow_augmented.checkpoints.restore_checkpoint",
    "gpflow_augmented.export.load_model",
    "gpflow_augmented.models.LogisticSoftmaxSVGP",
    "gpflow_augmented.monitoring",
    "gpflow_augmented.sklearn",
    "gpflow_augmented.training.Trainer",
    "gpflow_augmented.training.fit",
}


def literal_blocks(docstring: str) -> List[str]:
    """The literal blocks of a docstring, dedented."""
    lines = inspect.cleandoc(docstring).splitlines()
    blocks = []
    for number, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        indent = len(line) - len(line.lstrip())
        block = []
        for following in lines[number + 1 :]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            block.append(following)
        code = textwrap.dedent("\n".join(block)).strip("\n")
        if code:
            blocks.append(code)
    return blocks


def _documented(module) -> Dict[str, str]:
    """{qualified name: docstring} of a module and of the classes, functions and methods it
    defines."""
    found = {module.__name__: module.__doc__ or ""}
    for name, obj in vars(module).items():
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if obj.__module__ != module.__name__:
            continue
        found[f"{module.__name__}.{name}"] = obj.__doc__ or ""
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                if inspect.isfunction(value) or isinstance(value, property):
                    found[f"{module.__name__}.{name}.{member}"] = value.__doc__ or ""
    return found


def docstring_examples(package_name: str = "gpflow_augmented") -> Dict[str, List[str]]:
    """{where: [code, ...]} of every literal block in the docstrings of the package's modules."""
    package = importlib.import_module(package_name)
    modules = [package] + [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(package.__path__, f"{package_name}.")
        if not info.name.endswith("__main__")
    ]
    examples = {}
    for module in modules:
        for where, docstring in _documented(module).items():
            blocks = literal_blocks(docstring)
            if blocks:
                examples[where] = blocks
    return examples


def reader_names(module_name: str) -> dict:
    """The names an example may use without defining them (fresh for each example)."""
    import gpflow
    import tensorflow as tf

    import gpflow_augmented as ga

    wine = ga.datasets.load_dataset("wine")
    X, Y = wine.X_train, wine.Y_train
    model = ga.LogisticSoftmaxSVGP(
        ga.initial_kernel(X), ga.inducing_points(X, 20), num_classes=3, num_data=len(X)
    )
    module = importlib.import_module(module_name)
    return {
        **vars(module),
        "ga": ga,
        "gpflow": gpflow,
        "tf": tf,
        "np": np,
        "X": X,
        "Y": Y,
        "y": Y[:, 0],
        "X_test": wine.X_test,
        "Y_test": wine.Y_test,
        "model": model,
    }


def _module_of(where: str) -> str:
    """The module that ``where`` (a module, or a name in one) is in."""
    parts = where.split(".")
    for end in range(len(parts), 0, -1):
        try:
            return importlib.import_module(".".join(parts[:end])).__name__
        except ModuleNotFoundError:
            continue
    raise ValueError(f"{where} is in no module")


def run_example(where: str, code: str) -> None:
    namespace = reader_names(_module_of(where))
    exec(compile(shortened(code), f"the example of {where}", "exec"), namespace)


def test_a_literal_block_is_found_and_a_formula_is_not():
    docstring = """Summary.

    The formula, an indented paragraph:

        Λ = I + s A Aᵀ

    An example::

        x = 1
        y = x + 1

    Text after it.
    """
    assert literal_blocks(docstring) == ["x = 1\ny = x + 1"]


def test_a_broken_example_fails_the_sweep(tmp_path, monkeypatch):
    """A planted example that calls the API wrongly raises, as the sweep would report it."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError):
        run_example("gpflow_augmented.training.fit", "ga.fit(model, X, Y, iterations=3)")


@pytest.mark.slow
def test_every_docstring_example_runs(tmp_path, monkeypatch):
    examples = docstring_examples()
    assert KNOWN_EXAMPLES <= set(examples)
    failures = []
    for where, blocks in sorted(examples.items()):
        for number, code in enumerate(blocks):
            folder = tmp_path / f"{where}-{number}"
            folder.mkdir()
            monkeypatch.chdir(folder)
            try:
                run_example(where, code)
            except Exception as error:  # noqa: BLE001 - every failing example is listed
                failures.append(f"{where} (example {number + 1}): {type(error).__name__}: {error}")
    assert not failures, "\n".join(failures)
