"""Mutants of the sections "Requeue rules" and "interval": REQ-1, REQ-2, INT-1..3."""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from typing import Any

from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from convoy import api, apply, controller, durations, observer, policy, reconciler
from convoy.api import Reason
from convoy.informer import EventType
from mutants import generated, mutant
from mutants.patching import NOT_READY, key_of, sync_policy_read_once, wrap

Obj = dict[str, Any]

#: The reasons the document lists as not transient ("the waiting reasons" are the four
#: Waiting... reasons of the API reference).
NOT_TRANSIENT = (
    Reason.UNSUPPORTED,
    Reason.UNAPPLIABLE,
    Reason.PINNED,
    Reason.HOOK_FAILED,
    Reason.WAITING_FOR_SYNC,
    Reason.WAITING_FOR_WAVE,
    Reason.WAITING_FOR_HOOKS,
    Reason.WAITING_FOR_HEALTH,
)


@mutant("transient-not-retried", *(f"REQ-1.{reason.value}" for reason in api.TRANSIENT))
def transient_not_retried() -> None:
    """Transient failures are not retried with backoff: they wait like holds."""
    Reason.transient = property(lambda self: False)


@mutant("everything-retried", *(f"REQ-2.{reason.value}" for reason in NOT_TRANSIENT))
def everything_retried() -> None:
    """Non-transient reasons (Unappliable, Unsupported, waiting) are retried with backoff."""
    Reason.transient = property(lambda self: self is not Reason.APPLIED)


def _set_transient(reason: Reason, transient: bool) -> None:
    api.TRANSIENT = api.TRANSIENT | {reason} if transient else api.TRANSIENT - {reason}


# One mutant per reason the document lists: the list written with that reason left out, or
# with it added.
for _reason in sorted(api.TRANSIENT):
    generated(
        f"{_reason.value}-not-transient",
        f"{_reason.value} is left out of the transient reasons: it waits for the next "
        "periodic reconcile instead of a backoff retry.",
        lambda reason=_reason: _set_transient(reason, False),
        f"REQ-1.{_reason.value}",
    )
for _reason in NOT_TRANSIENT:
    generated(
        f"{_reason.value}-retried-with-backoff",
        f"{_reason.value} is counted among the transient reasons: it is retried with backoff.",
        lambda reason=_reason: _set_transient(reason, True),
        f"REQ-2.{_reason.value}",
    )


#: The reasons an author may take for "not ready yet", to poll rather than back off from.
@mutant("not-ready-polled-at-the-first-delay", *(f"REQ-1.{r.value}" for r in NOT_READY))
def not_ready_polled_at_the_first_delay() -> None:
    """A Release whose source, values or Cluster is not ready yet is polled at the first
    delay (controller-runtime's RequeueAfter habit): its retries never back off."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result):
        if result.outcome.reason in NOT_READY:
            self.queue.forget(key)
        return original(self, key, result)


@mutant("kubeconfig-errors-not-retried", "REQ-1.ClusterNotReady")
def kubeconfig_errors_not_retried() -> None:
    """A ClusterNotReady caused by the Cluster's kubeconfig Secret (missing, without its key,
    no kubeconfig in it) is taken for the user's error and not retried with backoff; a
    missing Cluster or an unreachable API server is."""
    _cluster_not_ready_not_retried_when("Secret ")


def _cluster_not_ready_not_retried_when(message_part: str) -> None:
    """A ClusterNotReady whose message has `message_part` waits like a hold."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result: reconciler.Result) -> str:
        outcome = result.outcome
        if outcome.reason == Reason.CLUSTER_NOT_READY and message_part in outcome.message:
            not_transient = dataclasses.replace(outcome, reason=Reason.UNSUPPORTED)
            result = dataclasses.replace(result, outcome=not_transient)
        return original(self, key, result)


@mutant("unreachable-cluster-waits-for-the-periodic-reconcile", "REQ-1.ClusterNotReady")
def unreachable_cluster_waits_for_the_periodic_reconcile() -> None:
    """A Cluster whose API server refuses connections is taken for one that is down for a
    while: it waits for the next periodic reconcile instead of a backoff retry; a missing
    Cluster or kubeconfig is retried."""
    _cluster_not_ready_not_retried_when("not reachable")


