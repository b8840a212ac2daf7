# `make test`, `make demo` and `make docs` set everything up on a fresh machine (Python 3 and make only).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: test test-slow demo docs bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# --no-compile: no bytecode for every installed module up front (half the install's time); Python
# writes it for the modules the tests import, on first import
$(VENV)/.test-installed: $(PY) pyproject.toml
	$(PY) -m pip install --quiet --no-compile -e ".[test,bench]"
	touch $@

$(VENV)/.demo-installed: $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e ".[bench]"
	touch $@

$(VENV)/.docs-installed: $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e ".[doc]"
	touch $@

# The tests run in pytest-xdist workers, one per logical CPU and at most 4 (each takes up to
# about 1.2 GB), a test file per worker: the files use different kernels, so that the workers
# compile them once between them (a fresh clone, fast and slow tests together: 4 min 44 s with
# tests spread one by one, 4 min 03 s by file); `make test PYTEST_WORKERS=0` runs them in one process.
PYTEST_WORKERS ?= logical

PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --maxprocesses=4 --dist loadfile

# `make test` runs the fast suite: every test but those marked `slow` (the exhaustive sweeps: each
# behaviour keeps a representative case here); `make test-slow` runs the `slow` ones, so that the
# two together run every test.  The selection is made here, not in setup.cfg, so that a plain
# `pytest tests/test_foo.py` still runs the whole file.
test: $(VENV)/.test-installed
	$(VENV)/bin/ruff check skrank tests benchmarks examples
	$(PYTEST) -m "not slow" tests

test-slow: $(VENV)/.test-installed
	$(PYTEST) -m slow tests

demo: $(VENV)/.demo-installed
	$(PY) -m skrank.demo

# The HTML site with the gallery (runs every examples/plot_*.py) in doc/_build/html.
docs: $(VENV)/.docs-installed
	$(VENV)/bin/sphinx-build -b html doc doc/_build/html

clean:
	rm -rf $(VENV) build *.egg-info
