"""Benign variants shaped like what vendors' controllers do around the reconcile itself: how the
status reaches the API server (a server-side apply of its own; a merge patch of the changed
fields only), how Events are sent (client-go's broadcaster), and what /metrics says besides the
reference's series (controller-runtime's). None changes a decision, a reason, a condition's
status or when a reconcile runs, so each must pass the whole suite. Written from the document
alone, by a reviewer who had not seen the tests (an adversarial round).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from typing import Any

from kubernetes import client, dynamic

from convoy import api, controller, events
from convoy.reconciler import Result
from mutants import variant
from mutants.patching import wrap

log = logging.getLogger("convoy")

Obj = dict[str, Any]
#: The field manager of the status apply (the renders keep "convoy").
STATUS_MANAGER = "convoy-status"


# Not in the combined variant: the combined one sends its status as a merge patch of the
# changed fields (status-patch-of-changes below); an apply of the whole status and a merge patch
# of a part of it are two answers to the same question, so one controller makes one of them.
# Beside reconciling-condition's merge patch (a condition of another manager, which an apply
# leaves in place by design) the combined one would also keep a stale Reconciling=True.
@variant("status-server-side-apply", joins_combined=False)
def status_server_side_apply() -> None:
    """The status is written by a server-side apply of the status subresource (field manager
    "convoy-status", conflicts forced) instead of a merge patch, as controller-runtime's
    `Status().Patch(ctx, obj, client.Apply, client.FieldOwner(...), client.ForceOwnership)`
    does: the whole status the reconcile computed is applied, and still only when it differs
    from the status the reconcile read."""

    @wrap(controller.Controller, "_send_status")
    def send_status(original, self, release: Obj, status: Obj) -> None:
        meta = release["metadata"]
        body = {
            "apiVersion": api.API_VERSION,
            "kind": "Release",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            # null in an apply configuration means "not set": leave such fields out
            "status": {key: value for key, value in status.items() if value is not None},
        }
        with contextlib.suppress(dynamic.exceptions.NotFoundError):  # deleted meanwhile
            self._releases.status.server_side_apply(
                body=body,
                name=meta["name"],
                namespace=meta["namespace"],
                field_manager=STATUS_MANAGER,
                force_conflicts=True,
            )


# It changes how a status is sent (Controller._send_status), under the variants that change
# what a reconcile writes and in how many writes (mutants/shapes.py): each of their writes is a
# whole status, of which this sends the part that differs from the Release that write follows.
@variant("status-patch-of-changes")
def status_patch_of_changes() -> None:
    """The status merge patch carries only the status fields the reconcile changed (each
    changed field whole: a condition list, lastSuccessful), as controller-runtime's
    `client.MergeFrom(before)` and Flux's patch helper compute it from the object read at the
    start of the reconcile; a field left as it was read is not sent, and a reconcile that
    changed nothing sends nothing."""

    @wrap(controller.Controller, "_send_status")
    def send_status(original, self, release: Obj, status: Obj) -> None:
        before = release.get("status") or {}
        changes = {
            key: value for key, value in status.items() if key not in before or before[key] != value
        }
        changes.update({key: None for key in before if key not in status})  # RFC 7386 removal
        if changes:
            original(self, release, changes)


#: client-go's limit on an object name (a DNS subdomain), which the Event's name must keep.
NAME_LIMIT = 253
#: How long a stopping controller waits for the Events it has queued to be sent.
FLUSH_TIMEOUT = 2.0


class Broadcaster:
    """client-go's record.EventBroadcaster with StartRecordingToSink: the reconcile hands its
    Event over and goes on; one background worker writes the Events in the order given, and a
    failure to write one is logged, never returned to the reconcile."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Any, Obj]] = queue.Queue()
        self._started = False
        self._lock = threading.Lock()

    def put(self, core: Any, event: Obj) -> None:
        with self._lock:
            if not self._started:
                threading.Thread(target=self._run, name="event-broadcaster", daemon=True).start()
                self._started = True
        self._queue.put((core, event))

    def flush(self, timeout: float) -> None:
        """Until every queued Event was sent, or `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)

    def _run(self) -> None:
        while True:
            core, event = self._queue.get()
            try:
                core.create_namespaced_event(event["metadata"]["namespace"], event)
            except client.ApiException as error:
                log.warning(
                    "event %s not recorded: %s %s",
                    event["metadata"].get("name"),
                    error.status,
                    error.reason,
                )
            except Exception as error:  # an Event never fails anything
                log.warning("event %s not recorded: %s", event["metadata"].get("name"), error)
            finally:
                self._queue.task_done()


def client_go_metadata(release: Obj, moment_ns: int) -> Obj:
    """client-go's Event name, `<name>.<UnixNano in hex>`; generateName when that is too long."""
    meta = release["metadata"]
    name = f"{meta['name']}.{moment_ns:x}"
    if len(name) <= NAME_LIMIT:
        return {"name": name, "namespace": meta["namespace"]}
    return {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]}


