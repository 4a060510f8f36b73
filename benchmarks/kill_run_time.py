"""Benchmark: where the kill run's wall time goes, from the matrix.json a kill run wrote.

The kill run keeps `parallel` pytest runs going at once: the baseline and each benign variant
run the whole suite, each mutant runs the tests of its clauses until the first failure. This
prints the wall time, the pytest-seconds of each kind of run, how busy the pool was (pytest-
seconds / (wall x parallel)), the CPU seconds the runs used against what the machine's cores
had (near 1: more runs at a time cannot make it faster), the seconds of a mutant's run, and the
longest runs; and writes the figures as JSON.

    .venv/bin/python benchmarks/kill_run_time.py WORKDIR [--parallel 4] [--out FILE]

WORKDIR is a kill run's --workdir (`convoy-conformance mutants --run --workdir=WORKDIR`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

LONGEST = 8


def breakdown(matrix: dict[str, Any], parallel: int) -> dict[str, Any]:
    runs = {
        "baseline": [matrix["baseline"]],
        "variants": matrix["variants"],
        "mutants": matrix["mutants"],
    }
    everything = [run for found in runs.values() for run in found]
    if "cpus" not in matrix or any("cpu_seconds" not in run for run in everything):
        raise SystemExit(
            "this matrix.json has no CPU seconds (a kill run older than its CPU accounting): "
            "run the kill run again"
        )
    seconds = {kind: round(sum(r["seconds"] for r in found)) for kind, found in runs.items()}
    cpu = {kind: round(sum(r["cpu_seconds"] for r in found)) for kind, found in runs.items()}
    longest = sorted(everything, key=lambda r: r["seconds"], reverse=True)[:LONGEST]
    mutants = matrix["mutants"]
    return {
        "wallSeconds": matrix["seconds"],
        "parallel": parallel,
        "runs": {kind: len(found) for kind, found in runs.items()},
        "pytestSeconds": seconds,
        "poolBusy": round(sum(seconds.values()) / (matrix["seconds"] * parallel), 2),
        "cpuSeconds": cpu,
        "cpuBusy": round(sum(cpu.values()) / (matrix["seconds"] * matrix["cpus"]), 2),
        "secondsPerMutant": round(seconds["mutants"] / max(len(mutants), 1), 1),
        "longest": [{"name": r["name"], "seconds": round(r["seconds"])} for r in longest],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--parallel", type=int, default=4, help="the kill run's --parallel")
    parser.add_argument("--out", type=Path, default=Path("reports/kill-run-time.json"))
    args = parser.parse_args()
    figures = breakdown(json.loads((args.workdir / "matrix.json").read_text()), args.parallel)
    print(f"kill run: {figures['wallSeconds']} s wall, {args.parallel} runs at a time")
    for kind, total in figures["pytestSeconds"].items():
        cpu = figures["cpuSeconds"][kind]
        print(f"  {kind:9} {figures['runs'][kind]:4} runs {total:6} pytest-seconds {cpu:6} CPU-s")
    print(f"  a mutant's run: {figures['secondsPerMutant']} s on average")
    pool, cores = figures["poolBusy"], figures["cpuBusy"]
    print(f"  the pool was busy {pool:.0%} of the time, the cores {cores:.0%}")
    print("  the longest runs:")
    for run in figures["longest"]:
        print(f"    {run['seconds']:5} s  {run['name']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
