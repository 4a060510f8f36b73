"""Every mutant is killed by the suite's tests of its clauses, every benign variant passes the
whole suite, and so does the reference controller (the baseline).

The kill run takes many minutes (each run starts its own control plane), so it runs apart from
the other tests: `make test` runs it last, with `-m kill_run`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.document import catalog
from mutants import COMBINED, load, parts_of_combined

pytestmark = pytest.mark.kill_run


def test_every_clause_has_a_mutant_and_every_mutant_names_known_clauses() -> None:
    entries = load().values()
    named = {clause for entry in entries for clause in entry.clauses}
    assert named <= set(catalog.CLAUSES), sorted(named - set(catalog.CLAUSES))
    assert sorted(set(catalog.CLAUSES) - named) == []
    assert all(entry.description for entry in entries)
    assert {entry.phase for entry in entries} <= {None, "shipped", "long"}


def test_the_variants_the_document_allows_are_there() -> None:
    variants = {entry.name for entry in load().values() if entry.benign}
    assert variants >= {
        "one-worker",
        "slower-reconcile",
        "other-field-manager",
        "other-messages",
        "extra-labels",
        "slower-observer",
        # shaped like the controllers vendors write
        "status-in-two-patches",
        "reconciling-condition",
        "status-at-every-reconcile",
        "finalizer",
        "ready-and-stalled-summary",
        "last-applied-render-annotation",
        "controller-runtime-rate-limiter",
        "leader-election",
        # around the reconcile: how status and Events are written, what /metrics says
        "status-server-side-apply",
        "status-patch-of-changes",
        "event-broadcaster",
        "controller-runtime-metrics",
        # an adversarial round's, each on its own
        "conditions-in-place-with-synced",
        "interval-from-reconcile-start",
        COMBINED,
    }
    # every other benign difference is in the combined variant; one left out says why where
    # it is registered
    outside = variants - {part.name for part in parts_of_combined()} - {COMBINED}
    assert outside == {
        "status-server-side-apply",
        "conditions-in-place-with-synced",
        "interval-from-reconcile-start",
    }


@pytest.mark.timeout(5400)
def test_the_suite_kills_every_mutant_and_passes_every_variant(tmp_path: Path) -> None:
    workdir = tmp_path / "kill-run"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "mutants",
            "--run",
            f"--workdir={workdir}",
            "--cluster=local",
            "--timing",
            "controller_resync=30s",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    print(run.stdout[-30000:])
    matrix = json.loads((workdir / "matrix.json").read_text())
    baseline = matrix["baseline"]
    assert not baseline["failed"] and not baseline["errors"], (
        f"the reference controller failed: {baseline['failed'] + baseline['errors']}"
    )
    survivors = {m["name"]: m["errors"] for m in matrix["mutants"] if not m["failed"]}
    assert survivors == {}, f"mutants not killed (with their errors, if any): {survivors}"
    failing = {
        v["name"]: v["failed"] + v["errors"]
        for v in matrix["variants"]
        if v["failed"] or v["errors"]
    }
    assert failing == {}, f"benign variants that failed the suite: {failing}"
