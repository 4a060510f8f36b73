"""Mutants of the section "The /sync request": SYNC-1..9 (SYNC-10 is the plugin's)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from convoy import (
    api,
    controller,
    hooks,
    observer,
    policy,
    reconciler,
    subresources,
    synctime,
    targets,
    waves,
    workqueue,
)
from convoy.api import Annotation, Reason
from convoy.informer import EventType
from mutants import mutant
from mutants.patching import key_of, wrap

Obj = dict[str, Any]


def _requests(read: policy.Requests, **changes: Any) -> policy.Requests:
    fields = {
        "sync_at": read.sync_at,
        "force_at": read.force_at,
        "last_handled_sync": read.last_handled_sync,
        "last_handled_force": read.last_handled_force,
    }
    return policy.Requests(**(fields | changes))


# -- SYNC-1 ------------------------------------------------------------------------------------
@mutant("sync-writes-an-old-time", "SYNC-1.current-time")
def sync_writes_an_old_time() -> None:
    """POST releases/<name>/sync writes a time an hour old instead of the current time."""

    @wrap(subresources.SubresourceAPI, "_annotations")
    def annotations(original, self, request, subresource):
        written = original(self, request, subresource)
        if subresource is subresources.Subresource.SYNC:
            old = synctime.format_sync_time(self._clock.wall() - timedelta(hours=1), precise=True)
            written = {key: old for key in written}
        return written


@mutant("subresource-times-to-the-second", "SYNC-7.each-request")
def subresource_times_to_the_second() -> None:
    """The subresource API writes sync-requested-at to the second, as metav1.Time would: a
    second write in the same second changes nothing, and starts no reconcile."""

    @wrap(subresources.SubresourceAPI, "_annotations")
    def annotations(original, self, request, subresource):
        written = original(self, request, subresource)
        whole = synctime.format_sync_time(self._clock.wall())
        stamped = (Annotation.SYNC_REQUESTED_AT, Annotation.SYNC_FORCE_REQUESTED_AT)
        return {key: whole if key in stamped else value for key, value in written.items()}


@mutant("sync-writes-the-whole-namespace", "SYNC-1.named-release")
def sync_writes_the_whole_namespace() -> None:
    """POST .../sync writes sync-requested-at on every Release of the namespace (a list and
    patch loop meant for a namespace-wide sync)."""

    @wrap(subresources.SubresourceAPI, "_patch")
    def patch(original, self, route, annotations):
        written = original(self, route, annotations)
        if route.subresource is subresources.Subresource.SYNC:
            listed = self._releases.list_namespaced_custom_object(
                api.GROUP, api.VERSION, route.namespace, api.RELEASES
            )
            for item in listed["items"]:
                name = item["metadata"]["name"]
                if name != route.name:
                    original(
                        self, type(route)(route.namespace, name, route.subresource), annotations
                    )
        return written


# -- SYNC-2 ------------------------------------------------------------------------------------
@mutant(
    "sync-annotation-ignored",
    "SYNC-2.later",
    "SYNC-2.earlier",
    "SYNC-2.removed",
    "TRIG-3.sync-requested-at",
)
def sync_annotation_ignored() -> None:
    """A change of sync-requested-at does not start a reconcile."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        return None if found == "sync-requested" else found


def _sync_at(obj: Obj) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(Annotation.SYNC_REQUESTED_AT)


@mutant("sync-trigger-only-when-later", "SYNC-2.earlier")
def sync_trigger_only_when_later() -> None:
    """Only a change of sync-requested-at to a later time starts a reconcile."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        if found != "sync-requested" or not _sync_at(event.old) or not _sync_at(event.new):
            return found
        old = synctime.parse_sync_time(_sync_at(event.old))
        return found if synctime.parse_sync_time(_sync_at(event.new)) > old else None


@mutant("sync-trigger-compares-instants", "SYNC-2.same-instant")
def sync_trigger_compares_instants() -> None:
    """A change of sync-requested-at starts a reconcile only when the time it holds changes:
    the same instant written in another UTC offset is taken for no change."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        if found != "sync-requested" or not _sync_at(event.old) or not _sync_at(event.new):
            return found
        try:
            old, new = (synctime.parse_sync_time(_sync_at(o)) for o in (event.old, event.new))
        except ValueError:
            return found
        return found if old != new else None


