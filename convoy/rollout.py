"""Rollouts under spec.failurePolicy: phases, the health timeout, the rollback target.

docs/api-reference.md ("failurePolicy and rollouts"). status.rollout is
{phase, renderRef, startedAt}. The render to roll back to is the lastSuccessful render when the
rollout started; its objects are kept in memory, so a restart of the controller turns a rollback
into Failed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Any

from convoy import synctime
from convoy.clock import Clock
from convoy.policy import FailurePolicy
from convoy.render import Render
from convoy.renders import RenderMemory

Obj = dict[str, Any]
#: A scheduled check lands this much after the timeout, so that it finds the timeout passed.
_MARGIN = 0.05


class Phase(StrEnum):
    PROGRESSING = "Progressing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ROLLED_BACK = "RolledBack"


class Rollouts:
    """Rollout bookkeeping for every Release (thread-safe)."""

    def __init__(self, clock: Clock, renders: RenderMemory) -> None:
        self._clock = clock
        self._renders = renders
        self._lock = threading.Lock()
        #: Release key -> (renderRef of its rollout, the render to roll back to)
        self._previous: dict[str, tuple[str, Render]] = {}

    def check(
        self,
        key: str,
        status: Obj,
        policy: FailurePolicy,
        healthy: bool,
        roll_back: Callable[[Render], None] | None,
    ) -> float | None:
        """Step 2 of a reconcile: end a Progressing rollout that is Healthy or timed out.

        `healthy`: the inventory says the rollout's render is Healthy. `roll_back` applies a
        render (and may raise); None in manual mode, which applies only after a /sync: a
        rollout that times out there ends Failed, whatever its action. Returns the seconds
        until the timeout, while Progressing.
        """
        rollout = status.get("rollout")
        if not rollout or rollout["phase"] != Phase.PROGRESSING:
            return None
        if healthy:
            status["rollout"] = {**rollout, "phase": Phase.SUCCEEDED.value}
            return None
        remaining = self._remaining(rollout, policy)
        if remaining > 0:
            return remaining + _MARGIN
        rolls_back = policy.rollback and roll_back is not None
        previous = self._rollback_target(key, rollout["renderRef"]) if rolls_back else None
        if previous is None or roll_back is None:
            status["rollout"] = {**rollout, "phase": Phase.FAILED.value}
            return None
        roll_back(previous)
        status["rollout"] = {**rollout, "phase": Phase.ROLLED_BACK.value}
        return None

    def start_if_new(self, key: str, status: Obj, ref: str, forced: bool) -> bool:
        """Step 9: a new Progressing rollout for a new render, or for any render when forced.
        Returns whether it started one."""
        rollout = status.get("rollout")
        if rollout and rollout["renderRef"] == ref and not forced:
            return False
        status["rollout"] = {
            "phase": Phase.PROGRESSING.value,
            "renderRef": ref,
            "startedAt": synctime.format_sync_time(self._clock.wall(), precise=True),
        }
        previous = self._renders.get(key, (status.get("lastSuccessful") or {}).get("renderRef"))
        with self._lock:
            # Rolling back to the render being rolled out would change nothing: no target then.
            if previous is None or previous.ref == ref:
                self._previous.pop(key, None)
            else:
                self._previous[key] = (ref, previous)
        return True

    def forget(self, key: str) -> None:
        with self._lock:
            self._previous.pop(key, None)

    def _remaining(self, rollout: Obj, policy: FailurePolicy) -> float:
        started: datetime = synctime.parse_status_time(rollout["startedAt"])
        elapsed = (self._clock.wall() - started).total_seconds()
        return policy.health_timeout - elapsed

    def _rollback_target(self, key: str, ref: str) -> Render | None:
        with self._lock:
            found = self._previous.get(key)
        return found[1] if found and found[0] == ref else None


def rolled_back_hold(status: Obj, ref: str) -> str | None:
    """Step 6: the message of the hold after a rollback, or None when there is no hold."""
    rollout = status.get("rollout") or {}
    if rollout.get("phase") != Phase.ROLLED_BACK or rollout.get("renderRef") != ref:
        return None
    back_to = (status.get("lastSuccessful") or {}).get("renderRef")
    return (
        f"render {ref} failed its health check and was rolled back to render {back_to}; "
        "held until a new render or a forced /sync"
    )
