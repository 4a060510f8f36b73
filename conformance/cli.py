"""The `convoy-conformance` command."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import logging
import sys
import time
from pathlib import Path

import pytest

from conformance import catalog, mutation, report
from conformance.clusters import binaries

SUITE_DIR = Path(__file__).parent / "suite"


def _binaries(args: argparse.Namespace) -> int:
    started = time.monotonic()
    found = binaries.resolve(args.kube_version, args.etcd_version)
    for name in ("etcd", "kube_apiserver", "kube_controller_manager", "kubectl"):
        print(f"{name.replace('_', '-'):24} {getattr(found, name)}")
    print(f"ready in {time.monotonic() - started:.0f} s")
    return 0


def _rules(args: argparse.Namespace) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        found = catalog.coverage(str(SUITE_DIR))
    rules = [
        {**dataclasses.asdict(rule), "tests": found.tests_by_rule[rule.id]}
        for rule in catalog.RULES
    ]
    if args.json:
        print(json.dumps({"rules": rules}, indent=2))
        return 0
    for rule in rules:
        print(f"{rule['id']:8} {len(rule['tests']):3} test(s)  {rule['statement']}")
    covered = len(rules) - len(found.uncovered)
    print(f"{covered}/{len(rules)} rules with at least one test")
    return 0


def _mutants(args: argparse.Namespace, extra: list[str]) -> int:
    from mutants import load  # the mutants are reference-controller code: load only here

    chosen = [m for m in load().values() if not args.only or m.name in args.only]
    # Long-only mutants need `-m long` and a resync above 1000 s (about 40 minutes each).
    mutants = [m for m in chosen if args.long or not m.long_only or not args.run]
    if not args.run:
        listing = [
            {
                "name": m.name,
                "rules": list(m.rules),
                "description": m.description,
                **({"longOnly": True} if m.long_only else {}),
            }
            for m in mutants
        ]
        print(
            json.dumps({"mutants": listing}, indent=2)
            if args.json
            else "\n".join(
                f"{m['name']:34} {','.join(m['rules']):14} {m['description']}" for m in listing
            )
        )
        return 0
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    def progress(outcome: mutation.Outcome) -> None:
        verdict = (
            "baseline"
            if outcome.name == "baseline"
            else ("KILLED" if outcome.killed else "SURVIVED")
        )
        print(
            f"{verdict:8} {outcome.name:34} {len(outcome.failed)} failed, "
            f"{len(outcome.errors)} errors, {len(outcome.passed)} passed, "
            f"{outcome.seconds:.0f} s",
            flush=True,
        )

    started = time.monotonic()
    baseline, outcomes = mutation.kill_run(
        mutants, SUITE_DIR, workdir, extra, args.parallel, progress
    )
    survivors = [o.name for o in outcomes if not o.killed]
    clean = not baseline.failed and not baseline.errors
    print(
        f"killed {len(outcomes) - len(survivors)}/{len(outcomes)} in "
        f"{time.monotonic() - started:.0f} s; baseline {'passed' if clean else 'FAILED'}"
    )
    for name in survivors:
        print(f"survivor: {name}")
    (workdir / "matrix.json").write_text(
        json.dumps(
            {
                "baseline": dataclasses.asdict(baseline),
                "mutants": [dataclasses.asdict(o) for o in outcomes],
            },
            indent=2,
        )
    )
    return 0 if clean and not survivors else 1


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    """pytest on the suite, writing the report unless the caller chose where."""
    report = [] if any(a.startswith("--report-dir") for a in extra) else ["--report-dir=reports"]
    chosen = any(not a.startswith("-") and Path(a.split("::")[0]).exists() for a in extra)
    paths = [] if chosen else [str(SUITE_DIR)]
    # Live log lines say what each long wait is for; xdist workers cannot show them.
    live = [] if "-n" in extra else ["-o", "log_cli=true", "-o", "log_cli_level=INFO"]
    return int(pytest.main([*paths, "-p", "no:cacheprovider", *live, *report, *extra]))


def _verify(args: argparse.Namespace) -> int:
    problems = report.verify(Path(args.file))
    for problem in problems:
        print(f"not certifying: {problem}")
    print(f"{args.file}: " + ("certifies" if not problems else f"{len(problems)} problem(s)"))
    return 0 if not problems else 1


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(prog="convoy-conformance", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("binaries", help="find or build the local provider's binaries")
    build.add_argument("--kube-version", help="Kubernetes version, e.g. 1.36.3")
    build.add_argument("--etcd-version", help="etcd version, e.g. 3.6.16")
    rules = commands.add_parser("rules", help="the rule catalog and the tests of each rule")
    rules.add_argument("--json", action="store_true", help="machine-readable output")
    verify = commands.add_parser(
        "verify-report", help="check a report's shape and that it certifies"
    )
    verify.add_argument("file")
    mutants = commands.add_parser("mutants", help="list the mutants, or kill them (--run)")
    mutants.add_argument("--json", action="store_true", help="machine-readable list")
    mutants.add_argument("--run", action="store_true", help="run the kill run")
    mutants.add_argument("--only", nargs="*", help="these mutants only")
    mutants.add_argument("--parallel", type=int, default=2, help="mutant runs at a time")
    mutants.add_argument("--workdir", default="reports/mutants", help="logs and JUnit files")
    mutants.add_argument(
        "--long",
        action="store_true",
        help="also the mutants only the long tests kill (pass -m long and a long resync too)",
    )
    commands.add_parser(
        "run", help="run the conformance suite; other arguments go to pytest", add_help=False
    )
    args, extra = parser.parse_known_args(argv)
    if args.command == "binaries":
        return _binaries(args)
    if args.command == "rules":
        return _rules(args)
    if args.command == "verify-report":
        return _verify(args)
    if args.command == "mutants":
        return _mutants(args, extra)
    return _run(args, extra)


if __name__ == "__main__":
    sys.exit(main())
