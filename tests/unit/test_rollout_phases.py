"""Rollout bookkeeping under failurePolicy, on a FakeClock (pure logic, no cluster)."""

from __future__ import annotations

import pytest

from convoy.clock import FakeClock
from convoy.policy import FailurePolicy
from convoy.render import Render
from convoy.renders import RenderMemory
from convoy.rollout import Rollouts, rolled_back_hold

KEY = "ns/web"
OLD, NEW = Render((), "sha256:" + "1" * 64), Render((), "sha256:" + "2" * 64)
HALT, ROLLBACK = FailurePolicy(10.0, rollback=False), FailurePolicy(10.0, rollback=True)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def renders() -> RenderMemory:
    memory = RenderMemory()
    memory.remember(KEY, OLD)
    return memory


def started(rollouts: Rollouts, *, forced: bool = False) -> dict:
    """A status after the apply of NEW over OLD, with a new rollout."""
    status = {"lastSuccessful": {"renderRef": OLD.ref}}
    assert rollouts.start_if_new(KEY, status, NEW.ref, forced)
    status["lastSuccessful"] = {"renderRef": NEW.ref}
    return status


def no_rollback(render: Render) -> None:
    raise AssertionError(f"rolled back to {render.ref}")


def test_a_new_render_starts_a_progressing_rollout(clock, renders) -> None:
    status = started(Rollouts(clock, renders))
    assert status["rollout"]["phase"] == "Progressing"
    assert status["rollout"]["renderRef"] == NEW.ref
    assert status["rollout"]["startedAt"] == "2026-01-01T00:00:00.000000Z"


def test_the_same_render_starts_none_unless_forced(clock, renders) -> None:
    rollouts = Rollouts(clock, renders)
    status = started(rollouts)
    first = dict(status["rollout"])
    assert not rollouts.start_if_new(KEY, status, NEW.ref, forced=False)
    clock.step(3)
    status["rollout"] = {**first, "phase": "Failed"}
    assert rollouts.start_if_new(KEY, status, NEW.ref, forced=True)
    assert status["rollout"]["phase"] == "Progressing"
    assert status["rollout"]["startedAt"] == "2026-01-01T00:00:03.000000Z"


def test_healthy_in_time_succeeds(clock, renders) -> None:
    rollouts = Rollouts(clock, renders)
    status = started(rollouts)
    clock.step(4)
    remaining = rollouts.check(KEY, status, HALT, False, no_rollback)
    assert remaining == pytest.approx(6.05)
    assert rollouts.check(KEY, status, HALT, True, no_rollback) is None
    assert status["rollout"]["phase"] == "Succeeded"


def test_halt_fails_at_the_timeout(clock, renders) -> None:
    rollouts = Rollouts(clock, renders)
    status = started(rollouts)
    clock.step(10)
    rollouts.check(KEY, status, HALT, False, no_rollback)
    assert status["rollout"]["phase"] == "Failed"
    rollouts.check(KEY, status, HALT, True, no_rollback)
    assert status["rollout"]["phase"] == "Failed", "a Failed rollout stays Failed"


def test_rollback_applies_the_previous_render(clock, renders) -> None:
    rollouts = Rollouts(clock, renders)
    status = started(rollouts)
    applied: list[Render] = []
    clock.step(10)
    rollouts.check(KEY, status, ROLLBACK, False, applied.append)
    assert applied == [OLD]
    assert status["rollout"]["phase"] == "RolledBack"
    status["lastSuccessful"] = {"renderRef": OLD.ref}
    message = rolled_back_hold(status, NEW.ref)
    assert message and OLD.ref in message and NEW.ref in message
    assert rolled_back_hold(status, "sha256:" + "3" * 64) is None, "a new render ends the hold"


def test_rollback_without_a_previous_render_fails(clock) -> None:
    rollouts = Rollouts(clock, RenderMemory())  # nothing was applied before NEW
    status = started(rollouts)
    clock.step(10)
    rollouts.check(KEY, status, ROLLBACK, False, no_rollback)
    assert status["rollout"]["phase"] == "Failed"


def test_rollback_after_a_restart_fails(clock, renders) -> None:
    status = started(Rollouts(clock, renders))
    restarted = Rollouts(clock, RenderMemory())
    clock.step(10)
    restarted.check(KEY, status, ROLLBACK, False, no_rollback)
    assert status["rollout"]["phase"] == "Failed"
