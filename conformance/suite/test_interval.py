"""interval: the period of the periodic reconcile, and none without it.

An automatic Release applies its render at every reconcile, so its apply attempts (seen by the
witness) are its reconciles. Measurements sit in slots free of the controller's resync ticks
(`resync_clock.quiet_slot`), so every attempt in them has a cause the test knows.
"""

from __future__ import annotations

import math
import statistics
import time
from datetime import datetime

import pytest

from conformance.certification import measurements
from conformance.harness.marks import case
from conformance.observe import widgets
from conformance.observe.releases import (
    DISTANT_RETRY,
    POLL,
    App,
    Releases,
    applied_automatic_app,
    not_by_suite,
    parse_time,
    rollout_phase,
)
from conformance.observe.resync import ResyncClock
from conformance.observe.witness import Attempt, WitnessTimeout
from conformance.polling import poll_until
from conformance.timing import OBSERVER_PERIOD, Timing, gaps_between

AUTOMATIC = {"automatic": True}
#: Intervals as written in spec.syncPolicy.interval, and their seconds. Their accepted ranges
#: (timing.band) lie far apart, and 2300ms is no whole number of seconds in another unit: a
#: controller that rounds, truncates or misreads a unit, or steps in whole seconds, misses it.
INTERVALS = {"1s": 1.0, "2300ms": 2.3}
#: The periodic reconcile's, with one below a second too: kept in whole seconds it is 0, no
#: periodic reconcile at all, which no load on the machine can hide (2300ms as 2 s can); and
#: one of two terms, as Go durations may be written ("1h30m").
RECONCILE_INTERVALS = {**INTERVALS, "500ms": 0.5, "1s500ms": 1.5}
#: Seconds of periods to measure at least; never fewer than three gaps.
MEASURE = 6.0


def ticks_note(resync_clock: ResyncClock, start: float, end: float) -> str:
    """For failure messages: resync ticks that fell into [start, end] despite the slot."""
    inside = [tick - start for tick in resync_clock.ticks() if start <= tick <= end]
    if not inside:
        return ""
    return f"; NOTE: resync tick(s) at {', '.join(f'+{t:.2f} s' for t in inside)} fell inside"


def record(
    what: str, timing: Timing, period: float, gaps: list[float], latency: float = 0.0
) -> list[measurements.Point]:
    """Every gap against the one period it should be."""
    return measurements.record(what, timing, [period] * len(gaps), gaps, latency)


def periods_off(
    what: str, timing: Timing, period: float, gaps: list[float], latency: float | list[float]
) -> list[str]:
    """Every gap against the one period it should be, and all of them against as many
    periods: a period off by less than one gap's slack (500ms come as 1 s) is off by as much
    at every gap, and the sum shows it (the slack for timer jitter is not spent each time).
    `latency` is the controller's own time in each gap (one for all, or one per gap); a gap
    may come `timing.stall` later still, the sum may not. Kept for the report; returns what
    is off its band, measured, expected and band."""
    latencies = latency if isinstance(latency, list) else [latency] * len(gaps)
    stalled = [own + timing.stall for own in latencies]
    points = measurements.record(what, timing, [period] * len(gaps), gaps, stalled)
    points += measurements.record(
        f"{what}, {len(gaps)} in all",
        timing,
        [period * len(gaps)],
        [sum(gaps)],
        sum(latencies),
    )
    return [f"{what}: {point.describe()}" for point in points if not point.ok]


def gap_band_text(timing: Timing, period: float, latency: float) -> str:
    """For the log: the band of one gap of a series judged by `periods_off`."""
    return timing.band_text(period, latency + timing.stall)


def periods_of(interval: float) -> int:
    return max(3, math.ceil(MEASURE / interval))


def creation_time(app: App, start: float) -> float:
    """The controller's own time for the reconcile that created `app` at `start` (its
    outcome shown): in every gap between two of its periodic reconciles."""
    app.wait_applied("True", "Applied")
    return app.reconcile_time(start)


