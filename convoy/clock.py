"""Clocks for the controller: the real one and a fake one for exact, fast tests.

Mirrors k8s.io/utils/clock (Clock) and k8s.io/utils/clock/testing (FakeClock): code that waits
takes a clock, so tests drive time by stepping it instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

# A fixed, recognisable default wall time for fake clocks.
DEFAULT_FAKE_WALL = datetime(2026, 1, 1, tzinfo=UTC)


class Clock(Protocol):
    """What the controller needs from time."""

    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""
        ...

    def wall(self) -> datetime:
        """The current wall time, timezone-aware UTC."""
        ...

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        """Wait on `cond` (held by the caller) for at most `timeout` seconds of clock time.

        May return early (like Condition.wait); callers re-check their predicate and the time.
        """
        ...


class RealClock:
    """The system clock: time.monotonic, UTC wall time, Condition.wait."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        if timeout is not None and timeout <= 0:
            return
        cond.wait(timeout)


class FakeClock:
    """A clock that moves only when step() is called, like client-go's testing FakeClock.

    wait() never sleeps in real time for longer than `poll`: it returns early so that the caller
    re-checks its predicate against the fake time. step() wakes every thread blocked in wait(),
    so a blocked WorkQueue.get() re-checks its delay heap at once.
    """

    def __init__(
        self, start: float = 0.0, wall: datetime = DEFAULT_FAKE_WALL, poll: float = 0.01
    ) -> None:
        if wall.tzinfo is None:
            raise ValueError("FakeClock wall time must be timezone-aware")
        self._lock = threading.Lock()
        self._start = start
        self._now = start
        self._wall_start = wall.astimezone(UTC)
        self._poll = poll
        self._waiting: dict[threading.Condition, int] = {}

    def now(self) -> float:
        with self._lock:
            return self._now

    def wall(self) -> datetime:
        with self._lock:
            return self._wall_start + timedelta(seconds=self._now - self._start)

    def step(self, seconds: float) -> None:
        """Advance the time and wake every thread waiting through this clock."""
        if seconds < 0:
            raise ValueError(f"FakeClock cannot step backwards ({seconds} s)")
        with self._lock:
            self._now += seconds
            conds = list(self._waiting)
        # Notify outside our lock: waiters take cond first and then our lock.
        for cond in conds:
            with cond:
                cond.notify_all()

    def waiters(self) -> int:
        """How many threads are blocked in wait() now (for tests that must step after a block)."""
        with self._lock:
            return sum(self._waiting.values())

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        if timeout is not None and timeout <= 0:
            return
        with self._lock:
            self._waiting[cond] = self._waiting.get(cond, 0) + 1
        try:
            # Registered before cond.wait releases the lock, so a step() after this cannot miss us.
            cond.wait(self._poll)
        finally:
            with self._lock:
                left = self._waiting[cond] - 1
                if left:
                    self._waiting[cond] = left
                else:
                    del self._waiting[cond]
