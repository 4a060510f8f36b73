"""The release controller: informers feed a rate-limited work queue; workers reconcile.

Requeue rules (docs/api-reference.md, "Requeue"): a transient failure is retried with the
Release's retryBackoff, or the queue's default limiter, and keeps its failure count; a success
or a hold forgets the count; with an interval, every outcome other than a transient failure
schedules the next periodic reconcile. A reconcile that depends on a deadline (a rollout's
healthTimeout, a hook batch's 60 s) also schedules one at that deadline.

Besides the reconcile workers the process runs the observer (convoy.observer), which the
Release and ReleaseInventory informers feed too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter, defaultdict
from typing import Any

from kubernetes import client, dynamic

from convoy import api
from convoy.api import HOLDS
from convoy.clock import Clock, RealClock
from convoy.events import EventRecorder
from convoy.hooks import Hooks
from convoy.informer import Event, EventType, Informer, object_key, read_fresh
from convoy.keylocks import KeyLocks
from convoy.observer import Observer
from convoy.reconciler import Context, Reconciler, Result
from convoy.renders import RenderMemory
from convoy.targets import Targets
from convoy.triggers import RESYNC, inventory_trigger, release_trigger, wave_trigger
from convoy.waves import cluster_of, higher_waves
from convoy.workqueue import WorkQueue
from convoyapi.discovery import dynamic_client

log = logging.getLogger("convoy")

Obj = dict[str, Any]
#: How long start() waits for the ReleaseInventory cache before the first reconcile.
INVENTORY_SYNC_TIMEOUT = 30.0


class Controller:
    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        resync: float,
        workers: int,
        namespace: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._clock = clock or RealClock()
        self._stop = threading.Event()
        self._workers = workers
        self._dynamic = dynamic_client(api_client)
        self._releases = self._dynamic.resources.get(api_version=api.API_VERSION, kind="Release")
        inventories = self._dynamic.resources.get(
            api_version=api.API_VERSION, kind="ReleaseInventory"
        )
        self.queue: WorkQueue[str] = WorkQueue(self._clock)
        self._why: dict[str, set[str]] = defaultdict(set)
        self._why_lock = threading.Lock()
        self.informer = Informer(
            self._releases, self._on_event, resync, self._stop, namespace, index=cluster_of
        )
        self.inventory_informer = Informer(
            inventories, self._on_inventory, 0, self._stop, namespace
        )
        core, targets = client.CoreV1Api(api_client), Targets(api_client)
        renders, hooks = RenderMemory(), Hooks(self._clock)
        self._key_locks = KeyLocks()
        self.observer = Observer(
            releases=self._releases,
            inventories=inventories,
            release_cache=self.informer,
            same_cluster=self.same_cluster,
            inventory_cache=self.inventory_informer,
            targets=targets,
            core=core,
            clock=self._clock,
            renders=renders,
            hooks=hooks,
            key_locks=self._key_locks,
        )
        context = Context(
            same_cluster=self.same_cluster,
            inventory=self.observer.inventory,
            assess=self.observer.assess_now,
        )
        self._reconciler = Reconciler(
            core, targets, self._clock, context=context, renders=renders, hooks=hooks
        )
        self._outcomes: Counter[str] = Counter()
        self._events = EventRecorder(core, self._clock)

    # -- events -> queue -----------------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        """Every Release event: the reconcile predicates, then the observer."""
        self._on_release(event)
        self.observer.on_release(event)

    def _on_release(self, event: Event) -> None:
        trigger = release_trigger(event)
        key = object_key(event.new)
        if event.type == EventType.DELETED:
            self.queue.forget(key)
            self._reconciler.forget(key)
        if trigger:
            self.enqueue(key, trigger)
        if wave_trigger(event):
            why = f"lower-wave-changed:{event.new['metadata']['name']}"
            for higher in higher_waves(event.new, self.same_cluster(event.new)):
                self.enqueue(object_key(higher), why)

    def _on_inventory(self, event: Event) -> None:
        """New health data starts a reconcile of the Release the inventory belongs to."""
        trigger = inventory_trigger(event)
        if trigger and self.observer.is_news(event.new):
            self.enqueue(object_key(event.new), trigger)

    def same_cluster(self, release: Obj) -> list[Obj]:
        """The cached Releases on the Cluster of `release` (itself included): all a wave needs."""
        return self.informer.indexed(cluster_of(release))

    def enqueue(self, key: str, why: str) -> None:
        """Queue a reconcile; a resync's waits behind those that events started."""
        with self._why_lock:
            self._why[key].add(why)
        self.queue.add(key, low_priority=why == RESYNC)

    # -- running -------------------------------------------------------------------------------
    def start(self) -> None:
        self.start_caches()
        self.start_work()

    def start_caches(self) -> None:
        """Inventories first: the first reconciles read health from their cache. A replica
        waiting for leadership runs its caches (and their resync) too, as controller-runtime's
        managers do; their events wait in the queue."""
        self.inventory_informer.start()
        if not self.inventory_informer.wait_synced(INVENTORY_SYNC_TIMEOUT):
            log.warning("ReleaseInventory cache not synced after %gs", INVENTORY_SYNC_TIMEOUT)
        self.informer.start()

    def start_work(self) -> None:
        """The observer and the reconcile workers: what only the leader runs."""
        self.observer.start()
        for number in range(self._workers):
            threading.Thread(target=self._work, name=f"worker-{number}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self.queue.shutdown()
        self.observer.stop()

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                self._process(key)
            except Exception:
                log.exception("reconcile %s crashed; retrying with backoff", key)
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

    def _process(self, key: str) -> None:
        with self._why_lock:
            why = sorted(self._why.pop(key, set())) or ["requeue"]
        with self._key_locks.held(key):  # no observation of it until its status is written
            # Fresh: the cache may not have our own last status write yet.
            release = read_fresh(self._releases, key)
            if release is None:
                self.queue.forget(key)
                return
            result = self._reconciler.reconcile(release)
            self._write_status(release, result.status)
        outcome = result.outcome
        self._events.applied_changed(release, result.status, outcome.reason, outcome.message)
        self._outcomes[outcome.reason.value] += 1
        requeue = self._requeue(key, result)
        log.info(
            "reconcile %s triggers=%s %s -> %s (%s) %s",
            key,
            ",".join(why),
            " ".join(result.notes),
            outcome.reason,
            outcome.message,
            requeue,
        )

    def metrics(self) -> str:
        """Prometheus text: reconciles by Applied reason, and the queue's length."""
        lines = ["# TYPE convoy_reconciles_total counter"]
        lines += [
            f'convoy_reconciles_total{{reason="{reason}"}} {count}'
            for reason, count in sorted(self._outcomes.items())
        ]
        lines += ["# TYPE convoy_workqueue_depth gauge"]
        lines += [f"convoy_workqueue_depth {len(self.queue)}"]
        return "\n".join(lines) + "\n"

    def _write_status(self, release: Obj, status: Obj) -> None:
        """Store the reconcile's `status` of the Release it read, unless nothing changed."""
        if status != (release.get("status") or {}):
            self._send_status(release, status)

    def _send_status(self, release: Obj, status: Obj) -> None:
        """How a status reaches the API server: a merge patch of all of it."""
        meta = release["metadata"]
        with contextlib.suppress(dynamic.exceptions.NotFoundError):  # deleted meanwhile
            self._releases.status.patch(
                namespace=meta["namespace"],
                name=meta["name"],
                body={"status": status},
                content_type="application/merge-patch+json",
            )

    def _requeue(self, key: str, result: Result) -> str:
        """Schedule the next reconcile by the requeue rules; return what was decided."""
        reason, policy = result.outcome.reason, result.policy
        if reason.transient:
            limiter = policy.backoff.delay if policy and policy.backoff else None
            delay = self.queue.add_rate_limited(key, limiter)
            return f"retry {self.queue.num_requeues(key)} in {delay:.3f}s"
        if result.outcome.applied or reason in HOLDS:
            self.queue.forget(key)
        if result.recheck_after is not None:
            self.queue.add_after(key, result.recheck_after)
        if policy and policy.interval > 0:
            self.queue.add_after(key, policy.interval)
            return f"next in {policy.interval:g}s"
        return "no periodic requeue"
