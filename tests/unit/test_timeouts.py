"""The per-test timeout, as pytest-timeout applies it under the suite's plugin."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conformance.timing import TEST_TIMEOUT

SLOW_SETUP = """
import time

import pytest


@pytest.fixture(scope="session")
def cluster_like():
    time.sleep(3)  # a cold cluster, image build and rollout, in miniature


def test_first(cluster_like):
    pass


def test_hangs():
    time.sleep(30)
"""


def test_the_timeout_counts_the_test_body_not_the_session_set_up(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(SLOW_SETUP)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "timeout=2")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*Timeout (>2.0s) from pytest-timeout*"])


SHOW_SETTINGS = """
def pytest_collection_finish(session):
    for item in session.items:
        mark = item.get_closest_marker("timeout")
        print("timeout mark:", mark.args, sorted(mark.kwargs.items()))
"""

PRINTS = """
def test_measures():
    print("retry 1 came after 1.003 s")
"""


def test_a_run_without_an_ini_file_has_the_suites_timeout_and_keeps_what_tests_print(
    pytester: pytest.Pytester,
) -> None:
    """The installed kit: no pyproject.toml, so nothing but the plugin bounds a hung test,
    and nothing but `convoy-conformance run` puts the measured figures into the JUnit file."""
    pytester.makeconftest(SHOW_SETTINGS)
    test = pytester.makepyfile(PRINTS)
    command = Path(sys.executable).parent / "convoy-conformance"
    result = pytester.run(command, "run", test.name, "--junitxml=junit.xml", "--report-dir=out")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"timeout mark: ({TEST_TIMEOUT},) [('func_only', True)]"])
    junit = (pytester.path / "junit.xml").read_text()
    assert "<system-out>" in junit and "retry 1 came after 1.003 s" in junit, junit


def test_a_timeout_the_run_sets_is_the_one_that_counts(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SHOW_SETTINGS)
    pytester.makepyfile(PRINTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--timeout=42")
    result.stdout.fnmatch_lines(["timeout mark: () [('func_only', True)]"])