def periods_off_for(
    app: App,
    written: str,
    start: float,
    latency: float,
    timing: Timing,
    resync_clock: ResyncClock,
) -> list[str]:
    """Measure the periods of an automatic Release created at `start` with interval
    `written`: its apply attempts (its reconciles); what is off the interval. Each gap is
    allowed the controller's own time measured in it, or `latency`, its creating reconcile's
    time, where that is more."""
    interval = RECONCILE_INTERVALS[written]
    periods = periods_of(interval)
    timeout = start - app.releases.recorder.mark() + timing.reconcile
    attempts = app.wait_attempts(
        count=periods + 1,
        timeout=timeout + periods * (interval + timing.slack(interval, latency)),
    )[: periods + 1]
    gaps = gaps_between(attempt.at for attempt in attempts)
    own = app.own_times(attempts, [interval] * periods, app.untraced_start(start), least=latency)
    print(
        f"interval {written}: {periods} gaps between apply attempts "
        f"{', '.join(f'{gap:.3f}' for gap in gaps)} s, median {statistics.median(gaps):.3f}"
        f" s (the controller's own time in them {', '.join(f'{o:.3f}' for o in own)} s)"
    )
    note = ticks_note(resync_clock, start, attempts[-1].at)
    what = f"interval {written}: apply attempts"
    return [f"{off}{note}" for off in periods_off(what, timing, interval, gaps, own)]


def interval_slot(timing: Timing, resync_clock: ResyncClock, *written: str) -> None:
    """Wait for a resync-free slot for the longest of these intervals' measurements: every
    period with its slack, which leaves the controller its own time in each (`timing.late`).
    One slack for all was too short: a slower reconcile's 0.4 s in each of six 1 s periods let
    a resync tick in."""

    def measurement(interval: float) -> float:
        return periods_of(interval) * (interval + timing.slack(interval))

    longest = max(measurement(RECONCILE_INTERVALS[w]) for w in written)
    resync_clock.quiet_slot(timing.slack(0) + longest)


@pytest.mark.clause(
    "INT-1.period",
    "TRIG-5.interval",
    "AUTO-1.unchanged",
    "TRIG-6.not-drift-or-times",
)
@pytest.mark.parametrize("written", sorted(RECONCILE_INTERVALS))
def test_an_automatic_release_is_applied_every_interval(
    releases: Releases, timing: Timing, resync_clock: ResyncClock, written: str
) -> None:
    """Its apply attempts (its reconciles) come the interval apart. The observer checks its
    drift on the same interval and writes it to the inventory: no new health data, so no
    reconcile between. Each interval on a Release alone: a controller of one worker and slow
    reconciles would make Releases side by side wait for each other's."""
    interval_slot(timing, resync_clock, written)
    start = releases.recorder.mark()
    app = releases.app("web", sync_policy={**AUTOMATIC, "interval": written})
    latency = creation_time(app, start)
    wrong = periods_off_for(app, written, start, latency, timing, resync_clock)
    assert not wrong, "INT-1.period: " + "; ".join(wrong)


@pytest.mark.clause("INT-1.rolling-out")
def test_a_release_whose_rollout_is_in_progress_is_applied_every_interval_too(
    releases: Releases, timing: Timing, resync_clock: ResyncClock
) -> None:
    """A failurePolicy makes the render a rollout, and its Widget never reports: the rollout
    stays Progressing, its timeout check scheduled ten minutes on. The periodic reconciles
    come the interval apart all the same."""
    written = "1s"
    interval_slot(timing, resync_clock, written)
    start = releases.recorder.mark()
    app = releases.app(
        "web",
        sync_policy={**AUTOMATIC, "interval": written},
        failurePolicy={"healthTimeout": "10m"},
        extra=[widgets.widget("worker")],
    )
    latency = creation_time(app, start)
    app.wait_for(lambda r: rollout_phase(r) == "Progressing", "a Progressing rollout")
    wrong = periods_off_for(app, written, start, latency, timing, resync_clock)
    assert not wrong, "INT-1.rolling-out: " + "; ".join(wrong)


