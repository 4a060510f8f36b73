"""The `convoy-conformance` command."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import logging
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conformance import kill_run
from conformance.certification import report, verify
from conformance.clusters import binaries
from conformance.document import catalog
from conformance.timing import LONG_RESYNC

if TYPE_CHECKING:
    from mutants import Mutant

SUITE_DIR = Path(__file__).parent / "suite"
#: `run --in-cluster`: the suite as a Job in the cluster under test (conformance.incluster).
IN_CLUSTER = "--in-cluster"
#: What each test printed (the measured ladders and periods) goes into the JUnit file too: the
#: installed kit has no ini file that would say so (a checkout's pyproject.toml does).
KEEP_PRINTED = ("-o", "junit_logging=system-out")


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

    def clause_entry(clause: catalog.Clause) -> dict:
        entry = {"id": clause.id, "statement": clause.statement}
        if clause.certifying_only:
            entry["certifyingOnly"] = clause.certifying_only
        return {**entry, "tests": found.tests_by_clause[clause.id]}

    rules: list[dict[str, Any]] = [
        {
            "id": rule.id,
            "section": rule.section,
            "statement": rule.statement,
            "clauses": [clause_entry(clause) for clause in rule.clauses],
        }
        for rule in catalog.RULES
    ]
    if args.json:
        print(json.dumps({"rules": rules}, indent=2))
        return 0
    for rule in rules:
        print(f"{rule['id']:8} {rule['statement']}")
        for clause in rule["clauses"]:
            note = " (certifying run only)" if "certifyingOnly" in clause else ""
            print(f"  {clause['id']:32} {len(clause['tests']):3} test(s){note}")
    tested = len(catalog.CLAUSES) - len(found.uncovered)
    print(f"{len(rules)} rules, {tested}/{len(catalog.CLAUSES)} clauses with at least one test")
    return 0


def _mutants(args: argparse.Namespace, extra: list[str]) -> int:
    # the mutants are reference-controller code: load only here
    from mutants import KILL_RECORD, load

    chosen = [m for m in load().values() if not args.only or m.name in args.only]
    if not args.run:
        return _list_mutants(chosen, as_json=args.json)
    # Mutants only a certifying phase can kill: the shipped phase's run a few minutes, the
    # long phase's about 40 minutes each (--long). The variants alone only when asked.
    runs = [
        m
        for m in chosen
        if (args.long or m.phase != "long")
        and (args.only or args.each_variant or not m.benign or m.combined)
    ]
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    def progress(outcome: kill_run.Outcome) -> None:
        if outcome.name == "baseline":
            verdict = "baseline" if outcome.clean else "BASELINE FAILED"
        elif outcome.must_pass:
            verdict = "benign" if outcome.clean else "VARIANT FAILED"
        else:
            verdict = "KILLED" if outcome.killed else "SURVIVED"
        print(
            f"{verdict:15} {outcome.name:42} {len(outcome.failed)} failed, "
            f"{len(outcome.errors)} errors, {len(outcome.passed)} passed, "
            f"{outcome.seconds:.0f} s",
            flush=True,
        )

    started = time.monotonic()
    run = kill_run.run(
        runs,
        SUITE_DIR,
        workdir,
        extra,
        args.parallel,
        args.workers,
        progress,
        args.tests,
        _lane_binaries(extra) if args.reuse_control_planes else None,
        kill_run.read_kill_records(KILL_RECORD),
    )
    baseline, outcomes = run.baseline, run.others
    wrong = [o for o in (baseline, *outcomes) if not o.as_expected]
    killed = sum(o.killed for o in outcomes if not o.must_pass)
    mutants = sum(not o.must_pass for o in outcomes)
    variants = [o for o in outcomes if o.must_pass]
    print(
        f"killed {killed}/{mutants} mutants; {sum(o.clean for o in variants)}/{len(variants)} "
        f"variants passed; baseline {'passed' if baseline.clean else 'FAILED'}; "
        f"{time.monotonic() - started:.0f} s"
    )
    for outcome in wrong:
        print(f"not as expected: {outcome.name}")
        if outcome.must_pass:
            for test, message in outcome.messages.items():
                print(f"  {test}\n    {message}")
    matrix = {
        "baseline": dataclasses.asdict(baseline),
        "mutants": [dataclasses.asdict(o) for o in outcomes if not o.must_pass],
        "variants": [dataclasses.asdict(o) for o in variants],
        "seconds": round(time.monotonic() - started),
        "phases": [dataclasses.asdict(phase) for phase in run.phases],
        "cpus": os.cpu_count(),
    }
    (workdir / "matrix.json").write_text(json.dumps(matrix, indent=2))
    for line in kill_run.describe(kill_run.breakdown(matrix)):
        print(line)
    return 0 if not wrong else 1


def _lane_binaries(extra: list[str]) -> binaries.Binaries | None:
    """The binaries of the local control planes the mutant runs reuse (conformance.lanes);
    None when the runs are not on the local provider."""
    parser = argparse.ArgumentParser(add_help=False)
    for option in ("--cluster", "--kube-version", "--etcd-version"):
        parser.add_argument(option)
    chosen, _ = parser.parse_known_args(extra)
    if chosen.cluster != "local":
        return None
    return binaries.resolve(chosen.kube_version, chosen.etcd_version)


def _list_mutants(chosen: list[Mutant], *, as_json: bool) -> int:
    def entry(m: Mutant) -> dict[str, Any]:
        fields = {"name": m.name, "description": m.description}
        if m.benign:
            return fields
        return {**fields, "clauses": list(m.clauses), **({"phase": m.phase} if m.phase else {})}

    listing = {
        "mutants": [entry(m) for m in chosen if not m.benign],
        "variants": [entry(m) for m in chosen if m.benign],
    }
    if as_json:
        print(json.dumps(listing, indent=2))
        return 0
    for kind, entries in listing.items():
        print(f"{len(entries)} {kind}:")
        for m in entries:
            print(f"  {m['name']:42} {','.join(m.get('clauses', ['(benign)']))}")
            print(f"  {'':42} {m['description']}")
    return 0


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    """pytest on the suite, writing the report unless the caller chose where."""
    if IN_CLUSTER in extra:
        return _run_in_cluster(extra)
    report = [] if any(a.startswith("--report-dir") for a in extra) else ["--report-dir=reports"]
    paths = [] if any(_names_tests(a) for a in extra) else [str(SUITE_DIR)]
    # Live log lines say what each long wait is for; xdist workers cannot show them.
    live = [] if "-n" in extra else ["-o", "log_cli=true", "-o", "log_cli_level=INFO"]
    argv = [*paths, "-p", "no:cacheprovider", *KEEP_PRINTED, *live, *report, *extra]
    return int(pytest.main(argv))


def in_cluster_parser() -> argparse.ArgumentParser:
    """The options of `run --in-cluster`; the rest go to pytest in the pod."""
    parser = argparse.ArgumentParser(prog="convoy-conformance run --in-cluster", add_help=False)
    parser.add_argument(IN_CLUSTER, action="store_true")
    parser.add_argument("--suite-image", required=True, help="convoy-conformance suite-image")
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--report-dir", default="reports")
    parser.add_argument("--workers", type=int, default=4, help="xdist workers in the pod")
    parser.add_argument("--convoy-controller-deployment", default=None)
    parser.add_argument("--deadline", type=int, default=7200, help="the Job's seconds at most")
    parser.add_argument("--image-pull-policy", default="IfNotPresent")
    return parser


def _run_in_cluster(extra: list[str], certify: argparse.Namespace | None = None) -> int:
    """The suite as a Job in the cluster (conformance.incluster), the report brought back;
    `certify`: both phases of a certifying run there, with `convoy-conformance certify`'s
    --report-dir and --workers."""
    from conformance.incluster import objects, run

    args, pytest_args = in_cluster_parser().parse_known_args(extra)
    if certify is not None:
        args.report_dir, args.workers = certify.report_dir, certify.workers
    kubeconfig = Path(args.kubeconfig or Path.home() / ".kube" / "config")
    spec = objects.RunSpec(
        run_id=secrets.token_hex(4),
        image=args.suite_image,
        command="run" if certify is None else "certify",
        workers=args.workers,
        pytest_args=tuple(pytest_args),
        controller_deployment=args.convoy_controller_deployment,
        deadline=args.deadline,
        image_pull_policy=args.image_pull_policy,
    )
    try:
        return run.run_in_cluster(kubeconfig, spec, Path(args.report_dir))
    except run.InClusterError as error:
        print(f"in-cluster: {error}", file=sys.stderr)
        return 1


def _suite_image(args: argparse.Namespace) -> int:
    from conformance.incluster import image
    from conformance.install import vendor

    kubectl = Path(args.kubectl or vendor.kubectl())
    try:
        print(image.build(args.tag, kubectl, args.base))
    except image.ImageError as error:
        print(f"suite-image: {error}", file=sys.stderr)
        return 1
    return 0


def _names_tests(arg: str) -> bool:
    """Is this argument tests to run (a test file, a node ID, a directory of tests), not an
    option's value such as the directory of `--report-dir DIR`?"""
    path = Path(arg.split("::")[0])
    try:
        if arg.startswith("-") or not path.exists():
            return False
    except OSError:  # no path at all: a long -k expression, say
        return False
    return path.suffix == ".py" or (path.is_dir() and any(path.glob("test_*.py")))


