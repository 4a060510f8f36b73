"""The conformance report: what a run writes, and what verify-report accepts."""

from __future__ import annotations

import pytest
import yaml

from conformance.certification import report, verify
from conformance.document import catalog
from conformance.timing import LONG_RESYNC

#: A vendor's run: its implementation named, its controller not the suite's own reference one.
METADATA = [
    *(f"--implementation-{f}=x" for f in report.IMPLEMENTATION_FIELDS),
    "--convoy-install=none",
]


def run_inner(pytester: pytest.Pytester, body: str, *args: str) -> dict:
    pytester.makepyfile(body)
    pytester.runpytest_subprocess("--report-dir=out", "-p", "no:cacheprovider", *args)
    return yaml.safe_load((pytester.path / "out" / "conformance-report.yaml").read_text())


PASSING_AND_FAILING = """
import pytest

from conformance.certification import verdicts

@pytest.mark.clause("SYNC-4.same-second", "SYNC-4.next-second")
def test_passes():
    pass

@pytest.mark.clause("SYNC-5.not-on-failure")
def test_fails():
    assert False, "lastHandledSyncAt written after a failure"

@pytest.mark.clause("BACK-5.restart")
def test_not_supported():
    verdicts.not_supported("the suite cannot restart this controller")

@pytest.mark.clause("BACK-3.max")
def test_skipped_with_the_words_of_a_verdict():
    pytest.skip("not supported: certifying run only")

@pytest.mark.clause("SYNC-4.same-second")
def test_long():
    verdicts.certifying_only("the long phase checks it")

@pytest.mark.clause("BACK-6.cap")
def test_certifying_only():
    verdicts.certifying_only("the long phase checks it")
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_run_writes_yaml_junit_and_html_with_a_verdict_per_rule_and_clause(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    written = run_inner(pytester, PASSING_AND_FAILING, *METADATA, *workers)
    rules = {rule["id"]: rule for rule in written["rules"]}
    clauses = {c["id"]: c for rule in written["rules"] for c in rule["clauses"]}
    assert len(rules) == len(catalog.RULES) and len(clauses) == len(catalog.CLAUSES)
    assert rules["SYNC-4"]["result"] == "passed"  # its certifying-only skip is no verdict
    assert clauses["SYNC-4.same-second"]["result"] == "passed"
    assert rules["SYNC-5"]["result"] == "failed"
    failed = clauses["SYNC-5.not-on-failure"]
    assert failed["result"] == "failed"
    assert "lastHandledSyncAt written" in failed["tests"][0]["message"]
    assert clauses["SYNC-5.after-success"]["message"] == "no test of this clause ran"
    assert rules["BACK-5"]["result"] == "not-supported"
    # a verdict is the skip's type, not its words
    assert clauses["BACK-3.max"]["result"] == "skipped"
    profile = clauses["BACK-6.cap"]
    assert profile["result"] == "not-in-profile"
    assert "long phase" in profile["notInProfile"]
    assert any(r.startswith("BACK-6.cap not-in-profile") for r in written["nonCertifyingReasons"])
    assert written["certifying"] is False
    out = pytester.path / "out"
    assert (out / "junit.xml").exists()
    page = (out / "conformance-report.html").read_text()
    assert "NOT CERTIFYING" in page and "SYNC-5.not-on-failure" in page


MODEL_RUN = """
import json
import pytest
from conformance.certification.report import MODEL_RUN_PROPERTY

@pytest.mark.clause("SYNC-4.same-second")
def test_sequences(record_property):
    summary = {"profile": "ci", "seed": 7, "sequences": 10, "steps": 80, "restarts": False,
               "goalsReached": ["SYNC-4.same-second: a request"],
               "goalsMissed": ["BACK-6.ladder: a ladder"],
               "replay": "convoy-conformance run --model-profile=ci --model-seed=7"}
    record_property(MODEL_RUN_PROPERTY, json.dumps(summary))
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_model_based_runs_profile_seed_counts_and_goals_are_in_the_report(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    written = run_inner(pytester, MODEL_RUN, *workers)
    (test,) = written["tests"]
    assert test["modelBasedRun"]["seed"] == 7 and test["modelBasedRun"]["steps"] == 80
    page = (pytester.path / "out" / "conformance-report.html").read_text()
    assert "Model-based run" in page and "seed 7: 10 sequences, 80 steps, no restarts" in page
    assert "--model-seed=7" in page
    assert "reached 1 of the 2 cases they aim for; none reached: BACK-6.ladder: a ladder" in page


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["-k", "passes"], "tests selected with -k"),
        (["--timing", "reconcile=60"], "timing beyond the certifying maximum: reconcile=60"),
        ([], "implementation metadata missing"),
    ],
)
def test_selection_changed_tolerances_and_missing_metadata_do_not_certify(
    pytester: pytest.Pytester, args: list[str], reason: str
) -> None:
    extra = METADATA if "implementation" not in reason else []
    written = run_inner(pytester, PASSING_AND_FAILING, *extra, *args)
    assert any(reason in r for r in written["nonCertifyingReasons"]), written[
        "nonCertifyingReasons"
    ]


#: The inner suites' cluster, as the report records it (they start none).
ENVIRONMENT = """
@pytest.fixture(autouse=True, scope="session")
def environment(pytestconfig):
    from conformance.harness.stash import ENVIRONMENT
    pytestconfig.stash[ENVIRONMENT] = {"provider": "kind", "kubernetesVersion": "v1.36.3"}
"""


