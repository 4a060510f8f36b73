"""A shared informer: list, then watch, into a cache; resync replays the cache.

Mirrors client-go's SharedIndexInformer closely enough for the document's rules: the resync
period re-delivers every cached object as an update whose old and new objects are the same
(a replay, not a re-list), and a watch that expires resumes from the last resourceVersion,
re-listing only when the server says that version is gone (410).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kubernetes import dynamic
from kubernetes.client import ApiException

log = logging.getLogger(__name__)

Obj = dict[str, Any]
_WATCH_SECONDS = 300
_RETRY_SECONDS = 1.0


class EventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    RESYNC = "RESYNC"


@dataclass(frozen=True)
class Event:
    type: EventType
    old: Obj | None
    new: Obj


Handler = Callable[[Event], None]


def object_key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


class Informer:
    """Watches one resource (in one namespace, or all) and calls `handler` for each event."""

    def __init__(
        self,
        resource: dynamic.Resource,
        handler: Handler,
        resync: float,
        stop: threading.Event,
        namespace: str | None = None,
    ) -> None:
        self._resource = resource
        self._namespace = namespace
        self._handler = handler
        self._resync = resync
        self._stop = stop
        self._cache: dict[str, Obj] = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()

    # -- the cache ---------------------------------------------------------------------------
    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._cache.get(key)

    def list(self) -> list[Obj]:
        with self._lock:
            return list(self._cache.values())

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    # -- running -----------------------------------------------------------------------------
    def start(self) -> None:
        name = self._resource.kind
        threading.Thread(target=self._run, name=f"informer-{name}", daemon=True).start()
        if self._resync > 0:
            threading.Thread(target=self._resync_loop, name=f"resync-{name}", daemon=True).start()

    def _run(self) -> None:
        version = None
        while not self._stop.is_set():
            try:
                version = version or self._relist()
                version = self._watch(version)
            except ApiException as error:
                if error.status == 410:
                    kind = self._resource.kind
                    log.info("watch %s: resourceVersion %s expired; listing again", kind, version)
                    version = None
                    continue
                log.warning("watch %s failed: %s", self._resource.kind, error.reason)
                self._stop.wait(_RETRY_SECONDS)
            except Exception:
                log.exception("watch %s failed", self._resource.kind)
                self._stop.wait(_RETRY_SECONDS)

    def _relist(self) -> str:
        """List everything; deliver the differences from the cache as events."""
        listed = self._resource.get(namespace=self._namespace).to_dict()
        fresh = {object_key(obj): obj for obj in listed["items"]}
        with self._lock:
            old_cache, self._cache = self._cache, dict(fresh)
        for key, obj in fresh.items():
            previous = old_cache.get(key)
            if previous is None:
                self._handler(Event(EventType.ADDED, None, obj))
            elif previous["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                self._handler(Event(EventType.MODIFIED, previous, obj))
        for key in old_cache.keys() - fresh.keys():
            self._handler(Event(EventType.DELETED, old_cache[key], old_cache[key]))
        self._synced.set()
        return listed["metadata"]["resourceVersion"]

    def _watch(self, version: str) -> str:
        """Follow the watch until it ends; return the last resourceVersion seen."""
        stream = self._resource.watch(
            namespace=self._namespace,
            resource_version=version,
            timeout=_WATCH_SECONDS,
            allow_watch_bookmarks=True,
        )
        for raw in stream:
            if self._stop.is_set():
                break
            kind, obj = raw["type"], raw["raw_object"]
            if kind == "ERROR":
                raise ApiException(status=obj.get("code"), reason=obj.get("message"))
            version = obj["metadata"]["resourceVersion"]
            if kind != "BOOKMARK":
                self._deliver(EventType(kind), obj)
        return version

    def _deliver(self, kind: EventType, obj: Obj) -> None:
        key = object_key(obj)
        with self._lock:
            old = self._cache.get(key)
            if kind == EventType.DELETED:
                self._cache.pop(key, None)
            else:
                self._cache[key] = obj
        self._handler(Event(kind, old, obj))

    def _resync_loop(self) -> None:
        """Every resync period, replay each cached object as an update to itself."""
        while not self._stop.wait(self._resync):
            for obj in self.list():
                self._handler(Event(EventType.RESYNC, obj, obj))