@mutant("sync-trigger-compares-to-the-second", "SYNC-2.later")
def sync_trigger_compares_to_the_second() -> None:
    """A change of sync-requested-at starts a reconcile only when its second changes: the
    author read "compares the times to the second" into the trigger too."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        if found != "sync-requested" or not _sync_at(event.old) or not _sync_at(event.new):
            return found
        old, new = (
            synctime.truncate_to_second(synctime.parse_sync_time(_sync_at(o)))
            for o in (event.old, event.new)
        )
        return found if old != new else None


@mutant("sync-trigger-needs-a-value", "SYNC-2.removed")
def sync_trigger_needs_a_value() -> None:
    """Removing sync-requested-at starts no reconcile: the predicate wants a new value."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        return None if found == "sync-requested" and not _sync_at(event.new) else found


@mutant("adds-during-a-reconcile-dropped", "SYNC-2.while-reconciling")
def adds_during_a_reconcile_dropped() -> None:
    """The work queue drops an add of an item that is being processed, instead of queueing it
    again when that processing is done."""
    original = workqueue.WorkQueue._add_locked

    def add_locked(self, item, low_priority: bool = False) -> None:
        if item in self._processing:
            return
        original(self, item, low_priority)

    workqueue.WorkQueue._add_locked = add_locked


# -- SYNC-3, SYNC-4 ----------------------------------------------------------------------------
@mutant("first-request-not-pending", "SYNC-3.later")
def first_request_not_pending() -> None:
    """Without lastHandledSyncAt no request is pending (a None check the wrong way round)."""

    def pending(self) -> bool:
        return (
            self.sync_at is not None
            and self.last_handled_sync is not None
            and synctime.is_pending(self.sync_at, self.last_handled_sync)
        )

    policy.Requests.sync_pending = property(pending)


@mutant("no-handled-time-read-as-the-last-apply", "SYNC-3.later")
def no_handled_time_read_as_the_last_apply() -> None:
    """Without lastHandledSyncAt the request is compared with lastSuccessful.appliedAt ("a
    request older than the last apply is in it already"): a /sync that automatic mode left
    unhandled is not pending once the Release is manual."""

    @wrap(policy, "_status_time")
    def status_time(original, status: Obj, field: str):
        found = original(status, field)
        if found is None and field == "lastHandledSyncAt":
            return original(status.get("lastSuccessful") or {}, "appliedAt")
        return found


@mutant("force-request-counts-as-a-sync", "SYNC-3.not-force-alone")
def force_request_counts_as_a_sync() -> None:
    """In manual mode a pending force counts as a pending /sync ("a forced sync is a sync
    too"): sync-force-requested-at written alone makes the next reconcile apply."""
    sync_pending = policy.Requests.sync_pending.fget

    def pending(self) -> bool:
        return sync_pending(self) or self.force_pending

    policy.Requests.sync_pending = property(pending)


@mutant("any-request-is-pending", "SYNC-3.not-later")
def any_request_is_pending() -> None:
    """Any sync-requested-at different from lastHandledSyncAt is pending, also an older one."""

    def pending(self) -> bool:
        if self.sync_at is None:
            return False
        handled = self.last_handled_sync
        return handled is None or synctime.truncate_to_second(self.sync_at) != (
            synctime.truncate_to_second(handled)
        )

    policy.Requests.sync_pending = property(pending)


@mutant("sync-time-offset-ignored", "SYNC-3.absolute-time")
def sync_time_offset_ignored() -> None:
    """Request times are read as UTC whatever their offset: the digits count, not the instant."""

    @wrap(synctime, "parse_sync_time")
    def parse(original, text: str) -> datetime:
        parsed = original(text)
        digits = datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")
        return digits.replace(tzinfo=UTC, microsecond=parsed.microsecond)


@mutant("sync-time-offset-minutes-unsigned", "SYNC-3.absolute-time")
def sync_time_offset_minutes_unsigned() -> None:
    """An offset's sign is applied to its hours only: -03:30 is read as -02:30."""

    def offset(text: str) -> timezone:
        if text == "Z":
            return UTC
        sign = -1 if text[0] == "-" else 1
        return timezone(timedelta(hours=sign * int(text[1:3]), minutes=int(text[4:6])))

    synctime._offset = offset


@mutant("sync-time-needs-a-fraction", "SYNC-3.any-form")
def sync_time_needs_a_fraction() -> None:
    """Request times are parsed with a fixed layout of microseconds and Z (the one the /sync
    endpoint writes): other RFC 3339 forms are refused as invalid."""

    @wrap(synctime, "parse_sync_time")
    def parse(original, text: str) -> datetime:
        if text.endswith("Z") and "." not in text[:-1] and len(text) == 20:
            return original(text)  # lastHandledSyncAt, written to the second
        datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")  # raises ValueError for other forms
        return original(text)