@pytest.mark.clause("INT-1.per-release")
def test_each_automatic_release_is_applied_every_interval_of_its_own(
    releases: Releases, timing: Timing, resync_clock: ResyncClock
) -> None:
    """Two Releases side by side, each its own interval apart (one interval for all, the
    first Release's say, shows)."""
    written = ("1s", "2300ms")
    interval_slot(timing, resync_clock, *written)
    start = releases.recorder.mark()
    apps = {
        w: releases.app(f"every-{w}", sync_policy={**AUTOMATIC, "interval": w}) for w in written
    }
    latencies = {w: creation_time(app, start) for w, app in apps.items()}
    wrong = [
        off
        for w, app in apps.items()
        for off in periods_off_for(app, w, start, latencies[w], timing, resync_clock)
    ]
    assert not wrong, "INT-1.per-release: " + "; ".join(wrong)


@pytest.mark.clause("INT-1.manual")
def test_a_manual_release_is_reconciled_every_interval_too(
    releases: Releases, timing: Timing, resync_clock: ResyncClock
) -> None:
    """Manual mode renders and reports at each periodic reconcile, with no event: a new source
    shows in status.renderRef at the next periodic reconcile. Each new source is written right
    after the last one was reported, so the reports come one interval apart."""
    written, interval = "2300ms", INTERVALS["2300ms"]
    periods = periods_of(interval)
    created = releases.recorder.mark()
    app = releases.app("web", sync_policy={"interval": written})
    app.wait_applied("False", "WaitingForSync")
    latency = app.reconcile_time(created)  # the controller's own time, at the least
    # The first report comes at any point of the period; a resync tick would report early.
    resync_clock.quiet_slot((periods + 1) * (interval + timing.slack(interval, latency)))
    reports = [
        render_reported(app, f"v{n}", timeout=interval + timing.reconcile)
        for n in range(2, periods + 3)
    ]
    gaps = gaps_between(report.at for report in reports)
    own = app.own_times(reports, [interval] * len(gaps), app.untraced_start(created), least=latency)
    print(
        f"manual, interval {written}: new renders reported "
        f"{', '.join(f'{gap:.3f}' for gap in gaps)} s apart (the controller's own time in "
        f"them {', '.join(f'{o:.3f}' for o in own)} s; accepted "
        f"{gap_band_text(timing, interval, max(own))})"
    )
    wrong = periods_off(f"manual, interval {written}: reports", timing, interval, gaps, own)
    assert not wrong, "INT-1.manual: new renders reported off the interval: " + "; ".join(wrong)


#: How the test ends a failure's backoff: a /sync, or a forced one (force=True).
RECOVERIES = {"sync": False, "forced-sync": True}


@pytest.mark.clause("INT-1.after-a-failure")
@pytest.mark.parametrize("recovery", sorted(RECOVERIES))
def test_the_reconcile_that_ends_a_failure_is_followed_by_the_next_period(
    releases: Releases, timing: Timing, resync_clock: ResyncClock, recovery: str
) -> None:
    """interval 1s, a retry ten minutes off: an apply refused (DeployFailed) schedules the
    retry and no period (BACK-1.with-interval). The witness refuses every apply until the
    /sync (so a resync tick's reconcile meanwhile fails too), or the forced /sync, that then
    applies; the periodic reconciles follow it one interval apart, as after any success."""
    written = "1s"
    interval = RECONCILE_INTERVALS[written]
    app = releases.app(
        "web",
        sync_policy={**AUTOMATIC, "interval": written, "retryBackoff": DISTANT_RETRY},
    )
    app.wait_applied("True", "Applied")
    app.deny_applies()  # from the next periodic reconcile's apply on
    app.wait_applied("False", "DeployFailed")
    app.settled_status()  # the failed reconcile is over: nothing is scheduled but its retry
    periods = periods_of(interval)
    measured = periods * (interval + timing.slack(interval))
    resync_clock.quiet_slot(timing.slack(0) + measured + timing.room(periods + 1))
    releases.recorder.allow_all()
    since = releases.recorder.mark()
    app.request_sync(force=RECOVERIES[recovery])
    app.wait_applied("True", "Applied")
    latency = app.reconcile_time(since)
    label = f"interval {written}, after a {recovery} ended a DeployFailed"
    try:
        attempts = app.wait_attempts(
            count=periods + 1, since=since, timeout=timing.reconcile + measured
        )[: periods + 1]
    except WitnessTimeout as error:
        raise AssertionError(
            f"INT-1.after-a-failure: {label}: too few reconciles: {error}"
        ) from None
    gaps = gaps_between(attempt.at for attempt in attempts)
    print(f"{label}: gaps between apply attempts {', '.join(f'{g:.3f}' for g in gaps)} s")
    wrong = periods_off(f"{label}: apply attempts", timing, interval, gaps, latency)
    note = ticks_note(resync_clock, since, attempts[-1].at)
    assert not wrong, f"INT-1.after-a-failure: {'; '.join(wrong)}{note}"


