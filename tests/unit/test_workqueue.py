"""The work queue against client-go's semantics, driven by a FakeClock (no real waiting)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from convoy.backoff import RetryBackoff
from convoy.clock import FakeClock
from convoy.workqueue import WorkQueue

REAL_LIMIT = 2.0  # real seconds a helper thread may take before the test fails


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queue(clock: FakeClock) -> WorkQueue[str]:
    return WorkQueue(clock)


def ready(queue: WorkQueue[str]) -> list[str]:
    """Take every item ready now, in order, marking each done."""
    items = []
    while (item := queue.get(timeout=0)) is not None:
        items.append(item)
        queue.done(item)
    return items


@contextmanager
def blocked_get(queue: WorkQueue[str], clock: FakeClock) -> Iterator[list[str | None]]:
    """Run get() in a thread; yield once it is blocked in the clock, then join and check."""
    result: list[str | None] = []
    thread = threading.Thread(target=lambda: result.append(queue.get()), daemon=True)
    thread.start()
    wait_until(lambda: clock.waiters() == 1)
    assert not result, "get() returned before the test acted"
    yield result
    thread.join(REAL_LIMIT)
    assert not thread.is_alive(), "get() stayed blocked"


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + REAL_LIMIT
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for a helper thread"
        time.sleep(0.0005)


def test_fake_clock_moves_only_when_stepped() -> None:
    clock = FakeClock(start=100.0, wall=datetime(2026, 11, 29, 14, 5, 9, tzinfo=UTC))
    clock.step(1.5)
    assert clock.now() == 101.5
    assert clock.wall() == datetime(2026, 11, 29, 14, 5, 10, 500000, tzinfo=UTC)
    with pytest.raises(ValueError, match="backwards"):
        clock.step(-1)


def test_fifo_order(queue: WorkQueue[str]) -> None:
    for item in "cab":
        queue.add(item)
    assert ready(queue) == ["c", "a", "b"]


def test_dedup_while_queued(queue: WorkQueue[str]) -> None:
    for item in "abab":
        queue.add(item)
    assert len(queue) == 2
    assert ready(queue) == ["a", "b"]


@pytest.mark.parametrize("adds", [0, 1, 3])
def test_adds_while_processing_collapse_into_one_rerun(queue: WorkQueue[str], adds: int) -> None:
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    for _ in range(adds):
        queue.add("a")
    assert queue.get(timeout=0) is None, "an item in processing must not be handed out again"
    queue.done("a")
    assert ready(queue) == ["a"] * min(adds, 1)


def test_low_priority_items_wait_behind_the_others(queue: WorkQueue[str]) -> None:
    for item in "xy":
        queue.add(item, low_priority=True)
    queue.add("a")
    queue.add("b")
    assert len(queue) == 4
    assert ready(queue) == ["a", "b", "x", "y"]


def test_a_normal_add_moves_a_low_priority_item_up(queue: WorkQueue[str]) -> None:
    for item in "xyz":
        queue.add(item, low_priority=True)
    queue.add("z")
    queue.add("y", low_priority=True)  # a second low add keeps its place
    assert len(queue) == 3
    assert ready(queue) == ["z", "x", "y"]


@pytest.mark.parametrize("second", [False, True])
def test_an_item_added_while_processing_keeps_the_priority_of_its_adds(
    queue: WorkQueue[str], second: bool
) -> None:
    """Added low while processing, then (maybe) normal: after done() it is queued once, in
    the line of its highest-priority add."""
    queue.add("x", low_priority=True)
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a", low_priority=True)
    if second:
        queue.add("a")
    queue.done("a")
    assert ready(queue) == (["a", "x"] if second else ["x", "a"])


@settings(max_examples=300, deadline=None)
# p moved up, handed out, added low while processing: its first low entry (behind q) is stale
@example(
    [
        *[("a", "q", True), ("a", "p", True), ("a", "p", False), ("g", "p", False)],
        *[("a", "p", True), ("g", "p", False), ("g", "p", False)],
    ]
)
@given(st.lists(st.tuples(st.sampled_from("adg"), st.sampled_from("pqr"), st.booleans())))
def test_priorities_never_hand_out_an_item_twice_nor_lose_one(
    operations: list[tuple[str, str, bool]],
) -> None:
    """Random adds (normal or low), gets and dones against a model of the queue (item -> queued
    with low priority?): an item is never handed out while processing, a low one only when no
    normal one is ready, and every add comes out once at last."""
    queue: WorkQueue[str] = WorkQueue(FakeClock())
    queued: dict[str, bool] = {}
    processing: set[str] = set()

    def ready_lows() -> set[bool]:
        return {low for item, low in queued.items() if item not in processing}

    for operation, item, low in operations:
        if operation == "a":
            queue.add(item, low_priority=low)
            queued[item] = queued.get(item, True) and low
        elif operation == "g" and (got := queue.get(timeout=0)) is not None:
            assert got not in processing and got in queued
            assert queued[got] == min(ready_lows()), "a low-priority item before a normal one"
            del queued[got]
            processing.add(got)
        elif operation == "d" and item in processing:
            processing.discard(item)
            queue.done(item)
    for item in sorted(processing):
        queue.done(item)
    assert sorted(ready(queue)) == sorted(queued)
    assert len(queue) == 0


def test_shutdown_unblocks_get(queue: WorkQueue[str], clock: FakeClock) -> None:
    with blocked_get(queue, clock) as result:
        queue.shutdown()
    assert result == [None]
    assert queue.shutting_down


def test_shutdown_drains_queued_and_refuses_new(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.add_after("b", 1)
    queue.shutdown()
    queue.add("c")
    queue.add_rate_limited("d")
    assert ready(queue) == ["a"]


def test_get_timeout_is_clock_time(queue: WorkQueue[str], clock: FakeClock) -> None:
    result: list[str | None] = []
    thread = threading.Thread(target=lambda: result.append(queue.get(timeout=5)), daemon=True)
    thread.start()
    wait_until(lambda: clock.waiters() == 1)
    clock.step(4)
    wait_until(lambda: clock.waiters() == 1)  # woke, re-checked and blocked again
    assert not result
    clock.step(1)
    thread.join(REAL_LIMIT)
    assert result == [None]


@pytest.mark.parametrize("delay", [0, -1.5])
def test_add_after_not_positive_adds_at_once(queue: WorkQueue[str], delay: float) -> None:
    queue.add_after("a", delay)
    assert ready(queue) == ["a"]


@pytest.mark.parametrize(("first", "second"), [(5, 10), (10, 5)])
def test_delayed_earliest_time_wins(
    queue: WorkQueue[str], clock: FakeClock, first: float, second: float
) -> None:
    queue.add_after("a", first)
    queue.add_after("a", second)
    clock.step(4)
    assert ready(queue) == []
    clock.step(1)
    assert ready(queue) == ["a"]
    clock.step(10)
    assert ready(queue) == [], "the later time must have been dropped, not kept as a second entry"


def test_delayed_items_come_out_in_ready_order(queue: WorkQueue[str], clock: FakeClock) -> None:
    for item, delay in [("late", 3), ("early", 1), ("mid", 2)]:
        queue.add_after(item, delay)
    clock.step(3)
    assert ready(queue) == ["early", "mid", "late"]


def test_add_does_not_cancel_a_delayed_add(queue: WorkQueue[str], clock: FakeClock) -> None:
    # client-go keeps the waiting entry: the item runs now and again when its time comes.
    queue.add_after("a", 5)
    queue.add("a")
    assert ready(queue) == ["a"]
    clock.step(5)
    assert ready(queue) == ["a"]


def test_step_releases_delayed_item_into_blocked_get() -> None:
    clock = FakeClock(poll=60)  # a long poll: only step()'s wake-up can release get() in time
    queue: WorkQueue[str] = WorkQueue(clock)
    queue.add_after("a", 10)
    with blocked_get(queue, clock) as result:
        clock.step(10)
    assert result == ["a"]


def test_rate_limited_uses_default_limiter_and_forget_resets(queue: WorkQueue[str]) -> None:
    assert [queue.add_rate_limited("a") for _ in range(3)] == [0.005, 0.01, 0.02]
    assert (queue.num_requeues("a"), queue.num_requeues("b")) == (3, 0)
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    assert queue.add_rate_limited("a") == 0.005


def test_limiter_override_shares_the_failure_count(queue: WorkQueue[str]) -> None:
    backoff = RetryBackoff(initial=1.0, factor=3.0)
    assert queue.add_rate_limited("a") == 0.005
    assert queue.add_rate_limited("a", limiter=backoff.delay) == 3.0  # retry 2
    assert queue.add_rate_limited("b", limiter=backoff.delay) == 1.0  # b counts on its own
    assert queue.add_rate_limited("a") == 0.02  # retry 3 on the default formula


def test_rate_limited_item_becomes_ready_after_its_delay(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock, limiter=lambda retry: 10.0 * retry)
    queue.add_rate_limited("a")
    clock.step(9)
    assert ready(queue) == []
    clock.step(1)
    assert ready(queue) == ["a"]


def test_new_queue_starts_without_failures(clock: FakeClock) -> None:
    old: WorkQueue[str] = WorkQueue(clock)
    old.add_rate_limited("a")
    assert WorkQueue(clock).num_requeues("a") == 0  # a controller restart forgets every count
