"""Every mutant is killed by the suite's tests of its clauses, every benign variant passes the
whole suite, and so does the reference controller (the baseline). What the registry must hold
is checked with the project's tests (tests/unit/test_mutant_registry.py).

The kill run takes many minutes (each run starts its own control plane), so it runs apart from
the other tests: `make test` runs it last, with `-m kill_run`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.kill_run


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