@mutant("manual-failure-retried-only-with-a-request", "REQ-1.manual")
def manual_failure_retried_only_with_a_request() -> None:
    """In manual mode a transient failure is retried only while a /sync is pending: without
    one the author took the failed reconcile for a report that can wait like a hold."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        manual = result.policy is not None and not result.policy.automatic
        result.idle_manual = manual and not policy.Requests.of(release).sync_pending
        return result

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result):
        if getattr(result, "idle_manual", False) and result.outcome.reason.transient:
            held = reconciler.Outcome(False, Reason.WAITING_FOR_SYNC, result.outcome.message)
            result = dataclasses.replace(result, outcome=held)
        return original(self, key, result)


@mutant("pending-request-retried-with-backoff", "REQ-2.request-pending")
def pending_request_retried_with_backoff() -> None:
    """In manual mode a /sync request whose reconcile failed (Unappliable, Unsupported,
    HookFailed) is retried with backoff: "the next reconcile tries the apply again" read as a
    retry."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        manual = result.policy is not None and not result.policy.automatic
        result.failed_request = (
            manual
            and policy.Requests.of(release).sync_pending
            and not result.outcome.applied
            and result.outcome.reason not in api.HOLDS
        )
        return result

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result):
        if getattr(result, "failed_request", False) and not result.outcome.reason.transient:
            limiter = result.policy.backoff.delay if result.policy.backoff else None
            delay = self.queue.add_rate_limited(key, limiter)
            return f"retry {self.queue.num_requeues(key)} in {delay:.3f}s"
        return original(self, key, result)


# -- interval ----------------------------------------------------------------------------------
def _with_interval(read: policy.SyncPolicy, interval: float) -> policy.SyncPolicy:
    return policy.SyncPolicy(read.automatic, interval, read.backoff)


@mutant("interval-doubled", "INT-1.period")
def interval_doubled() -> None:
    """The periodic reconcile comes at twice spec.syncPolicy.interval."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        read = original(release)
        return _with_interval(read, 2 * read.interval)


@mutant("interval-in-whole-seconds", "INT-1.period")
def interval_in_whole_seconds() -> None:
    """The interval is kept in whole seconds (an int conversion): 2300ms becomes 2 s."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        read = original(release)
        return _with_interval(read, float(int(read.interval)))


@mutant("interval-rounded-up-to-whole-seconds", "INT-1.period")
def interval_rounded_up_to_whole_seconds() -> None:
    """The interval is rounded up to whole seconds (a timer of second granularity that never
    fires early): 500ms becomes 1 s, 2300ms 3 s. Each period is late by less than one gap's
    slack; only their sum tells."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        read = original(release)
        return _with_interval(read, float(math.ceil(read.interval)))


@mutant("duration-read-to-its-first-term", "INT-1.period")
def duration_read_to_its_first_term() -> None:
    """A duration of several terms counts its first one only: "1s500ms" is 1 s (a parser
    that matches one number and unit where Go sums every term)."""
    terms = durations._TERM

    class FirstTerm:
        def findall(self, text: str) -> list[tuple[str, str]]:
            return terms.findall(text)[:1]

    durations._TERM = FirstTerm()


@mutant("deadline-check-replaces-the-interval", "INT-1.rolling-out")
def deadline_check_replaces_the_interval() -> None:
    """A reconcile that schedules a deadline check (a rollout's timeout, a hook batch's)
    schedules no periodic reconcile besides: its author took the deadline for the next
    reconcile due anyway."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result: reconciler.Result) -> str:
        read = result.policy
        if result.recheck_after is not None and read is not None:
            result = dataclasses.replace(result, policy=_with_interval(read, 0))
        return original(self, key, result)


@mutant("interval-only-in-automatic-mode", "INT-1.manual")
def interval_only_in_automatic_mode() -> None:
    """Only automatic Releases get a periodic reconcile: "a manual one waits for /sync"."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        if result.policy is not None and not result.policy.automatic:
            result.policy = _with_interval(result.policy, 0.0)
        return original(self, key, result)


@mutant("waiting-for-sync-backs-off", "INT-1.manual")
def waiting_for_sync_backs_off() -> None:
    """A manual Release that waits for /sync is requeued at twice its interval, as if
    WaitingForSync were a hold that backs off: new renders show up one interval late."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        if result.policy is not None and result.outcome.reason is Reason.WAITING_FOR_SYNC:
            result.policy = _with_interval(result.policy, 2 * result.policy.interval)
        return original(self, key, result)


