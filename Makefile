# Two entry points (see README): `make conformance` and `make test`.
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3

.PHONY: conformance test lint binaries

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --editable '.[dev]'
	touch $@

# Real etcd, kube-apiserver, kube-controller-manager and kubectl: cached, or built once with Go.
binaries: $(BIN)/.installed
	$(BIN)/convoy-conformance binaries

conformance: binaries
	$(BIN)/convoy-conformance run $(ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint binaries
	$(BIN)/pytest tests $(ARGS)
