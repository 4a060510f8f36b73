"""interval: the period of the periodic reconcile, and none without it.

An automatic Release applies its render at every reconcile, so its apply attempts (seen by the
witness) are its reconciles. Measurements sit in slots free of the controller's resync ticks
(`resync_clock.quiet_slot`), so every attempt in them has a cause the test knows.
"""

from __future__ import annotations

import itertools
import math
import time
from datetime import datetime

import pytest

from conformance import widgets
from conformance.polling import poll_until
from conformance.releases import POLL, App, Releases, not_by_suite, parse_time
from conformance.resync import ResyncClock
from conformance.timing import Timing
from conformance.witness import Attempt

AUTOMATIC = {"automatic": True}
#: Two intervals whose accepted ranges (interval +- timing.slack) do not overlap with the
#: default tolerances, so no controller with one fixed period passes both: 1 s accepts gaps up
#: to 2.2 s, 4.5 s accepts gaps from 2.6 s.
INTERVALS = (1.0, 4.5)
#: Seconds of periods to measure at least; never fewer than two gaps.
MEASURE = 4.0


def ticks_note(resync_clock: ResyncClock, start: float, end: float) -> str:
    """For failure messages: resync ticks that fell into [start, end] despite the slot."""
    inside = [tick - start for tick in resync_clock.ticks() if start <= tick <= end]
    if not inside:
        return ""
    return f"; NOTE: resync tick(s) at {', '.join(f'+{t:.2f} s' for t in inside)} fell inside"


@pytest.mark.rule("INT-1")
@pytest.mark.parametrize("interval", INTERVALS, ids=lambda interval: f"{interval:g}s")
def test_an_automatic_release_is_applied_every_interval(
    interval: float, releases: Releases, timing: Timing, resync_clock: ResyncClock
) -> None:
    periods = max(2, math.ceil(MEASURE / interval))
    slack = timing.slack(interval)
    resync_clock.quiet_slot(timing.tolerance + periods * interval + slack)
    start = releases.recorder.mark()
    app = releases.app("web", sync_policy={**AUTOMATIC, "interval": f"{interval:g}s"})
    attempts = app.wait_attempts(
        count=periods + 1, timeout=timing.reconcile + periods * (interval + slack)
    )[: periods + 1]
    gaps = [b.at - a.at for a, b in itertools.pairwise(attempts)]
    print(
        f"interval {interval:g} s: {periods} gaps between apply attempts "
        f"{', '.join(f'{gap:.2f}' for gap in gaps)} s (accepted {interval:g} +- {slack:.2f} s)"
    )
    note = ticks_note(resync_clock, start, attempts[-1].at)
    wrong = [gap for gap in gaps if abs(gap - interval) > slack]
    assert not wrong, (
        f"apply attempts {', '.join(f'{gap:.2f}' for gap in wrong)} s apart, not every "
        f"{interval:g} s +- {slack:.2f} s{note}"
    )


def first_attempt(app: App, since: float, timeout: float) -> Attempt:
    return app.wait_attempts(since=since, timeout=timeout)[0]


