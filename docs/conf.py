"""Sphinx configuration: the user guide (the Markdown pages here), the reference built from the
docstrings, and the notebooks, rendered from their jupytext percent files without running them.

    python -m sphinx -W --keep-going -b html docs build/docs
"""

import gpflow_augmented

project = "gpflow_augmented"
author = "the gpflow_augmented developers"
release = version = gpflow_augmented.__version__

# myst_nb reads the Markdown pages (it includes myst-parser) and the notebooks; autodoc and
# napoleon, GPflow's own choice, read the docstrings.
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax"]

# The percent-format notebooks, read by jupytext, shown as they are: their measured sections are
# in the text, and running them takes minutes to hours.
nb_custom_formats = {".pct.py": ["jupytext.reads", {"fmt": "py:percent"}]}
nb_execution_mode = "off"
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

exclude_patterns = ["_build", "results/*/report.md"]  # a report beside its summaries
html_theme = "alabaster"
html_title = f"gpflow_augmented {release}"
