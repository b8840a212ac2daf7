# `make test`, `make demo` and `make docs` set everything up on a fresh machine (Python 3 and make only).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: test demo docs bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.test-installed: $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e ".[test,bench]"
	touch $@

$(VENV)/.demo-installed: $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e ".[bench]"
	touch $@

$(VENV)/.docs-installed: $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e ".[doc]"
	touch $@

test: $(VENV)/.test-installed
	$(VENV)/bin/ruff check skrank tests benchmarks examples
	$(PY) -m pytest -q -p no:cacheprovider tests

demo: $(VENV)/.demo-installed
	$(PY) -m skrank.demo

# The HTML site with the gallery (runs every examples/plot_*.py) in doc/_build/html.
docs: $(VENV)/.docs-installed
	$(VENV)/bin/sphinx-build -b html doc doc/_build/html

clean:
	rm -rf $(VENV) build *.egg-info
