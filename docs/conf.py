"""Sphinx configuration of the fairque documentation.

Build: ``uv run --group docs sphinx-build -W --keep-going docs docs/_build/html``.
The reference pages for the command line, the configuration keys and the HTTP API are
generated from the code and ``openapi.json`` before the sources are read.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent / "src"))

import fairque_reference  # noqa: E402

import fairque  # noqa: E402

fairque_reference.generate(HERE)

project = "fairque"
author = "the fairque authors"
copyright = "fairque contributors"
release = fairque.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
# included by other pages, not pages of their own
exclude_patterns = [
    "_build",
    "_generated",
    "_ext",
    "architecture.md",
    "benchmarks/results.md",
    "benchmarks/fairness*.md",
    "benchmarks/shards.md",
]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}
# the public names are documented where ``fairque`` exports them
autodoc_inherit_docstrings = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
nitpicky = False
# option names and quotes stay as typed (--queue, not an en dash)
smartquotes = False
suppress_warnings = ["myst.xref_missing"]

html_theme = "furo"
html_title = f"fairque {release}"
html_static_path: list[str] = []
