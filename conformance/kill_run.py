"""The kill run: the suite's tests of each mutant's clauses, against that mutant.

A mutant is killed when at least one test of its clauses FAILS (an assertion about the rule);
an error (a fixture or the harness breaking, the controller crashing) is not a kill. The whole
suite first runs against the unmutated reference controller (the baseline): it must pass, so
that no kill is false. The combined variant (every benign difference at once) runs the whole
suite too and must pass it; each variant alone does the same when asked (the example tests and
one shard of the model-based run each, in turn).

A mutant runs its clauses' example tests, not the model-based run (minutes, and it names many
clauses): its power is measured by a kill table of its own, `--tests` its module.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from conformance.clusters.binaries import Binaries
from conformance.clusters.processes import die_with_parent
from conformance.document import catalog, model_profiles
from conformance.install.host import MUTANT_VARIABLE
from conformance.lanes import Lanes
from conformance.timing import DOCUMENT_RESYNC, LONG_RESYNC

if TYPE_CHECKING:
    from mutants import Mutant


@dataclass
class Outcome:
    """What one pytest run of a selection said, test by test."""

    name: str
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: failed or erred test -> the first lines of what pytest said about it
    messages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    #: CPU seconds of the run's processes (pytest, its controller, its control plane unless it
    #: reused a lane's: the phase counts those)
    cpu_seconds: float = 0.0
    #: the baseline or a benign variant: it must pass; a mutant must be killed
    must_pass: bool = False

    @property
    def killed(self) -> bool:
        return bool(self.failed)

    @property
    def clean(self) -> bool:
        return bool(self.passed) and not self.failed and not self.errors

    @property
    def as_expected(self) -> bool:
        return self.clean if self.must_pass else self.killed


@dataclass
class Phase:
    """One phase of the kill run: its name, its runs at a time, its wall time and the CPU
    seconds of every process it ran (its runs and the control planes they reused)."""

    name: str
    width: int
    seconds: float
    cpu_seconds: float
    #: why a lane got a fresh control plane (conformance.lanes), one line each
    lanes_replaced: list[str] = field(default_factory=list)


@dataclass
class KillRun:
    baseline: Outcome
    #: the variants' and the mutants' outcomes, in the registry's order
    others: list[Outcome]
    phases: list[Phase]


#: The kill run's phases: the runs that must pass, then the mutants.
MUST_PASS, MUTANTS = "mustPass", "mutants"
#: The name of the run of the whole suite against the reference controller.
BASELINE = "baseline"
#: The xdist workers that the runs which must pass share, as many runs at a time as they fill:
#: a development run's (the Makefile's SUITE_WORKERS), whose timing spread is measured
#: (benchmarks/timing_spread.py). More would load the machine under their timing tests.
MUST_PASS_WORKERS = 12
#: Workers the combined variant's run takes from the baseline's when the two run side by side:
#: its run holds about a third more test-seconds (4,314 against 3,321 at 6 workers each, in a
#: cold CI run: slower reconciles, a Lease to wait for at each restart), so with even shares the
#: baseline ended 172 s before it. Moved, not added: the machine carries the same load.
COMBINED_TAKES = 1
#: Mutant runs at a time, each on a lane's control plane (conformance.lanes). A run that
#: started its own used 10.6 CPU-seconds in 33 s (five at a time: the cores 78 % busy); on a
#: lane the start and stop are gone, and seven keep the cores about as busy, so that a mutant
#: dies of its clause's failure, not of a starved machine (benchmarks/kill_run_time.py). Eight
#: were measured too, since the runs share a bytecode cache (seven left the cores 72-75 %
#: busy): the cores 82 % busy, but each run slower, 24.2 s against 18.8 s on average, and the
#: phase longer (742 s for 215 mutants against 708 s for 212), in a cold CI run.
MUTANT_RUNS_AT_ONCE = 7


def selection(
    clauses: tuple[str, ...], tests_by_clause: dict[str, list[str]], killer: str | None = None
) -> list[str]:
    """The example tests of `clauses`; the one that last killed the mutant (`killer`) first,
    since the run stops at the first failure."""
    found = {
        test
        for clause in clauses
        for test in tests_by_clause[clause]
        if test.partition("[")[0].rpartition("::")[2] != model_profiles.TEST_NAME
    }
    return sorted(found, key=lambda test: (not killed_by(test, killer), test))


def killed_by(test: str, killer: str | None) -> bool:
    """Whether `test` (a node ID, of one case or of all) is or holds `killer`."""
    return killer is not None and (killer == test or killer.startswith(f"{test}["))


def one_model_shard(variant: int) -> list[str]:
    """A benign variant's run of the whole suite keeps one shard of the model-based run, a
    different one for each variant in turn: every variant is checked against the model, and
    its run no longer waits for all four shards (about 800 s of tests, most of its length)."""
    name = model_profiles.TEST_NAME
    return ["-k", f"not {name} or {name}[{variant % model_profiles.SHARDS}]"]


def phase_arguments(mutant: Mutant) -> list[str]:
    """What a mutant that only a certifying phase can kill needs: the controller as shipped
    (no --resync), or the long phase's resync and tests."""
    if mutant.phase == "shipped":
        return ["--timing", f"controller_resync={DOCUMENT_RESYNC:g}s"]
    if mutant.phase == "long":
        return ["-m", "long", "--timing", f"controller_resync={LONG_RESYNC:g}s"]
    return []