@mutant("requests-before-creation-ignored", "SYNC-3.at-creation")
def requests_before_creation_ignored() -> None:
    """A request older than the Release itself is taken as stale and ignored."""

    @wrap(policy.Requests, "of")
    def of(original, release: Obj):
        read = original(release)
        created = synctime.parse_sync_time(release["metadata"]["creationTimestamp"])
        if read.sync_at is not None and read.sync_at < created:
            return _requests(read, sync_at=None)
        return read


@mutant("latest-request-per-namespace", "SYNC-3.per-release")
def latest_request_per_namespace() -> None:
    """The latest request is remembered per namespace, not per Release: a request to one
    Release is pending for its neighbours too."""
    latest: dict[str, datetime] = {}
    lock = threading.Lock()

    @wrap(policy.Requests, "of")
    def of(original, release: Obj):
        read = original(release)
        namespace = release["metadata"]["namespace"]
        with lock:
            if read.sync_at is not None:
                latest[namespace] = max(latest.get(namespace, read.sync_at), read.sync_at)
            newest = latest.get(namespace)
        return _requests(read, sync_at=newest) if newest else read


@mutant("in-sync-request-applies-nothing", "SYNC-3.in-sync")
def in_sync_request_applies_nothing() -> None:
    """A manual request whose render is the one already applied is recorded as handled
    without a dry run or an apply (the author took it for nothing to do): drift stays."""

    @wrap(reconciler.Reconciler, "_apply_with_hooks")
    def apply_with_hooks(original, self, release: Obj, result, target, current, *rest):
        applied = (result.status.get("lastSuccessful") or {}).get("renderRef")
        manual = result.policy is not None and not result.policy.automatic
        if manual and applied == current.ref:
            return None  # nothing stops the sync: it is recorded as handled, Applied
        return original(self, release, result, target, current, *rest)


@mutant("sub-second-comparison", "SYNC-4.same-second")
def sub_second_comparison() -> None:
    """The pending check compares with sub-second precision instead of whole seconds."""

    def pending(self) -> bool:
        handled = self.last_handled_sync
        return self.sync_at is not None and (handled is None or self.sync_at > handled)

    policy.Requests.sync_pending = property(pending)


@mutant("compared-to-the-minute", "SYNC-4.next-second")
def compared_to_the_minute() -> None:
    """The pending check truncates to the minute instead of the second."""

    def minute(moment: datetime) -> datetime:
        return synctime.truncate_to_second(moment).replace(second=0)

    def pending(self) -> bool:
        handled = self.last_handled_sync
        if self.sync_at is None or handled is None:
            return self.sync_at is not None
        return minute(self.sync_at) > minute(handled)

    policy.Requests.sync_pending = property(pending)


@mutant("pending-a-second-too-late", "SYNC-4.next-second")
def pending_a_second_too_late() -> None:
    """A request is pending only when it is more than a whole second later (off by one)."""

    def pending(self) -> bool:
        handled = self.last_handled_sync
        if self.sync_at is None or handled is None:
            return self.sync_at is not None
        later = synctime.truncate_to_second(self.sync_at) - synctime.truncate_to_second(handled)
        return later > timedelta(seconds=1)

    policy.Requests.sync_pending = property(pending)


# -- SYNC-5, SYNC-6 ----------------------------------------------------------------------------
@mutant("handled-at-the-apply-time", "SYNC-5.after-success")
def handled_at_the_apply_time() -> None:
    """lastHandledSyncAt holds the time of the apply, not that of the handled request."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        previous = (release.get("status") or {}).get("lastHandledSyncAt")
        if result.status.get("lastHandledSyncAt") not in (None, previous):
            result.status["lastHandledSyncAt"] = synctime.format_sync_time(self._clock.wall())
        return result


def _handle_pending(release: Obj, status: Obj) -> None:
    """Record `release`'s pending manual request as handled in `status`."""
    requests = policy.Requests.of(release)
    if not policy.SyncPolicy.of(release).automatic and requests.sync_pending:
        status["lastHandledSyncAt"] = reconciler.second(requests.sync_at)


