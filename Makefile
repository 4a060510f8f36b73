# Entry points (see README): `make conformance` and `make test`; `make mutants`, `make certify`.
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3
# Development runs: the reference controller resyncs every 30 s instead of the default 2 min
# (a run with it does not certify; see docs/certification.md).
FAST := --timing controller_resync=30s
WORKERS ?= 3
# The suite alone mostly waits on timers: 8 workers (each with its own local control plane and
# controller) fit 2 cores and bring its wall time near its longest test.
SUITE_WORKERS ?= 8

.PHONY: conformance certify test lint binaries mutants

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --editable '.[dev]'
	touch $@

# Real etcd, kube-apiserver, kube-controller-manager and kubectl: cached, or built once with Go.
binaries: $(BIN)/.installed
	$(BIN)/convoy-conformance binaries

conformance: binaries
	$(BIN)/convoy-conformance run $(FAST) -n $(SUITE_WORKERS) --dist worksteal $(ARGS)

# Both phases of a certifying run: the controller as shipped, then the long phase (about 45 min).
certify: binaries
	$(BIN)/convoy-conformance certify --workers $(SUITE_WORKERS) $(ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The kill run's baseline is the whole suite on the reference controller.
test: lint binaries
	$(BIN)/pytest tests $(FAST) -n $(WORKERS) -m "not mutation" $(ARGS)
	$(BIN)/pytest tests/mutation -m mutation -s $(ARGS)

mutants: binaries
	$(BIN)/convoy-conformance mutants --run $(FAST) $(ARGS)