def _certify(args: argparse.Namespace, extra: list[str]) -> int:
    """A certifying run: the whole suite on the controller as shipped, then the long phase
    (the controller restarted with a resync above the longest ladder), one report for both.

    Each phase is a pytest process of its own; the second carries the first's results on.
    """
    if IN_CLUSTER in extra:
        return _run_in_cluster(extra, certify=args)
    report_dir = Path(args.report_dir)
    shipped = report_dir / "phases" / "shipped"
    phases = {
        "shipped": [
            *("-n", str(args.workers)),
            f"--report-dir={shipped}",
        ],
        "long": [
            *("-n", str(args.long_workers)),
            "--timing",
            f"controller_resync={LONG_RESYNC:g}s",
            f"--previous-phase={shipped / 'conformance-report.yaml'}",
            f"--report-dir={report_dir}",
        ],
    }
    for phase, options in phases.items():
        started = time.monotonic()
        # -P: the working directory (a vendor's workspace) must not shadow the suite's packages.
        argv = [sys.executable, "-P", "-m", "pytest", str(SUITE_DIR), "-p", "no:cacheprovider"]
        argv += [
            *KEEP_PRINTED,
            "-m",
            report.PHASES[phase],
            f"--certify-phase={phase}",
            *options,
            *extra,
        ]
        print(f"certify: phase {phase}: {' '.join(argv[4:])}", flush=True)
        code = subprocess.run(argv, check=False).returncode
        print(
            f"certify: phase {phase} ended with code {code} in {time.monotonic() - started:.0f} s"
        )
    report_file = str(report_dir / "conformance-report.yaml")
    return _verify(argparse.Namespace(file=report_file, results_only=False))


