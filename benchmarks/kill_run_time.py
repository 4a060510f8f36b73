"""Benchmark: where the kill run's wall time goes, from the matrix.json a kill run wrote.

The kill run has two phases: the runs that must pass (the baseline and the variants, the whole
suite each, side by side) and then the mutants (each the tests of its clauses until the first
failure, `--parallel` at a time). For each phase this prints its wall time, its runs' pytest-
seconds and CPU seconds, how busy its pool was (pytest-seconds / (wall x runs at a time)) and
its cores (CPU seconds / (wall x cores): near 1, more runs at a time cannot make it faster);
then the seconds of a mutant's run and the longest runs; and writes the figures as JSON.

    .venv/bin/python benchmarks/kill_run_time.py WORKDIR [--out FILE]

WORKDIR is a kill run's --workdir (`convoy-conformance mutants --run --workdir=WORKDIR`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

LONGEST = 8


def breakdown(matrix: dict[str, Any]) -> dict[str, Any]:
    runs_by_phase = {
        "mustPass": [matrix["baseline"], *matrix["variants"]],
        "mutants": matrix["mutants"],
    }
    everything = [run for found in runs_by_phase.values() for run in found]
    if "phases" not in matrix or any("cpu_seconds" not in run for run in everything):
        raise SystemExit(
            "this matrix.json has no phases or no CPU seconds (a kill run older than its "
            "accounting): run the kill run again"
        )
    phases = {}
    for phase in matrix["phases"]:
        found = runs_by_phase[phase["name"]]
        seconds = sum(r["seconds"] for r in found)
        cpu = sum(r["cpu_seconds"] for r in found)
        wall = max(phase["seconds"], 1e-9)
        phases[phase["name"]] = {
            "wallSeconds": round(phase["seconds"]),
            "runsAtATime": phase["width"],
            "runs": len(found),
            "pytestSeconds": round(seconds),
            "cpuSeconds": round(cpu),
            "poolBusy": round(seconds / (wall * phase["width"]), 2),
            "cpuBusy": round(cpu / (wall * matrix["cpus"]), 2),
        }
    longest = sorted(everything, key=lambda r: r["seconds"], reverse=True)[:LONGEST]
    mutants = matrix["mutants"]
    return {
        "wallSeconds": matrix["seconds"],
        "phases": phases,
        "secondsPerMutant": round(sum(r["seconds"] for r in mutants) / max(len(mutants), 1), 1),
        "longest": [{"name": r["name"], "seconds": round(r["seconds"])} for r in longest],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--out", type=Path, default=Path("reports/kill-run-time.json"))
    args = parser.parse_args()
    figures = breakdown(json.loads((args.workdir / "matrix.json").read_text()))
    print(f"kill run: {figures['wallSeconds']} s wall")
    for name, phase in figures["phases"].items():
        print(
            f"  {name:9} {phase['wallSeconds']:5} s wall, {phase['runs']:4} runs, "
            f"{phase['runsAtATime']} at a time, {phase['pytestSeconds']:6} pytest-seconds, "
            f"{phase['cpuSeconds']:6} CPU-s; pool busy {phase['poolBusy']:.0%}, "
            f"cores {phase['cpuBusy']:.0%}"
        )
    print(f"  a mutant's run: {figures['secondsPerMutant']} s on average")
    print("  the longest runs:")
    for run in figures["longest"]:
        print(f"    {run['seconds']:5} s  {run['name']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
