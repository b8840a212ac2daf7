"""Sphinx configuration for the skrank documentation."""

project = "skrank"
author = "skrank developers"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax"]
napoleon_numpy_docstring = True
html_theme = "alabaster"
exclude_patterns = ["_build"]