@mutant("interval-kept-per-namespace", "INT-1.per-release")
def interval_kept_per_namespace() -> None:
    """The interval is cached per namespace when a Release is created or its spec changes:
    every Release of the namespace requeues with the interval of the one created or changed
    last. (Status writes change no generation and leave the cache alone, so the wrong interval
    does not depend on which Release's status the informer delivered last.)"""
    intervals: dict[str, float] = {}
    lock = threading.Lock()

    def spec_written(event) -> bool:
        if event.type == EventType.ADDED:
            return True
        generation = event.new["metadata"].get("generation")
        return event.type == EventType.MODIFIED and (
            event.old is None or event.old["metadata"].get("generation") != generation
        )

    @wrap(controller.Controller, "_on_release")
    def on_release(original, self, event) -> None:
        if spec_written(event):
            try:
                interval = policy.SyncPolicy.of(event.new).interval
            except policy.SpecError:
                interval = 0.0
            with lock:
                intervals[event.new["metadata"]["namespace"]] = interval
        original(self, event)

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        if result.policy is not None and result.policy.interval > 0:
            with lock:
                shared = intervals.get(key.split("/", 1)[0], result.policy.interval)
            result.policy = _with_interval(result.policy, shared)
        return original(self, key, result)


@mutant("interval-read-once", "INT-1.changed", "INT-3.changed-to-zero")
def interval_read_once() -> None:
    """The interval is read at a Release's first reconcile and kept in memory: a changed
    interval is ignored until a restart."""
    sync_policy_read_once("interval")


@mutant("removed-interval-kept", "INT-3.removed")
def removed_interval_kept() -> None:
    """The interval is kept per Release and taken from the spec where it is written: an
    interval removed from the spec leaves the last one in place (one written as 0 stops it),
    as a controller that merges each spec into the settings it remembers does."""
    remembered: dict[str, float] = {}
    lock = threading.Lock()

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        read = original(release)
        written = "interval" in ((release.get("spec") or {}).get("syncPolicy") or {})
        with lock:
            if written:
                remembered[release["metadata"]["uid"]] = read.interval
            interval = remembered.get(release["metadata"]["uid"], read.interval)
        return _with_interval(read, interval)


@mutant("pending-periodic-reconcile-kept", "INT-1.changed")
def pending_periodic_reconcile_kept() -> None:
    """A Release whose periodic reconcile is scheduled keeps that time: an interval shortened
    by a spec edit (10m to 1s) takes effect only once the old period has passed."""
    due: dict[str, float] = {}
    lock = threading.Lock()

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        interval = result.policy.interval if result.policy is not None else 0.0
        now = time.monotonic()
        with lock:
            if interval > 0 and due.get(key, 0.0) > now:
                result.policy = _with_interval(result.policy, 0.0)  # the scheduled one stays
            elif interval > 0:
                due[key] = now + interval
        return original(self, key, result)


@mutant("a-missing-object-is-no-drift", "INT-2.deleted")
def a_missing_object_is_no_drift() -> None:
    """A drift check compares the objects it finds: one deleted from the target is not
    drift (a 404 taken for "nothing to compare")."""

    def found_in_place(target, obj: Obj) -> bool:
        metadata = obj["metadata"]
        try:
            resource = target.resource(obj["apiVersion"], obj["kind"])
            live = resource.get(name=metadata["name"], namespace=metadata.get("namespace"))
        except NotFoundError:
            return True
        except ResourceNotFoundError:  # a kind the target does not serve: drift, as before
            return False
        return apply.matches(obj, live.to_dict())

    apply._in_place = found_in_place


@mutant("drift-checked-every-3s", "INT-2.period")
def drift_checked_every_3s() -> None:
    """The observer checks drift every 3 seconds, whatever the Release's interval."""
    observer._interval = lambda release: 3.0