#: How much of a failure's message the kill run keeps: enough to name the broken expectation.
MESSAGE_CHARS = 800


def read_junit(path: Path, name: str, seconds: float) -> Outcome:
    outcome = Outcome(name, seconds=seconds)
    if not path.exists():
        outcome.errors.append("no JUnit report: pytest did not finish")
        return outcome
    for case in ET.parse(path).iter("testcase"):
        test = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        failure, error = case.find("failure"), case.find("error")
        if failure is not None:
            outcome.failed.append(test)
        elif error is not None:
            outcome.errors.append(test)
        elif case.find("skipped") is None:
            outcome.passed.append(test)
        said = failure if failure is not None else error
        if said is not None:
            outcome.messages[test] = (said.get("message") or said.text or "")[:MESSAGE_CHARS]
    return outcome


PLUGIN_SHIM = '#!/bin/sh\nexec {python} -m mutants.kubectl "$@"\n'


def mutant_environment(mutant: Mutant | None, workdir: Path) -> tuple[list[str], dict[str, str]]:
    """How a run selects `mutant`: a controller flag, or a broken `kubectl-convoy` on PATH."""
    env = shared_bytecode(workdir)
    if mutant is None:
        return [], env
    if mutant.kind == "controller":
        return [f"--convoy-mutant={mutant.name}"], env
    shim_dir = workdir / f"{mutant.name}-bin"
    shim_dir.mkdir(exist_ok=True)
    shim = shim_dir / "kubectl-convoy"
    shim.write_text(PLUGIN_SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    path = os.pathsep.join([str(shim_dir), env.get("PATH", "")])
    return [], {**env, "PATH": path, MUTANT_VARIABLE: mutant.name}


def shared_bytecode(workdir: Path) -> dict[str, str]:
    """This environment, with one bytecode cache for every run (PYTHONPYCACHEPREFIX's, else
    one in `workdir`), whatever PYTHONDONTWRITEBYTECODE says: without it each run's pytest
    compiles and rewrites the kit's modules anew, 0.6 of the 3.4 CPU seconds a mutant's run
    takes, in a phase bound by the cores. The checkout gets no __pycache__ of it."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("PYTHONPYCACHEPREFIX", str(workdir / "pycache"))
    return env


def run_selection(
    name: str,
    tests: list[str],
    mutant: Mutant | None,
    workdir: Path,
    pytest_args: list[str],
    lanes: Lanes | None = None,
) -> Outcome:
    """One pytest run; on a lane's control plane when there are lanes."""
    with lanes.borrow(name) if lanes else contextlib.nullcontext() as plane:
        reuse = [f"--reuse-control-plane={plane}"] if plane else []
        return run_pytest(name, tests, mutant, workdir, [*pytest_args, *reuse])


def run_pytest(
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
        cpu = run_counting_cpu(argv, log, env)
    outcome = read_junit(junit, name, time.monotonic() - started)
    outcome.cpu_seconds = round(cpu, 1)
    outcome.must_pass = must_pass(mutant)
    return outcome


def must_pass(mutant: Mutant | None) -> bool:
    """The baseline (no mutant) and the benign variants must pass; a mutant must be killed."""
    return mutant is None or mutant.benign


def run_counting_cpu(argv: list[str], log: IO[str], env: dict[str, str]) -> float:
    """Run `argv` to its end; the CPU seconds it and the descendants it waited for used (what
    tells a kill run bound by the machine's cores from one that waits)."""
    # Killed with the kill run, which waits for it in the thread that started it.
    process = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Job:
    """One pytest run of the kill run: which tests, against what, with which extra options."""

    name: str
    tests: list[str]
    mutant: Mutant | None
    options: list[str]

    @property
    def must_pass(self) -> bool:
        return must_pass(self.mutant)


@dataclass(frozen=True)
class KillRecord:
    """What a kill run recorded of one mutant: its run's seconds and the test that killed it."""

    seconds: float
    killed_by: str | None


def read_kill_records(path: Path) -> dict[str, KillRecord]:
    """The records `path` keeps (benchmarks/kill_run_time.py --record); none without it."""
    if not path.exists():
        return {}
    found = json.loads(path.read_text())
    return {name: KillRecord(r["seconds"], r.get("killedBy")) for name, r in found.items()}


def write_kill_records(path: Path, records: dict[str, KillRecord]) -> None:
    """`records` into `path`, by mutant name, as read_kill_records reads them."""
    found = {name: {"seconds": r.seconds, "killedBy": r.killed_by} for name, r in records.items()}
    path.write_text(json.dumps(dict(sorted(found.items())), indent=1) + "\n")


def recorded(matrix: dict[str, Any]) -> dict[str, KillRecord]:
    """What a kill run's matrix.json says of each mutant's run: its seconds, its first failure."""
    return {
        run["name"]: KillRecord(round(run["seconds"], 1), next(iter(run["failed"]), None))
        for run in matrix["mutants"]
    }


def longest_first(mutants: list[Mutant], records: dict[str, KillRecord]) -> list[Mutant]:
    """`mutants` by their recorded seconds, the longest first, so that the pool's last runs are
    short ones and its runs at a time stay busy to the end; one not recorded (new since)
    counts as the median run."""
    seconds = {m.name: records[m.name].seconds for m in mutants if m.name in records}
    known = sorted(seconds.values())
    median = known[len(known) // 2] if known else 0.0
    return sorted(mutants, key=lambda m: -seconds.get(m.name, median))


def jobs(
    mutants: list[Mutant],
    suite_dir: Path,
    tests_by_clause: dict[str, list[str]],
    workers: int,
    tests: list[str] | None = None,
    records: dict[str, KillRecord] | None = None,
) -> list[Job]:
    """The baseline and each benign variant run the whole suite and must pass it (the baseline
    and the combined variant every shard of the model-based run, a variant alone one of them);
    a mutant runs the tests of its clauses and stops at the first failure (a kill). With
    `tests`, every run runs those instead (the kill table of one part, the model-based run
    say). The runs that must pass first, the whole suite each; then the mutants by their
    `records`, the longest first, each run's last killer first."""
    whole = ["-n", str(workers)]
    everything = tests or [str(suite_dir)]
    combined = [m for m in mutants if m.benign and m.combined]
    taken = min(COMBINED_TAKES, workers - 1) if combined else 0
    found = [Job(BASELINE, everything, None, ["-n", str(workers - taken)])]
    found += [Job(m.name, everything, m, ["-n", str(workers + taken)]) for m in combined]
    alone = [m for m in mutants if m.benign and not m.combined]
    found += [
        Job(m.name, everything, m, whole if tests else [*whole, *one_model_shard(n)])
        for n, m in enumerate(alone)
    ]
    chosen = [m for m in mutants if not m.benign]
    records = records or {}
    for mutant in longest_first(chosen, records):
        killer = records[mutant.name].killed_by if mutant.name in records else None
        selected = tests or selection(mutant.clauses, tests_by_clause, killer)
        found.append(Job(mutant.name, selected, mutant, ["--maxfail=1", *phase_arguments(mutant)]))
    return found


def run(
    mutants: list[Mutant],
    suite_dir: Path,
    workdir: Path,
    pytest_args: list[str],
    parallel: int,
    workers: int,
    progress: Callable[[Outcome], None],
    tests: list[str] | None = None,
    lane_binaries: Binaries | None = None,
    records: dict[str, KillRecord] | None = None,
) -> KillRun:
    """Run the baseline (the whole suite on the reference controller), every variant and every
    mutant, `parallel` mutant runs at a time; with `lane_binaries` (a local kill run), the
    mutant runs reuse `parallel` control planes of those binaries (conformance.lanes); the
    mutants by their `records`, the longest first.

    The mutants start when the runs that must pass have ended: their control planes' starts
    would load the machine under those runs' timing tests."""
    with contextlib.redirect_stdout(io.StringIO()):
        tests_by_clause = catalog.coverage(str(suite_dir)).tests_by_clause
    everything = jobs(mutants, suite_dir, tests_by_clause, workers, tests, records)
    outcomes: list[Outcome] = []
    phases: list[Phase] = []
    for phase, batch, width in (
        (MUST_PASS, [job for job in everything if job.must_pass], MUST_PASS_WORKERS // workers),
        (MUTANTS, [job for job in everything if not job.must_pass], parallel),
    ):
        started, cpu, width = time.monotonic(), children_cpu_seconds(), max(1, width)
        reused = lane_binaries if phase == MUTANTS and batch else None
        with (
            Lanes(reused, width, workdir / "lanes") if reused else contextlib.nullcontext()
        ) as lanes:
            for outcome in run_batch(batch, width, workdir, pytest_args, lanes):
                outcomes.append(outcome)
                progress(outcome)
        seconds, cpu = time.monotonic() - started, children_cpu_seconds() - cpu
        replaced = lanes.replaced if lanes else []
        phases.append(Phase(phase, width, round(seconds, 1), round(cpu, 1), replaced))
    baseline = next(o for o in outcomes if o.name == BASELINE)
    order = {m.name: n for n, m in enumerate(mutants)}
    others = sorted((o for o in outcomes if o is not baseline), key=lambda o: order[o.name])
    return KillRun(baseline, others, phases)


def run_batch(
    batch: list[Job], width: int, workdir: Path, pytest_args: list[str], lanes: Lanes | None
) -> Iterator[Outcome]:
    """The batch's runs, `width` at a time; their outcomes as they end."""
    with ThreadPoolExecutor(max_workers=width) as pool:
        futures = [
            pool.submit(
                run_selection,
                job.name,
                job.tests,
                job.mutant,
                workdir,
                [*pytest_args, *job.options],
                lanes,
            )
            for job in batch
        ]
        for future in as_completed(futures):
            yield future.result()


def children_cpu_seconds() -> float:
    """CPU seconds of the processes this one started and waited for: the runs, and the lanes'
    control planes once stopped."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: The longest runs a breakdown names.
LONGEST = 8


def breakdown(matrix: dict[str, Any]) -> dict[str, Any]:
    """Where a kill run's wall time went, from its matrix.json: for the runs that must pass and
    for the mutants, the phase's wall time, its runs' pytest-seconds, the CPU seconds of all it
    ran (the runs and the lanes' control planes), how busy its pool was (pytest-seconds / (wall
    x runs at a time)) and its cores (CPU seconds / (wall x cores): near 1, more runs at a time
    cannot make it faster), and why a lane got a fresh control plane; the longest runs."""
    runs_by_phase = {
        "mustPass": [matrix["baseline"], *matrix["variants"]],
        "mutants": matrix["mutants"],
    }
    everything = [run for found in runs_by_phase.values() for run in found]
    phases = {}
    for phase in matrix["phases"]:
        found = runs_by_phase[phase["name"]]
        seconds = sum(r["seconds"] for r in found)
        cpu = phase["cpu_seconds"]
        wall = max(phase["seconds"], 1e-9)
        phases[phase["name"]] = {
            "wallSeconds": round(phase["seconds"]),
            "runsAtATime": phase["width"],
            "runs": len(found),
            "pytestSeconds": round(seconds),
            "cpuSeconds": round(cpu),
            "poolBusy": round(seconds / (wall * phase["width"]), 2),
            "cpuBusy": round(cpu / (wall * matrix["cpus"]), 2),
            "lanesReplaced": phase["lanes_replaced"],
        }
    longest = sorted(everything, key=lambda r: r["seconds"], reverse=True)[:LONGEST]
    mutants = matrix["mutants"]
    return {
        "wallSeconds": matrix["seconds"],
        "phases": phases,
        "secondsPerMutant": round(sum(r["seconds"] for r in mutants) / max(len(mutants), 1), 1),
        "longest": [{"name": r["name"], "seconds": round(r["seconds"])} for r in longest],
    }


def describe(figures: dict[str, Any]) -> list[str]:
    """A breakdown as the kill run and benchmarks/kill_run_time.py print it."""
    lines = [f"kill run: {figures['wallSeconds']} s wall"]
    for name, phase in figures["phases"].items():
        lines.append(
            f"  {name:9} {phase['wallSeconds']:5} s wall, {phase['runs']:4} runs, "
            f"{phase['runsAtATime']} at a time, {phase['pytestSeconds']:6} pytest-seconds, "
            f"{phase['cpuSeconds']:6} CPU-s; pool busy {phase['poolBusy']:.0%}, "
            f"cores {phase['cpuBusy']:.0%}"
        )
        lines += [f"    a fresh control plane for {why}" for why in phase["lanesReplaced"]]
    lines.append(f"  a mutant's run: {figures['secondsPerMutant']} s on average")
    return lines
