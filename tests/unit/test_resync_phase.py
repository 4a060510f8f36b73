"""The next resync tick predicted from the sentinel's reconciles, which wait in the queue."""

from __future__ import annotations

import pytest

from conformance.observe.resync import next_tick_due

PERIOD = 30.0


def test_a_tick_whose_sentinel_waited_in_the_queue_does_not_delay_the_next_one() -> None:
    # the resync at 100, 130, 160; the sentinel reconciled 0.1 s, 1.2 s and 0.4 s after it
    assert next_tick_due([100.1, 131.2, 160.4], 160.4, PERIOD) == pytest.approx(190.1)


def test_a_single_tick_predicts_one_period_after_it() -> None:
    assert next_tick_due([100.0], 100.0, PERIOD) == pytest.approx(130.0)


def test_without_ticks_the_next_is_a_period_after_the_controllers_start() -> None:
    assert next_tick_due([], 5.0, PERIOD) == pytest.approx(35.0)


def test_a_missed_tick_still_counts_in_whole_periods() -> None:
    # ticks at 100 and 160.5, none seen at 130
    assert next_tick_due([100.0, 160.5], 160.5, PERIOD) == pytest.approx(190.0)
