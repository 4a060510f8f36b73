"""The kill run: the suite's tests of each mutant's rules, against that mutant.

A mutant is killed when at least one test of its rules FAILS (an assertion about the rule);
an error (a fixture or the harness breaking, the controller crashing) is not a kill. The same
selection first runs against the unmutated reference controller: it must pass, so that no kill
is false.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from conformance import catalog
from conformance.controllers import MUTANT_VARIABLE

if TYPE_CHECKING:
    from mutants import Mutant


@dataclass
class Outcome:
    """What one pytest run of a selection said, test by test."""

    name: str
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def killed(self) -> bool:
        return bool(self.failed)


def selection(rules: tuple[str, ...], tests_by_rule: dict[str, list[str]]) -> list[str]:
    return sorted({test for rule in rules for test in tests_by_rule[rule]})


def read_junit(path: Path, name: str, seconds: float) -> Outcome:
    outcome = Outcome(name, seconds=seconds)
    if not path.exists():
        outcome.errors.append("no JUnit report: pytest did not finish")
        return outcome
    for case in ET.parse(path).iter("testcase"):
        test = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        if case.find("failure") is not None:
            outcome.failed.append(test)
        elif case.find("error") is not None:
            outcome.errors.append(test)
        elif case.find("skipped") is None:
            outcome.passed.append(test)
    return outcome


PLUGIN_SHIM = '#!/bin/sh\nexec {python} -m mutants.kubectl "$@"\n'


def mutant_environment(mutant: Mutant | None, workdir: Path) -> tuple[list[str], dict[str, str]]:
    """How a run selects `mutant`: a controller flag, or a broken `kubectl-convoy` on PATH."""
    if mutant is None:
        return [], dict(os.environ)
    if mutant.kind == "controller":
        return [f"--convoy-mutant={mutant.name}"], dict(os.environ)
    shim_dir = workdir / f"{mutant.name}-bin"
    shim_dir.mkdir(exist_ok=True)
    shim = shim_dir / "kubectl-convoy"
    shim.write_text(PLUGIN_SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    path = os.pathsep.join([str(shim_dir), os.environ.get("PATH", "")])
    return [], {**os.environ, "PATH": path, MUTANT_VARIABLE: mutant.name}


def run_selection(
    name: str, tests: list[str], mutant: Mutant | None, workdir: Path, pytest_args: list[str]
) -> Outcome:
    junit = workdir / f"{name}.xml"
    flags, env = mutant_environment(mutant, workdir)
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *tests,
        f"--junitxml={junit}",
        "-q",
        "-p",
        "no:cacheprovider",
        *flags,
        *pytest_args,
    ]
    started = time.monotonic()
    with (workdir / f"{name}.log").open("w") as log:
        subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    return read_junit(junit, name, time.monotonic() - started)


def kill_run(
    mutants: list[Mutant],
    suite_dir: Path,
    workdir: Path,
    pytest_args: list[str],
    parallel: int,
    progress: Callable[[Outcome], None],
) -> tuple[Outcome, list[Outcome]]:
    """Run the baseline, then every mutant (`parallel` at a time); return all outcomes."""
    with contextlib.redirect_stdout(io.StringIO()):
        tests_by_rule = catalog.coverage(str(suite_dir)).tests_by_rule
    chosen = {m.name: selection(m.rules, tests_by_rule) for m in mutants}
    everything = sorted({test for tests in chosen.values() for test in tests})
    baseline = run_selection("baseline", everything, None, workdir, pytest_args)
    progress(baseline)
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [
            pool.submit(run_selection, m.name, chosen[m.name], m, workdir, pytest_args)
            for m in mutants
        ]
        outcomes = []
        for future in futures:
            outcomes.append(future.result())
            progress(outcomes[-1])
    return baseline, outcomes
