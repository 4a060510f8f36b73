"""verify-report: does a report, or a submission directory, hold up against this kit?

In the spirit of Kubernetes conformance's submission checks. A report must have its shape, every
clause passed, and match the kit that checks it: the suite version it names is this one, the
digest of the suite's own files is this kit's, its rules, clauses and the tests of each clause
are this suite's (none missing, none extra), and the JUnit file beside it agrees with it test by
test. A certifying report also names a Kubernetes minor the kit supports. A submission directory
(reports/<suite version>/<organization>-<project>/) holds the report, the JUnit file and a
README with a Reproduce section. Every problem names the file and the field.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

from conformance.certification import provenance
from conformance.certification.report import (
    API_VERSION,
    IMPLEMENTATION_FIELDS,
    INTEGRITY,
    KIND,
    PHASE_IDENTITY,
    PHASES,
    REPORT_FILES,
    content_digest,
    file_digest,
    reference_named_otherwise,
)
from conformance.document import catalog

#: What a development run may leave a clause at: passed, or left to a certifying run's phase.
RESULTS_ONLY = ("passed", "not-in-profile")
#: The report's results as JUnit can tell them.
AS_JUNIT = {"not-supported": "skipped", "not-in-profile": "skipped"}
REQUIRED_FIELDS = (
    "date",
    "suiteVersion",
    "provenance",
    "document",
    "implementation",
    "environment",
    "options",
    "timing",
    "phases",
    "certifying",
    "rules",
)
README = "README.md"
REPRODUCE = re.compile(r"^#+\s*Reproduce\b", re.MULTILINE | re.IGNORECASE)
#: Tests by clause ID, as a suite collects them.
Expected = dict[str, list[str]]


@functools.cache
def this_suite() -> Expected:
    """The tests of each clause in this kit's suite (collected in a process of its own; -P: a
    package of the working directory, a vendor's own `conformance/`, must not shadow the kit)."""
    argv = [sys.executable, "-P", "-m", "conformance.cli", "rules", "--json"]
    listed = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    return {c["id"]: c["tests"] for rule in listed["rules"] for c in rule["clauses"]}


def test_key(nodeid: str) -> str:
    """A test's name wherever the suite is installed: its module's file name onwards."""
    path, _, rest = nodeid.partition("::")
    return f"{Path(path).name}::{rest}"


def verify(
    path: Path, *, results_only: bool = False, expected: Expected | None = None
) -> list[str]:
    """Problems of the report at `path`; empty when it certifies (`results_only`: when every
    clause passed or was left to a certifying run's phase, a development run's check).
    `expected`: the tests of each clause (default: this kit's suite)."""
    try:
        report = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        return [f"{path}: cannot read it: {error}"]
    if not isinstance(report, dict):
        return [f"{path}: not a YAML mapping"]
    if (report.get("apiVersion"), report.get("kind")) != (API_VERSION, KIND):
        return [f"{path}: apiVersion/kind must be {API_VERSION}/{KIND}"]
    rules = report.get("rules") or []
    problems = [
        f"{path}: {p}"
        for p in clause_problems(rules, RESULTS_ONLY if results_only else ("passed",))
    ]
    problems += kit_problems(report, path)
    problems += test_problems(rules, path, this_suite() if expected is None else expected)
    problems += junit_problems(report, path, path.parent / "junit.xml")
    problems += integrity_problems(report, path, path.parent / "junit.xml")
    if not results_only:
        problems += certifying_problems(report, path)
    return problems