def render_reported(app: App, content: str, timeout: float) -> Attempt:
    """Give the source new content (no event); return the controller's status write that
    reported its render: the last one the witness had seen by the time a read showed the new
    renderRef."""
    recorder = app.releases.recorder
    since = recorder.mark()
    app.wait_for(app.new_render(content), f"report of the render of {content}", timeout)
    writes = recorder.attempts(
        since=since, kind="Release", name=app.name, subresource="status", where=not_by_suite
    )
    assert writes, f"{app.name}: a new renderRef, but no status write of the controller seen"
    return writes[-1]


#: Interval changes by a spec edit: the interval written at creation (None: unset) and the
#: one written then, with their seconds (0: no periodic reconcile). From 1s the old interval
#: has a reconcile scheduled when the edit comes; from none, or from 10m, the new interval
#: must start one of its own.
INTERVAL_CHANGES = {
    "1s-to-2300ms": (("1s", 1.0), ("2300ms", INTERVALS["2300ms"])),
    "1s-to-0s": (("1s", 1.0), ("0s", 0.0)),
    "1s-to-unset": (("1s", 1.0), (None, 0.0)),
    "unset-to-1s": ((None, 0.0), ("1s", 1.0)),
    "10m-to-1s": (("10m", 600.0), ("1s", 1.0)),
}


@pytest.mark.parametrize(
    "change",
    [
        case("1s-to-2300ms", "1s-to-2300ms", "INT-1.changed"),
        case("1s-to-0s", "1s-to-0s", "INT-3.changed-to-zero"),
        case("1s-to-unset", "1s-to-unset", "INT-3.removed"),
        case("unset-to-1s", "unset-to-1s", "INT-1.changed"),
        case("10m-to-1s", "10m-to-1s", "INT-1.changed"),
    ],
)
def test_a_changed_interval_is_the_period_from_the_next_reconcile_on(
    releases: Releases, timing: Timing, resync_clock: ResyncClock, change: str
) -> None:
    """An interval changed by a spec edit. The edit's reconcile, and the one a 1s interval had
    already scheduled (at most 1 s after the last), may come; after them the reconciles come
    the new interval apart, or none come with 0s or with the interval removed."""
    (old_text, old), (written, new) = INTERVAL_CHANGES[change]
    pending = old if old <= 1.0 else 0.0  # a reconcile the old interval has scheduled by then
    # The slot: the periods up to the edit and the transition's, then four new periods (or
    # the quiet period), each with its slack, and the reconciles' own time (the creating and
    # the editing ones besides); as long as a resync period allows.
    periods = [pending] * 3 + ([new] * 4 if new else [timing.quiet])
    wanted = timing.slack(0) + sum(p + timing.slack(p) for p in periods)
    wanted += timing.room(len(periods) + 2)
    resync_clock.quiet_slot(min(wanted, resync_clock.longest_slot()))
    policy = AUTOMATIC if old_text is None else {**AUTOMATIC, "interval": old_text}
    app = releases.app("web", sync_policy=policy)
    app.wait_attempts(
        count=2 if pending else 1, timeout=timing.reconcile + 2 * (pending + timing.slack(pending))
    )
    since = releases.recorder.mark()
    app.patch({"spec": {"syncPolicy": {"interval": written}}})
    edited = first_attempt(app, since, timing.reconcile)
    latency = app.reconcile_time(since)  # the controller's own time, in every gap
    # the one reconcile the old interval had already scheduled comes by then
    settled = edited.at + (pending + timing.slack(pending, latency) if pending else 0.0)
    label = f"interval {old_text or 'unset'} -> {written or 'unset'}"
    if new:
        # four attempts after the transition: the first comes up to one new period after it
        budget = 4 * (new + timing.slack(new, latency))
        attempts = app.wait_attempts(
            count=4, since=settled, timeout=settled + budget - releases.recorder.mark()
        )[:4]
        gaps = gaps_between(attempt.at for attempt in attempts)
        print(f"{label}: gaps {', '.join(f'{g:.3f}' for g in gaps)} s")
        wrong = periods_off(f"{label}: apply attempts", timing, new, gaps, latency)
        note = ticks_note(resync_clock, settled, attempts[-1].at)
        assert not wrong, f"INT-1.changed: {'; '.join(wrong)}{note}"
        return
    quiet = timing.quiet
    seen = app.quiet(settled + quiet - releases.recorder.mark(), since=settled)
    print(f"{label}: {len(seen)} attempt(s) in {quiet:g} s after the change")
    note = ticks_note(resync_clock, settled, settled + quiet)
    assert seen == [], (
        f"INT-3: reconciled after the interval was changed to {written or 'unset'}: "
        f"{'; '.join(a.describe() for a in seen)}{note}"
    )