@mutant("handled-before-the-prune", "SYNC-5.not-on-failure")
def handled_before_the_prune() -> None:
    """lastHandledSyncAt is written once the apply succeeded, before the prune, which may
    still fail."""
    reconciling = threading.local()

    @wrap(reconciler.Reconciler, "_remembered_apply")
    def remembered_apply(original, self, release: Obj, target, result, current) -> None:
        reconciling.release, reconciling.status = release, result.status
        original(self, release, target, result, current)

    @wrap(reconciler.apply, "prune")
    def prune(original, target, previous, current):
        _handle_pending(reconciling.release, reconciling.status)
        return original(target, previous, current)


@mutant("handled-once-applied", "SYNC-5.not-while-waiting")
def handled_once_applied() -> None:
    """lastHandledSyncAt is written as soon as the render is applied, before the postApply
    hooks and the wait for health that finish the sync."""

    @wrap(reconciler.Reconciler, "_remembered_apply")
    def remembered_apply(original, self, release: Obj, target, result, current) -> None:
        original(self, release, target, result, current)
        _handle_pending(release, result.status)


@mutant("handled-on-failure", "SYNC-5.not-on-failure")
def handled_on_failure() -> None:
    """lastHandledSyncAt is written when the apply fails, too."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        requests = policy.Requests.of(release)
        if result.outcome.reason.transient and requests.sync_pending:
            result.status["lastHandledSyncAt"] = reconciler.second(requests.sync_at)
        return result


def _mark_handled_when(
    reasons: frozenset, where: Callable[[Any, Obj], bool] = lambda reconciler, release: True
) -> None:
    """Record a pending request of manual mode as handled after a reconcile that ends with one
    of `reasons`, where `where(reconciler, release)` holds too."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        requests = policy.Requests.of(release)
        automatic = result.policy is not None and result.policy.automatic
        if (
            result.outcome.reason in reasons
            and requests.sync_pending
            and not automatic
            and where(self, release)
        ):
            result.status["lastHandledSyncAt"] = reconciler.second(requests.sync_at)
        return result


@mutant("hold-marks-the-request-handled", "SYNC-5.not-while-waiting", "SYNC-6.wait")
def hold_marks_the_request_handled() -> None:
    """A reconcile that holds (Pinned, waiting) records the pending request as handled."""
    _mark_handled_when(api.HOLDS)


@mutant("wave-hold-marks-the-request-handled", "SYNC-5.not-while-waiting", "SYNC-6.wait")
def wave_hold_marks_the_request_handled() -> None:
    """A reconcile that waits for a lower wave records the pending request as handled (the
    author took a wave's wait for an outcome of the request)."""
    _mark_handled_when(frozenset({Reason.WAITING_FOR_WAVE}))


@mutant("hooks-wait-marks-the-request-handled", "SYNC-5.not-while-waiting")
def hooks_wait_marks_the_request_handled() -> None:
    """A reconcile that waits for a hook batch (WaitingForHooks) records the pending request as
    handled (the author counted on the observer's /sync for the batch to finish the sync)."""
    _mark_handled_when(frozenset({Reason.WAITING_FOR_HOOKS}))


@mutant("unappliable-request-dropped", "SYNC-6.failure")
def unappliable_request_dropped() -> None:
    """A request whose render fails the dry run (Unappliable) is recorded as handled: the
    user must send a new one once the render is fixed."""
    _mark_handled_when(frozenset({Reason.UNAPPLIABLE}))


@mutant("failed-hook-request-dropped", "SYNC-6.failure")
def failed_hook_request_dropped() -> None:
    """A request whose preApply hook failed (HookFailed) is recorded as handled, so that a
    failed migration is not run again at each periodic reconcile."""
    _mark_handled_when(frozenset({Reason.HOOK_FAILED}))


@mutant("render-failure-request-dropped", "SYNC-6.render-failure")
def render_failure_request_dropped() -> None:
    """A request whose render cannot be made (its source, values or Cluster not ready) is
    recorded as handled: the author took the retry for the controller's business, not the
    request's."""
    _mark_handled_when(
        frozenset({Reason.SOURCE_NOT_READY, Reason.VALUES_NOT_READY, Reason.CLUSTER_NOT_READY})
    )