def every_clause_passing() -> str:
    """A suite with one passing test per clause; the certifying-only ones are long tests."""
    lines = ["import pytest", ENVIRONMENT]
    for number, clause in enumerate(catalog.CLAUSES.values()):
        if clause.certifying_only == catalog.LONG_PHASE:
            lines.append("@pytest.mark.long")
        lines += [f'@pytest.mark.clause("{clause.id}")', f"def test_{number}():", "    pass", ""]
    return "\n".join(lines)


def run_phase(pytester: pytest.Pytester, phase: str, out: str, *args: str) -> dict:
    pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-m",
        report.PHASES[phase],
        f"--certify-phase={phase}",
        f"--report-dir={out}",
        *METADATA,
        *args,
    )
    return yaml.safe_load((pytester.path / out / "conformance-report.yaml").read_text())


def test_the_two_phases_of_a_certifying_run_make_one_report_that_certifies(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(every_clause_passing())
    first = run_phase(pytester, "shipped", "shipped")
    assert first["certifying"] is False
    assert any("only the shipped phase" in r for r in first["nonCertifyingReasons"])
    both = run_phase(
        pytester,
        "long",
        "out",
        "--previous-phase=shipped/conformance-report.yaml",
        "--timing",
        f"controller_resync={LONG_RESYNC:g}",
    )
    assert both["nonCertifyingReasons"] == []
    assert [p["name"] for p in both["phases"]] == ["shipped", "long"]
    module = next(pytester.path.glob("test_*.py")).name
    expected = {c: [f"{module}::test_{n}"] for n, c in enumerate(catalog.CLAUSES)}
    path = pytester.path / "out" / "conformance-report.yaml"
    assert verify.verify(path, expected=expected) == []


def test_a_long_phase_without_the_shipped_one_does_not_certify(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(every_clause_passing())
    alone = run_phase(pytester, "long", "out", "--timing", f"controller_resync={LONG_RESYNC:g}")
    assert any("must follow the phases ['shipped']" in r for r in alone["nonCertifyingReasons"])
    assert alone["certifying"] is False


def test_the_terminal_tells_the_verdict_its_reasons_and_the_report_files(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(every_clause_passing())
    clauses = len(catalog.CLAUSES)
    long_only = sum(c.certifying_only == catalog.LONG_PHASE for c in catalog.CLAUSES.values())
    shipped = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-m",
        report.PHASES["shipped"],
        "--certify-phase=shipped",
        "--report-dir=shipped",
        *METADATA,
    )
    shipped.stdout.fnmatch_lines(
        [
            f"convoy conformance: NOT CERTIFYING ({clauses} clauses: {clauses - long_only} "
            f"passed, {long_only} skipped)",
            "  - only the shipped phase of the certifying run ran so far",
            "  report: shipped/conformance-report.yaml, shipped/conformance-report.html, "
            "shipped/junit.xml",
        ]
    )
    both = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-m",
        report.PHASES["long"],
        "--certify-phase=long",
        "--report-dir=out",
        "--previous-phase=shipped/conformance-report.yaml",
        "--timing",
        f"controller_resync={LONG_RESYNC:g}",
        *METADATA,
    )
    both.stdout.fnmatch_lines(
        [f"convoy conformance: CERTIFYING ({clauses} clauses: {clauses} passed)"]
    )


def test_rerun_failed_runs_exactly_what_the_report_lists_as_failed(
    pytester: pytest.Pytester,
) -> None:
    first = run_inner(pytester, PASSING_AND_FAILING, *METADATA)
    failed = {t["name"] for t in first["tests"] if t["result"] in ("failed", "error")}
    assert failed == {
        "test_rerun_failed_runs_exactly_what_the_report_lists_as_failed.py::test_fails"
    }
    pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--report-dir=again",
        "--rerun-failed=out/conformance-report.yaml",
        *METADATA,
    )
    again = yaml.safe_load((pytester.path / "again" / "conformance-report.yaml").read_text())
    assert {t["name"] for t in again["tests"]} == failed
    assert (
        "a rerun of the tests out/conformance-report.yaml lists as failed"
        in again["nonCertifyingReasons"]
    )
    junit = (pytester.path / "again" / "junit.xml").read_text()
    assert junit.count("<testcase") == 1


def test_rerun_failed_of_a_report_without_failures_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(every_clause_passing())
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--report-dir=out", *METADATA)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--rerun-failed=out/conformance-report.yaml"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--rerun-failed out/conformance-report.yaml: the report lists no failed test*"]
    )


def test_what_the_shipped_phase_did_stays_a_reason_in_the_last_report(
    pytester: pytest.Pytester,
) -> None:
    """A -k or a loosened tolerance in the first phase is no less a reason when the second
    phase is clean: the last report lists it, under the phase's name."""
    pytester.makepyfile(every_clause_passing())
    run_phase(pytester, "shipped", "shipped", "--timing", "reconcile=60")
    both = run_phase(
        pytester,
        "long",
        "out",
        "--previous-phase=shipped/conformance-report.yaml",
        "--timing",
        f"controller_resync={LONG_RESYNC:g}",
    )
    assert both["nonCertifyingReasons"] == [
        "phase shipped: timing beyond the certifying maximum: reconcile=60 (maximum 30)"
    ]
    assert both["certifying"] is False
