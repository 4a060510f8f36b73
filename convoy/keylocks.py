"""One lock per Release key ("namespace/name"), shared by the reconcile and the observer.

A reconcile assesses the render it applies (the observer's `assess_now`) before it writes the
Release status that names that render. An observation of the same Release in between would see
the old render as the applied one: it would write its health over the new render's and announce
it Healthy with a /sync (in manual mode a request, which applies whatever the render is then).
So neither runs while the other does on the same Release.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class KeyLocks:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._users: dict[str, int] = {}

    @contextlib.contextmanager
    def held(self, key: str) -> Iterator[None]:
        """Hold the lock of `key`; a key nobody holds or waits for keeps no lock in memory."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
            self._users[key] = self._users.get(key, 0) + 1
        try:
            with lock:
                yield
        finally:
            with self._guard:
                self._users[key] -= 1
                if not self._users[key]:
                    del self._users[key], self._locks[key]