@mutant("a-broken-kubeconfig-answers-the-request", "SYNC-6.render-failure")
def a_broken_kubeconfig_answers_the_request() -> None:
    """A request that meets a Cluster whose kubeconfig cannot be used (its Secret or key
    missing, no kubeconfig, an API server that cannot be reached) is recorded as handled: the
    Cluster was found, so the author left the kubeconfig to the user to fix and the request
    answered. A Cluster not found still leaves the request pending."""

    def cluster_found(self: reconciler.Reconciler, release: Obj) -> bool:
        ref = (release.get("spec") or {}).get("clusterRef") or {}
        try:
            self._targets._read_cluster(release["metadata"]["namespace"], ref["name"])
        except (KeyError, targets.TargetError):
            return False
        return True

    _mark_handled_when(frozenset({Reason.CLUSTER_NOT_READY}), cluster_found)


@mutant("failed-request-forgotten", "SYNC-6.transient-failure")
def failed_request_forgotten() -> None:
    """A request whose apply failed is remembered (in memory) as done and not tried again."""
    failed: set[tuple[str, str]] = set()

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        meta = release["metadata"]
        stamp = (meta.get("annotations") or {}).get(Annotation.SYNC_REQUESTED_AT, "")
        key = (key_of(release), stamp)
        if key in failed:
            patched = {
                **release,
                "status": {**(release.get("status") or {}), "lastHandledSyncAt": stamp},
            }
            return original(self, patched)
        result = original(self, release)
        if result.outcome.reason.transient:
            failed.add(key)
        return result


@mutant("retry-keeps-a-withdrawn-request", "SYNC-6.transient-failure")
def retry_keeps_a_withdrawn_request() -> None:
    """A request whose apply failed is remembered (in memory) for its retries: a retry
    applies it also when the request was withdrawn (its annotation removed) meanwhile."""
    failed: dict[str, str] = {}
    lock = threading.Lock()

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        key, meta = key_of(release), release["metadata"]
        annotations = meta.get("annotations") or {}
        with lock:
            remembered = failed.get(key)
        if remembered and Annotation.SYNC_REQUESTED_AT not in annotations:
            annotations = {**annotations, Annotation.SYNC_REQUESTED_AT: remembered}
            release = {**release, "metadata": {**meta, "annotations": annotations}}
        result = original(self, release)
        with lock:
            requested = annotations.get(Annotation.SYNC_REQUESTED_AT)
            if result.outcome.reason.transient and requested:
                failed[key] = requested
            else:
                failed.pop(key, None)
        return result


# -- SYNC-7 ------------------------------------------------------------------------------------
@mutant("automatic-uses-last-handled", "SYNC-7.not-read")
def automatic_uses_last_handled() -> None:
    """Automatic mode applies only when sync-requested-at is later than lastHandledSyncAt."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        if result.policy.automatic and requests.sync_at and not requests.sync_pending:
            return reconciler.Outcome(True, Reason.APPLIED, "already handled")
        return original(self, release, result, requests, forced)


@mutant("automatic-writes-last-handled", "SYNC-7.not-written")
def automatic_writes_last_handled() -> None:
    """Automatic mode records each /sync it applied in lastHandledSyncAt too."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        requests = policy.Requests.of(release)
        automatic = result.policy is not None and result.policy.automatic
        if automatic and result.outcome.applied and requests.sync_at:
            result.status["lastHandledSyncAt"] = reconciler.second(requests.sync_at)
        return result


# -- SYNC-8 ------------------------------------------------------------------------------------
def _drop_sync_for(*chosen: subresources.Subresource, methods: tuple[str, ...]) -> None:
    @wrap(subresources.SubresourceAPI, "_annotations")
    def annotations(original, self, request, subresource):
        written = original(self, request, subresource)
        if subresource in chosen and request.method in methods:
            written.pop(Annotation.SYNC_REQUESTED_AT)
        return written


@mutant(
    "delete-of-nothing-is-no-request",
    "SYNC-8.DELETE-pin",
    "SYNC-8.DELETE-mutations",
    "SYNC-8.DELETE-lifecycle",
)
def delete_of_nothing_is_no_request() -> None:
    """A DELETE of a subresource whose annotation is not set answers 200 and writes nothing:
    "there is nothing to take away", so no /sync request either."""

    @wrap(subresources.SubresourceAPI, "_patch")
    def patch(original, self, route, annotations):
        current = self._releases.get_namespaced_custom_object(
            api.GROUP, api.VERSION, route.namespace, api.RELEASES, route.name
        )
        existing = current["metadata"].get("annotations") or {}
        data = [name for name in annotations if name != Annotation.SYNC_REQUESTED_AT]
        if data and all(annotations[n] is None and n not in existing for n in data):
            return current["metadata"]
        return original(self, route, annotations)


