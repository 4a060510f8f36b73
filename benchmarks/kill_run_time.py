"""Benchmark: where the kill run's wall time goes, from the matrix.json a kill run wrote.

The kill run has two phases: the runs that must pass (the baseline and the variants, the whole
suite each, side by side) and then the mutants (each the tests of its clauses until the first
failure, `--parallel` at a time). For each phase this prints its wall time, its runs' pytest-
seconds and CPU seconds, how busy its pool was (pytest-seconds / (wall x runs at a time)) and
its cores (CPU seconds / (wall x cores): near 1, more runs at a time cannot make it faster);
then the seconds of a mutant's run and the longest runs; and writes the figures as JSON.

    .venv/bin/python benchmarks/kill_run_time.py WORKDIR [--out FILE] [--record]

WORKDIR is a kill run's --workdir (`convoy-conformance mutants --run --workdir=WORKDIR`). With
--record, each mutant's seconds in that run and the test that killed it go into
mutants/kill_record.json: the next kill runs start the longest first, each with its last
killer first (record from a run of every mutant on its clauses' tests: `make test-kill`'s, or
`convoy-conformance mutants --run` without --tests).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from conformance.kill_run import (
    breakdown,
    describe,
    read_kill_records,
    recorded,
    write_kill_records,
)
from mutants import KILL_RECORD


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--out", type=Path, default=Path("reports/kill-run-time.json"))
    parser.add_argument("--record", action="store_true", help=f"into {KILL_RECORD}")
    args = parser.parse_args()
    matrix = json.loads((args.workdir / "matrix.json").read_text())
    if args.record:
        record(matrix)
    try:
        figures = breakdown(matrix)
    except KeyError as missing:
        raise SystemExit(
            f"this matrix.json has no {missing} (a kill run older than its accounting): "
            "run the kill run again"
        ) from None
    for line in describe(figures):
        print(line)
    print("  the longest runs:")
    for run in figures["longest"]:
        print(f"    {run['seconds']:5} s  {run['name']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2))
    return 0


def record(matrix: dict) -> None:
    """Each mutant's seconds in `matrix` and the test that killed it, over what was recorded
    before (a mutant this run did not run keeps its record)."""
    now = recorded(matrix)
    write_kill_records(KILL_RECORD, {**read_kill_records(KILL_RECORD), **now})
    print(f"recorded {len(now)} mutants' seconds and killers in {KILL_RECORD}")


if __name__ == "__main__":
    raise SystemExit(main())
