"""Sphinx configuration for the skrank documentation."""

import os
import sys

import skrank

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _gallery_order

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
exclude_patterns = ["_build"]

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