@pytest.mark.rule("INT-3")
def test_without_an_interval_only_events_and_the_resync_start_a_reconcile(
    releases: Releases, timing: Timing, resync_clock: ResyncClock, controller_resync: float
) -> None:
    """Two automatic Releases, interval unset and "0s". After the reconcile at creation:
    no apply attempt during the quiet period; a /sync (an event) starts one at once; and the
    next one after that is the informer resync's, at the same moment as the resync sentinel's
    (nothing reconciles them between the /sync and the resync tick).

    The sentinel is an automatic Release without interval too: its attempts after creation
    must come one resync period apart, else they are no resync ticks to compare with.
    """
    quiet = timing.quiet
    resync_clock.quiet_slot(timing.tolerance + quiet)
    apps = {
        "unset": releases.app("unset", sync_policy=AUTOMATIC),
        '"0s"': releases.app("zero", sync_policy={**AUTOMATIC, "interval": "0s"}),
    }
    created = {label: app.wait_attempts()[0] for label, app in apps.items()}
    after = {app.object_name: created[label].at for label, app in apps.items()}

    def later_attempt(attempt: Attempt) -> bool:
        return not_by_suite(attempt) and attempt.at > after.get(attempt.name, math.inf)

    end = max(after.values()) + quiet
    seen = releases.recorder.quiet(end - releases.recorder.mark(), where=later_attempt)
    print(f"quiet period {quiet:g} s after the reconcile at creation: {len(seen)} attempt(s)")
    note = ticks_note(resync_clock, min(after.values()), end)
    assert seen == [], (
        f"reconciled with interval unset or 0 and no event: "
        f"{'; '.join(attempt.describe() for attempt in seen)}{note}"
    )

    synced = {}
    for label, app in apps.items():
        before = releases.recorder.mark()
        app.request_sync()
        synced[label] = first_attempt(app, before, timing.reconcile)
        print(f"interval {label}: /sync -> apply attempt after {synced[label].at - before:.2f} s")

    limit = controller_resync + timing.slack(controller_resync)
    for label, app in apps.items():
        since = synced[label].at + 1e-6
        resynced = first_attempt(app, since, limit - (releases.recorder.mark() - since))
        gap = resynced.at - synced[label].at
        tick = sentinel_tick(
            resync_clock,
            resynced.at,
            timing.tolerance,
            unexplained=f"interval {label}: an apply attempt {gap:.2f} s after the /sync one",
        )
        print(
            f"interval {label}: next apply attempt {gap:.2f} s after the /sync one, "
            f"{resynced.at - tick:+.2f} s from the resync sentinel's tick"
        )
    ticks = resync_clock.ticks()
    periods = [b - a for a, b in itertools.pairwise(ticks)]
    print(
        f"resync sentinel (interval unset): {len(ticks)} attempts after creation, "
        f"{', '.join(f'{p:.2f}' for p in periods) or 'none'} s apart "
        f"(--resync {controller_resync:g} s)"
    )
    off = [p for p in periods if abs(p - controller_resync) > timing.slack(controller_resync)]
    assert not off, (
        f"the resync sentinel, a Release without interval, was reconciled {off} s apart, not "
        f"once per resync period ({controller_resync:g} s)"
    )


def sentinel_tick(resync_clock: ResyncClock, at: float, within: float, unexplained: str) -> float:
    """The resync sentinel's tick nearest to `at`; it must come within `within` seconds of it."""

    def nearest() -> float | None:
        near = [tick for tick in resync_clock.ticks() if abs(tick - at) <= within]
        return min(near, key=lambda tick: abs(tick - at)) if near else None

    return poll_until(
        nearest,
        timeout=at + within - time.monotonic(),
        step=POLL,
        failure=lambda: AssertionError(
            f"{unexplained} that no resync tick explains (sentinel ticks at {resync_clock.ticks()})"
        ),
    )


@pytest.mark.rule("INT-2")
@pytest.mark.parametrize("interval", INTERVALS, ids=lambda interval: f"{interval:g}s")
def test_the_observer_checks_drift_on_the_release_interval(
    releases: Releases, timing: Timing, interval: float
) -> None:
    app = releases.app("web", sync_policy={"interval": f"{interval:g}s"})  # manual: drift stays
    app.request_sync()
    app.wait_applied("True", "Applied")
    app.drift()
    checks: list[datetime] = []

    def drift_recorded() -> bool:
        status = widgets.inventory_status(app)
        checked = status.get("driftCheckedAt")
        if checked and (not checks or parse_time(checked) != checks[-1]):
            checks.append(parse_time(checked))
        names = [ref["name"] for ref in status.get("drift") or []]
        return app.object_name in names and len(checks) >= 3

    budget = 3 * interval + timing.slack(interval) + timing.reconcile
    app.wait_for(lambda _: drift_recorded(), "drift recorded in 3 drift checks", budget)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(checks)][1:]
    print(f"drift checks {', '.join(f'{g:.2f}' for g in gaps)} s apart (interval {interval:g} s)")
    assert all(abs(gap - interval) <= timing.slack(interval) for gap in gaps), gaps
