"""Every mutant is killed by the suite's tests of its rules, and the baseline passes.

The kill run takes minutes (each mutant starts its own control plane and runs the tests of its
rules), so it runs apart from the other tests: `make test` runs it last, with `-m mutation`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import catalog
from mutants import load

pytestmark = pytest.mark.mutation


def test_every_rule_has_a_mutant_and_every_mutant_names_known_rules() -> None:
    mutants = load().values()
    named = {rule for mutant in mutants for rule in mutant.rules}
    assert named <= set(catalog.BY_ID), sorted(named - set(catalog.BY_ID))
    assert sorted(set(catalog.BY_ID) - named) == []
    assert all(mutant.description for mutant in mutants)


@pytest.mark.timeout(5400)
def test_the_suite_kills_every_mutant(tmp_path: Path) -> None:
    workdir = tmp_path / "kill-run"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "mutants",
            "--run",
            "--parallel",
            "2",
            f"--workdir={workdir}",
            "--timing",
            "controller_resync=30s",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    print(run.stdout[-20000:])
    matrix = json.loads((workdir / "matrix.json").read_text())
    baseline = matrix["baseline"]
    assert not baseline["failed"] and not baseline["errors"], (
        f"the unmutated controller failed: {baseline['failed'] + baseline['errors']}"
    )
    survivors = {m["name"]: m["errors"] for m in matrix["mutants"] if not m["failed"]}
    assert survivors == {}, f"mutants not killed (with their errors, if any): {survivors}"