def integrity_problems(report: dict[str, Any], path: Path, junit: Path) -> list[str]:
    """The report and its JUnit file are as the run wrote them (report.seal): an edit of
    either, a result changed or a measurement dropped, shows as a digest that differs."""
    seal = report.get(INTEGRITY)
    if not isinstance(seal, dict) or "report" not in seal:
        return [f"{path}: {INTEGRITY} is missing: the run seals its report (report.seal)"]
    problems = []
    if seal["report"] != content_digest(report):
        problems.append(
            f"{path}: {INTEGRITY}.report: the report's content is not what the run wrote "
            "(edited, reformatted or merged by hand after the run)"
        )
    if "junit" in seal and junit.exists() and seal["junit"] != file_digest(junit):
        problems.append(
            f"{junit}: not the JUnit file the run wrote beside {path.name} ({INTEGRITY}.junit)"
        )
    return problems


def clause_problems(rules: list[dict[str, Any]], allowed: tuple[str, ...]) -> list[str]:
    by_id = {r.get("id"): r for r in rules}
    problems = []
    for rule in catalog.RULES:
        if rule.id not in by_id:
            problems.append(f"rules: rule {rule.id} is missing")
            continue
        results = {c.get("id"): c.get("result") for c in by_id[rule.id].get("clauses") or []}
        for clause in rule.clauses:
            if clause.id not in results:
                problems.append(f"rules[{rule.id}].clauses: clause {clause.id} is missing")
            elif results[clause.id] not in allowed:
                problems.append(f"rules[{rule.id}].clauses[{clause.id}]: {results[clause.id]}")
    extra = sorted(str(rule) for rule in set(by_id) - set(catalog.BY_ID))
    return problems + [f"rules: {rule} is no rule of this suite" for rule in extra]


def kit_problems(report: dict[str, Any], path: Path) -> list[str]:
    """The report was made by this kit: its version and the digest of its suite's files."""
    problems = []
    mine = provenance.suite_version()
    if report.get("suiteVersion") != mine:
        problems.append(
            f"{path}: suiteVersion {report.get('suiteVersion')!r}: this is convoy-conformance "
            f"{mine}; verify a report with the kit that made it"
        )
    digest, ours = (report.get("provenance") or {}).get("suiteDigest"), provenance.suite_digest()
    if digest != ours:
        problems.append(
            f"{path}: provenance.suiteDigest {digest!r} is not the digest of this kit's suite "
            f"files ({ours}): the suite that ran was not this one"
        )
    return problems


def test_problems(rules: list[dict[str, Any]], path: Path, expected: Expected) -> list[str]:
    """Each clause lists exactly the tests the suite has for it."""
    problems = []
    for rule in rules:
        for clause in rule.get("clauses") or []:
            if clause.get("id") not in expected:
                continue  # clause_problems names it
            field = f"rules[{rule.get('id')}].clauses[{clause['id']}].tests"
            listed = {test_key(t.get("name", "")) for t in clause.get("tests") or []}
            wanted = {test_key(name) for name in expected[clause["id"]]}
            problems += [f"{path}: {field}: {name} is missing" for name in sorted(wanted - listed)]
            problems += [
                f"{path}: {field}: {name} is no test of this clause"
                for name in sorted(listed - wanted)
            ]
    return problems


