"""The rule catalog is complete, its clauses are tested, and the suite names only clauses."""

from __future__ import annotations

import re

import pytest

from conformance import cli
from conformance.cli import SUITE_DIR
from conformance.document import catalog


@pytest.fixture(scope="module")
def coverage() -> catalog.Coverage:
    return catalog.coverage(str(SUITE_DIR))


def test_the_catalog_has_the_43_rules_of_the_document_once_each() -> None:
    ids = [rule.id for rule in catalog.RULES]
    assert len(ids) == 43 and len(set(ids)) == 43
    assert all(re.fullmatch(r"(MODE|AUTO|MAN|SYNC|FORCE|TRIG|REQ|INT|BACK)-\d+", i) for i in ids)
    assert all(rule.statement and rule.section in catalog.SECTIONS for rule in catalog.RULES)


def test_every_rule_has_clauses_named_after_it() -> None:
    for rule in catalog.RULES:
        assert rule.clauses, rule.id
        for clause in rule.clauses:
            assert re.fullmatch(rf"{re.escape(rule.id)}\.[A-Za-z0-9-]+", clause.id), clause.id
            assert clause.statement and clause.rule_id == rule.id
    assert len(catalog.CLAUSES) == sum(len(rule.clauses) for rule in catalog.RULES)


def test_every_reason_the_document_lists_is_a_clause_of_its_requeue_rule() -> None:
    """One clause per listed reason, in the document's order, and beside them only the
    clauses named here (REQ-1.manual: the same retries in manual mode; REQ-2.request-pending:
    the same waits with a /sync pending)."""
    for rule_id, reasons, besides in (
        ("REQ-1", catalog.TRANSIENT_REASONS, ["manual"]),
        ("REQ-2", catalog.NOT_TRANSIENT_REASONS, ["request-pending"]),
    ):
        assert [c.id for c in catalog.BY_ID[rule_id].clauses] == [
            f"{rule_id}.{name}" for name in [*reasons, *besides]
        ]


def test_every_clause_has_a_conformance_test(coverage: catalog.Coverage) -> None:
    assert coverage.uncovered == []


def test_every_conformance_test_names_a_clause(coverage: catalog.Coverage) -> None:
    assert coverage.untagged == []


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('"SYNC-99.x"', "unknown clause ID(s) ['SYNC-99.x']"),
        ('"SYNC-4"', "SYNC-4 is a rule: name its clauses (SYNC-4.same-second"),
    ],
    ids=["unknown", "bare-rule"],
)
def test_a_test_naming_no_clause_of_the_catalog_is_a_usage_error(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.clause({marker})
        def test_x():
            pass
        """
    )
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


@pytest.mark.parametrize(
    ("arg", "names_tests"),
    [
        ("conformance/suite", True),
        ("conformance/suite/test_mode.py", True),
        ("conformance/suite/test_mode.py::test_manual_mode_applies_nothing_without_sync", True),
        ("conformance", False),  # a directory without tests of its own
        ("docs", False),  # the value of `--report-dir docs`
        ("-q", False),
        ("absent/test_x.py", False),
        (" or ".join(["test_a_name_long_enough_for_a_long_expression"] * 8), False),  # -k's value
    ],
)
def test_run_takes_only_tests_for_the_tests_to_run(arg: str, names_tests: bool) -> None:
    """`convoy-conformance run --report-dir DIR` must still run the suite, not what DIR holds."""
    assert cli._names_tests(arg) is names_tests
