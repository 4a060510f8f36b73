"""verify-report against this kit: a report matches its suite (version, digest, rules, clauses,
the tests of each clause), the JUnit file beside it and a supported Kubernetes minor; a
submission directory is checked whole. Each refusal names the file and the field."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.certification import provenance, report, verify
from conformance.document import catalog

Obj = dict[str, Any]
ORGANIZATION, PROJECT = "Vendor Example", "convoy-like"


@pytest.fixture(scope="module")
def expected() -> verify.Expected:
    """This kit's suite, collected once (what verify-report checks against by default)."""
    return verify.this_suite()


def certifying_report(expected: verify.Expected) -> Obj:
    """What a certifying run of this suite writes: every test of every clause passed."""
    clauses_of: dict[str, list[str]] = {}
    for clause, tests in expected.items():
        for name in tests:
            clauses_of.setdefault(name, []).append(clause)
    return {
        "apiVersion": report.API_VERSION,
        "kind": report.KIND,
        "date": "2026-12-01T00:00:00Z",
        "suiteVersion": provenance.suite_version(),
        "provenance": provenance.provenance(),
        "document": {},
        "environment": {"kubernetesVersion": "v1.36.3"},
        "options": {"convoyInstall": "none"},
        "timing": {},
        "phases": [
            {
                "name": name,
                "provider": "kind",
                "kubernetesVersion": "v1.36.3",
                "controller": [f"manager=vendor.example/convoy-like:1.0@sha256:{'a' * 64}"],
                "nonCertifyingReasons": [],
            }
            for name in report.PHASES
        ],
        "implementation": {f: "x" for f in report.IMPLEMENTATION_FIELDS}
        | {"organization": ORGANIZATION, "project": PROJECT},
        "certifying": True,
        "nonCertifyingReasons": [],
        "rules": [
            {
                "id": rule.id,
                "result": "passed",
                "clauses": [
                    {
                        "id": c.id,
                        "result": "passed",
                        "tests": [{"name": n, "result": "passed"} for n in expected[c.id]],
                    }
                    for c in rule.clauses
                ],
            }
            for rule in catalog.RULES
        ],
        "tests": [
            {"name": name, "clauses": clauses, "result": "passed", "phase": "long"}
            for name, clauses in clauses_of.items()
        ],
    }


def junit(tests: list[Obj]) -> str:
    """The JUnit file pytest writes for these tests (its classname: module path, then class)."""
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite")
    for test in tests:
        path, *inner = test["name"].split("::")
        classname = ".".join([path.removesuffix(".py").replace("/", "."), *inner[:-1]])
        case = ET.SubElement(suite, "testcase", classname=classname, name=inner[-1])
        if test["result"] != "passed":
            ET.SubElement(case, {"failed": "failure"}.get(test["result"], test["result"]))
    return ET.tostring(root, encoding="unicode")


def write(directory: Path, written: Obj, junit_tests: list[Obj] | None = None) -> Path:
    """What a run writes: its JUnit file, then the report sealed with it (report.seal)."""
    directory.mkdir(parents=True, exist_ok=True)
    junit_path = directory / "junit.xml"
    junit_path.write_text(junit(written["tests"] if junit_tests is None else junit_tests))
    path = directory / "conformance-report.yaml"
    path.write_text(yaml.safe_dump(report.seal(written, junit_path)))
    return path


def test_a_certifying_report_of_this_suite_passes(
    tmp_path: Path, expected: verify.Expected
) -> None:
    assert verify.verify(write(tmp_path, certifying_report(expected)), expected=expected) == []


def first_test(r: Obj) -> Obj:
    return r["rules"][0]["clauses"][0]["tests"][0]


def rename_first_test(r: Obj) -> None:
    first_test(r)["name"] += "_renamed"