def _verify(args: argparse.Namespace) -> int:
    """A report file, or a submission directory (reports/<suite version>/<org>-<project>/)."""
    path = Path(args.file)
    if path.is_dir():
        problems = verify.verify_submission(path)
    else:
        problems = verify.verify(path, results_only=args.results_only)
    verdict, problem_kind = (
        ("every clause passed", "not passed")
        if args.results_only
        else ("certifies", "not certifying")
    )
    for problem in problems:
        print(f"{problem_kind}: {problem}")
    print(f"{args.file}: " + (verdict if not problems else f"{len(problems)} problem(s)"))
    return 0 if not problems else 1


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(prog="convoy-conformance", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("binaries", help="find or build the local provider's binaries")
    build.add_argument("--kube-version", help="Kubernetes version, e.g. 1.36.3")
    build.add_argument("--etcd-version", help="etcd version, e.g. 3.6.16")
    rules = commands.add_parser(
        "rules", help="the rule catalog: each rule's clauses and the tests of each clause"
    )
    rules.add_argument("--json", action="store_true", help="machine-readable output")
    checker = commands.add_parser(
        "verify-report",
        help="check a report (or a submission directory) against this kit and that it certifies",
    )
    checker.add_argument("file", help="conformance-report.yaml, or a submission directory")
    checker.add_argument(
        "--results-only",
        action="store_true",
        help="only check that every clause passed or is left to a certifying phase (a "
        "development run: timing, metadata and phases aside)",
    )
    mutants = commands.add_parser("mutants", help="list the mutants, or kill them (--run)")
    mutants.add_argument("--json", action="store_true", help="machine-readable list")
    mutants.add_argument("--run", action="store_true", help="run the kill run")
    mutants.add_argument("--only", nargs="*", help="these mutants only")
    mutants.add_argument(
        "--tests",
        nargs="+",
        help="run these tests (paths or node IDs) against every mutant, the baseline and the "
        "variants, instead of each mutant's clause tests: the kill table of one part",
    )
    mutants.add_argument(
        "--parallel",
        type=int,
        default=kill_run.MUTANT_RUNS_AT_ONCE,
        help="mutant runs at a time",
    )
    mutants.add_argument(
        "--workers",
        type=int,
        default=kill_run.MUST_PASS_WORKERS // 2,
        help="xdist workers of each run of the whole suite (the baseline and the variants); "
        f"they run {kill_run.MUST_PASS_WORKERS} workers' worth at a time",
    )
    mutants.add_argument(
        "--each-variant",
        action="store_true",
        help="also run each benign variant alone (by default only the combined one runs, "
        "which has them all)",
    )
    mutants.add_argument(
        "--no-reuse-control-planes",
        dest="reuse_control_planes",
        action="store_false",
        help="with --cluster=local, each mutant run starts a control plane of its own instead "
        "of reusing one of --parallel that the kill run keeps (conformance.lanes)",
    )
    mutants.add_argument("--workdir", default="reports/mutants", help="logs and JUnit files")
    mutants.add_argument(
        "--long",
        action="store_true",
        help="also the mutants only the long phase of a certifying run kills (40 minutes each)",
    )
    commands.add_parser(
        "run",
        help="run the conformance suite; other arguments go to pytest (--in-cluster: as a Job "
        "in the cluster, see docs/certification.md)",
        add_help=False,
    )
    suite_image = commands.add_parser(
        "suite-image", help="build the suite's image for `run --in-cluster` (Docker)"
    )
    suite_image.add_argument("--tag", required=True, help="the image to build")
    suite_image.add_argument(
        "--base",
        help="the reference controller's image (the repository's Dockerfile); default: build it",
    )
    suite_image.add_argument("--kubectl", help="the kubectl binary to put in (default: PATH's)")
    certify = commands.add_parser(
        "certify",
        help="a certifying run: both phases (the controller as shipped, then the long phase); "
        "other arguments go to pytest",
    )
    certify.add_argument("--report-dir", default="reports", help="where the report goes")
    certify.add_argument("--workers", type=int, default=8, help="xdist workers of phase 1")
    certify.add_argument(
        "--long-workers", type=int, default=3, help="xdist workers of the long phase"
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
    if args.command == "certify":
        return _certify(args, extra)
    if args.command == "suite-image":
        return _suite_image(args)
    return _run(args, extra)


if __name__ == "__main__":
    sys.exit(main())
