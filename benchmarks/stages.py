"""Where `make test`'s time went: each stage timed, and a table of them printed at the end,
whether the run passed or failed (so that every CI log says it).

    python3 -P benchmarks/stages.py begin FILE
    python3 -P benchmarks/stages.py run FILE NAME -- COMMAND [ARG ...]
    python3 -P benchmarks/stages.py table FILE

`run` runs COMMAND, records its wall time, how busy the machine's cores were meanwhile (all
processes, from /proc/stat: what tells a stage that waits from one that computes, and so which
stages could run side by side) and its exit status in FILE, and exits with its status. A `run`
inside another (a stage's own stages) is recorded indented under it. The standard library only:
the first stage is the one that makes the project's venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: How deep the current stage is nested (set for the command a `run` runs).
DEPTH = "CONVOY_STAGE_DEPTH"


def cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores since boot; None where there is no /proc/stat."""
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().split()[1:9]]
    except OSError:
        return None
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def busy_between(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[1] == before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 2)


def begin(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


def run(path: Path, name: str, argv: list[str]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    depth = int(os.environ.get(DEPTH, "0"))
    record = {"name": name, "depth": depth, "started": time.time()}
    with path.open("a") as stages:  # the row first: nested stages come after their parent
        stages.write(json.dumps(record) + "\n")
    started, cpu = time.monotonic(), cpu_times()
    status = subprocess.run(argv, env={**os.environ, DEPTH: str(depth + 1)}).returncode
    seconds, busy = round(time.monotonic() - started), busy_between(cpu, cpu_times())
    finished = {**record, "seconds": seconds, "coresBusy": busy, "status": status}
    with path.open("a") as stages:
        stages.write(json.dumps(finished) + "\n")
    return status


def rows(path: Path) -> list[dict]:
    """One row a stage, in the order they started; a stage without an end did not finish."""
    found: dict[tuple[str, float], dict] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        found[(record["name"], record["started"])] = record
    return list(found.values())


def table(path: Path) -> str:
    lines = [f"{'stage':<56} {'wall':>9}  {'cores busy':>10}  result"]
    for row in rows(path):
        name = "  " * row["depth"] + row["name"]
        if "seconds" not in row:
            lines.append(f"{name:<56} {'-':>9}  did not finish")
            continue
        result = "ok" if row["status"] == 0 else f"FAILED ({row['status']})"
        busy = row.get("coresBusy")
        cores = "-" if busy is None else f"{busy:.0%}"
        lines.append(f"{name:<56} {clock(row['seconds'])}  {cores:>10}  {result}")
    total = sum(row.get("seconds", 0) for row in rows(path) if row["depth"] == 0)
    lines.append(f"{'total':<56} {clock(total)}")
    return "\n".join(lines)


def clock(seconds: int) -> str:
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes:>5}m{seconds:02d}s"


def main(argv: list[str]) -> int:
    command, path = argv[0], Path(argv[1])
    if command == "begin":
        begin(path)
        return 0
    if command == "run":
        name, separator, *rest = argv[2:]
        if separator != "--" or not rest:
            raise SystemExit("usage: stages.py run FILE NAME -- COMMAND [ARG ...]")
        return run(path, name, rest)
    if command == "table":
        print(f"\nWhere the time went ({path}):\n{table(path)}", flush=True)
        return 0
    raise SystemExit(__doc__)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