TAMPERED: list[tuple[str, Callable[[Obj], object], str]] = [
    (
        "rule removed",
        lambda r: r["rules"].pop(),
        "conformance-report.yaml: rules: rule BACK-6 is missing",
    ),
    (
        "clause removed",
        lambda r: r["rules"][0]["clauses"].pop(),
        "rules[MODE-1].clauses: clause MODE-1.changed is missing",
    ),
    ("test renamed", rename_first_test, "rules[MODE-1].clauses[MODE-1.unset].tests: "),
    (
        "clause not passed",
        lambda r: r["rules"][0]["clauses"][0].update(result="failed"),
        "rules[MODE-1].clauses[MODE-1.unset]: failed",
    ),
    (
        "digest changed",
        lambda r: r["provenance"].update(suiteDigest="sha256:" + "0" * 64),
        "provenance.suiteDigest 'sha256:000",
    ),
    (
        "other suite version",
        lambda r: r.update(suiteVersion="9.9.9"),
        "suiteVersion '9.9.9': this is convoy-conformance",
    ),
    (
        "unsupported minor",
        lambda r: r["environment"].update(kubernetesVersion="v1.20.15"),
        "environment.kubernetesVersion v1.20.15: this kit supports Kubernetes 1.35",
    ),
    (
        "one phase",
        lambda r: r["phases"].pop(),
        "phases: ['shipped'], a certifying run has ['shipped', 'long']",
    ),
    (
        "no contact",
        lambda r: r["implementation"].update(contact=""),
        "implementation.contact is empty",
    ),
    ("not certifying", lambda r: r.update(certifying=False), "certifying is not true"),
    (
        "the reference controller under a vendor's name",
        lambda r: r["options"].update(convoyInstall="reference"),
        "options.convoyInstall: the suite ran its own reference controller "
        "(--convoy-install=reference), not Vendor Example's convoy-like",
    ),
    (
        "phases against two controllers",
        lambda r: r["phases"][1].update(controller=["manager=vendor.example/other:2@sha256:b"]),
        "phases[*].controller: the phases disagree or omit it",
    ),
    (
        "phases on two Kubernetes versions",
        lambda r: r["phases"][0].update(kubernetesVersion="v1.35.2"),
        "phases[*].kubernetesVersion: the phases disagree or omit it (shipped: v1.35.2",
    ),
    (
        "a phase that says nothing of its cluster",
        lambda r: r["phases"][0].pop("provider"),
        "phases[*].provider: the phases disagree or omit it",
    ),
    ("other kind", lambda r: r.update(kind="Other"), "apiVersion/kind must be"),
]


@pytest.mark.parametrize(
    ("change", "problem"), [t[1:] for t in TAMPERED], ids=[t[0] for t in TAMPERED]
)
def test_a_tampered_report_is_refused_naming_the_field(
    tmp_path: Path, expected: verify.Expected, change: Callable[[Obj], object], problem: str
) -> None:
    tampered = certifying_report(expected)
    change(tampered)
    problems = verify.verify(
        write(tmp_path, tampered, certifying_report(expected)["tests"]), expected=expected
    )
    assert any(problem in p for p in problems), problems


def test_a_junit_file_that_disagrees_is_refused_test_by_test(
    tmp_path: Path, expected: verify.Expected
) -> None:
    written = certifying_report(expected)
    junit_tests = copy.deepcopy(written["tests"])
    junit_tests[0]["result"] = "failed"
    extra = {**junit_tests[1], "name": "conformance/suite/test_mode.py::test_not_in_the_report"}
    problems = verify.verify(
        write(tmp_path, written, [*junit_tests[1:], junit_tests[0], extra]), expected=expected
    )
    key = verify.test_key(written["tests"][0]["name"])
    assert (
        f"{tmp_path / 'junit.xml'}: {key} failed, but conformance-report.yaml tests[{key}] passed"
        in problems
    )
    unknown = "test_mode.py::test_not_in_the_report"
    assert (
        f"{tmp_path / 'junit.xml'}: {unknown} is not in conformance-report.yaml tests" in problems
    )
    (tmp_path / "junit.xml").unlink()
    assert (
        f"{tmp_path / 'junit.xml'}: missing (a run writes it beside its report)"
        in verify.verify(tmp_path / "conformance-report.yaml", expected=expected)
    )


def development_report(expected: verify.Expected, result: str) -> Obj:
    edited = certifying_report(expected)
    edited.update(certifying=False, nonCertifyingReasons=["timing beyond the maximum"])
    edited["rules"][0]["clauses"][0].update(result=result)
    return edited


@pytest.mark.parametrize("result", ["passed", "not-in-profile"])
def test_results_only_accepts_a_development_run_whose_clauses_passed(
    tmp_path: Path, expected: verify.Expected, result: str
) -> None:
    path = write(tmp_path, development_report(expected, result))
    assert verify.verify(path, results_only=True, expected=expected) == []
    assert verify.verify(path, expected=expected) != []


