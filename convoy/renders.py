"""The controller's memory of applied renders: the objects behind a renderRef.

A renderRef alone cannot be applied again or compared with live objects; the objects can. The
controller keeps the objects of each Release's recent successful applies in memory (a rollback
re-applies one, the observer's drift check compares with one). A restart forgets them, which
docs/api-reference.md allows for ("failurePolicy and rollouts", "Drift").
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from convoy.render import Render

#: Renders kept per Release: the current one, and enough older ones for a rollback target.
KEEP = 3


class RenderMemory:
    """Thread-safe: reconcile workers write, the observer reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._renders: dict[str, OrderedDict[str, Render]] = {}

    def remember(self, key: str, render: Render) -> None:
        """Record `render` as successfully applied for the Release `key` (newest last)."""
        with self._lock:
            kept = self._renders.setdefault(key, OrderedDict())
            kept.pop(render.ref, None)
            kept[render.ref] = render
            while len(kept) > KEEP:
                kept.popitem(last=False)

    def get(self, key: str, ref: str | None) -> Render | None:
        with self._lock:
            kept = self._renders.get(key)
            return kept.get(ref or "") if kept else None

    def forget(self, key: str) -> None:
        with self._lock:
            self._renders.pop(key, None)
