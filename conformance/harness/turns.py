"""Turns at a controller the xdist workers share (in kind, or a vendor's Deployment).

Every test that uses the shared controller holds a shared turn while it runs; a test that stops
the controller (BACK-5's restart) holds the exclusive turn, so that no other worker's test sees
the controller go away, its subresource API go unserved, or its restarted initial list. It
records when the controller started again: the restart moves the resync ticks, which every
worker's resync clock keeps track of. A
turnstile gives the exclusive turn precedence: once a stopping test waits, no new test starts
until it is done, and it does not wait for the end of the run.

Locks are flock(2) locks on files named after the run, so they hold between the workers'
processes (which run on one machine) and go with a process that dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: The marker of a test that stops the controller under test.
STOPS_CONTROLLER = "stops_controller"


@contextlib.contextmanager
def _flocked(path: Path, operation: int) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, operation)
        yield  # closing the file releases the lock


class ControllerTurns:
    def __init__(self, run: str, directory: Path) -> None:
        base = directory / f"convoy-controller-{run}"
        self._turnstile = base.with_suffix(".turnstile")
        self._users = base.with_suffix(".users")
        self._sessions = base.with_suffix(".sessions")
        self._restarts = base.with_suffix(".restarts")
        self._ticks = base.with_suffix(".ticks")

    @contextlib.contextmanager
    def session(self, setup: Callable[[], Any], teardown: Callable[[Any], None]) -> Iterator[None]:
        """A change to the controller for the whole run (the long phase's --resync): made by
        the first worker to arrive, before any worker's test; undone by the last to leave,
        with what `setup` returned (JSON: the workers are processes)."""
        with _flocked(self._sessions, fcntl.LOCK_EX):
            shared = self._read_sessions()
            if shared["workers"] == 0:
                shared["state"] = setup()
            shared["workers"] += 1
            self._sessions.write_text(json.dumps(shared))
        try:
            yield
        finally:
            with _flocked(self._sessions, fcntl.LOCK_EX):
                shared = self._read_sessions()
                shared["workers"] -= 1
                self._sessions.write_text(json.dumps(shared))
                if shared["workers"] == 0:
                    teardown(shared["state"])

    def _read_sessions(self) -> dict[str, Any]:
        text = self._sessions.read_text() if self._sessions.exists() else ""
        return json.loads(text) if text.strip() else {"workers": 0, "state": None}

    @contextlib.contextmanager
    def using(self) -> Iterator[None]:
        """A test that needs the controller running, beside other such tests."""
        with _flocked(self._turnstile, fcntl.LOCK_EX):
            users = self._users.open("a")
            fcntl.flock(users, fcntl.LOCK_SH)
        with users:
            yield

    @contextlib.contextmanager
    def stopping(self) -> Iterator[None]:
        """A test that stops the controller: alone, once the running tests are done."""
        with _flocked(self._turnstile, fcntl.LOCK_EX), _flocked(self._users, fcntl.LOCK_EX):
            yield

    def restarted(self, at: float) -> None:
        """A stopping test started the controller again at `at` (time.monotonic(), one clock
        for every process on the machine): every worker's resync clock must know."""
        with _flocked(self._restarts, fcntl.LOCK_EX):
            self._restarts.write_text(json.dumps(max(at, self.last_restart())))

    def last_restart(self) -> float:
        """When a stopping test last started the controller again; 0.0 if none did."""
        text = self._restarts.read_text() if self._restarts.exists() else ""
        return float(json.loads(text)) if text.strip() else 0.0

    def share_ticks(self, ticks: list[float]) -> list[float]:
        """Add this worker's resync ticks (time.monotonic()) to every worker's; return them all,
        in order. Each worker's sentinel waits its turn in a tick's burst: the earliest of them
        comes nearest the resync itself."""
        with _flocked(self._ticks, fcntl.LOCK_EX):
            shared = self._ticks.read_text().split() if self._ticks.exists() else []
            known = set(shared)
            new = [repr(tick) for tick in ticks if repr(tick) not in known]
            if new:
                with self._ticks.open("a") as handle:
                    handle.write("".join(f"{tick}\n" for tick in new))
        return sorted(float(tick) for tick in [*shared, *new])
