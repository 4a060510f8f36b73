"""What starts a reconcile: the watch-event predicates of the release controller.

A Release is enqueued when it is created, when its generation changes (only a spec change does
that), when the annotation sync-requested-at changes, and at each informer resync. Any other
change, a status write above all, enqueues nothing: that is what keeps the controller's own
status writes from looping. Two more events start a reconcile of a Release: new health data in
its ReleaseInventory (TRIG-6), and a change of the Applied or Healthy condition status of a
Release of a lower wave on the same Cluster (TRIG-7).
"""

from __future__ import annotations

from typing import Any

from convoy import waves
from convoy.api import Annotation
from convoy.informer import Event, EventType

Obj = dict[str, Any]
#: The trigger of the informer's resync: the one reconcile the queue may put last.
RESYNC = "resync"


def _generation(obj: Obj) -> int | None:
    return obj["metadata"].get("generation")


def _sync_requested_at(obj: Obj) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(Annotation.SYNC_REQUESTED_AT)


def release_trigger(event: Event) -> str | None:
    """The reason this Release event starts a reconcile, or None when it must not."""
    if event.type == EventType.ADDED:
        return "created"
    if event.type == EventType.RESYNC:
        return RESYNC
    if event.type != EventType.MODIFIED or event.old is None:
        return None
    if _generation(event.old) != _generation(event.new):
        return "generation-changed"
    if _sync_requested_at(event.old) != _sync_requested_at(event.new):
        return "sync-requested"
    return None


#: The trigger of a reconcile that new health data in the inventory started (TRIG-6).
INVENTORY_HEALTH = "inventory-health"


def inventory_trigger(event: Event) -> str | None:
    """A ReleaseInventory update whose health data changed (not its drift, not its times).

    A created inventory has no status yet (the status subresource ignores it on create), so
    only updates count; that also keeps the initial list after a restart from reconciling.
    """
    if event.type != EventType.MODIFIED or event.old is None:
        return None
    old, new = event.old.get("status") or {}, event.new.get("status") or {}
    fields = ("renderRef", "health", "entries")
    return INVENTORY_HEALTH if any(old.get(f) != new.get(f) for f in fields) else None


def wave_trigger(event: Event) -> bool:
    """Did the status of Applied or Healthy change? Then the higher waves reconcile (TRIG-7).

    Reasons and messages do not count, nor does a create, a delete or a resync replay.
    """
    if event.type != EventType.MODIFIED or event.old is None:
        return False
    return waves.statuses(event.old) != waves.statuses(event.new)
