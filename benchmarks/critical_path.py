"""Benchmark: the suite's wall time against its critical path, in one run.

The critical path is what no number of workers can beat: a worker's set-up (its control plane
and controller, paid in the setup of its first test) plus the longest test. The benchmark runs
the whole suite (a dev run: 12 workers, a 30 s resync; --certifying: the document's default
resync, which is the first phase of a certifying run), records every test's phases with this
module loaded as a pytest plugin, and prints the wall time, the critical path, their ratio, and
the other lower bound (the tests' total time over the workers), with the longest tests, and
how busy the machine's cores were meanwhile (all processes: the machine may be shared).

    .venv/bin/python -m benchmarks.critical_path [--workers 12] [--certifying]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from benchmarks.figures import DEV_WORKERS, write_figures

#: Where the plugin (in the run's controller process) writes the phases it saw.
PHASES_FILE = "CONVOY_BENCHMARK_PHASES"
PHASES: list[dict[str, Any]] = []


# -- the plugin (loaded into the suite's run with -p benchmarks.critical_path) ---------------
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    node = getattr(report, "node", None)  # xdist: the worker that ran it
    worker = node.gateway.id if node is not None else "main"
    PHASES.append(
        {"test": report.nodeid, "when": report.when, "worker": worker}
        | {"start": report.start, "seconds": report.duration}
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    if (out := os.environ.get(PHASES_FILE)) and not hasattr(session.config, "workerinput"):
        Path(out).write_text(json.dumps(PHASES))


# -- the benchmark --------------------------------------------------------------------------
def critical_path(phases: list[dict[str, Any]], workers: int) -> dict[str, Any]:
    tests: dict[str, dict[str, Any]] = defaultdict(lambda: {"seconds": 0.0, "start": 1e18})
    for phase in phases:
        test = tests[phase["test"]]
        test["worker"] = phase["worker"]
        test["start"] = min(test["start"], phase["start"])
        test[phase["when"]] = phase["seconds"]
    first: dict[str, str] = {}
    for name, test in sorted(tests.items(), key=lambda item: item[1]["start"]):
        first.setdefault(test["worker"], name)
    set_up = {worker: tests[name].get("setup", 0.0) for worker, name in first.items()}
    for name, test in tests.items():
        own_setup = 0.0 if name in first.values() else test.get("setup", 0.0)
        test["seconds"] = own_setup + test.get("call", 0.0) + test.get("teardown", 0.0)
    longest = sorted(tests.items(), key=lambda item: -item[1]["seconds"])
    total = sum(t["seconds"] for t in tests.values()) + sum(set_up.values())
    return {
        "tests": len(tests),
        "workerSetUpSeconds": max(set_up.values()),
        "longestTestSeconds": longest[0][1]["seconds"],
        "criticalPathSeconds": max(set_up.values()) + longest[0][1]["seconds"],
        "totalOverWorkersSeconds": total / workers,
        "longestTests": {name: round(t["seconds"], 1) for name, t in longest[:5]},
    }


def cpu_times() -> tuple[float, float]:
    """The machine's busy and total CPU time so far, in clock ticks (/proc/stat)."""
    ticks = [float(t) for t in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle and iowait
    return sum(ticks) - idle, sum(ticks)


def run_suite(workers: int, certifying: bool, out: Path) -> tuple[float, float]:
    """The run's wall time, and the share of the machine's CPU time that was busy in it."""
    argv = [sys.executable, "-m", "conformance.cli", "run", "--cluster=local"]
    argv += [] if certifying else ["--timing", "controller_resync=30s"]
    argv += ["-n", str(workers), "-p", "benchmarks.critical_path"]
    argv += [f"--report-dir={out / 'report'}", "-q"]
    started, (busy, total) = time.monotonic(), cpu_times()
    with (out / "run.log").open("w") as log:
        subprocess.run(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
            env={**os.environ, PHASES_FILE: str(out / "phases.json")},
        )
    busy_after, total_after = cpu_times()
    return time.monotonic() - started, (busy_after - busy) / (total_after - total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=DEV_WORKERS)
    parser.add_argument("--certifying", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="convoy-critical-path-"))
    wall, cpu_busy = run_suite(args.workers, args.certifying, work)
    figures = critical_path(json.loads((work / "phases.json").read_text()), args.workers)
    figures = {"run": "certifying" if args.certifying else "dev", "workers": args.workers} | {
        "wallSeconds": wall,
        "ratio": wall / figures["criticalPathSeconds"],
        "cpuBusyShare": cpu_busy,
        **figures,
    }
    name = f"critical-path-{figures['run']}.json"
    write_figures(args.out / name, figures)
    print(f"run log and report: {work}")


if __name__ == "__main__":
    main()
