# Entry points (see README): `make conformance` and `make test`; `make mutants`, `make certify`.
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3
# Development runs: the reference controller resyncs every 30 s instead of the default 2 min
# (a run with it does not certify; see docs/certification.md).
FAST := --timing controller_resync=30s
# Every target names its cluster provider: `auto` would pick kind wherever kind and Docker are
# (GitHub's runners have both). The project's tests and the kill run are on the local control
# plane; `make conformance CLUSTER=kind` runs the suite on kind (no local binaries needed then).
CLUSTER ?= local
TEST_CLUSTER := --cluster=local
WORKERS ?= 3
# The suite alone mostly waits on timers: 8 workers (each with its own local control plane and
# controller) fit 2 cores and bring its wall time near its longest test.
SUITE_WORKERS ?= 8

.PHONY: conformance certify test lint binaries mutants soak

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --editable '.[dev]'
	touch $@

# Real etcd, kube-apiserver, kube-controller-manager and kubectl: cached, or built once with Go.
binaries: $(BIN)/.installed
	$(BIN)/convoy-conformance binaries

conformance: $(if $(filter local,$(CLUSTER)),binaries,$(BIN)/.installed)
	$(BIN)/convoy-conformance run --cluster=$(CLUSTER) $(FAST) -n $(SUITE_WORKERS) --dist worksteal $(ARGS)

# Both phases of a certifying run: the controller as shipped, then the long phase (about 45 min).
certify: $(if $(filter local,$(CLUSTER)),binaries,$(BIN)/.installed)
	$(BIN)/convoy-conformance certify --cluster=$(CLUSTER) --workers $(SUITE_WORKERS) $(ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The kill run's baseline is the whole suite on the reference controller.
test: lint binaries
	$(BIN)/pytest tests $(TEST_CLUSTER) $(FAST) -n $(WORKERS) -m "not mutation" $(ARGS)
	$(BIN)/pytest tests/mutation $(TEST_CLUSTER) -m mutation -s $(ARGS)

mutants: binaries
	$(BIN)/convoy-conformance mutants --run $(TEST_CLUSTER) $(FAST) $(ARGS)

# The whole suite ten times in a row on the local control plane; every run must pass.
soak: binaries
	$(BIN)/python benchmarks/soak.py $(ARGS)
