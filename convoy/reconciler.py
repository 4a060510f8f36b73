"""One reconcile of one Release: decide, maybe dry-run, apply and prune, and say what happened.

The steps and their order are those of docs/api-reference.md ("Reconcile order"). Every
outcome is a reason on the Applied condition; the controller turns it into a requeue.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from convoy import apply, render, synctime
from convoy.api import ConditionType, Reason
from convoy.clock import Clock
from convoy.policy import Requests, SpecError, SyncPolicy
from convoy.targets import Target, TargetError, Targets

log = logging.getLogger(__name__)

Obj = dict[str, Any]
FAILURES = (SpecError, TargetError, render.RenderError, apply.ApplyError)


@dataclass(frozen=True)
class Outcome:
    """What the Applied condition says after a reconcile."""

    applied: bool
    reason: Reason
    message: str


@dataclass
class Result:
    """The outcome plus what the controller needs to requeue and to log."""

    outcome: Outcome
    policy: SyncPolicy | None
    status: Obj
    notes: list[str] = field(default_factory=list)


class Reconciler:
    def __init__(self, core_api: Any, targets: Targets, clock: Clock) -> None:
        self._core = core_api
        self._targets = targets
        self._clock = clock

    def reconcile(self, release: Obj) -> Result:
        status = dict(release.get("status") or {})
        result = Result(Outcome(False, Reason.INVALID_SPEC, ""), None, status)
        try:
            result.policy = SyncPolicy.of(release)
            requests = Requests.of(release)
            forced = requests.force_pending
            try:
                result.outcome = self._sync(release, result, requests, forced)
            finally:
                if forced:
                    # A forced request lasts one reconcile, whatever that reconcile's outcome.
                    status["lastHandledForceSyncAt"] = second(requests.force_at)
        except FAILURES as failure:
            result.outcome = Outcome(False, failure.reason, str(failure))
        set_condition(status, release, result.outcome, self._clock.wall())
        status["observedGeneration"] = release["metadata"].get("generation", 0)
        return result

    def _sync(self, release: Obj, result: Result, requests: Requests, forced: bool) -> Outcome:
        policy = result.policy
        assert policy is not None
        target = self._targets.for_release(release)
        current = render.render(self._core, release, scope_of=target.scope_of)
        result.status["renderRef"] = current.ref
        result.notes.append(f"render {short(current.ref)}")
        if not policy.automatic and not requests.sync_pending:
            return manual_without_request(result.status, current.ref)
        result.notes.append("automatic" if policy.automatic else "pending /sync")
        if forced:
            result.notes.append("forced: no dry run")
        else:
            apply.dry_run(target, list(current.objects))
        self._apply(target, result.status, current)
        if not policy.automatic:
            result.status["lastHandledSyncAt"] = second(requests.sync_at)
        return Outcome(True, Reason.APPLIED, f"Applied render {current.ref}")

    def _apply(self, target: Target, status: Obj, current: render.Render) -> None:
        applied = apply.apply(target, list(current.objects))
        apply.prune(target, status.get("appliedObjects") or [], applied)
        status["appliedObjects"] = applied
        status["lastSuccessful"] = {
            "renderRef": current.ref,
            "appliedAt": synctime.format_sync_time(self._clock.wall()),
        }


def manual_without_request(status: Obj, ref: str) -> Outcome:
    """Manual mode, nothing pending: report, apply nothing, run no dry run."""
    if (status.get("lastSuccessful") or {}).get("renderRef") == ref:
        return Outcome(
            True, Reason.APPLIED, f"Release is in sync with render {ref}; apply waits for /sync"
        )
    return Outcome(
        False,
        Reason.WAITING_FOR_SYNC,
        f"render {ref} differs from the last applied render; apply waits for /sync",
    )


def second(moment: datetime | None) -> str | None:
    return synctime.format_sync_time(moment) if moment else None


def short(ref: str) -> str:
    return ref.removeprefix("sha256:")[:12]


def set_condition(status: Obj, release: Obj, outcome: Outcome, now: datetime) -> None:
    """Set Applied; keep lastTransitionTime while the condition's status stays the same."""
    conditions = [c for c in status.get("conditions") or [] if c["type"] != ConditionType.APPLIED]
    previous = next(
        (c for c in status.get("conditions") or [] if c["type"] == ConditionType.APPLIED), None
    )
    value = "True" if outcome.applied else "False"
    changed = previous is None or previous["status"] != value
    conditions.append(
        {
            "type": ConditionType.APPLIED.value,
            "status": value,
            "reason": outcome.reason.value,
            "message": outcome.message,
            "lastTransitionTime": synctime.format_sync_time(now)
            if changed
            else previous["lastTransitionTime"],
            "observedGeneration": release["metadata"].get("generation", 0),
        }
    )
    status["conditions"] = sorted(conditions, key=lambda c: c["type"])
