"""The rule catalog is complete, and the suite checks every rule it lists."""

from __future__ import annotations

import re

import pytest

from conformance import catalog
from conformance.cli import SUITE_DIR


@pytest.fixture(scope="module")
def coverage() -> catalog.Coverage:
    return catalog.coverage(str(SUITE_DIR))


def test_the_catalog_has_the_43_rules_of_the_document_once_each() -> None:
    ids = [rule.id for rule in catalog.RULES]
    assert len(ids) == 43 and len(set(ids)) == 43
    assert all(re.fullmatch(r"(MODE|AUTO|MAN|SYNC|FORCE|TRIG|REQ|INT|BACK)-\d+", i) for i in ids)
    assert all(rule.statement and rule.section in catalog.SECTIONS for rule in catalog.RULES)


def test_every_rule_has_a_conformance_test(coverage: catalog.Coverage) -> None:
    assert coverage.uncovered == []


def test_every_conformance_test_names_a_rule(coverage: catalog.Coverage) -> None:
    assert coverage.untagged == []


def test_a_test_naming_an_unknown_rule_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.rule("SYNC-99")
        def test_x():
            pass
        """
    )
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown rule ID(s) ['SYNC-99']" in result.stderr.str()
