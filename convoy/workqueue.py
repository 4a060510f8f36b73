"""A rate-limited, delaying work queue with client-go's semantics (k8s.io/client-go/util/workqueue).

Three layers in one class, each mirroring its client-go counterpart:
- Type: a FIFO with a `dirty` set (queued or to be re-queued) and a `processing` set, so an item
  is never handed to two workers at once and adds during processing collapse into one re-run;
- DelayingInterface: add_after() keeps a heap of ready times where the earliest time wins;
- RateLimitingInterface: add_rate_limited() asks a limiter for the delay, forget() and
  num_requeues() manage the per-item failure count.

One addition, after controller-runtime's priority queue: an item added with low priority (a
resync's replay of the whole cache) waits behind every other ready item, and a normal add of an
item that waits with low priority moves it to the front line. So an event that starts a
reconcile (a /sync) does not wait for thousands of resync reconciles.

There is no background goroutine: get() and len() move due items from the heap into the FIFO
first, and get() waits through the injected clock until the next ready time.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from convoy.backoff import Limiter, default_limiter
from convoy.clock import Clock, RealClock

T = TypeVar("T", bound=Hashable)


class FailureCounter(Generic[T]):
    """Consecutive failures per item: the `failures` map of client-go's rate limiters.

    One per queue, whatever limiter computes the delay, so a per-Release formula and the default
    share the same count. Only forget() clears it; a new queue (a controller restart) starts at 0.
    Not thread-safe on its own: the queue guards it with its lock.
    """

    def __init__(self) -> None:
        self._counts: dict[T, int] = {}

    def record(self, item: T) -> int:
        """Count one more failure of `item` and return the new count (the retry number)."""
        count = self._counts.get(item, 0) + 1
        self._counts[item] = count
        return count

    def count(self, item: T) -> int:
        return self._counts.get(item, 0)

    def forget(self, item: T) -> None:
        self._counts.pop(item, None)


class WorkQueue(Generic[T]):
    """client-go's rate-limiting work queue. Items must be hashable (e.g. namespace/name keys).

    Note that len() is the number of items ready for get(), so an idle queue is falsy.
    """

    def __init__(self, clock: Clock | None = None, limiter: Limiter = default_limiter) -> None:
        self._clock: Clock = RealClock() if clock is None else clock
        self._limiter = limiter
        self._cond = threading.Condition()
        self._queue: deque[T] = deque()
        # Low-priority items wait here; an entry is stale once its item is no longer in _low
        # (it was moved to _queue, or handed out): _pop_locked skips those.
        self._low_queue: deque[T] = deque()
        self._low: set[T] = set()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        # Delay heap of (ready_at, seq, item); _waiting holds each item's current ready time, so
        # heap entries that disagree with it are stale (lazy deletion after an earlier add_after).
        self._heap: list[tuple[float, int, T]] = []
        self._waiting: dict[T, float] = {}
        self._seq = itertools.count()
        self._failures: FailureCounter[T] = FailureCounter()
        self._shutting_down = False

    # --- Type ---------------------------------------------------------------------------------

    def add(self, item: T, low_priority: bool = False) -> None:
        """Queue `item` unless it is already queued; if it is processing, re-queue it on done().

        With `low_priority` it waits behind every other ready item; without, an item already
        waiting with low priority moves up.
        """
        with self._cond:
            self._add_locked(item, low_priority)

    def get(self, timeout: float | None = None) -> T | None:
        """Block for the next item and mark it processing.

        Returns None when `timeout` seconds of clock time pass, or when the queue is shut down and
        empty (like client-go, items queued before shutdown are still handed out).
        """
        with self._cond:
            deadline = None if timeout is None else self._clock.now() + timeout
            while True:
                now = self._clock.now()
                self._promote_due(now)
                if self._has_ready_locked():
                    return self._pop_locked()
                if self._shutting_down or (deadline is not None and now >= deadline):
                    return None
                self._clock.wait(self._cond, self._wait_time(now, deadline))

    def done(self, item: T) -> None:
        """Finish processing `item`; re-queue it once if it was added meanwhile."""
        with self._cond:
            self._processing.discard(item)
            if item in self._dirty:
                (self._low_queue if item in self._low else self._queue).append(item)
                self._cond.notify()

    def shutdown(self) -> None:
        """Refuse new adds, drop delayed items and wake every blocked get()."""
        with self._cond:
            self._shutting_down = True
            self._heap.clear()
            self._waiting.clear()
            self._cond.notify_all()

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    def __len__(self) -> int:
        with self._cond:
            self._promote_due(self._clock.now())
            return len(self._queue) + len(self._low - self._processing)

    # --- Delaying -----------------------------------------------------------------------------

    def add_after(self, item: T, delay: float) -> None:
        """Add `item` after `delay` seconds; if it is already waiting, the earliest time wins."""
        with self._cond:
            self._add_after_locked(item, delay)

    # --- Rate limiting ------------------------------------------------------------------------

    def add_rate_limited(self, item: T, limiter: Limiter | None = None) -> float:
        """Count a failure of `item` and add it after the limiter's delay for that count.

        `limiter` overrides the queue's default for this call only (a Release's retryBackoff);
        the failure count is the queue's either way. Returns the delay used.
        """
        with self._cond:
            limit = self._limiter if limiter is None else limiter
            delay = limit(self._failures.record(item))
            self._add_after_locked(item, delay)
            return delay

    def forget(self, item: T) -> None:
        """Clear the failure count of `item` (it stays queued or waiting if it is)."""
        with self._cond:
            self._failures.forget(item)

    def num_requeues(self, item: T) -> int:
        """Failures recorded for `item` since it was last forgotten."""
        with self._cond:
            return self._failures.count(item)

    # --- internals (caller holds self._cond) --------------------------------------------------

    def _add_locked(self, item: T, low_priority: bool = False) -> None:
        if self._shutting_down:
            return
        if item in self._dirty:
            if not low_priority and item in self._low:
                self._low.discard(item)  # its entry in _low_queue is stale now
                if item not in self._processing:
                    self._queue.append(item)
            return
        self._dirty.add(item)
        if low_priority:
            self._low.add(item)
        if item in self._processing:
            return
        (self._low_queue if low_priority else self._queue).append(item)
        self._cond.notify()

    def _has_ready_locked(self) -> bool:
        """Can get() hand out an item now? Drops the stale low-priority entries in front."""
        low = self._low_queue
        while low and (low[0] not in self._low or low[0] in self._processing):
            low.popleft()  # done() queues a processing item's entry again
        return bool(self._queue or low)

    def _pop_locked(self) -> T:
        """The next item; the caller checked _has_ready_locked()."""
        if self._queue:
            item = self._queue.popleft()
        else:
            item = self._low_queue.popleft()
            self._low.discard(item)
        self._processing.add(item)
        self._dirty.discard(item)
        return item

    def _add_after_locked(self, item: T, delay: float) -> None:
        if self._shutting_down:
            return
        if delay <= 0:
            self._add_locked(item)
            return
        ready_at = self._clock.now() + delay
        current = self._waiting.get(item)
        if current is not None and current <= ready_at:
            return
        self._waiting[item] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._seq), item))
        # A blocked get() may now have an earlier time to wake for.
        self._cond.notify_all()

    def _promote_due(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            ready_at, _, item = heapq.heappop(self._heap)
            if self._waiting.get(item) != ready_at:
                continue  # stale: the item was moved to an earlier time and already handled
            del self._waiting[item]
            self._add_locked(item)

    def _wait_time(self, now: float, deadline: float | None) -> float | None:
        next_ready = self._heap[0][0] if self._heap else None
        times = [t - now for t in (deadline, next_ready) if t is not None]
        return min(times) if times else None
