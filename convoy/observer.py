"""The observer: the controller's health loop (docs/api-reference.md "Observer and health").

For each Release it assesses the objects of the applied render every PERIOD seconds and checks
drift every spec.syncPolicy.interval, and records both in the Release's ReleaseInventory. It
sends a /sync (writes sync-requested-at) when its assessment of an applied render turns Healthy
for the first time, when a hook batch that a reconcile waits for turns Healthy, and, to the next
wave, when a cluster wave completes.

It runs on its own work queue, keyed like the controller's ("namespace/name"), so one Release is
never observed twice at once and each Release has its own schedule.

Which inventory writes start a reconcile (TRIG-6): a write of health data (renderRef, health,
entries) that differs from what the Release last took in. A reconcile takes the inventory in when
it reads it, and when it asks for an assessment of the render it has just applied (`assess_now`,
so that Healthy reflects that render without a second reconcile): that write is not news.

The observer is the inventory's only writer, so it knows each write before its watch event
comes: where the cache has not caught up with its last write, the inventory is that write (a
reconcile that read the cache then would take in older data, and the late event of a write it
has taken in, its own assessment's say, would look new). An event of a write no newer than the
one the Release took in is no news.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from kubernetes import client, dynamic

from convoy import apply, health, synctime, waves
from convoy.api import API_VERSION, Annotation
from convoy.clock import Clock
from convoy.health import Health
from convoy.hooks import Hooks
from convoy.informer import Event, EventType, Informer, object_key, read_fresh
from convoy.keylocks import KeyLocks
from convoy.policy import SpecError, SyncPolicy
from convoy.reconciler import render_release
from convoy.render import Obj, RenderError
from convoy.renders import RenderMemory
from convoy.targets import Target, TargetError, Targets, api_message
from convoy.workqueue import WorkQueue

log = logging.getLogger("convoy.observer")

#: Seconds between two health assessments of a Release.
PERIOD = 2.0
#: The observer's inventory writes remembered per Release: their events come within moments.
WRITES_KEPT = 8
_MESSAGE_MAX = 1024
_MERGE = "application/merge-patch+json"


def fingerprint(inventory_status: Obj | None) -> str:
    """The health data of an inventory status: what makes a write news (TRIG-6)."""
    status = inventory_status or {}
    return json.dumps([status.get(f) for f in ("renderRef", "health", "entries")], sort_keys=True)


def entry(ref: Obj, found: health.Assessment) -> Obj:
    return {
        "apiVersion": ref["apiVersion"],
        "kind": ref["kind"],
        "namespace": ref.get("namespace") or "",
        "name": ref["name"],
        "health": found.health.value,
        "message": found.message[:_MESSAGE_MAX],
    }


class Observer:
    def __init__(
        self,
        *,
        releases: dynamic.Resource,
        inventories: dynamic.Resource,
        release_cache: Informer,
        same_cluster: Callable[[Obj], list[Obj]],
        inventory_cache: Informer,
        targets: Targets,
        core: Any,
        clock: Clock,
        renders: RenderMemory,
        hooks: Hooks,
        key_locks: KeyLocks,
    ) -> None:
        self._releases = releases
        self._inventories = inventories
        self._release_cache = release_cache
        self._same_cluster = same_cluster
        self._inventory_cache = inventory_cache
        self._targets = targets
        self._core = core
        self._clock = clock
        self._renders = renders
        self._hooks = hooks
        self._key_locks = key_locks
        self.queue: WorkQueue[str] = WorkQueue(clock)
        self._lock = threading.Lock()
        self._tracked: set[str] = set()
        #: health data each Release last took in (see the module docstring)
        self._consumed: dict[str, str] = {}
        #: the resourceVersion of the inventory each Release last took in
        self._taken: dict[str, str | None] = {}
        #: the observer's inventory writes, oldest first
        self._writes: dict[str, deque[Obj]] = {}
        #: the render whose first Healthy assessment was announced with a /sync
        self._announced: dict[str, str] = {}
        #: the render a reconcile last assessed as it applied it (`assess_now`)
        self._assessed: dict[str, str | None] = {}
        #: monotonic time of the last drift check
        self._drift_checked: dict[str, float] = {}

    # -- running -------------------------------------------------------------------------------
    def start(self, workers: int = 1) -> None:
        for number in range(workers):
            threading.Thread(target=self._work, name=f"observer-{number}", daemon=True).start()

    def stop(self) -> None:
        self.queue.shutdown()

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            delay: float | None = PERIOD
            try:
                delay = self._observe(key)
            except Exception:
                log.exception("observing %s failed; trying again in %g s", key, PERIOD)
            finally:
                self.queue.done(key)
            if delay is None:
                self._forget(key)
            else:
                self.queue.add_after(key, delay)

    # -- what the controller tells the observer, and asks of it --------------------------------
    def on_release(self, event: Event) -> None:
        """Track Releases; observe at once a Release with a new applied render; send the next
        wave its /sync when this change completes a wave."""
        key = object_key(event.new)
        if event.type == EventType.DELETED:
            self._forget(key)
            return
        with self._lock:
            new = key not in self._tracked
            self._tracked.add(key)
        if new or _applied_ref(event.old) != _applied_ref(event.new):
            self.queue.add(key)
        if event.type == EventType.MODIFIED and event.old is not None:
            self._wave_completed(event.old, event.new)

    def is_news(self, inventory: Obj) -> bool:
        """Is this inventory's health data new to its Release?"""
        key = object_key(inventory)
        with self._lock:
            written = [version_of(write) for write in self._writes.get(key, ())]
            version, taken = version_of(inventory), self._taken.get(key)
            if version in written and taken in written:
                return written.index(version) > written.index(taken)
            return self._consumed.get(key) != fingerprint(inventory.get("status"))

    def inventory(self, key: str) -> Obj | None:
        """The inventory a reconcile reads; what it holds is then no news to the Release."""
        found = self._known(key)
        with self._lock:
            self._consumed[key] = fingerprint((found or {}).get("status"))
            self._taken[key] = version_of(found)
        return found

    def _known(self, key: str) -> Obj | None:
        """The inventory from the cache, unless the cache has not caught up with the
        observer's last write of it: then that write."""
        cached = self._inventory_cache.get(key)
        with self._lock:
            writes = list(self._writes.get(key, ()))
        behind = [version_of(write) for write in writes[:-1]]
        return writes[-1] if version_of(cached) in behind else cached

    def assess_now(self, release: Obj, status: Obj, target: Target) -> Obj | None:
        """Assess the render a reconcile has just applied (`status` is the Release status it
        will write) and record it; returns the inventory as it now is.

        A failed inventory write must not fail the reconcile whose apply succeeded: the
        observer loop records the assessment later.
        """
        key = object_key(release)
        old = self._known(key)
        assessed = self._assess(status, target)
        with self._lock:
            self._assessed[key] = assessed["renderRef"]
            self._consumed[key] = fingerprint(assessed)
            if assessed["health"] == Health.HEALTHY:
                self._announced[key] = assessed["renderRef"]
        try:
            recorded = self._record(release, old, assessed, None)
        except client.ApiException as error:
            log.warning("observer: %s: inventory not written: %s", key, api_message(error))
            return old
        with self._lock:
            self._taken[key] = version_of(recorded)
        return recorded

    # -- one observation -----------------------------------------------------------------------
    def _observe(self, key: str) -> float | None:
        """Observe one Release; returns the seconds until the next observation, None if gone."""
        with self._key_locks.held(key):  # never halfway through a reconcile of it
            release = self._current(key)
            return None if release is None else self._observe_release(key, release)

    def _current(self, key: str) -> Obj | None:
        """The Release from the cache, unless the cache lags behind the status write of the
        reconcile that last applied a render (its render is not the applied one there yet):
        then from the API server."""
        cached = self._release_cache.get(key)
        with self._lock:
            assessed = self._assessed.get(key)
        if cached is None or assessed in (None, _applied_ref(cached)):
            return cached
        fresh = read_fresh(self._releases, key)
        if fresh is None:
            return None
        with self._lock:  # what the API server says is applied (its status write may have failed)
            self._assessed[key] = _applied_ref(fresh)
        return fresh

    def _observe_release(self, key: str, release: Obj) -> float:
        try:
            target = self._targets.for_release(release)
        except TargetError as error:
            log.debug("observer: %s: %s", key, error)
            return PERIOD
        self._check_hooks(key, release, target)
        status = release.get("status") or {}
        if not _applied_ref(release):
            return PERIOD
        old = self._known(key)
        assessed = self._assess(status, target)
        drift = self._drift_if_due(key, release, status, target)
        self._record(release, old, assessed, drift)
        self._announce(key, release, old, assessed)
        return self._next_observation(key, release)

    def _assess(self, status: Obj, target: Target) -> Obj:
        refs = status.get("appliedObjects") or []
        entries = [entry(ref, health.assess(target, ref)) for ref in refs]
        return {
            "renderRef": status["lastSuccessful"]["renderRef"],
            "health": health.render_health(Health(e["health"]) for e in entries).value,
            "entries": entries,
        }

    def _drift_if_due(self, key: str, release: Obj, status: Obj, target: Target) -> list | None:
        """The drifted objects when a drift check is due (every interval), else None. A check
        that is due but cannot be made (the applied render is neither in memory nor the
        current render: after a restart, a new source in manual mode) waits one interval like
        a check made, instead of being tried again at once."""
        interval = _interval(release)
        last = self._drift_checked.get(key)
        if not interval or (last is not None and self._clock.now() - last < interval):
            return None
        self._drift_checked[key] = self._clock.now()
        objects = self._applied_objects(key, release, status, target)
        if objects is None:
            return None
        return [
            {**ref, "namespace": ref.get("namespace") or ""} for ref in apply.drift(target, objects)
        ]

    def _applied_objects(
        self, key: str, release: Obj, status: Obj, target: Target
    ) -> list[Obj] | None:
        """The objects of the applied render: from memory, or rendered again when the current
        render is still the applied one (after a restart); None when neither is known."""
        ref = status["lastSuccessful"]["renderRef"]
        remembered = self._renders.get(key, ref)
        if remembered is None:
            try:
                remembered = render_release(self._core, release, target)
            except RenderError:
                return None
        return list(remembered.objects) if remembered.ref == ref else None

    def _next_observation(self, key: str, release: Obj) -> float:
        interval, last = _interval(release), self._drift_checked.get(key)
        if not interval or last is None:
            return PERIOD
        return max(0.0, min(PERIOD, last + interval - self._clock.now()))

    def _record(self, release: Obj, old: Obj | None, assessed: Obj, drift: list | None) -> Obj:
        """Write the inventory when the health data changed or drift was checked."""
        previous = (old or {}).get("status") or {}
        if fingerprint(assessed) == fingerprint(previous) and drift is None:
            return old or {}
        now = synctime.format_sync_time(self._clock.wall(), precise=True)
        status = {**assessed, "assessedAt": now}
        if drift is not None:
            status.update(drift=drift, driftCheckedAt=now)
        meta = release["metadata"]
        if old is None:
            self._create_inventory(release)
        with _absent_ok():
            written = self._inventories.status.patch(
                namespace=meta["namespace"],
                name=meta["name"],
                body={"status": status},
                content_type=_MERGE,
            ).to_dict()
            with self._lock:
                writes = self._writes.setdefault(object_key(release), deque(maxlen=WRITES_KEPT))
                writes.append(written)
            return written
        return {**(old or {}), "status": {**previous, **status}}

    def _create_inventory(self, release: Obj) -> None:
        meta = release["metadata"]
        owner = {
            "apiVersion": API_VERSION,
            "kind": "Release",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
        }
        body = {
            "apiVersion": API_VERSION,
            "kind": "ReleaseInventory",
            "metadata": {"name": meta["name"], "ownerReferences": [owner]},
            "spec": {"releaseName": meta["name"]},
        }
        # A conflict: it exists, and our cache had not seen it yet.
        with contextlib.suppress(dynamic.exceptions.ConflictError):
            self._inventories.create(body=body, namespace=meta["namespace"])

    # -- the /syncs ----------------------------------------------------------------------------
    def _announce(self, key: str, release: Obj, old: Obj | None, assessed: Obj) -> None:
        """/sync when the applied render is Healthy for the first time."""
        ref = assessed["renderRef"]
        if assessed["health"] != Health.HEALTHY:
            return
        previous = (old or {}).get("status") or {}
        with self._lock:
            first = self._announced.get(key) != ref and (
                previous.get("renderRef"),
                previous.get("health"),
            ) != (ref, Health.HEALTHY.value)
            self._announced[key] = ref
        if first:
            self._request_sync(release, f"render {ref} is Healthy")

    def _check_hooks(self, key: str, release: Obj, target: Target) -> None:
        """/sync when the hook batch this Release waits for is Healthy."""
        waiting = self._hooks.waiting(key)
        if waiting is None or waiting.notified:
            return
        found = [health.assess(target, ref).health for ref in waiting.refs]
        if all(h == Health.HEALTHY for h in found):
            self._request_sync(release, f"{waiting.phase} batch {waiting.index + 1} is Healthy")
            self._hooks.notified(key, waiting)

    def _wave_completed(self, old: Obj, new: Obj) -> None:
        """/sync to each Release of the next wave when this change completes a wave."""
        others = self._same_cluster(new)
        if not waves.wave_completed(old, new, others):
            return
        for release in waves.next_wave(new, others):
            self._request_sync(release, f"wave {waves.wave_of(new)} completed")

    def _request_sync(self, release: Obj, why: str) -> None:
        """A /sync as the subresource API sends it: sync-requested-at = now."""
        meta = release["metadata"]
        now = synctime.format_sync_time(self._clock.wall(), precise=True)
        body = {"metadata": {"annotations": {Annotation.SYNC_REQUESTED_AT.value: now}}}
        with _absent_ok():
            self._releases.patch(
                namespace=meta["namespace"], name=meta["name"], body=body, content_type=_MERGE
            )
            log.info("observer: /sync %s/%s at %s: %s", meta["namespace"], meta["name"], now, why)

    def _forget(self, key: str) -> None:
        with self._lock:
            self._tracked.discard(key)
            self._consumed.pop(key, None)
            self._announced.pop(key, None)
            self._assessed.pop(key, None)
            self._taken.pop(key, None)
            self._writes.pop(key, None)
            self._drift_checked.pop(key, None)


def version_of(obj: Obj | None) -> str | None:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")


def _applied_ref(release: Obj | None) -> str | None:
    return (((release or {}).get("status") or {}).get("lastSuccessful") or {}).get("renderRef")


def _interval(release: Obj) -> float:
    try:
        return SyncPolicy.of(release).interval
    except SpecError:
        return 0.0


def _absent_ok() -> contextlib.suppress:
    """Ignore a 404: the Release (and with it its inventory) was deleted meanwhile."""
    return contextlib.suppress(dynamic.exceptions.NotFoundError)
