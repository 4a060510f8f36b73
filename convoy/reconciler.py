"""One reconcile of one Release: decide, maybe dry-run, apply and prune, and say what happened.

The steps and their order are those of docs/api-reference.md ("Reconcile order"). Every
outcome is a reason on the Applied condition; the controller turns it into a requeue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from convoy import apply, health, render, synctime, waves
from convoy.api import Annotation, ConditionType, Reason
from convoy.clock import Clock
from convoy.hooks import POST_APPLY, PRE_APPLY, BatchWait, HookFailed, Hooks, Lifecycle
from convoy.informer import object_key
from convoy.mutations import apply_mutations, parse_mutations
from convoy.policy import FailurePolicy, Requests, SpecError, SyncPolicy, pin_of
from convoy.renders import RenderMemory
from convoy.rollout import Rollouts, rolled_back_hold
from convoy.targets import Target, TargetError, Targets

log = logging.getLogger(__name__)

Obj = dict[str, Any]
FAILURES = (SpecError, TargetError, render.RenderError, apply.ApplyError, HookFailed)


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
    #: seconds until a deadline this reconcile depends on (a rollout's or a hook batch's timeout)
    recheck_after: float | None = None
    #: the Release's ReleaseInventory as this reconcile knows it
    inventory: Obj | None = None

    def recheck(self, seconds: float | None) -> None:
        if seconds is not None:
            self.recheck_after = min(seconds, self.recheck_after or seconds)


@dataclass(frozen=True)
class Context:
    """What a reconcile needs from the rest of the controller: its caches and its observer."""

    #: the Releases on the Cluster of a Release, from the informer cache (for the waves)
    same_cluster: Callable[[Obj], list[Obj]]
    #: the ReleaseInventory of a Release by "namespace/name" (for health)
    inventory: Callable[[str], Obj | None]
    #: assess the render just applied: (release, its new status, target) -> the inventory
    assess: Callable[[Obj, Obj, Target], Obj | None]


class Reconciler:
    def __init__(
        self,
        core_api: Any,
        targets: Targets,
        clock: Clock,
        *,
        context: Context,
        renders: RenderMemory,
        hooks: Hooks,
    ) -> None:
        self._core = core_api
        self._targets = targets
        self._clock = clock
        self._context = context
        self._renders = renders
        self._hooks = hooks
        self._rollouts = Rollouts(clock, renders)

    def reconcile(self, release: Obj) -> Result:
        status = dict(release.get("status") or {})
        result = Result(Outcome(False, Reason.INVALID_SPEC, ""), None, status)
        result.inventory = self._context.inventory(object_key(release))
        try:
            requests = Requests.of(release)
            forced = requests.force_pending
            try:
                # Inside: a spec that cannot be read (InvalidSpec) still uses up the force.
                result.policy = SyncPolicy.of(release)
                result.outcome = self._sync(release, result, requests, forced)
            finally:
                if forced:
                    # A forced request lasts one reconcile, whatever that reconcile's outcome.
                    status["lastHandledForceSyncAt"] = second(requests.force_at)
            if requests.ignored:
                result.outcome = with_notice(result.outcome, requests.ignored)
        except FAILURES as failure:
            result.outcome = Outcome(False, failure.reason, str(failure))
        now = self._clock.wall()
        set_condition(status, release, result.outcome, now)
        applied_ref = (status.get("lastSuccessful") or {}).get("renderRef")
        healthy = health.healthy_condition(result.inventory, applied_ref)
        put_condition(status, release, ConditionType.HEALTHY, *healthy, now)
        status["observedGeneration"] = release["metadata"].get("generation", 0)
        return result

    def forget(self, key: str) -> None:
        """Drop what memory holds of a deleted Release."""
        self._renders.forget(key)
        self._hooks.forget(key)
        self._rollouts.forget(key)

    def _sync(self, release: Obj, result: Result, requests: Requests, forced: bool) -> Outcome:
        """Steps 1 to 14 of docs/api-reference.md "Reconcile order"."""
        policy, status = result.policy, result.status
        assert policy is not None
        target = self._targets.for_release(release)
        failure = FailurePolicy.of(release)
        if failure:
            self._check_rollout(release, target, result, failure)
        current = render_release(self._core, release, target)
        lifecycle = Lifecycle.parse(_annotation(release, Annotation.LIFECYCLE))
        status["renderRef"] = current.ref
        result.notes.append(f"render {short(current.ref)}")
        if not policy.automatic and not requests.sync_pending:
            return manual_without_request(status, current.ref)
        result.notes.append("automatic" if policy.automatic else "pending /sync")
        hold = self._hold(release, status, current.ref, forced)
        if hold:
            return hold
        stop = self._apply_with_hooks(release, result, target, current, forced, failure, lifecycle)
        if stop:
            return stop
        if not policy.automatic:
            status["lastHandledSyncAt"] = second(requests.sync_at)
        return Outcome(True, Reason.APPLIED, f"Applied render {current.ref}")

    def _apply_with_hooks(
        self,
        release: Obj,
        result: Result,
        target: Target,
        current: render.Render,
        forced: bool,
        failure: FailurePolicy | None,
        lifecycle: Lifecycle,
    ) -> Outcome | None:
        """Steps 7 to 13; the outcome that ends the reconcile early, or None to go on."""
        key, namespace = object_key(release), _target_namespace(release)
        if forced:
            result.notes.append("forced: no dry run")
        else:
            apply.dry_run(target, list(current.objects))
        waiting = self._hooks.run(key, PRE_APPLY, lifecycle.pre_apply, target, namespace)
        if waiting:
            return _waiting_for_hooks(result, waiting)
        if failure and self._rollouts.start_if_new(key, result.status, current.ref, forced):
            result.recheck(failure.health_timeout)
        self._remembered_apply(release, target, result, current)
        if failure:  # a render its own assessment finds Healthy ends its rollout here
            self._check_rollout(release, target, result, failure)
        if not lifecycle.post_apply:
            return None
        if not _healthy(result, current.ref):
            return Outcome(
                False,
                Reason.WAITING_FOR_HEALTH,
                f"render {current.ref} is applied; the postApply hooks wait for it to be Healthy",
            )
        waiting = self._hooks.run(key, POST_APPLY, lifecycle.post_apply, target, namespace)
        return _waiting_for_hooks(result, waiting) if waiting else None

    def _check_rollout(
        self, release: Obj, target: Target, result: Result, failure: FailurePolicy
    ) -> None:
        """Step 2: end a Progressing rollout that is Healthy (Succeeded) or timed out."""
        status = result.status
        rollout_ref = (status.get("rollout") or {}).get("renderRef")
        applied_ref = (status.get("lastSuccessful") or {}).get("renderRef")
        healthy = rollout_ref == applied_ref and _healthy(result, rollout_ref)

        def roll_back(previous: render.Render) -> None:
            result.notes.append(f"rollback to render {short(previous.ref)}")
            self._remembered_apply(release, target, result, previous)

        key = object_key(release)
        # A rollback is an apply: manual mode applies only after a /sync, and a rollback is
        # none (docs/api-reference.md, "failurePolicy and rollouts").
        automatic = result.policy is not None and result.policy.automatic
        checked = self._rollouts.check(
            key, status, failure, healthy, roll_back if automatic else None
        )
        result.recheck(checked)

    def _hold(self, release: Obj, status: Obj, ref: str, forced: bool) -> Outcome | None:
        """Step 6: the pin, the hold after a rollback (not when forced), the lower waves."""
        pin = pin_of(release)
        if pin is not None and pin != ref:
            return Outcome(
                False, Reason.PINNED, f"pinned to render {pin}; the current render is {ref}"
            )
        rolled_back = None if forced else rolled_back_hold(status, ref)
        if rolled_back:
            return Outcome(False, Reason.PINNED, rolled_back)
        blocking = waves.blocking(release, self._context.same_cluster(release))
        if blocking:
            names = ", ".join(
                f"{o['metadata']['name']} (wave {waves.wave_of(o)})" for o in blocking
            )
            return Outcome(
                False,
                Reason.WAITING_FOR_WAVE,
                f"waiting for lower waves on the same Cluster to be Applied and Healthy: {names}",
            )
        return None

    def _remembered_apply(
        self, release: Obj, target: Target, result: Result, current: render.Render
    ) -> None:
        """Apply and prune (steps 10 and 11), remember the objects, and have them assessed."""
        self._apply(target, result.status, current)
        self._renders.remember(object_key(release), current)
        result.inventory = self._context.assess(release, result.status, target)

    def _apply(self, target: Target, status: Obj, current: render.Render) -> None:
        applied = apply.apply(target, list(current.objects))
        apply.prune(target, status.get("appliedObjects") or [], applied)
        status["appliedObjects"] = applied
        status["lastSuccessful"] = {
            "renderRef": current.ref,
            "appliedAt": synctime.format_sync_time(self._clock.wall()),
        }


def render_release(core: Any, release: Obj, target: Target) -> render.Render:
    """Steps 3 and 4: the render with the mutations. The mutations annotation is read at the
    mutate seam, after the source and the values, so that their failures are reported first."""
    text = _annotation(release, Annotation.MUTATIONS)

    def mutate(objects: list[Obj]) -> list[Obj]:
        return apply_mutations(parse_mutations(text), objects)

    return render.render(core, release, scope_of=target.scope_of, mutate=mutate)


def _healthy(result: Result, ref: str | None) -> bool:
    """The inventory says render `ref` is Healthy."""
    status = (result.inventory or {}).get("status") or {}
    return status.get("renderRef") == ref and status.get("health") == health.Health.HEALTHY


def _waiting_for_hooks(result: Result, waiting: BatchWait) -> Outcome:
    result.recheck(waiting.remaining)
    return Outcome(False, Reason.WAITING_FOR_HOOKS, waiting.message)


def _annotation(release: Obj, name: Annotation) -> str | None:
    return (release["metadata"].get("annotations") or {}).get(name)


def _target_namespace(release: Obj) -> str:
    return (release.get("spec") or {}).get("targetNamespace") or release["metadata"]["namespace"]


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


def with_notice(outcome: Outcome, notices: tuple[str, ...]) -> Outcome:
    """The outcome, its message telling what the reconcile ignored."""
    return replace(outcome, message="; ".join((outcome.message, *notices)))


def second(moment: datetime | None) -> str | None:
    return synctime.format_sync_time(moment) if moment else None


def short(ref: str) -> str:
    return ref.removeprefix("sha256:")[:12]


def set_condition(status: Obj, release: Obj, outcome: Outcome, now: datetime) -> None:
    """Set Applied from the outcome of a reconcile."""
    value = "True" if outcome.applied else "False"
    put_condition(
        status, release, ConditionType.APPLIED, value, outcome.reason.value, outcome.message, now
    )


def put_condition(
    status: Obj,
    release: Obj,
    kind: ConditionType,
    value: str,
    reason: str,
    message: str,
    now: datetime,
) -> None:
    """Set one condition; keep lastTransitionTime while the condition's status stays the same."""
    conditions = [c for c in status.get("conditions") or [] if c["type"] != kind]
    previous = next((c for c in status.get("conditions") or [] if c["type"] == kind), None)
    since = None if previous is None or previous["status"] != value else previous
    conditions.append(
        {
            "type": kind.value,
            "status": value,
            "reason": reason,
            "message": message,
            "lastTransitionTime": synctime.format_sync_time(now)
            if since is None
            else since["lastTransitionTime"],
            "observedGeneration": release["metadata"].get("generation", 0),
        }
    )
    status["conditions"] = sorted(conditions, key=lambda c: c["type"])
