"""The per-test timeout, as pytest-timeout applies it under the suite's plugin."""

from __future__ import annotations

import pytest

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
