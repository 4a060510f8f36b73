"""Soak: the whole suite on the reference controller, many times in a row; every run must pass.

A flaky test shows here long before it shows in CI. Each run is `convoy-conformance run` on
the local control plane (12 workers, a 30 s resync) with its own report; the soak prints one
line per run (passed, failed, errors, skipped, seconds), writes them as JSON with the
failing tests of each run, and exits non-zero when any run did not pass.

    .venv/bin/python -m benchmarks.soak [--runs 10] [--workers 12] [--out reports/soak]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.figures import DEV_WORKERS

#: JUnit's element for each outcome other than a pass.
OUTCOMES = {"failure": "failed", "error": "errors", "skipped": "skipped"}


def counts(junit: Path) -> dict[str, Any]:
    """Tests by outcome, and the names of those that failed or erred."""
    tally: Counter[str] = Counter()
    broken = [] if junit.exists() else ["(no JUnit file: the run did not finish)"]
    for case in ET.parse(junit).iter("testcase") if junit.exists() else []:
        outcome = next((OUTCOMES[t] for t in OUTCOMES if case.find(t) is not None), "passed")
        tally[outcome] += 1
        if outcome in ("failed", "errors"):
            broken.append(f"{case.get('classname')}::{case.get('name')}")
    return {k: tally[k] for k in ("passed", "failed", "errors", "skipped")} | {"broken": broken}


def soak_run(number: int, workers: int, out: Path) -> dict[str, Any]:
    report_dir = out / f"run-{number:02d}"
    argv = [sys.executable, "-m", "conformance.cli", "run", "--cluster=local"]
    argv += ["--timing", "controller_resync=30s", "-n", str(workers)]
    argv += [f"--report-dir={report_dir}", "-q"]
    started = time.monotonic()
    with (out / f"run-{number:02d}.log").open("w") as log:
        code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    result = {"run": number, "exitCode": code, "seconds": round(time.monotonic() - started)}
    return result | counts(report_dir / "junit.xml")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=DEV_WORKERS)
    parser.add_argument("--out", type=Path, default=Path("reports/soak"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    for number in range(1, args.runs + 1):
        runs.append(soak_run(number, args.workers, args.out))
        run = runs[-1]
        print(
            f"run {number:2}/{args.runs}: exit {run['exitCode']}, {run['passed']} passed, "
            f"{run['failed']} failed, {run['errors']} errors, {run['skipped']} skipped, "
            f"{run['seconds']} s {' '.join(run['broken'])}",
            flush=True,
        )
    clean = sum(run["exitCode"] == 0 and not run["broken"] for run in runs)
    print(f"soak: {clean} of {len(runs)} runs passed")
    summary = {"runs": runs, "clean": clean, "workers": args.workers}
    (args.out / "soak.json").write_text(json.dumps(summary, indent=2))
    return 0 if clean == len(runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