@mutant("pin-write-is-no-request", "SYNC-8.PUT-pin", "SYNC-8.DELETE-pin")
def pin_write_is_no_request() -> None:
    """A write to /pin stores the pin without setting sync-requested-at."""
    _drop_sync_for(subresources.Subresource.PIN, methods=("PUT", "DELETE"))


@mutant(
    "mutations-write-is-no-request",
    "TRIG-10.PUT-mutations",
    "TRIG-10.PUT-lifecycle",
    "SYNC-8.PUT-mutations",
    "SYNC-8.PUT-lifecycle",
)
def mutations_write_is_no_request() -> None:
    """A PUT of /mutations or /lifecycle stores its data without setting sync-requested-at."""
    _drop_sync_for(
        subresources.Subresource.MUTATIONS,
        subresources.Subresource.LIFECYCLE,
        methods=("PUT",),
    )


@mutant(
    "delete-writes-no-request",
    "SYNC-8.DELETE-pin",
    "SYNC-8.DELETE-mutations",
    "SYNC-8.DELETE-lifecycle",
    "TRIG-10.DELETE-mutations",
    "TRIG-10.DELETE-lifecycle",
)
def delete_writes_no_request() -> None:
    """A DELETE of /pin, /mutations or /lifecycle removes the annotation only."""
    _drop_sync_for(
        subresources.Subresource.PIN,
        subresources.Subresource.MUTATIONS,
        subresources.Subresource.LIFECYCLE,
        methods=("DELETE",),
    )


@mutant("lifecycle-write-is-no-request", "SYNC-8.PUT-lifecycle", "TRIG-10.PUT-lifecycle")
def lifecycle_write_is_no_request() -> None:
    """A PUT of /lifecycle stores the hooks without setting sync-requested-at."""
    _drop_sync_for(subresources.Subresource.LIFECYCLE, methods=("PUT",))


# -- SYNC-9 ------------------------------------------------------------------------------------
@mutant("observer-never-syncs", "SYNC-9.wave", "SYNC-9.new-render", "SYNC-9.hooks")
def observer_never_syncs() -> None:
    """The observer never sends a /sync (waves, new healthy render, hook batches)."""
    observer.Observer._request_sync = lambda self, release, why: None


@mutant("wave-sync-to-the-first-release-only", "SYNC-9.wave")
def wave_sync_to_the_first_release_only() -> None:
    """A completed wave sends its /sync to the first Release of the next wave only."""

    @wrap(waves, "next_wave")
    def next_wave(original, release: Obj, others):
        found = sorted(original(release, others), key=lambda o: o["metadata"]["name"])
        return found[:1]


@mutant("wave-sync-to-the-wave-above-by-one", "SYNC-9.wave")
def wave_sync_to_the_wave_above_by_one() -> None:
    """A completed wave w sends its /sync to wave w + 1, not to the lowest wave above."""

    @wrap(waves, "next_wave")
    def next_wave(original, release: Obj, others):
        above = waves.wave_of(release) + 1
        return [o for o in original(release, others) if waves.wave_of(o) == above]


@mutant("wave-completed-by-any-release", "SYNC-9.wave-complete")
def wave_completed_by_any_release() -> None:
    """A wave counts as complete when any one of its Releases becomes Applied and Healthy."""
    waves.wave_completed = lambda old, new, others: not waves.settled(old) and waves.settled(new)


@mutant("wave-completed-at-every-update", "SYNC-9.wave-once")
def wave_completed_at_every_update() -> None:
    """Each update of a Release of a complete wave sends the next wave its /syncs: the author
    checked that the wave is complete, not that this change completed it."""

    @wrap(waves, "wave_completed")
    def wave_completed(original, old: Obj, new: Obj, others) -> bool:
        unsettled = {**old, "status": {}}
        return original(unsettled, new, others)


@mutant("wave-completed-only-by-health", "SYNC-9.wave-by-apply")
def wave_completed_only_by_health() -> None:
    """A wave completes only when health is reached: a Release that turns Applied while it is
    Healthy already (a hold lifted) completes nothing."""

    @wrap(waves, "wave_completed")
    def wave_completed(original, old: Obj, new: Obj, others) -> bool:
        if waves.condition_status(old, api.ConditionType.HEALTHY) == "True":
            return False
        return original(old, new, others)


@mutant("no-sync-for-a-healthy-render", "SYNC-9.new-render")
def no_sync_for_a_healthy_render() -> None:
    """Health assessment reaching a new render sends no /sync."""
    observer.Observer._announce = lambda self, key, release, old, assessed: None


