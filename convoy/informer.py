"""A shared informer: list, then watch, into a cache; resync replays the cache.

Mirrors client-go's SharedIndexInformer closely enough for the document's rules: the resync
period re-delivers every cached object as an update whose old and new objects are the same
(a replay, not a re-list), and a watch that expires resumes from the last resourceVersion,
re-listing only when the server says that version is gone (410).

Like client-go's reflector it lists in pages, and like the transform most controllers install it
keeps no managedFields in the cache: with thousands of objects, a whole list at once and the
field managers of each object are most of the controller's memory.
"""

from __future__ import annotations

import builtins
import json
import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kubernetes import dynamic
from kubernetes.client import ApiException

log = logging.getLogger(__name__)

Obj = dict[str, Any]
_WATCH_SECONDS = 300
_RETRY_SECONDS = 1.0
#: Objects per page of a list (client-go's reflector lists 500 at a time too).
LIST_PAGE = 500


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
#: An index function: the value an object is filed under (client-go's IndexFunc, one value).
IndexFunc = Callable[[Obj], Hashable]


def object_key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def read_fresh(resource: dynamic.Resource, key: str) -> Obj | None:
    """The object of `key` as the API server has it now, not as a cache does; None if gone."""
    namespace, name = key.split("/", 1)
    try:
        return resource.get(namespace=namespace, name=name).to_dict()
    except dynamic.exceptions.NotFoundError:
        return None


class Informer:
    """Watches one resource (in one namespace, or all) and calls `handler` for each event."""

    def __init__(
        self,
        resource: dynamic.Resource,
        handler: Handler,
        resync: float,
        stop: threading.Event,
        namespace: str | None = None,
        index: IndexFunc | None = None,
    ) -> None:
        self._resource = resource
        self._namespace = namespace
        self._handler = handler
        self._resync = resync
        self._stop = stop
        self._cache: dict[str, Obj] = {}
        # The cache again, filed by `index`: a lookup by value costs what it finds, not a scan.
        self._index_of = index
        self._index: dict[Hashable, dict[str, Obj]] = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()

    # -- the cache ---------------------------------------------------------------------------
    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._cache.get(key)

    def list(self) -> list[Obj]:
        with self._lock:
            return list(self._cache.values())

    # builtins.list: in the class body below, `list` is the method above.
    def indexed(self, value: Hashable) -> builtins.list[Obj]:
        """The cached objects that the index function files under `value`."""
        with self._lock:
            return list(self._index.get(value, {}).values())

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
                kind = self._resource.kind
                log.warning("watch %s failed: %s %s", kind, error.status, error.reason)
                self._stop.wait(_RETRY_SECONDS)
            except Exception:
                log.exception("watch %s failed", self._resource.kind)
                self._stop.wait(_RETRY_SECONDS)

    def _relist(self) -> str:
        """List everything; deliver the differences from the cache as events."""
        items, version = self._list()
        fresh = {object_key(obj): obj for obj in items}
        with self._lock:
            old_cache, self._cache = self._cache, dict(fresh)
            self._index.clear()
            for key, obj in fresh.items():
                self._file(key, obj)
        for key, obj in fresh.items():
            previous = old_cache.get(key)
            if previous is None:
                self._handler(Event(EventType.ADDED, None, obj))
            elif previous["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                self._handler(Event(EventType.MODIFIED, previous, obj))
        for key in old_cache.keys() - fresh.keys():
            self._handler(Event(EventType.DELETED, old_cache[key], old_cache[key]))
        self._synced.set()
        return version

    def _list(self) -> tuple[builtins.list[Obj], str]:
        """Every object, a page at a time (raw JSON: the client's object wrappers cost more than
        the objects); return them and the list's resourceVersion."""
        items: list[Obj] = []
        token = None
        while True:
            response = self._resource.get(
                namespace=self._namespace, limit=LIST_PAGE, _continue=token, serialize=False
            )
            page = json.loads(response.data)
            items += [_trimmed(obj) for obj in page["items"]]
            token = page["metadata"].get("continue")
            if not token:
                return items, page["metadata"]["resourceVersion"]

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
                self._deliver(EventType(kind), _trimmed(obj))
        return version

    def _deliver(self, kind: EventType, obj: Obj) -> None:
        key = object_key(obj)
        with self._lock:
            old = self._cache.get(key)
            if old is not None:
                self._unfile(key, old)
            if kind == EventType.DELETED:
                self._cache.pop(key, None)
            else:
                self._cache[key] = obj
                self._file(key, obj)
        self._handler(Event(kind, old, obj))

    def _file(self, key: str, obj: Obj) -> None:
        if self._index_of is not None:
            self._index.setdefault(self._index_of(obj), {})[key] = obj

    def _unfile(self, key: str, obj: Obj) -> None:
        if self._index_of is None:
            return
        value = self._index_of(obj)
        filed = self._index.get(value, {})
        filed.pop(key, None)
        if not filed:
            self._index.pop(value, None)

    def _resync_loop(self) -> None:
        """Every resync period, replay each cached object as an update to itself."""
        while not self._stop.wait(self._resync):
            for obj in self.list():
                self._handler(Event(EventType.RESYNC, obj, obj))


def _trimmed(obj: Obj) -> Obj:
    """The object as the cache keeps it: without metadata.managedFields, which nothing reads."""
    obj.get("metadata", {}).pop("managedFields", None)
    return obj
