"""Mutants of the section "Forced sync": FORCE-1..5 (FORCE-6 is the plugin's)."""

from __future__ import annotations

import json
import threading
from typing import Any

from convoy import api, policy, reconciler, rollout, subresources, synctime
from convoy.api import Annotation, Reason
from mutants import mutant
from mutants.patching import NOT_READY, key_of, wrap

Obj = dict[str, Any]


@mutant("force-annotation-not-written", "FORCE-1.written")
def force_annotation_not_written() -> None:
    """POST .../sync?force=true writes only sync-requested-at, not sync-force-requested-at."""

    @wrap(subresources.SubresourceAPI, "_annotations")
    def annotations(original, self, request, subresource):
        written = original(self, request, subresource)
        written.pop(Annotation.SYNC_FORCE_REQUESTED_AT, None)
        return written


@mutant("force-parameter-present-means-forced", "FORCE-1.not-without-force")
def force_parameter_present_means_forced() -> None:
    """Any force parameter forces, force=false included (its presence is what is checked)."""
    original = subresources._force

    def force(query: dict[str, list[str]]) -> bool:
        original(query)  # still refuses values other than true and false
        return "force" in query

    subresources._force = force


@mutant("force-runs-dry-run", "FORCE-2.manual", "FORCE-2.automatic")
def force_runs_dry_run() -> None:
    """A forced reconcile still runs the pre-apply dry run."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        return original(self, release, result, requests, False)


@mutant("force-only-in-manual-mode", "FORCE-2.automatic")
def force_only_in_manual_mode() -> None:
    """A forced request skips the dry run in manual mode only; automatic mode ignores force."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        return original(self, release, result, requests, forced and not result.policy.automatic)


@mutant("force-flag-shared", "FORCE-2.own-release")
def force_flag_shared() -> None:
    """The controller keeps one "skip the next dry run" flag for all Releases: a forced
    request also spares the next reconcile of whichever Release comes next."""
    flag = threading.Event()
    forced_keys: set[str] = set()

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        key = key_of(release)
        if forced:
            flag.set()
            forced_keys.add(key)
        elif flag.is_set() and key not in forced_keys:
            flag.clear()
            forced = True
        return original(self, release, result, requests, forced)


@mutant("force-keeps-the-rollout", "FORCE-3.Failed", "FORCE-3.RolledBack", "FORCE-3.Succeeded")
def force_keeps_the_rollout() -> None:
    """A forced sync does not start a new rollout; a Failed or RolledBack one stays."""

    @wrap(rollout.Rollouts, "start_if_new")
    def start_if_new(original, self, key: str, status: Obj, ref: str, forced: bool) -> bool:
        return original(self, key, status, ref, False)


@mutant("force-restarts-only-failed-rollouts", "FORCE-3.Succeeded")
def force_restarts_only_failed_rollouts() -> None:
    """A forced sync starts a new rollout only after a Failed or RolledBack one."""

    @wrap(rollout.Rollouts, "start_if_new")
    def start_if_new(original, self, key: str, status: Obj, ref: str, forced: bool) -> bool:
        phase = (status.get("rollout") or {}).get("phase")
        ended_badly = phase in (rollout.Phase.FAILED.value, rollout.Phase.ROLLED_BACK.value)
        return original(self, key, status, ref, forced and (ended_badly or phase is None))


@mutant("force-keeps-a-progressing-rollout", "FORCE-3.Progressing")
def force_keeps_a_progressing_rollout() -> None:
    """A forced sync does not restart a rollout in flight: a Progressing one keeps its start
    (and so its health timeout)."""

    @wrap(rollout.Rollouts, "start_if_new")
    def start_if_new(original, self, key: str, status: Obj, ref: str, forced: bool) -> bool:
        phase = (status.get("rollout") or {}).get("phase")
        return original(self, key, status, ref, forced and phase != rollout.Phase.PROGRESSING)


