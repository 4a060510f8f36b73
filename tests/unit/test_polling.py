"""poll_until: the suite's one wait."""

from __future__ import annotations

import time
from itertools import count

import pytest

from conformance.polling import poll_until, quiet_period


def test_returns_the_first_truthy_result() -> None:
    calls = count(1)
    assert (
        poll_until(
            lambda: next(calls) >= 3 and "ready",
            timeout=5,
            step=0.01,
            failure=lambda: AssertionError("never"),
        )
        == "ready"
    )
    assert next(calls) == 4


def test_raises_the_failure_after_a_last_check_at_the_deadline() -> None:
    checks: list[float] = []
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="seen 0"):
        poll_until(
            lambda: checks.append(time.monotonic() - started),
            timeout=0.3,
            step=0.2,
            failure=lambda: TimeoutError("seen 0"),
        )
    assert checks[-1] == pytest.approx(0.3, abs=0.05), checks


def test_a_raising_check_fails_at_once() -> None:
    def died() -> bool:
        raise RuntimeError("child died")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="child died"):
        poll_until(died, timeout=10, step=1, failure=lambda: AssertionError("timeout"))
    assert time.monotonic() - started < 1


def test_a_quiet_period_checks_through_to_its_end() -> None:
    checks: list[float] = []
    started = time.monotonic()
    quiet_period(lambda: checks.append(time.monotonic() - started), seconds=0.3, step=0.1)
    assert len(checks) >= 3 and checks[-1] == pytest.approx(0.3, abs=0.05), checks


def test_a_check_that_raises_ends_the_quiet_period() -> None:
    def changed() -> None:
        raise AssertionError("stopped holding")

    with pytest.raises(AssertionError, match="stopped holding"):
        quiet_period(changed, seconds=10, step=1)