def first_attempt(app: App, since: float, timeout: float) -> Attempt:
    return app.wait_attempts(since=since, timeout=timeout)[0]


#: The phases a rollout ends in: its render Healthy in time, or not.
ENDED = ("Succeeded", "Failed")


@pytest.mark.clause("INT-3.unset")
def test_a_rollouts_timeout_check_is_one_reconcile_not_a_period(
    releases: Releases, timing: Timing, resync_clock: ResyncClock
) -> None:
    """Interval unset, a failurePolicy with a healthTimeout of 1s: the rollout ends, and its
    timeout check (the API reference: one reconcile at startedAt + healthTimeout) comes and
    goes. After them nothing reconciles the Release, every healthTimeout or otherwise."""
    timeout, quiet = 1.0, timing.quiet
    resync_clock.quiet_slot(timing.reconcile + timing.settle + quiet)
    created = releases.recorder.mark()
    app = releases.app(
        "web", sync_policy={"automatic": True}, failurePolicy={"healthTimeout": f"{timeout:g}s"}
    )
    app.wait_applied("True", "Applied")
    latency = app.reconcile_time(created)
    started = app.attempts(dry_run=False)[0].at
    app.wait_for(lambda r: rollout_phase(r) in ENDED, "the rollout's end")
    app.settle()  # the observer's /sync at the new Healthy render is done
    # A named quiet period, from the latest moment the timeout check may come.
    now = releases.recorder.mark()
    since = max(now, started + timeout + timing.slack(timeout, latency))
    seen = app.quiet(since - now + quiet, since=since)
    assert seen == [], (
        f"INT-3.unset: reconciled in the {quiet:g} s after the rollout's end and its timeout "
        f"check, with no interval (healthTimeout {timeout:g}s); expected no reconcile: "
        f"{'; '.join(attempt.describe() for attempt in seen)}"
    )
    print(f"no reconcile for {quiet:g} s, from {since - started:.2f} s after the first apply")


@pytest.mark.clause("INT-3.unset", "INT-3.zero")
def test_without_an_interval_only_events_and_the_resync_start_a_reconcile(
    releases: Releases, timing: Timing, resync_clock: ResyncClock, controller_resync: float
) -> None:
    """Three automatic Releases, interval unset, "0s" and "0". After the reconcile at creation:
    no apply attempt during the quiet period; a /sync (an event) starts one at once; and the
    next one after that is the informer resync's, at the same moment as the resync sentinel's
    (nothing reconciles them between the /sync and the resync tick).

    The sentinel is an automatic Release without interval too: its attempts while the test
    runs must come one resync period apart, else they are no resync ticks to compare with.
    """
    begun = releases.recorder.mark()
    quiet = timing.quiet
    resync_clock.quiet_slot(timing.slack(0) + quiet)
    apps = {
        "unset": releases.app("unset", sync_policy=AUTOMATIC),
        '"0s"': releases.app("zero", sync_policy={**AUTOMATIC, "interval": "0s"}),
        '"0"': releases.app("bare-zero", sync_policy={**AUTOMATIC, "interval": "0"}),
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

    # The /syncs go right after a resync burst: the next tick is a whole period away, so any
    # periodic reconcile shorter than the period comes before it, far from every tick.
    resync_clock.quiet_slot(resync_clock.longest_slot())
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
            timing,
            resynced.at,
            unexplained=f"interval {label}: an apply attempt {gap:.2f} s after the /sync one",
        )
        print(
            f"interval {label}: next apply attempt {gap:.2f} s after the /sync one, "
            f"{resynced.at - tick:+.2f} s from the resync sentinel's tick"
        )
    ticks = resync_clock.ticks_from(begun)
    periods = gaps_between(ticks)
    print(
        f"resync sentinel (interval unset): {len(ticks)} attempts in the test, "
        f"{', '.join(f'{p:.2f}' for p in periods) or 'none'} s apart "
        f"(--resync {controller_resync:g} s)"
    )
    # Judged against the timer's schedule: a tick whose reconcile came late in its burst
    # shortens the gap after it, not the resync period.
    scheduled = measurements.against_schedule(ticks, controller_resync)
    points = record("resync sentinel (interval unset)", timing, controller_resync, scheduled)
    off = [point.describe() for point in points if not point.ok]
    assert not off, (
        f"INT-3: the resync sentinel, a Release without interval, was reconciled off the "
        f"schedule of one resync period ({controller_resync:g} s): {'; '.join(off)}"
    )