@mutant("observer-syncs-manual-releases-only", "SYNC-9.automatic")
def observer_syncs_manual_releases_only() -> None:
    """The observer sends its /syncs to manual Releases only: "an automatic Release
    reconciles on its own"."""

    @wrap(observer.Observer, "_request_sync")
    def request_sync(original, self, release: Obj, why: str) -> None:
        if ((release.get("spec") or {}).get("syncPolicy") or {}).get("automatic") is not True:
            original(self, release, why)


@mutant("observer-syncs-every-healthy-assessment", "SYNC-9.new-render-once")
def observer_syncs_every_healthy_assessment() -> None:
    """The observer sends a /sync at every assessment that finds the applied render Healthy."""

    @wrap(observer.Observer, "_announce")
    def announce(original, self, key: str, release: Obj, old, assessed) -> None:
        original(self, key, release, old, assessed)
        if assessed["health"] == observer.Health.HEALTHY:
            self._request_sync(release, "the render is Healthy")


@mutant("observer-syncs-when-healthy-again", "SYNC-9.new-render-once")
def observer_syncs_when_healthy_again() -> None:
    """The observer sends a /sync whenever the applied render turns Healthy, the same render
    again included (it remembers the last assessment, not the renders it announced)."""

    @wrap(observer.Observer, "_announce")
    def announce(original, self, key: str, release: Obj, old, assessed) -> None:
        with self._lock:
            self._announced.pop(key, None)
        original(self, key, release, old, assessed)


@mutant("healthy-after-a-reapply-announced", "SYNC-9.new-render-once")
def healthy_after_a_reapply_announced() -> None:
    """The observer announces a render Healthy for the first time after each apply, not
    after each new render: a reconcile that applies the same render again while it is not
    Healthy (in automatic mode every reconcile applies, the one its Degraded news starts
    too) makes its turning Healthy again news for a /sync."""

    @wrap(observer.Observer, "assess_now")
    def assess_now(original, self, release: Obj, status: Obj, target):
        inventory = original(self, release, status, target)
        health = ((inventory or {}).get("status") or {}).get("health")
        if health != observer.Health.HEALTHY:
            with self._lock:
                self._announced.pop(key_of(release), None)
        return inventory


def _hook_syncs_only_when(notifies: Callable[[Any], bool]) -> None:
    @wrap(observer.Observer, "_check_hooks")
    def check_hooks(original, self, key: str, release: Obj, target) -> None:
        waiting = self._hooks.waiting(key)
        if waiting is None or notifies(waiting):
            original(self, key, release, target)


@mutant("no-sync-for-a-postApply-batch", "SYNC-9.hooks")
def no_sync_for_a_post_apply_batch() -> None:
    """Only a preApply batch sends a /sync when it completes; a postApply batch waits for
    the next periodic reconcile."""
    _hook_syncs_only_when(lambda waiting: waiting.phase == hooks.PRE_APPLY)


@mutant("sync-for-the-first-hook-batch-only", "SYNC-9.hooks")
def sync_for_the_first_hook_batch_only() -> None:
    """Only the first batch of a phase sends a /sync when it completes."""
    _hook_syncs_only_when(lambda waiting: waiting.index == 0)


@mutant("hook-batch-complete-when-one-is-healthy", "SYNC-9.hooks")
def hook_batch_complete_when_one_is_healthy() -> None:
    """The observer takes a hook batch for complete when any one of its objects is Healthy
    (any for all): its /sync comes early, and none comes when the batch really completes."""

    def check_hooks(self, key: str, release: Obj, target) -> None:
        waiting = self._hooks.waiting(key)
        if waiting is None or waiting.notified:
            return
        found = [observer.health.assess(target, ref).health for ref in waiting.refs]
        if any(h == observer.Health.HEALTHY for h in found):
            self._request_sync(release, f"{waiting.phase} batch {waiting.index + 1} is Healthy")
            self._hooks.notified(key, waiting)

    observer.Observer._check_hooks = check_hooks


@mutant("no-sync-for-a-hook-batch", "SYNC-9.hooks")
def no_sync_for_a_hook_batch() -> None:
    """A completed hook batch sends no /sync."""
    observer.Observer._check_hooks = lambda self, key, release, target: None