@pytest.mark.parametrize("result", ["skipped", "failed", "error", "not-supported"])
def test_results_only_refuses_a_clause_that_did_not_pass(
    tmp_path: Path, expected: verify.Expected, result: str
) -> None:
    """An all-skipped run is green to pytest; not to the report's check."""
    path = write(tmp_path, development_report(expected, result))
    assert verify.verify(path, results_only=True, expected=expected) == [
        f"{path}: rules[MODE-1].clauses[MODE-1.unset]: {result}"
    ]


def submission(tmp_path: Path, expected: verify.Expected, readme: str = "## Reproduce\n") -> Path:
    directory = tmp_path / "reports" / provenance.suite_version() / "vendor-example-convoy-like"
    write(directory, certifying_report(expected))
    (directory / "README.md").write_text(f"# convoy-like\n\n{readme}convoy-conformance certify\n")
    return directory


def test_a_submission_directory_is_checked_whole(tmp_path: Path, expected: verify.Expected) -> None:
    directory = submission(tmp_path, expected)
    assert verify.verify_submission(directory, expected=expected) == []
    moved = directory.rename(directory.with_name("someone-else"))
    assert any("lives in reports/" in p for p in verify.verify_submission(moved, expected=expected))
    (moved / "README.md").write_text("# convoy-like\n")
    assert (
        f"{moved / 'README.md'}: no Reproduce section (## Reproduce)"
        in verify.verify_submission(moved, expected=expected)
    )
    (moved / "junit.xml").unlink()
    assert verify.verify_submission(moved, expected=expected) == [f"{moved}: junit.xml is missing"]


def test_a_workspace_package_named_conformance_does_not_shadow_the_kit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, expected: verify.Expected
) -> None:
    """verify-report runs in a vendor's workspace (the action's last step): the suite it
    collects is the kit's, not a `conformance/` package of the workspace's own."""
    (tmp_path / "conformance").mkdir()
    (tmp_path / "conformance" / "__init__.py").write_text("raise SystemExit('shadowed')\n")
    monkeypatch.chdir(tmp_path)
    verify.this_suite.cache_clear()
    try:
        assert verify.this_suite() == expected
    finally:
        verify.this_suite.cache_clear()


def test_the_reference_controllers_report_names_the_reference(
    tmp_path: Path, expected: verify.Expected
) -> None:
    written = certifying_report(expected)
    written["options"]["convoyInstall"] = "reference"
    written["implementation"].update(report.REFERENCE_IMPLEMENTATION)
    assert verify.verify(write(tmp_path, written), expected=expected) == []


def edit(path: Path, change: Callable[[str], str]) -> None:
    path.write_text(change(path.read_text()))


@pytest.mark.parametrize(
    ("file", "change", "problem"),
    [
        (
            "conformance-report.yaml",
            lambda text: text.replace("result: failed", "result: passed"),
            "integrity.report: the report's content is not what the run wrote",
        ),
        (
            "conformance-report.yaml",
            lambda text: text.replace("measured: 1.5", "measured: 1.0"),
            "integrity.report: the report's content is not what the run wrote",
        ),
        (
            "junit.xml",
            lambda text: text.replace(" /><testcase", "><skipped /></testcase><testcase", 1),
            "junit.xml: not the JUnit file the run wrote beside conformance-report.yaml",
        ),
    ],
    ids=["a result", "a measurement", "the junit file"],
)
def test_a_report_or_junit_file_edited_after_the_run_is_refused(
    tmp_path: Path,
    expected: verify.Expected,
    file: str,
    change: Callable[[str], str],
    problem: str,
) -> None:
    """The run seals its report with digests of the report and of the JUnit file: an edit of
    either after the run (a failure made a pass, a measurement made to fit) shows."""
    written = certifying_report(expected)
    first_test(written)["result"] = "failed"
    first_test(written)["measurements"] = [{"expected": 1.0, "measured": 1.5}]
    path = write(tmp_path, written)
    before = verify.integrity_problems(
        yaml.safe_load(path.read_text()), path, tmp_path / "junit.xml"
    )
    assert before == []
    edit(tmp_path / file, change)
    problems = verify.verify(path, expected=expected)
    assert any(problem in p for p in problems), problems


def test_a_report_without_its_seal_is_refused(tmp_path: Path, expected: verify.Expected) -> None:
    path = write(tmp_path, certifying_report(expected))
    edit(path, lambda text: yaml.safe_dump({**yaml.safe_load(text), "integrity": None}))
    assert f"{path}: integrity is missing: the run seals its report (report.seal)" in (
        verify.verify(path, expected=expected)
    )
