"""How the kill run reads a pytest run's JUnit file, and in what order it runs them."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance import kill_run
from conformance.cli import SUITE_DIR
from conformance.document import model_profiles
from conformance.kill_run import (
    MESSAGE_CHARS,
    KillRecord,
    Outcome,
    breakdown,
    describe,
    jobs,
    read_junit,
    run_counting_cpu,
)
from mutants import COMBINED, load, parts_of_combined

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
  <testcase classname="conformance.suite.test_mode" name="test_ok" />
  <testcase classname="conformance.suite.test_mode" name="test_broken">
    <failure message="AssertionError: no rollout phase Succeeded after 15 s">trace</failure>
  </testcase>
  <testcase classname="conformance.suite.test_mode" name="test_harness">
    <error message="{long}">trace</error>
  </testcase>
  <testcase classname="conformance.suite.test_mode" name="test_long">
    <skipped message="certifying run only" />
  </testcase>
</testsuite></testsuites>
"""


def test_a_run_is_read_test_by_test_with_what_pytest_said_of_each_failure(
    tmp_path: Path,
) -> None:
    junit = tmp_path / "run.xml"
    junit.write_text(JUNIT.format(long="x" * (MESSAGE_CHARS + 50)))
    outcome = read_junit(junit, "run", 1.0)
    test = "conformance/suite/test_mode.py::"
    assert outcome.passed == [f"{test}test_ok"]
    assert outcome.failed == [f"{test}test_broken"]
    assert outcome.errors == [f"{test}test_harness"]
    assert outcome.messages[f"{test}test_broken"].endswith("Succeeded after 15 s")
    assert len(outcome.messages[f"{test}test_harness"]) == MESSAGE_CHARS


def test_a_run_that_wrote_no_junit_file_is_an_error(tmp_path: Path) -> None:
    outcome = read_junit(tmp_path / "missing.xml", "run", 1.0)
    assert outcome.errors and not outcome.passed and not outcome.as_expected


def test_a_mutant_runs_its_clauses_example_tests_or_else_the_tests_given() -> None:
    """Not the model-based run: its power is its own kill table (`--tests` its module)."""
    loaded = load()
    chosen = [loaded["sub-second-comparison"], loaded["one-worker"]]
    model_run = f"conformance/suite/test_model_based.py::{model_profiles.TEST_NAME}[0]"
    by_clause = {"SYNC-4.same-second": ["conformance/suite/test_sync.py::test_x", model_run]}
    default = {j.name: j.tests for j in jobs(chosen, Path("suite"), by_clause, 2)}
    assert default == {
        "baseline": ["suite"],
        "one-worker": ["suite"],
        "sub-second-comparison": ["conformance/suite/test_sync.py::test_x"],
    }
    given = {j.name: j.tests for j in jobs(chosen, Path("suite"), by_clause, 2, [model_run])}
    assert set(map(tuple, given.values())) == {(model_run,)}


def test_the_mutants_run_after_the_runs_that_must_pass_the_longest_recorded_first() -> None:
    """A mutant not recorded (new since) counts as the median run: neither first nor last."""
    loaded = load()
    seconds = {"sub-second-comparison": 12.0, "pending-a-second-too-late": 20.0}
    seconds |= {"compared-to-the-minute": 45.0, "not-a-mutant-any-more": 99.0}
    records = {name: KillRecord(s, None) for name, s in seconds.items()}
    names = [*seconds.keys() - {"not-a-mutant-any-more"}, "resync-ignored", "one-worker"]
    chosen = [loaded[name] for name in sorted(names)]
    found = [j.name for j in jobs(chosen, Path("suite"), {}, 2, ["suite/t.py"], records)]
    assert found == [
        "baseline",
        "one-worker",
        "compared-to-the-minute",
        "pending-a-second-too-late",
        "resync-ignored",
        "sub-second-comparison",
    ]


def test_a_kill_runs_record_is_read_back_as_written(tmp_path: Path) -> None:
    """Each mutant's seconds and first failure; a mutant that survived has no killer."""
    matrix = {
        "mutants": [
            {"name": "killed", "seconds": 31.26, "failed": ["suite/t.py::test_a", "x"]},
            {"name": "survived", "seconds": 40.0, "failed": []},
        ]
    }
    records = kill_run.recorded(matrix)
    assert records == {
        "killed": KillRecord(31.3, "suite/t.py::test_a"),
        "survived": KillRecord(40.0, None),
    }
    kill_run.write_kill_records(tmp_path / "record.json", records)
    assert kill_run.read_kill_records(tmp_path / "record.json") == records
    assert kill_run.read_kill_records(tmp_path / "none.json") == {}


def test_a_mutants_run_starts_with_the_test_that_last_killed_it_and_keeps_the_others() -> None:
    mutant = load()["sub-second-comparison"]
    case = "suite/test_sync.py::test_b[DeployFailed]"
    by_clause = {clause: ["suite/test_sync.py::test_a", case] for clause in mutant.clauses}
    by_clause[mutant.clauses[0]].append("suite/test_sync.py::test_c")

    def tests_of(killer: str | None) -> list[str]:
        records = {mutant.name: KillRecord(30.0, killer)}
        (job,) = jobs([mutant], Path("suite"), by_clause, 2, None, records)[1:]
        return job.tests

    assert tests_of(None) == ["suite/test_sync.py::test_a", case, "suite/test_sync.py::test_c"]
    assert tests_of(case)[0] == case
    assert tests_of("suite/test_sync.py::test_c")[0] == "suite/test_sync.py::test_c"
    assert tests_of("suite/test_sync.py::test_a[x]")[0] == "suite/test_sync.py::test_a"
    assert sorted(tests_of(case)) == sorted(tests_of(None))