@mutant("force-writes-a-rollout-without-failurePolicy", "FORCE-3.no-failurePolicy")
def force_writes_a_rollout_without_failure_policy() -> None:
    """A forced reconcile records a Progressing rollout even without a failurePolicy."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        forced = policy.Requests.of(release).force_pending
        result = original(self, release)
        if forced and not (release.get("spec") or {}).get("failurePolicy"):
            result.status["rollout"] = {
                "phase": rollout.Phase.PROGRESSING.value,
                "renderRef": result.status.get("renderRef"),
                "startedAt": synctime.format_sync_time(self._clock.wall(), precise=True),
            }
        return result


@mutant("force-lasts-two-reconciles", "FORCE-4.after-success")
def force_lasts_two_reconciles() -> None:
    """A forced request skips the dry run in two reconciles, not one."""
    seen: dict[str, int] = {}

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        requests = policy.Requests.of(release)
        result = original(self, release)
        if requests.force_pending:
            key = json.dumps([release["metadata"]["uid"], str(requests.force_at)])
            seen[key] = seen.get(key, 0) + 1
            if seen[key] < 2:
                result.status["lastHandledForceSyncAt"] = (release.get("status") or {}).get(
                    "lastHandledForceSyncAt"
                )
                if result.status["lastHandledForceSyncAt"] is None:
                    del result.status["lastHandledForceSyncAt"]
        return result


def _force_kept_in_memory_unless(done: Any) -> None:
    """The force of a Release stays in memory (lastHandledForceSyncAt is still written) until
    a reconcile's outcome satisfies `done`."""
    kept: set[str] = set()

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        key = key_of(release)
        forced = forced or key in kept
        try:
            outcome = original(self, release, result, requests, forced)
        except Exception:
            if forced:
                kept.add(key)
            raise
        if forced and not done(outcome):
            kept.add(key)
        else:
            kept.discard(key)
        return outcome


@mutant("force-kept-until-a-success", "FORCE-4.after-failure")
def force_kept_until_a_success() -> None:
    """A forced request whose reconcile fails stays in force (in memory) for its retries."""
    _force_kept_in_memory_unless(lambda outcome: not outcome.reason.transient)


@mutant("force-kept-through-a-hold", "FORCE-4.after-wait")
def force_kept_through_a_hold() -> None:
    """A forced request whose reconcile holds stays in force (in memory) for the next one."""
    _force_kept_in_memory_unless(lambda outcome: outcome.reason not in api.HOLDS)


@mutant("force-handled-at-the-reconcile-time", "FORCE-5.success")
def force_handled_at_the_reconcile_time() -> None:
    """lastHandledForceSyncAt holds the time of the forced reconcile, not of the request."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        previous = (release.get("status") or {}).get("lastHandledForceSyncAt")
        if result.status.get("lastHandledForceSyncAt") not in (None, previous):
            result.status["lastHandledForceSyncAt"] = synctime.format_sync_time(self._clock.wall())
        return result


@mutant("force-handled-at-the-sync-time", "FORCE-5.success")
def force_handled_at_the_sync_time() -> None:
    """lastHandledForceSyncAt takes the time of sync-requested-at (the POST writes both the
    same), not that of the forced request."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        previous = (release.get("status") or {}).get("lastHandledForceSyncAt")
        sync_at = policy.Requests.of(release).sync_at
        if result.status.get("lastHandledForceSyncAt") not in (None, previous) and sync_at:
            result.status["lastHandledForceSyncAt"] = reconciler.second(sync_at)
        return result


def _force_handled_only_when(accepted: Any) -> None:
    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        if not accepted(result.outcome):
            previous = (release.get("status") or {}).get("lastHandledForceSyncAt")
            result.status.pop("lastHandledForceSyncAt", None)
            if previous:
                result.status["lastHandledForceSyncAt"] = previous
        return result