@variant("event-broadcaster")
def event_broadcaster() -> None:
    """Events are sent as client-go's EventBroadcaster sends them: the reconcile queues the
    Event (the same reason, message, type and timestamps, decided when the Applied condition
    changed) and a background worker creates it, named `<release>.<UnixNano in hex>` as
    client-go's recorder names Events; a stopping controller first flushes what it queued."""
    broadcaster = Broadcaster()

    @wrap(events.EventRecorder, "applied_changed")
    def applied_changed(
        original, self, release: Obj, status: Obj, reason: api.Reason, message: str
    ) -> None:
        if events.applied_of(release.get("status")) == events.applied_of(status):
            return
        event = self.event(release, reason, message)
        event["metadata"] = client_go_metadata(release, time.time_ns())
        broadcaster.put(self._core, event)

    @wrap(controller.Controller, "stop")
    def stop(original, self) -> None:
        original(self)
        broadcaster.flush(FLUSH_TIMEOUT)


#: controller-runtime's reconcile-time buckets (a subset of its defaults), in seconds.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
CONTROLLER_LABEL = 'controller="release"'


class ReconcileMetrics:
    """controller_runtime_reconcile_total / _errors_total / _time_seconds of one controller."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._results: dict[str, int] = dict.fromkeys(
            ("success", "error", "requeue", "requeue_after"), 0
        )
        self._buckets = [0] * len(BUCKETS)
        self._count, self._sum = 0, 0.0
        self._active = 0
        self._last = threading.local()

    def started(self) -> None:
        self._last.result = "success"  # a Release gone meanwhile: nothing to requeue
        with self._lock:
            self._active += 1

    def decided(self, result: str) -> None:
        self._last.result = result

    def ended(self, seconds: float, failed: bool) -> None:
        result = "error" if failed else getattr(self._last, "result", "success")
        with self._lock:
            self._active -= 1
            self._results[result] += 1
            self._count += 1
            self._sum += seconds
            for index, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    self._buckets[index] += 1

    def text(self, workers: int) -> str:
        with self._lock:
            results, buckets = dict(self._results), list(self._buckets)
            count, total, active = self._count, self._sum, self._active
        errors = results["error"]
        lines = ["# TYPE controller_runtime_reconcile_total counter"]
        lines += [
            f'controller_runtime_reconcile_total{{{CONTROLLER_LABEL},result="{result}"}} {n}'
            for result, n in results.items()
        ]
        lines += ["# TYPE controller_runtime_reconcile_errors_total counter"]
        lines += [f"controller_runtime_reconcile_errors_total{{{CONTROLLER_LABEL}}} {errors}"]
        lines += ["# TYPE controller_runtime_reconcile_time_seconds histogram"]
        lines += [
            f'controller_runtime_reconcile_time_seconds_bucket{{{CONTROLLER_LABEL},le="{bound:g}"}}'
            f" {n}"
            for bound, n in zip(BUCKETS, buckets, strict=True)
        ]
        lines += [
            f'controller_runtime_reconcile_time_seconds_bucket{{{CONTROLLER_LABEL},le="+Inf"}}'
            f" {count}",
            f"controller_runtime_reconcile_time_seconds_sum{{{CONTROLLER_LABEL}}} {total:.6f}",
            f"controller_runtime_reconcile_time_seconds_count{{{CONTROLLER_LABEL}}} {count}",
            "# TYPE controller_runtime_active_workers gauge",
            f"controller_runtime_active_workers{{{CONTROLLER_LABEL}}} {active}",
            "# TYPE controller_runtime_max_concurrent_reconciles gauge",
            f"controller_runtime_max_concurrent_reconciles{{{CONTROLLER_LABEL}}} {workers}",
        ]
        return "\n".join(lines) + "\n"


def result_label(result: Result, requeue: str) -> str:
    """controller-runtime's result label of what the reference decided: an error for a
    transient failure (retried with backoff), requeue_after when a reconcile is scheduled."""
    if result.outcome.reason.transient:
        return "error"
    if result.recheck_after is not None or requeue.startswith("next in"):
        return "requeue_after"
    return "success"


@variant("controller-runtime-metrics")
def controller_runtime_metrics() -> None:
    """/metrics also serves controller-runtime's reconcile series (reconcile_total by result,
    reconcile_errors_total, the reconcile_time_seconds histogram, active_workers,
    max_concurrent_reconciles, with controller="release"), after the reference's own series,
    which stay as they are."""
    metrics = ReconcileMetrics()

    @wrap(controller.Controller, "_process")
    def process(original, self, key: str) -> None:
        metrics.started()
        began, failed = time.monotonic(), True
        try:
            original(self, key)
            failed = False
        finally:
            metrics.ended(time.monotonic() - began, failed)

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result: Result) -> str:
        decided = original(self, key, result)
        metrics.decided(result_label(result, decided))
        return decided

    @wrap(controller.Controller, "metrics")
    def text(original, self) -> str:
        return original(self) + metrics.text(self._workers)