@mutant("drift-checked-only-in-manual-mode", "INT-2.automatic")
def drift_checked_only_in_manual_mode() -> None:
    """The observer checks no drift of an automatic Release ("its reconciles mend drift
    anyway")."""

    @wrap(observer.Observer, "_drift_if_due")
    def drift_if_due(original, self, key: str, release: Obj, status: Obj, target):
        try:
            if policy.SyncPolicy.of(release).automatic:
                return None
        except policy.SpecError:
            pass
        return original(self, key, release, status, target)


@mutant("drift-interval-read-once", "INT-2.changed")
def drift_interval_read_once() -> None:
    """The observer reads a Release's interval once, when it starts to observe it: a changed
    interval changes the reconciles, not the drift checks."""
    original = observer._interval
    first: dict[str, float] = {}
    lock = threading.Lock()

    def interval(release: Obj) -> float:
        with lock:
            return first.setdefault(key_of(release), original(release))

    observer._interval = interval


@mutant("drift-due-by-the-interval-of-the-last-check", "INT-2.changed")
def drift_due_by_the_interval_of_the_last_check() -> None:
    """The next drift check is due one interval after the last, by the interval in force at
    that check: an interval shortened from 10m waits the old one out."""
    in_force: dict[str, float] = {}

    @wrap(observer.Observer, "_drift_if_due")
    def drift_if_due(original, self, key: str, release: Obj, status: Obj, target):
        last, due = self._drift_checked.get(key), in_force.get(key)
        if last is not None and due is not None and self._clock.now() - last < due:
            return None
        found = original(self, key, release, status, target)
        if self._drift_checked.get(key) != last:  # it checked
            in_force[key] = observer._interval(release)
        return found


@mutant("drift-checked-without-an-interval", "INT-2.no-interval")
def drift_checked_without_an_interval() -> None:
    """Without an interval the observer checks drift at each of its observations."""
    original = observer._interval
    observer._interval = lambda release: original(release) or observer.PERIOD


@mutant("default-interval", "INT-3.unset", "INT-3.zero")
def default_interval() -> None:
    """Without an interval, the Release is reconciled every 3 seconds anyway."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        read = original(release)
        return read if read.interval else _with_interval(read, 3.0)


@mutant("unset-interval-means-10s", "INT-3.unset")
def unset_interval_means_10s() -> None:
    """An unset interval defaults to 10 seconds (only an explicit 0 turns it off)."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        read = original(release)
        spec = (release.get("spec") or {}).get("syncPolicy") or {}
        return _with_interval(read, 10.0) if "interval" not in spec else read


@mutant("zero-interval-means-1s", "INT-3.zero")
def zero_interval_means_1s() -> None:
    """An interval of 0 means "as often as sensible": every second."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        read = original(release)
        spec = (release.get("spec") or {}).get("syncPolicy") or {}
        zero = "interval" in spec and not read.interval
        return _with_interval(read, 1.0) if zero else read


@mutant("health-timeout-polls-without-an-interval", "INT-3.unset")
def health_timeout_polls_without_an_interval() -> None:
    """Without an interval, a Release with a failurePolicy is reconciled every healthTimeout:
    the author, thinking nothing else would notice a rollout's timeout there, schedules the
    timeout check at every reconcile of such a Release, not only while a rollout is
    Progressing (with an interval, "the periodic reconcile notices it")."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj) -> reconciler.Result:
        result = original(self, release)
        if result.policy is None or result.policy.interval > 0:
            return result
        try:
            failure = policy.FailurePolicy.of(release)
        except policy.SpecError:
            return result
        if failure is not None:
            result.recheck(failure.health_timeout)
        return result


@mutant("forced-reconcile-schedules-no-interval", "INT-1.after-a-failure")
def forced_reconcile_schedules_no_interval() -> None:
    """A forced reconcile is handled as a one-shot (a result without RequeueAfter): it schedules
    no periodic reconcile, so a Release with an interval is not reconciled again until some
    event or the resync starts a reconcile."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        result.adv_forced = forced
        return original(self, release, result, requests, forced)

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        read = result.policy
        if getattr(result, "adv_forced", False) and read and not result.outcome.reason.transient:
            result.policy = policy.SyncPolicy(read.automatic, 0.0, read.backoff)
        return original(self, key, result)
