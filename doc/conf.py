"""Sphinx configuration for the skrank documentation."""

import os
import sys

import skrank

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _gallery_order


def _write_solver_tables():
    """Write the solver tables of conventions.rst from the solver table itself."""
    from skrank.solvers.registry import doc_tables

    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_generated")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "solver_tables.rst"), "w") as file:
        file.write(doc_tables())


_write_solver_tables()

project = "skrank"
author = "skrank developers"
version = release = skrank.__version__
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
]
napoleon_numpy_docstring = True
napoleon_preprocess_types = True
exclude_patterns = ["_build", "_generated"]

html_theme = "pydata_sphinx_theme"
html_title = "skrank"

# The gallery: every examples/plot_*.py runs during the build, and its
# figures and printed output go into doc/auto_examples (not committed).
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "_gallery_order.ExampleOrder",
    "download_all_examples": False,
    "capture_repr": (),
}