@mutant("pending-compared-by-time-of-day", "SYNC-3.absolute-time")
def pending_compared_by_time_of_day() -> None:
    """The to-the-second comparison drops the fraction by comparing the UTC clock readings,
    datetime.time() without microseconds, which drops the date too: a request made on a later
    day at an earlier time of day than lastHandledSyncAt is not pending."""

    def pending(self) -> bool:
        if self.sync_at is None:
            return False
        if self.last_handled_sync is None:
            return True
        requested = self.sync_at.time().replace(microsecond=0)
        return requested > self.last_handled_sync.time().replace(microsecond=0)

    policy.Requests.sync_pending = property(pending)


@mutant("automatic-clears-last-handled", "SYNC-7.not-written")
def automatic_clears_last_handled() -> None:
    """Automatic mode removes status.lastHandledSyncAt, a field only manual mode uses, so that
    a Release switched from manual to automatic shows no stale handled time (and, switched back,
    takes its last /sync for pending again)."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        automatic = result.policy is not None and result.policy.automatic
        if automatic and result.status.get("lastHandledSyncAt") is not None:
            result.status["lastHandledSyncAt"] = None  # a merge patch with null removes it
        return result


@mutant("request-bound-to-the-render-it-found", "SYNC-6.wait", "SYNC-6.failure")
def request_bound_to_the_render_it_found() -> None:
    """A /sync request is bound (in memory) to the render its first attempt found: once its
    apply failed or waited, a later reconcile that finds another render does not try it again
    and reports WaitingForSync, as if a new /sync were needed to approve the new render."""
    bound: dict[str, tuple[datetime | None, str]] = {}
    lock = threading.Lock()

    @wrap(reconciler.Reconciler, "_hold")
    def hold(original, self, release: Obj, status: Obj, ref: str, forced: bool):
        # _hold runs only in automatic mode or with a pending request: the request's apply
        # attempt starts here.
        if not policy.SyncPolicy.of(release).automatic:
            requests = policy.Requests.of(release)
            if requests.sync_pending:
                key = key_of(release)
                with lock:
                    seen = bound.get(key)
                    if seen is None or seen[0] != requests.sync_at:
                        seen = bound[key] = (requests.sync_at, ref)
                if seen[1] != ref:
                    return reconciler.manual_without_request(status, ref)
        return original(self, release, status, ref, forced)


def _sync_requested_at(obj: Obj) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(Annotation.SYNC_REQUESTED_AT)


@mutant("requests-found-at-start-taken-as-handled", "SYNC-6.across-a-restart")
def requests_found_at_start_taken_as_handled() -> None:
    """A started controller takes the sync-requested-at each Release has in its initial list
    as the previous instance's business: only a change of the annotation after the start is a
    request, so a request left pending by a failed or waiting apply (or sent while the
    controller was down) is not applied after a restart."""
    found_at_start: dict[str, str] = {}
    lock = threading.Lock()

    @wrap(controller.Controller, "_on_event")
    def on_event(original, self, event) -> None:
        key = key_of(event.new)
        if event.type == EventType.DELETED:
            with lock:
                found_at_start.pop(key, None)
        elif event.type == EventType.ADDED and not self.informer.wait_synced(0):
            value = _sync_requested_at(event.new)
            if value is not None:
                with lock:
                    found_at_start[key] = value
        original(self, event)

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        with lock:
            found = found_at_start.get(key_of(release))
        annotations = release["metadata"].get("annotations") or {}
        if found is None or annotations.get(Annotation.SYNC_REQUESTED_AT) != found:
            return original(self, release)
        kept = {k: v for k, v in annotations.items() if k != Annotation.SYNC_REQUESTED_AT}
        return original(self, {**release, "metadata": {**release["metadata"], "annotations": kept}})


@mutant("nanoseconds-rounded-to-microseconds", "SYNC-4.same-second")
def nanoseconds_rounded_to_microseconds() -> None:
    """A request time with more than six fractional digits (RFC3339Nano, as Go writes it) is
    rounded to microseconds instead of cut: ".9999996" becomes the next second, so a request in
    the same second as lastHandledSyncAt is pending."""
    original = synctime.parse_sync_time

    def parse_sync_time(text: str) -> datetime:
        parsed = original(text)
        match = synctime._RFC3339.fullmatch(text)
        fraction = match.group(7) if match else None
        if not fraction or len(fraction) <= 6:
            return parsed
        micro = round(float("0." + fraction) * 1_000_000)
        return parsed.replace(microsecond=0) + timedelta(microseconds=micro)

    synctime.parse_sync_time = parse_sync_time
