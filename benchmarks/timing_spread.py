"""Benchmark: how far the reference controller's measured delays and periods stray from the
document's, under a full parallel run of the suite. The timing config's bands (conformance/
timing.py: early, late, ratio) are set from these figures.

Runs the whole suite (12 workers, a 30 s resync) with the measured tables printed, reads every
backoff retry and interval gap from them, and prints, per kind, how much sooner and later than
expected they came: the minimum, the median, the 95th percentile and the maximum, in seconds,
and writes them as JSON. `--runs N` runs N whole suites side by side (the kill run's runs that
must pass: the baseline and the combined variant, `--runs 2 --workers 6`) and pools their
figures. `--junit FILE...` reads the figures from runs that have ended instead (a kill run's
WORKDIR/baseline.xml and WORKDIR/combined.xml, say: the suite's JUnit files keep what each test
printed).

    .venv/bin/python -m benchmarks.timing_spread [--workers 12] [--runs 1]
        [--junit FILE...] [--out reports/timing-spread.json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from benchmarks.figures import DEV_WORKERS

#: A row of a backoff ladder table: retry, expected delay, measured gap.
LADDER_ROW = re.compile(r"^\s+\d+\s+([\d.]+) s\s+([\d.]+) s\s")
#: An interval line: the written interval and the measured gaps.
INTERVAL = re.compile(r"^interval (\S+): \d+ gaps between apply attempts ([\d., ]+) s")
SECONDS = {"1s": 1.0, "2300ms": 2.3}


def excesses(output: str) -> dict[str, list[float]]:
    """measured - expected, in seconds, per kind of measurement."""
    found: dict[str, list[float]] = {"backoff": [], "interval": []}
    for line in output.splitlines():
        if row := LADDER_ROW.match(line):
            expected, measured = map(float, row.groups())
            found["backoff"].append(measured - expected)
        elif (gaps := INTERVAL.match(line)) and gaps[1] in SECONDS:
            found["interval"] += [float(g) - SECONDS[gaps[1]] for g in gaps[2].split(", ")]
    return found


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "min": round(ordered[0], 3),
        "median": round(statistics.median(ordered), 3),
        "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
        "max": round(ordered[-1], 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=DEV_WORKERS)
    parser.add_argument("--runs", type=int, default=1, help="whole suites side by side")
    parser.add_argument("--out", type=Path, default=Path("reports/timing-spread.json"))
    parser.add_argument("--junit", type=Path, nargs="+", help="read these runs' JUnit files")
    args = parser.parse_args()
    if args.junit:
        return write(pooled_excesses(printed(path) for path in args.junit), args.out, {})
    argv = [sys.executable, "-m", "conformance.cli", "run", "--timing", "controller_resync=30s"]
    argv += ["-n", str(args.workers), "-rP"]
    report_dirs = [Path(f"reports/timing-spread-{n}") for n in range(args.runs)]
    for report_dir in report_dirs:
        report_dir.mkdir(parents=True, exist_ok=True)
    # Each run's output to a file of its own: pipes read one after another could fill up.
    logs = [(report_dir / "output.log").open("w+") for report_dir in report_dirs]
    runs = [
        subprocess.Popen(
            [*argv, f"--report-dir={report_dir}"], stdout=log, stderr=subprocess.DEVNULL
        )
        for report_dir, log in zip(report_dirs, logs, strict=True)
    ]
    outputs = []
    for run, log in zip(runs, logs, strict=True):
        run.wait()
        log.seek(0)
        outputs.append(log.read())
        log.close()
    codes = [run.returncode for run in runs]
    about = {"workers": args.workers, "runs": args.runs, "suite_exit_codes": codes}
    write(pooled_excesses(outputs), args.out, about)
    return max(codes)


def printed(junit: Path) -> str:
    """What the tests of a JUnit file printed, one after another."""
    root = ET.parse(junit).getroot()
    return "\n".join(out.text or "" for out in root.iter("system-out"))


def pooled_excesses(outputs: Iterable[str]) -> dict[str, list[float]]:
    pooled: dict[str, list[float]] = {}
    for output in outputs:
        for kind, values in excesses(output).items():
            pooled.setdefault(kind, []).extend(values)
    return pooled


def write(pooled: dict[str, list[float]], out: Path, about: dict[str, object]) -> int:
    figures: dict[str, object] = {kind: summary(v) for kind, v in pooled.items() if v}
    figures.update(about)
    for kind, numbers in figures.items():
        print(f"{kind:16} {numbers}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