def test_each_benign_variant_alone_keeps_one_shard_of_the_model_based_run_in_turn() -> None:
    """The baseline and the combined variant run every shard; the variants alone share them
    out, all of them."""
    variants = [m for m in load().values() if m.benign]
    runs = {job.name: job for job in jobs(variants, Path("suite"), {}, 2)}
    assert "-k" not in runs["baseline"].options
    assert "-k" not in runs[COMBINED].options
    alone = [job for job in runs.values() if job.mutant and not job.mutant.combined]
    kept = {
        int(job.options[job.options.index("-k") + 1].rpartition("[")[2].rstrip("]"))
        for job in alone
    }
    assert len(alone) >= model_profiles.SHARDS
    assert kept == set(range(model_profiles.SHARDS))
    with_tests = jobs(variants, Path("suite"), {}, 2, ["suite/test_x.py"])
    assert all("-k" not in job.options for job in with_tests)


def test_a_runs_cpu_seconds_include_the_processes_it_waited_for(tmp_path: Path) -> None:
    """A run's control plane and controller are its children: their CPU counts as the run's."""
    spin = "import time; end = time.process_time() + 0.5\nwhile time.process_time() < end: pass"
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {spin!r}])"
    with (tmp_path / "run.log").open("w") as log:
        cpu = run_counting_cpu([sys.executable, "-c", parent], log, dict(os.environ))
    assert 0.5 <= cpu < 5, cpu


def test_the_runs_share_one_bytecode_cache_in_the_workdir_even_when_told_to_write_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's pytest imports the kit's modules from the cache the runs before it wrote."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)  # make's, under make
    (tmp_path / "imported.py").write_text("VALUE = 1\n")
    env = {**kill_run.shared_bytecode(tmp_path / "work"), "PYTHONPATH": str(tmp_path)}
    subprocess.run([sys.executable, "-c", "import imported"], env=env, check=True)
    cached = list((tmp_path / "work" / "pycache").rglob("imported.*.pyc"))
    assert len(cached) == 1, cached
    assert not (tmp_path / "__pycache__").exists(), "bytecode written beside the source"


def test_the_benchmark_says_where_each_phases_time_went_and_refuses_an_older_matrix() -> None:
    """The cores' share from the CPU of everything a phase ran (runs and lanes alike)."""
    run = {"name": "m", "seconds": 10.0, "cpu_seconds": 4.0}
    replaced = ["lane-1 after m: left ['Namespace/x'], removed []"]
    phases = [
        {"name": "mustPass", "width": 2, "seconds": 10.0, "cpu_seconds": 8.0},
        {"name": "mutants", "width": 4, "seconds": 5.0, "cpu_seconds": 8.0},
    ]
    phases[0]["lanes_replaced"], phases[1]["lanes_replaced"] = [], replaced
    matrix = {
        "seconds": 15.0, "cpus": 2, "phases": phases,
        "baseline": run, "variants": [run], "mutants": [run, run],
    }  # fmt: skip
    figures = breakdown(matrix)["phases"]
    assert figures["mustPass"]["poolBusy"] == 1.0 and figures["mustPass"]["cpuBusy"] == 0.4
    assert figures["mutants"]["poolBusy"] == 1.0 and figures["mutants"]["cpuBusy"] == 0.8
    lines = describe(breakdown(matrix))
    assert "mustPass" in lines[1] and "2 at a time" in lines[1] and "cores 40%" in lines[1]
    assert f"    a fresh control plane for {replaced[0]}" in lines
    older = {key: value for key, value in matrix.items() if key != "phases"}
    with pytest.raises(KeyError, match="phases"):
        breakdown(older)


def test_the_mutants_start_when_the_runs_that_must_pass_have_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Their control planes' starts would load the machine under the timing tests."""
    loaded = load()
    chosen = [loaded["sub-second-comparison"], loaded["one-worker"], loaded["slower-reconcile"]]
    spans: dict[str, tuple[float, float]] = {}

    def run_selection(name: str, *_: object) -> Outcome:
        started = time.monotonic()
        time.sleep(0.2 if name == "slower-reconcile" else 0.05)
        spans[name] = (started, time.monotonic())
        return Outcome(name)

    monkeypatch.setattr(kill_run, "run_selection", run_selection)
    kill_run.run(chosen, SUITE_DIR, Path("work"), [], 4, 2, lambda _: None)
    must_pass_ended = max(spans[n][1] for n in ("baseline", "one-worker", "slower-reconcile"))
    assert spans["sub-second-comparison"][0] >= must_pass_ended


def test_the_combined_variant_applies_every_other_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    """A benign difference joins the combined variant by being registered (unless its
    registration keeps it out, and says why)."""
    registry = load()
    applied: list[str] = []
    for part in parts_of_combined():
        stand_in = dataclasses.replace(part, apply=lambda name=part.name: applied.append(name))
        monkeypatch.setitem(registry, part.name, stand_in)
    registry[COMBINED].apply()
    variants = {m.name for m in registry.values() if m.benign and m.joins_combined}
    assert sorted(applied) == sorted(variants - {COMBINED})
    assert len(applied) >= 6
