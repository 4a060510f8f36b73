# Entry points (see README): `make conformance` and `make test`; `make mutants`, `make certify`.
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3
# make's Python processes share one bytecode cache in the venv, even where the environment says
# PYTHONDONTWRITEBYTECODE (containers often do): the tests start hundreds of Python processes,
# and each compiled the kit anew (`make test-project`: 304 s without it, 266 s with it).
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX ?= $(abspath $(VENV))/pycache
# Development runs: the reference controller resyncs every 30 s instead of the default 2 min
# (a run with it does not certify; see docs/certification.md).
FAST := --timing controller_resync=30s
# Every target names its cluster provider: `auto` would pick kind wherever kind and Docker are
# (GitHub's runners have both). The project's tests and the kill run are on the local control
# plane; `make conformance CLUSTER=kind` runs the suite on kind (no local binaries needed then).
CLUSTER ?= local
TEST_CLUSTER := --cluster=local
WORKERS ?= 3
# The suite alone mostly waits on timers: 12 workers (each with its own local control plane and
# controller) keep 2 cores about 60 % busy and bring its wall time to 1.2x its longest test plus
# a worker's set-up (benchmarks/critical_path.py).
SUITE_WORKERS ?= 12
# The suite on a real kind cluster (`make test-kind`, part of `make test`). KIND_ENGINE=own: the
# kind host's own Docker engine and node image (conformance.kindhost; sandboxed hosts such as
# this project's CI, root, Debian); system: this machine's Docker and kind with the pinned
# kindest/node (GitHub's runners).
KIND_ENGINE ?= own
# On the system's Docker; with KIND_ENGINE=own the kind-host tests run the whole suite on the
# cluster they share, as many workers (tests/kindhost/test_whole_suite_on_kind.py says why 12).
KIND_WORKERS ?= 12
KIND_REPORT := reports/kind
KINDHOST := $(BIN)/python -P -m conformance.kindhost

.PHONY: venv conformance certify certify-vendor test test-project test-kill test-kind kindhost-packages browser-packages lint binaries mutants soak

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --editable '.[dev]'
	touch $@

# The project's venv alone: what a kind or existing cluster needs (no Go, no local binaries).
venv: $(BIN)/.installed

# Real etcd, kube-apiserver, kube-controller-manager and kubectl: cached, or built once with Go.
binaries: $(BIN)/.installed
	$(BIN)/convoy-conformance binaries

conformance: $(if $(filter local,$(CLUSTER)),binaries,$(BIN)/.installed)
	$(BIN)/convoy-conformance run --cluster=$(CLUSTER) $(FAST) -n $(SUITE_WORKERS) $(ARGS)

# Both phases of a certifying run of the reference controller: as shipped, then the long phase
# (about 45 min). Its report names the reference (conformance.certification.report.REFERENCE_IMPLEMENTATION).
certify: $(if $(filter local,$(CLUSTER)),binaries,$(BIN)/.installed)
	$(BIN)/convoy-conformance certify --cluster=$(CLUSTER) --workers $(SUITE_WORKERS) \
	  --implementation-organization=convoy-conformance --implementation-project=reference $(ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# `make test` times each stage and prints a table of them at the end, pass or fail.
STAGES := reports/stages.jsonl
stage = $(PYTHON) -P benchmarks/stages.py run $(STAGES) $(1) --
MAKE_STAGE := $(MAKE) --no-print-directory

# The kill run's baseline is the whole suite on the reference controller.
test:
	@$(PYTHON) -P benchmarks/stages.py begin $(STAGES); status=0; \
	$(call stage,"set-up: venv + binaries + Chromium") $(MAKE_STAGE) binaries browser-packages \
	&& $(call stage,lint) $(MAKE_STAGE) lint \
	&& $(call stage,"project tests (local, $(WORKERS) workers)") $(MAKE_STAGE) test-project \
	&& $(call stage,"kind") $(MAKE_STAGE) test-kind \
	&& $(call stage,"kill run") $(MAKE_STAGE) test-kill \
	|| status=$$?; $(PYTHON) -P benchmarks/stages.py table $(STAGES); exit $$status

test-project: $(BIN)/.installed
	$(BIN)/pytest tests $(TEST_CLUSTER) $(FAST) -n $(WORKERS) -m "not kill_run and not kindhost" $(ARGS)

test-kill: binaries
	$(BIN)/pytest tests/kill_run $(TEST_CLUSTER) -m kill_run -s $(ARGS)

# What a Debian host needs for the kind host's engine: Debian's dockerd (and runc), debootstrap.
kindhost-packages:
	@command -v dockerd >/dev/null && command -v debootstrap >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	   apt-get install -y -qq --no-install-recommends docker.io debootstrap)

# tests/report renders the report page in a real headless browser: Debian's Chromium.
browser-packages:
	@command -v chromium >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	   apt-get install -y -qq --no-install-recommends chromium)

# The engine goes down again whatever the tests did; its images stay cached in ~/.cache.
test-kind: binaries $(if $(filter own,$(KIND_ENGINE)),kindhost-packages)
ifeq ($(KIND_ENGINE),own)
	$(call stage,"engine up (its images built when missing)") $(KINDHOST) up
	status=0; export $$($(KINDHOST) env); options="$$($(KINDHOST) options)"; \
	$(call stage,"kind-host tests (the whole suite on kind among them)") \
	  $(BIN)/pytest tests/kindhost -m kindhost --durations=0 $$options $(ARGS) \
	  || status=$$?; $(KINDHOST) down; exit $$status
else
	$(BIN)/convoy-conformance run --cluster=kind $(FAST) -n $(KIND_WORKERS) \
	  --report-dir $(KIND_REPORT) $(ARGS)
	$(BIN)/convoy-conformance verify-report --results-only $(KIND_REPORT)/conformance-report.yaml
endif

# A vendor's two certifying runs as the guide tells vendors to make them (about two hours; not
# in `make test`): the kit from its wheel in a venv outside the checkout, the vendor's own
# manifests on a kind cluster of the kind host's engine, `certify` and `certify --in-cluster`
# with their default workers, each report checked by verify-report (tests/kindhost/certify_as_a_vendor.py).
VENDOR_WORK ?= $(abspath ..)/convoy-vendor-certification
certify-vendor: binaries kindhost-packages
	$(KINDHOST) up
	status=0; export $$($(KINDHOST) env); \
	$(BIN)/python -m tests.kindhost.certify_as_a_vendor --work $(VENDOR_WORK) $$($(KINDHOST) options) $(ARGS) \
	  || status=$$?; $(KINDHOST) down; exit $$status

# Every mutant, the combined variant and each variant alone.
mutants: binaries
	$(BIN)/convoy-conformance mutants --run --each-variant $(TEST_CLUSTER) $(FAST) $(ARGS)

# The whole suite ten times in a row on the local control plane; every run must pass.
soak: binaries
	$(BIN)/python -m benchmarks.soak --workers $(SUITE_WORKERS) $(ARGS)
