# `make test` and `make demo` set everything up on a fresh machine (Python 3 and make only).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: test demo bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.test-installed: $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e ".[test,bench]"
	touch $@

$(VENV)/.demo-installed: $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e ".[bench]"
	touch $@

test: $(VENV)/.test-installed
	$(VENV)/bin/ruff check skrank tests benchmarks
	$(PY) -m pytest -q -p no:cacheprovider tests

demo: $(VENV)/.demo-installed
	$(PY) -m skrank.demo

clean:
	rm -rf $(VENV) build *.egg-info