@mutant("force-handled-only-on-success", "FORCE-5.failure", "FORCE-5.wait")
def force_handled_only_on_success() -> None:
    """lastHandledForceSyncAt is written only when the forced reconcile succeeds."""
    _force_handled_only_when(lambda outcome: outcome.applied)


@mutant("force-not-handled-on-a-hold", "FORCE-5.wait")
def force_not_handled_on_a_hold() -> None:
    """lastHandledForceSyncAt is not written when the forced reconcile holds (Pinned, waiting)."""
    _force_handled_only_when(lambda outcome: outcome.reason not in api.HOLDS)


@mutant("force-handled-only-once-rendered", "FORCE-5.failure")
def force_handled_only_once_rendered() -> None:
    """lastHandledForceSyncAt is written in the sync path, after the render ("a force is about
    a render"): a forced reconcile that fails before its render is made (the source, the values
    or the Cluster not ready) leaves the force pending for its retry."""
    _force_handled_only_when(lambda outcome: outcome.reason not in NOT_READY)


@mutant("force-handled-once-the-cluster-is-reached", "FORCE-5.failure")
def force_handled_once_the_cluster_is_reached() -> None:
    """The Cluster's client is made before the reconcile proper (controller-runtime's habit
    of a client per Cluster): a Cluster that cannot be reached returns early, and leaves the
    forced request pending for the retry."""
    _force_handled_only_when(lambda outcome: outcome.reason != Reason.CLUSTER_NOT_READY)


@mutant("force-handled-by-the-retry", "FORCE-5.failure")
def force_handled_by_the_retry() -> None:
    """A forced reconcile that fails uses the force up in memory (its retry runs the dry run)
    and leaves lastHandledForceSyncAt to the retry, which writes it "after that reconcile"."""
    owed: set[str] = set()

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        return original(self, release, result, requests, forced and key_of(release) not in owed)

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        key, pending = key_of(release), policy.Requests.of(release).force_pending
        result = original(self, release)
        if key in owed:
            owed.discard(key)  # this reconcile wrote it: the force was still pending
        elif pending and result.outcome.reason.transient:
            previous = (release.get("status") or {}).get("lastHandledForceSyncAt")
            result.status.pop("lastHandledForceSyncAt", None)
            if previous:
                result.status["lastHandledForceSyncAt"] = previous
            owed.add(key)
        return result


@mutant("force-handled-time-cut-from-its-text", "FORCE-5.success")
def force_handled_time_cut_from_its_text() -> None:
    """lastHandledForceSyncAt is the annotation's text cut to the second plus a Z: right for
    what the POST writes (UTC), another instant for a time written with an offset."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        forced = policy.Requests.of(release).force_pending
        result = original(self, release)
        text = (release["metadata"].get("annotations") or {}).get(
            Annotation.SYNC_FORCE_REQUESTED_AT
        )
        if forced and isinstance(text, str) and len(text) >= len("2006-01-02T15:04:05"):
            result.status["lastHandledForceSyncAt"] = text[:19] + "Z"
        return result


@mutant("force-kept-while-hooks-or-health-wait", "FORCE-4.after-wait", "FORCE-5.wait")
def force_kept_while_hooks_or_health_wait() -> None:
    """A forced reconcile that waits for hooks or health is not the force's one reconcile:
    the force stays pending (like the /sync request) for the reconcile that goes on."""
    waits = (Reason.WAITING_FOR_HOOKS, Reason.WAITING_FOR_HEALTH)
    _force_handled_only_when(lambda outcome: outcome.reason not in waits)


@mutant("only-the-first-force-counts", "FORCE-2.manual", "FORCE-5.success")
def only_the_first_force_counts() -> None:
    """A force request is pending only while no force was ever handled: once
    lastHandledForceSyncAt is set, later forced requests run as ordinary ones."""
    policy.Requests.force_pending = property(
        lambda self: self.force_at is not None and self.last_handled_force is None
    )