def junit_outcomes(junit: Path) -> dict[str, str]:
    """Each test case of a JUnit file by test_key, with its outcome."""
    outcomes = {}
    for case in ET.parse(junit).iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        module = next(
            (i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1
        )
        key = "::".join([f"{parts[module]}.py", *parts[module + 1 :], case.get("name") or ""])
        found = [kind for kind in ("failure", "error", "skipped") if case.find(kind) is not None]
        outcomes[key] = {"failure": "failed"}.get(found[0], found[0]) if found else "passed"
    return outcomes


def junit_problems(report: dict[str, Any], path: Path, junit: Path) -> list[str]:
    """The JUnit file of the run's last phase agrees with the report, test by test."""
    if not junit.exists():
        return [f"{junit}: missing (a run writes it beside its report)"]
    try:
        outcomes = junit_outcomes(junit)
    except ET.ParseError as error:
        return [f"{junit}: not a JUnit file: {error}"]
    last = ((report.get("phases") or [{}])[-1]).get("name")
    tests = {test_key(t.get("name", "")): t for t in report.get("tests") or []}
    problems = []
    for key, test in tests.items():
        if (test.get("phase") or "single") != last:
            continue  # an earlier phase's test: that phase's JUnit file had it
        if key not in outcomes:
            problems.append(f"{path}: tests[{key}] is not in {junit.name}")
            continue
        said = AS_JUNIT.get(test.get("result"), test.get("result"))
        if outcomes[key] != said:
            problems.append(f"{junit}: {key} {outcomes[key]}, but {path.name} tests[{key}] {said}")
    problems += [
        f"{junit}: {key} is not in {path.name} tests"
        for key in sorted(outcomes.keys() - tests.keys())
    ]
    return problems


def certifying_problems(report: dict[str, Any], path: Path) -> list[str]:
    problems = [f"{path}: {field} is missing" for field in REQUIRED_FIELDS if field not in report]
    implementation = report.get("implementation") or {}
    problems += [
        f"{path}: implementation.{f} is empty"
        for f in IMPLEMENTATION_FIELDS
        if not implementation.get(f)
    ]
    phases = [p.get("name") for p in report.get("phases") or []]
    if "phases" in report and phases != list(PHASES):
        problems.append(f"{path}: phases: {phases}, a certifying run has {list(PHASES)}")
    problems += phase_identity_problems(report.get("phases") or [], path)
    reference = reference_named_otherwise(report.get("options") or {}, implementation)
    problems += [f"{path}: options.convoyInstall: {reference}"] if reference else []
    version = str((report.get("environment") or {}).get("kubernetesVersion") or "")
    supported = provenance.supported_minors()
    if provenance.minor_of(version) not in supported:
        problems.append(
            f"{path}: environment.kubernetesVersion {version or '(none)'}: this kit supports "
            f"Kubernetes {', '.join(supported)}"
        )
    if report.get("certifying") is not True:
        reasons = "; ".join(report.get("nonCertifyingReasons") or ["no reason given"])
        problems.append(f"{path}: certifying is not true: {reasons}")
    return problems


def phase_identity_problems(phases: list[dict[str, Any]], path: Path) -> list[str]:
    """Every phase ran on the same kind of cluster and Kubernetes version, against the same
    controller (its images, and the digests its pods ran)."""
    problems = []
    for field in PHASE_IDENTITY:
        seen = {p.get("name"): p.get(field) for p in phases}
        if len({repr(value) for value in seen.values()}) > 1 or None in seen.values():
            said = "; ".join(f"{name}: {value}" for name, value in seen.items())
            problems.append(f"{path}: phases[*].{field}: the phases disagree or omit it ({said})")
    return problems


def submission_name(implementation: dict[str, Any]) -> str:
    """<organization>-<project>, lower case, spaces as dashes."""
    parts = (implementation.get("organization") or "", implementation.get("project") or "")
    return "-".join(re.sub(r"[^a-z0-9.]+", "-", part.lower()).strip("-") for part in parts)


def verify_submission(directory: Path, *, expected: Expected | None = None) -> list[str]:
    """A submission directory, whole: its place, its files, and its report."""
    report_path = directory / REPORT_FILES[0]
    needed = [report_path, directory / "junit.xml", directory / README]
    problems = [f"{directory}: {p.name} is missing" for p in needed if not p.exists()]
    if problems:
        return problems
    readme = (directory / README).read_text()
    if not REPRODUCE.search(readme):
        problems.append(f"{directory / README}: no Reproduce section (## Reproduce)")
    report = yaml.safe_load(report_path.read_text()) or {}
    want = Path(str(report.get("suiteVersion"))) / submission_name(
        report.get("implementation") or {}
    )
    if Path(directory.parent.name) / directory.name != want:
        problems.append(
            f"{directory}: a submission of this report lives in reports/{want}/ "
            "(suiteVersion, implementation.organization and .project)"
        )
    return problems + verify(report_path, expected=expected)