def sentinel_tick(resync_clock: ResyncClock, timing: Timing, at: float, unexplained: str) -> float:
    """The resync sentinel's tick whose burst the apply attempt at `at` is part of (the
    sentinel's reconcile may come before or after it in the burst)."""
    return poll_until(
        lambda: resync_clock.tick_explaining(at),
        timeout=at + resync_clock.settle + timing.reconcile - time.monotonic(),
        step=POLL,
        failure=lambda: AssertionError(
            f"{unexplained} that no resync tick explains (sentinel ticks at {resync_clock.ticks()})"
        ),
    )


def drift_checks(app: App, count: int, budget: float, *, drifted: bool = True) -> list[datetime]:
    """The times of `count` drift checks, the last one finding the App's object drifted
    (unless not `drifted`: an automatic Release mends its drift at each reconcile)."""
    checks: list[datetime] = []

    def drift_recorded() -> bool:
        status = widgets.inventory_status(app)
        checked = status.get("driftCheckedAt")
        if checked and (not checks or parse_time(checked) != checks[-1]):
            checks.append(parse_time(checked))
        names = [ref["name"] for ref in status.get("drift") or []]
        return (app.object_name in names or not drifted) and len(checks) >= count

    app.wait_for(lambda _: drift_recorded(), f"{count} drift checks", budget)
    return checks


#: How a manual Release's object drifts: changed, or deleted, behind the controller's back.
DRIFTS = {"changed": App.drift, "deleted": App.delete_object}


def drifted_manual_app(
    releases: Releases, sync_policy: dict, drift: str = "changed"
) -> tuple[App, float]:
    """A manual Release applied once by a /sync, then drifted: the drift stays for the
    observer. With the time of the reconcile that applied it: the controller's own time."""
    app = releases.app("web", sync_policy=sync_policy)
    synced = releases.recorder.mark()
    app.request_sync()
    app.wait_applied("True", "Applied")
    latency = app.reconcile_time(synced)
    app.settle()  # a reconcile the request's event started after it would mend the drift
    DRIFTS[drift](app)
    return app, latency


@pytest.mark.parametrize(
    "target",
    [
        *(case((w, "changed"), w, "INT-2.period") for w in INTERVALS),
        case(("1s", "deleted"), "deleted-1s", "INT-2.deleted"),
        case(("2300ms", None), "automatic-2300ms", "INT-2.automatic"),
    ],
)
def test_the_observer_checks_drift_on_the_release_interval(
    releases: Releases, timing: Timing, target: tuple[str, str | None]
) -> None:
    """A manual Release whose object was changed or deleted, and an automatic one (its
    reconciles mend drift, its drift is checked all the same): driftCheckedAt advances every
    interval, and the manual one's drift lists the object.

    A drift check may wait for a reconcile of the same Release that is under way (the
    periodic reconcile runs on the same interval), so the band allows the controller's own
    reconcile time, as measured at the first apply, as the other interval tests do."""
    written, drift = target
    created = releases.recorder.mark()
    policy = {"interval": written}
    if drift is None:
        app = applied_automatic_app(releases, sync_policy=policy)
        latency = app.reconcile_time(created)
    else:
        app, latency = drifted_manual_app(releases, policy, drift)
    assert_drift_checked_every(app, written, created, latency, timing, drifted=drift is not None)


