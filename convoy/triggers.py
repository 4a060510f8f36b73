"""What starts a reconcile: the watch-event predicates of the release controller.

A Release is enqueued when it is created, when its generation changes (only a spec change does
that), when the annotation sync-requested-at changes, and at each informer resync. Any other
change, a status write above all, enqueues nothing: that is what keeps the controller's own
status writes from looping.
"""

from __future__ import annotations

from typing import Any

from convoy.api import Annotation
from convoy.informer import Event, EventType

Obj = dict[str, Any]


def _generation(obj: Obj) -> int | None:
    return obj["metadata"].get("generation")


def _sync_requested_at(obj: Obj) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(Annotation.SYNC_REQUESTED_AT)


def release_trigger(event: Event) -> str | None:
    """The reason this Release event starts a reconcile, or None when it must not."""
    if event.type == EventType.ADDED:
        return "created"
    if event.type == EventType.RESYNC:
        return "resync"
    if event.type != EventType.MODIFIED or event.old is None:
        return None
    if _generation(event.old) != _generation(event.new):
        return "generation-changed"
    if _sync_requested_at(event.old) != _sync_requested_at(event.new):
        return "sync-requested"
    return None