#: Interval changes for the drift checks: longer, and from one far off to a short one.
DRIFT_INTERVAL_CHANGES = {"1s-to-2300ms": ("1s", "2300ms"), "10m-to-1s": ("10m", "1s")}


@pytest.mark.clause("INT-2.changed")
@pytest.mark.parametrize("change", sorted(DRIFT_INTERVAL_CHANGES))
def test_the_observer_checks_drift_on_a_changed_interval(
    releases: Releases, timing: Timing, change: str
) -> None:
    """A manual Release that drifted, its interval changed: after the change, drift checks
    come the new interval apart (the first one may still be due by a shorter old one). A
    check due ten minutes after the last by the old interval is not waited for."""
    old, new = DRIFT_INTERVAL_CHANGES[change]
    created = releases.recorder.mark()
    app, latency = drifted_manual_app(releases, {"interval": old})
    if old in INTERVALS:  # the observer checks drift on the old interval before the change
        before = INTERVALS[old]
        drift_checks(app, 2, 2 * (before + timing.slack(before, latency)) + timing.reconcile)
    app.patch({"spec": {"syncPolicy": {"interval": new}}})
    assert_drift_checked_every(app, new, created, latency, timing)


def assert_drift_checked_every(
    app: App,
    written: str,
    created: float,
    latency: float,
    timing: Timing,
    *,
    drifted: bool = True,
) -> None:
    """driftCheckedAt advances every interval `written`: four checks from now, the gaps after
    the first judged (a check under way, or due before, may come sooner), each with the
    controller's own time in it (`drift_check_own_times`)."""
    interval = INTERVALS[written]
    budget = 4 * (interval + timing.slack(interval, latency)) + timing.reconcile
    checks = drift_checks(app, 4, budget, drifted=drifted)
    gaps = gaps_between(check.timestamp() for check in checks)[1:]
    own = drift_check_own_times(app, checks[2:], app.untraced_start(created), latency)
    print(
        f"drift checks {', '.join(f'{g:.3f}' for g in gaps)} s apart (interval {written}, "
        f"the controller's own time in them {', '.join(f'{o:.3f}' for o in own)} s; accepted "
        f"{gap_band_text(timing, interval, max(own))})"
    )
    wrong = periods_off(f"drift checks, interval {written}", timing, interval, gaps, own)
    assert not wrong, f"INT-2: drift checks off the interval: {'; '.join(wrong)}"


def drift_check_own_times(
    app: App, checks: list[datetime], untraced: float, latency: float
) -> list[float]:
    """The controller's own time before each of `checks`: a drift check may wait for a
    reconcile of the same Release under way (the periodic one runs on the same interval), then
    reads the objects. As the witness saw it: from the start of the reconcile whose traces
    lead up to the inventory write that recorded the check (with its untraced start) to that
    write; at least `latency`, the creating reconcile's time."""
    recorded: dict[datetime, Attempt] = {}
    for write in app.releases.recorder.attempts(
        kind="ReleaseInventory", name=app.name, subresource="status", where=not_by_suite
    ):
        checked = (write.status or {}).get("driftCheckedAt")
        if checked:
            recorded.setdefault(parse_time(checked), write)
    pause = app.pause_between_reconciles()
    own = []
    for check in checks:
        found = recorded.get(check)
        waited = app.traced_start(found, pause) if found else 0.0
        own.append(max(latency, untraced + waited) if waited else latency)
    return own


@pytest.mark.clause("INT-2.no-interval")
def test_without_an_interval_the_observer_checks_no_drift(
    releases: Releases, timing: Timing
) -> None:
    """The observer assesses health every few seconds; it must not check drift meanwhile."""
    app, _ = drifted_manual_app(releases, {})
    app.wait_for(lambda _: widgets.inventory(app) is not None, "the ReleaseInventory")
    app.holds_for(
        lambda _: "driftCheckedAt" not in widgets.inventory_status(app),
        "no drift check without an interval",
        timing.quiet_for(OBSERVER_PERIOD),
    )
