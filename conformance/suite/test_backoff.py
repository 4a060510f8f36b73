"""retryBackoff: how long convoy waits before it retries a Release whose reconcile failed.

A ladder is measured from outside. The witness refuses every apply of the Release's rendered
object, so each reconcile ends DeployFailed (a transient reason) and is retried with backoff.
The witness's receive times of the refused applies are the attempts; the gap between two
consecutive attempts is the retry delay plus the controller's own time in it: the rest of the
failed reconcile (the writes of its outcome) and the start of the retry up to its apply (a
condition written when it starts, a render). `timing.band` allows for that own time, measured
in each gap from the witness's traces (`App.own_times`): a reconcile slowed by a loaded machine
does not count against its delay. A resync tick would reconcile the Release in the middle of a
ladder, so every ladder runs in a resync-free slot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import zip_longest
from typing import Any

import pytest

from conformance.certification import measurements, verdicts
from conformance.harness.marks import case
from conformance.install.base import ControllerUnderTest
from conformance.observe import subresources, widgets
from conformance.observe.releases import (
    NO_RENDER,
    App,
    Releases,
    applied_is,
    invalid_object,
    parse_time,
)
from conformance.observe.resync import ResyncClock
from conformance.observe.witness import Attempt, WitnessTimeout
from conformance.timing import Timing, gaps_between

# The rule's own constants.
#: A factor below 1, or none, is taken as 2.
DEFAULT_FACTOR = 2.0
#: The cap when max is not set, in seconds.
DEFAULT_MAX = 1000.0
#: Without initial: the default rate limiter's first delay (5 ms), doubling up to DEFAULT_MAX.
DEFAULT_FIRST = 0.005
#: The default limiter's retries up to and including the first capped one (5 ms x 2^18 > 1000 s).
DEFAULT_LADDER_TO_CAP = 19
LONG_PHASE_ONLY = (
    "needs a resync period above the whole ladder (the long phase of `convoy-conformance certify`)"
)


def delays(initial: float, factor: float, count: int, cap: float = DEFAULT_MAX) -> list[float]:
    """The delays before retries 1..count by the rule: initial x factor^(n-1), capped."""
    return [min(initial * factor**n, cap) for n in range(count)]


def seconds(values: Sequence[float]) -> str:
    return ", ".join(f"{value:g}" for value in values) + " s"


@dataclass
class Ladder:
    """The retries of one App while the witness refuses its applies: measured, printed, judged."""

    app: App
    retry_backoff: dict[str, Any] | None
    timing: Timing
    resync_clock: ResyncClock
    #: the witness's time of the last attempt the last climb saw
    last_attempt: float = 0.0
    #: the controller's own reconcile time, measured at the Release's first apply: how long to
    #: wait for a retry and how long a ladder takes, and the least own time a gap is allowed
    latency: float = 0.0
    #: what a reconcile does before the witness sees it, measured at the first apply; each gap
    #: is allowed it and the rest of the controller's own time measured in that gap, or
    #: `latency` where that is more
    untraced: float = 0.0
    #: the controller's own time in each gap of the last ladder measured (`measure`)
    own: list[float] = field(default_factory=list)

    def reserve(self, *ladders: Sequence[float], besides: float = 0.0) -> None:
        """Wait for a resync-free slot long enough for `ladders`, climbed one after the other
        (each retry takes a reconcile time on top of its delay), and `besides` seconds of
        other steps."""
        total = sum(sum(ladder) for ladder in ladders) + besides
        retries = sum(len(ladder) + 1 for ladder in ladders)
        wanted = total + retries * self.latency + self.timing.slack(total)
        # A slow controller's estimate may exceed the period: then the longest slot there is.
        self.resync_clock.quiet_slot(min(wanted, self.resync_clock.longest_slot()))

    def climb(
        self,
        expected: Sequence[float],
        start: Callable[[], object],
        *,
        what: str,
        refusals: int | None = None,
        first_within: float | None = None,
    ) -> list[float]:
        """Refuse applies, `start` a reconcile, and time the retries that follow it.

        The reconcile that `start` begins is attempt 0, awaited `first_within` seconds (None:
        timing.reconcile); retry n should come expected[n-1] seconds after the attempt before
        it. The witness refuses `refusals` applies (None: all
        of them); an apply it lets through ends the ladder in a success. Waits for each retry
        until its delay and slack have passed (longer once its reconcile has started); prints
        the measured ladder, asserts every gap is within `timing.band` of its delay with the
        controller's own time measured in it, and returns the gaps.
        """
        recorder = self.app.releases.recorder
        self.app.deny_applies(refusals)
        since = recorder.mark()
        start()
        seen = [self.app.wait_attempts(since=since, timeout=first_within)[0]]
        if first_within is not None:
            print(f"{what}: attempt 0 came {seen[0].at - since:.2f} s after the start")
        for delay in expected:
            try:
                seen.append(self._retry(seen[-1], delay, since, len(seen) + 1))
            except WitnessTimeout as missing:
                table = self.measured(what, expected, self.measure(seen, expected))
                raise AssertionError(
                    f"retry {len(seen)} did not come within "
                    f"{delay + self.timing.slack(delay, self.latency):.3f} s of the attempt "
                    f"before it (delay {delay:g} s + slack), nor did its reconcile start\n"
                    f"{table}\n{missing}"
                ) from None
        self.last_attempt = seen[-1].at
        gaps = self.measure(seen, expected)
        table = self.measured(what, expected, gaps)
        print(table)
        assert self.fits(gaps, expected), f"retry delays off the rule\n{table}"
        return gaps

    def _retry(self, last: Attempt, delay: float, since: float, count: int) -> Attempt:
        """The attempt of the retry due `delay` after `last`: awaited until its delay and slack
        have passed, then, if the witness saw its reconcile start by then, for that slack again
        (the controller's own time is judged once the gap is known). A retry that holds
        instead of applying fails no later than that."""
        recorder = self.app.releases.recorder
        slack = self.timing.slack(delay, self.latency)
        try:
            return self.app.wait_attempts(
                count, since=since, timeout=max(last.at + delay + slack - recorder.mark(), 0.0)
            )[count - 1]
        except WitnessTimeout:
            if not self.app.retry_started(last, delay):
                raise
        return self.app.wait_attempts(count, since=since, timeout=slack)[count - 1]

    def outlast(self, delay: float) -> None:
        """A quiet period through the retry that was due `delay` after the last attempt, so
        that it cannot fall into the next ladder: a hold applies nothing meanwhile (a wait for
        hooks comes after the dry run, so a dry run may come)."""
        recorder = self.app.releases.recorder
        seen = self.app.quiet(self._until_due(delay), since=recorder.mark(), dry_run=False)
        assert seen == [], f"applied during a hold: {[a.describe() for a in seen]}"

    def outlast_applying(self, delay: float, reason: str) -> None:
        """`outlast` for a hold whose reconciles apply the render (WaitingForHealth: automatic
        mode applies at each reconcile, then waits): the Release holds with `reason` through
        the retry that was due `delay` after the last attempt."""
        self.app.holds_for(
            lambda release: applied_is(release, "False", reason),
            f"the {reason} hold",
            self._until_due(delay),
        )

    def _until_due(self, delay: float) -> float:
        """Seconds from now until the retry due `delay` after the last attempt has had its
        slack, with the most own time of a gap in the last ladder: a retry pending from it
        comes as late as its retries did."""
        own = max([self.latency, *self.own])
        end = self.last_attempt + delay + self.timing.slack(delay, own)
        return max(end - self.app.releases.recorder.mark(), 0.0)

    def measure(self, seen: Sequence[Attempt], expected: Sequence[float]) -> list[float]:
        """The gaps between the attempts `seen`, retries due `expected` apart; keeps the
        controller's own time in each for `fits`, `measured` and `table`."""
        self.own = self.app.own_times(
            seen, expected[: len(seen) - 1], self.untraced, least=self.latency
        )
        return gaps_between(attempt.at for attempt in seen)

    def fits(self, gaps: Sequence[float], expected: Sequence[float]) -> bool:
        """Do the gaps last measured fit these delays, each with its own time?"""
        return len(gaps) == len(expected) and all(
            self.timing.fits(gap, delay, latency)
            for gap, delay, latency in zip(gaps, expected, self.own, strict=True)
        )

    def measured(self, what: str, expected: Sequence[float], gaps: Sequence[float]) -> str:
        """Keep the ladder last measured for the report's chart; its table."""
        measurements.record(what, self.timing, expected, gaps, self.own)
        return self.table(what, expected, gaps)

    def table(self, what: str, expected: Sequence[float], gaps: Sequence[float]) -> str:
        backoff = "unset" if self.retry_backoff is None else self.retry_backoff
        rows = [
            f"{what}; retryBackoff {backoff}; the controller's own time in each gap (a "
            f"reconcile's untraced start {self.untraced:.3f} s and what the witness saw, at "
            f"least the reconcile time {self.latency:.3f} s)",
            f"{'retry':>5} {'expected':>10} {'measured':>10} {'own time':>9} {'accepted':>20}",
        ]
        for number, (delay, gap, latency) in enumerate(zip_longest(expected, gaps, self.own), 1):
            if gap is None or latency is None:
                measured, mine, band, verdict = "-", "-", "-", "MISSING"
            else:
                measured, mine = f"{gap:.3f} s", f"{latency:.3f} s"
                band = self.timing.band_text(delay, latency)
                verdict = "ok" if self.timing.fits(gap, delay, latency) else "OFF"
            rows.append(
                f"{number:>5} {delay:>8.3f} s {measured:>10} {mine:>9} {band:>20}  {verdict}"
            )
        return "\n".join(rows)


@pytest.fixture
def release_with(
    releases: Releases, timing: Timing, resync_clock: ResyncClock
) -> Callable[..., Ladder]:
    """A Release with this retryBackoff (None: unset) and `spec`, that applied once, as a
    Ladder to climb (in the test's namespace, or `within` another's Releases).

    Automatic by default: it applies at its creation. A manual one applies at a first /sync,
    so that status.lastHandledSyncAt is set.
    """

    def make(
        retry_backoff: dict[str, Any] | None,
        *,
        automatic: bool = True,
        interval: str | None = None,
        name: str = "web",
        within: Releases = releases,
        **spec: Any,
    ) -> Ladder:
        policy: dict[str, Any] = {"automatic": True} if automatic else {}
        if interval is not None:
            policy["interval"] = interval
        if retry_backoff is not None:
            policy["retryBackoff"] = retry_backoff
        since = within.recorder.mark()
        app = within.app(name, sync_policy=policy, **spec)
        if not automatic:
            since = within.recorder.mark()
            app.request_sync()
        app.wait_applied("True", "Applied")
        latency, untraced = app.reconcile_time(since), app.untraced_start(since)
        if not automatic:  # the request's event may start one more reconcile after the apply
            app.settle()
        return Ladder(app, retry_backoff, timing, resync_clock, latency=latency, untraced=untraced)

    return make


def long_phase(timing: Timing, ladder: float) -> None:
    """Skip unless the controller's resync leaves room for a ladder of `ladder` seconds."""
    if timing.controller_resync <= ladder + timing.slack(ladder) + 60:
        verdicts.certifying_only(
            f"{LONG_PHASE_ONLY}; this run's resync is {timing.controller_resync:g} s, the "
            f"ladder {ladder:g} s"
        )


# The default ladder is about 10 s of retries: it fits a short resync period only well clear of
# a tick, which `reserve` waits for.
@pytest.mark.parametrize(
    "retry_backoff",
    [case(None, "unset", "BACK-6.ladder"), case({}, "without-initial", "BACK-6.without-initial")],
)
def test_without_initial_the_default_limiter_starts_at_5_ms_and_doubles(
    release_with: Callable[..., Ladder], retry_backoff: dict[str, Any] | None
) -> None:
    """11 retries, 5 ms doubling to 5.12 s (about 10 s in all, and a reconcile time each). The
    early gaps are hardly more than a reconcile's own time, and `timing.band` allows for that;
    the later ones tell a start of 10 ms or 2.5 ms apart, and any other factor. With
    retryBackoff unset, and set without initial (the CRD refuses a factor or max without it)."""
    expected = delays(DEFAULT_FIRST, DEFAULT_FACTOR, 11)
    ladder = release_with(retry_backoff)
    ladder.reserve(expected)
    ladder.climb(expected, ladder.app.request_sync, what="applies refused")


@pytest.mark.long
@pytest.mark.clause("BACK-6.cap")
@pytest.mark.timeout(0)  # bounded by its own waits: the whole ladder, about 39 minutes
def test_without_initial_the_default_limiter_stops_doubling_at_1000_seconds(
    release_with: Callable[..., Ladder], timing: Timing
) -> None:
    """The whole default ladder: 18 doublings from 5 ms (655.36 s at retry 18), then 1000 s
    instead of 1310.72 s. A cap at 600 s shows at retry 18, one at 100 s at retry 15."""
    expected = delays(DEFAULT_FIRST, DEFAULT_FACTOR, DEFAULT_LADDER_TO_CAP)
    long_phase(timing, sum(expected))
    ladder = release_with(None)
    ladder.reserve(expected)
    ladder.climb(expected, ladder.app.request_sync, what="applies refused, the default limiter")


@pytest.mark.clause("BACK-1.formula")
@pytest.mark.parametrize(
    ("retry_backoff", "expected"),
    [
        ({"initial": "1s", "factor": 2}, [1, 2, 4]),
        ({"initial": "2s", "factor": 1.5}, [2, 3, 4.5]),
        ({"initial": "500ms", "factor": 3}, [0.5, 1.5, 4.5]),
    ],
    ids=["1s-factor-2", "2s-factor-1.5", "500ms-factor-3"],
)
def test_the_delay_before_retry_n_is_initial_times_factor_to_the_n_minus_1(
    release_with: Callable[..., Ladder], retry_backoff: dict, expected: list[float]
) -> None:
    ladder = release_with(retry_backoff)
    ladder.reserve(expected)
    ladder.climb(expected, ladder.app.request_sync, what="applies refused")


@pytest.mark.clause("BACK-1.formula")
def test_the_retry_backoff_the_release_has_at_a_failure_sets_its_next_delay(
    release_with: Callable[..., Ladder],
) -> None:
    """Three failures on 1s x2; then retryBackoff becomes 300ms x1, and that edit's own
    reconcile fails too: the next retries wait 300 ms each (factor 1: whatever the count),
    not the 8 s the old curve had next."""
    ladder = release_with({"initial": "1s", "factor": 2})
    changed = {"initial": "300ms", "factor": 1}
    expected = [0.3, 0.3, 0.3]
    ladder.reserve([1, 2], expected)
    ladder.climb([1, 2], ladder.app.request_sync, what="3 failures on 1s x2")
    ladder.retry_backoff = changed
    edit = {"spec": {"syncPolicy": {"retryBackoff": changed}}}
    ladder.climb(expected, lambda: ladder.app.patch(edit), what="retryBackoff changed")


@pytest.mark.clause("BACK-1.with-interval")
@pytest.mark.parametrize("interval", ["1h", "1s"])
def test_a_release_with_an_interval_retries_its_failures_on_the_ladder_too(
    release_with: Callable[..., Ladder], interval: str
) -> None:
    """interval 1h: the periodic reconcile is an hour away; the retries keep to the ladder,
    neither left to it nor put off. interval 1s, shorter than the later delays: the ladder
    starts at the next periodic reconcile, and a failure schedules its retry, not the next
    periodic reconcile as well: the retries do not come every second."""
    expected = [1, 2, 4]
    ladder = release_with({"initial": "1s", "factor": 2}, interval=interval)
    ladder.reserve(expected)
    # With 1s, the next periodic reconcile starts the ladder: a /sync would add a reconcile.
    start = ladder.app.request_sync if interval == "1h" else (lambda: None)
    ladder.climb(expected, start, what=f"applies refused, interval {interval}")


@pytest.mark.clause("BACK-1.per-release")
@pytest.mark.parametrize("beside", ["same-namespace", "same-name-in-another-namespace"])
def test_each_release_counts_its_own_failures(
    release_with: Callable[..., Ladder],
    neighbour_releases: Releases,
    timing: Timing,
    beside: str,
) -> None:
    """Two Releases fail side by side, the second starting just after the first: each
    climbs its own ladder, as if the other were not there. They share a namespace, or a
    name in two namespaces."""
    backoff = {"initial": "1s", "factor": 2}
    expected = [1, 2, 4]
    if beside == "same-namespace":
        first, second = (release_with(backoff, name=name) for name in ("first", "second"))
    else:
        first, second = release_with(backoff), release_with(backoff, within=neighbour_releases)
    first.reserve([1, *expected])
    since = first.app.releases.recorder.mark()
    for ladder in (first, second):
        ladder.app.deny_applies()
    first.app.request_sync()
    first.app.wait_attempts(since=since)
    second.app.request_sync()
    total = sum(expected) + timing.slack(sum(expected)) + timing.reconcile
    wrong = []
    for ladder in (first, second):
        attempts = ladder.app.wait_attempts(len(expected) + 1, since=since, timeout=total)
        gaps = ladder.measure(attempts[: len(expected) + 1], expected)
        where = f"{ladder.app.namespace}/{ladder.app.name}"
        print(ladder.measured(f"{where}, beside the other", expected, gaps))
        if not ladder.fits(gaps, expected):
            wrong.append(ladder.table(where, expected, gaps))
    assert not wrong, "a Release's retries followed another's failures:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    "factor",
    [
        case(0.5, "factor-0.5", "BACK-2.below-1"),
        case(0, "factor-0", "BACK-2.below-1"),
        case(-1, "factor-minus-1", "BACK-2.below-1"),
        case(None, "factor-unset", "BACK-2.unset"),
    ],
)
def test_a_factor_below_1_or_unset_is_taken_as_2(
    release_with: Callable[..., Ladder], factor: float | None
) -> None:
    initial, literal = 1.0, 1.0 if factor is None else factor
    retry_backoff: dict[str, Any] = {"initial": f"{initial:g}s"}
    if factor is not None:
        retry_backoff["factor"] = factor
    expected = delays(initial, DEFAULT_FACTOR, 3)
    literally = delays(initial, literal, 3)
    ladder = release_with(retry_backoff)
    ladder.reserve(expected)
    gaps = ladder.climb(expected, ladder.app.request_sync, what="applies refused")
    print(f"a factor of {literal:g} would have given {seconds(literally)}")
    assert not ladder.fits(gaps, literally), f"the delays also fit a factor of {literal:g}"


@pytest.mark.clause("BACK-2.exactly-1")
def test_a_factor_of_exactly_1_keeps_every_delay_at_initial(
    release_with: Callable[..., Ladder],
) -> None:
    expected = delays(1.5, 1, 4)
    ladder = release_with({"initial": "1500ms", "factor": 1})
    ladder.reserve(expected)
    gaps = ladder.climb(expected, ladder.app.request_sync, what="applies refused")
    assert not ladder.fits(gaps, delays(1.5, DEFAULT_FACTOR, 4)), "factor 1 was taken as 2"


@pytest.mark.clause("BACK-3.max")
def test_max_caps_the_delay(release_with: Callable[..., Ladder]) -> None:
    expected = [1, 2, 3, 3]
    uncapped = delays(1, 2, len(expected))
    ladder = release_with({"initial": "1s", "factor": 2, "max": "3s"})
    ladder.reserve(expected)
    gaps = ladder.climb(expected, ladder.app.request_sync, what="applies refused")
    assert not ladder.fits(gaps, uncapped), f"the delays also fit the uncapped {uncapped}"


@pytest.mark.clause("BACK-3.max-below-initial")
def test_a_max_below_initial_caps_the_first_delay_too(
    release_with: Callable[..., Ladder],
) -> None:
    expected = [1.5, 1.5, 1.5]
    ladder = release_with({"initial": "4s", "factor": 2, "max": "1500ms"})
    ladder.reserve(expected)
    ladder.climb(expected, ladder.app.request_sync, what="applies refused")


@pytest.mark.long
@pytest.mark.clause("BACK-3.default")
@pytest.mark.timeout(0)  # bounded by its own waits: the 1000 s retry
def test_without_max_the_delay_is_capped_at_1000_seconds(
    release_with: Callable[..., Ladder], timing: Timing
) -> None:
    """initial far above 1000 s: the first retry comes after 1000 s, not after initial."""
    long_phase(timing, DEFAULT_MAX)
    initial = 2 * (DEFAULT_MAX + timing.slack(DEFAULT_MAX))  # uncapped, it would come too late
    ladder = release_with({"initial": f"{initial:g}s"})
    ladder.reserve([DEFAULT_MAX])
    ladder.climb([DEFAULT_MAX], ladder.app.request_sync, what="applies refused, max unset")


@pytest.mark.clause("BACK-4.success")
def test_a_success_resets_the_failure_count(release_with: Callable[..., Ladder]) -> None:
    ladder = release_with({"initial": "1s", "factor": 2})
    ladder.reserve([1, 2, 4], [1, 2])
    # three applies refused; the third retry, 4 s later, is let through and succeeds
    ladder.climb([1, 2, 4], ladder.app.request_sync, refusals=3, what="3 failures, a success")
    ladder.app.wait_applied("True", "Applied")
    # counting on from 3 failures, the first retry would wait 1 s x 2^3 = 8 s
    ladder.climb([1, 2], ladder.app.request_sync, what="failing again after the success")


@pytest.mark.clause("BACK-4.hold-WaitingForSync")
def test_a_waiting_for_sync_hold_resets_the_failure_count(
    release_with: Callable[..., Ladder],
) -> None:
    """A manual Release fails a pending /sync three times, then holds (WaitingForSync).

    The request is taken back by an annotation no later than status.lastHandledSyncAt, so the
    next reconcile has nothing pending and a new render (v2) to wait with: a hold.
    """
    ladder = release_with({"initial": "1s", "factor": 2}, automatic=False)
    app = ladder.app
    handled = parse_time(app.settled_status()["lastHandledSyncAt"])
    app.set_content("v2")  # starts no reconcile; makes the hold below WaitingForSync
    ladder.reserve([1, 2, 4], [1, 2])
    pending = handled + timedelta(seconds=2)
    ladder.climb([1, 2], lambda: app.request_sync(at=pending), what="3 failures of a /sync")
    app.request_sync(at=handled)  # not later than lastHandledSyncAt: nothing pending
    app.wait_applied("False", "WaitingForSync")
    ladder.outlast(4)
    # counting on from 3 failures, the first retry would wait 1 s x 2^3 = 8 s
    later = handled + timedelta(seconds=4)
    ladder.climb([1, 2], lambda: app.request_sync(at=later), what="a new /sync after the hold")


#: Holds made and ended through a subresource (each write is also a /sync): what to PUT, the
#: reason of the hold; the DELETE ends it.
HOLDS = {
    "Pinned": ("pin", {"renderRef": NO_RENDER}),
    "WaitingForHooks": ("lifecycle", widgets.pre_apply_hook()),
}


@pytest.mark.parametrize(
    "hold", [case(reason, reason, f"BACK-4.hold-{reason}") for reason in HOLDS]
)
def test_a_pinned_or_waiting_hold_resets_the_failure_count(
    release_with: Callable[..., Ladder], hold: str
) -> None:
    """An automatic Release fails three times, then holds: pinned to a render it does not
    have, or waiting for a hook that never turns Healthy. The hold ends: its next failure
    waits the first delay again."""
    subresource, body = HOLDS[hold]
    ladder = release_with({"initial": "1s", "factor": 2})
    app = ladder.app
    ladder.reserve([1, 2, 4], [1, 2])
    ladder.climb([1, 2], app.request_sync, what="3 failures")
    subresources.put(app, subresource, body)
    app.wait_applied("False", hold)
    ladder.outlast(4)
    # counting on from 3 failures, the first retry would wait 1 s x 2^3 = 8 s
    ladder.climb([1, 2], lambda: subresources.delete(app, subresource), what=f"after {hold}")


@pytest.mark.clause("BACK-4.hold-WaitingForHealth")
def test_a_waiting_for_health_hold_resets_the_failure_count(
    release_with: Callable[..., Ladder],
) -> None:
    """An automatic Release fails three times; then its apply goes through, with a render
    whose Widget never turns Healthy and a postApply hook that waits for it: a hold
    (WaitingForHealth) after an apply, neither a success nor a failure. A /sync whose apply
    fails again waits the first delay again."""
    ladder = release_with({"initial": "1s", "factor": 2})
    app = ladder.app
    ladder.reserve([1, 2, 4], [1, 2])
    ladder.climb([1, 2], app.request_sync, what="3 failures")
    app.releases.recorder.allow_all()
    app.set_content("v1", extra=[widgets.widget("worker")])
    subresources.put(app, "lifecycle", {"postApply": [[widgets.widget("notify")]]})
    app.wait_applied("False", "WaitingForHealth")
    ladder.outlast_applying(4, "WaitingForHealth")
    # counting on from 3 failures, the first retry would wait 1 s x 2^3 = 8 s
    ladder.climb([1, 2], app.request_sync, what="after WaitingForHealth")


@pytest.mark.clause("BACK-4.nothing-else")
def test_a_failure_of_another_transient_reason_counts_on(
    release_with: Callable[..., Ladder], timing: Timing
) -> None:
    """Four refused applies (DeployFailed; retries after 0.5, 1 and 2 s). Then, with no
    event, the source is deleted and the applies are let through: retry 4, due 4 s after the
    fourth failure, fails SourceNotReady, the fifth failure. Once it has, the source comes
    back (no event either): retry 5 is due 8 s after it, and applies then. A count per reason
    would have started again at the new reason: retry 5 half a second after it. (The whole
    ladder fits a development run's 30 s resync period.)"""
    ladder = release_with({"initial": "500ms", "factor": 2})
    app, recorder = ladder.app, ladder.app.releases.recorder
    ladder.reserve([0.5, 1, 2, 4, 8])
    ladder.climb([0.5, 1, 2], app.request_sync, what="4 refused applies")
    app.releases.core.delete_namespaced_config_map(app.source_name, app.namespace)
    recorder.allow_all()
    app.wait_applied("False", "SourceNotReady", timeout=4 + timing.slack(4, ladder.latency))
    fifth = recorder.mark()  # just after retry 4 ended: its status shows its reason
    app.set_content("v1")
    delay = 8.0
    [applied, *_] = app.wait_attempts(
        since=fifth, timeout=delay + timing.slack(delay, ladder.latency) + timing.reconcile
    )
    took = applied.at - fifth
    print(f"retry 5 applied {took:.3f} s after retry 4 failed SourceNotReady")
    [point] = measurements.record(
        "retry 5, after a DeployFailed ladder turned SourceNotReady",
        timing,
        [delay],
        [took],
        ladder.latency,
    )
    assert point.ok, (
        f"BACK-4.nothing-else: retry 5 after a new transient reason: {point.describe()}"
    )


def unappliable_then_sync(app: App) -> None:
    """A reconcile that fails without being transient (Unappliable: its render fails the
    dry run), then the render mended and a /sync."""
    app.set_content("v1", extra=[invalid_object("rejected")])
    app.request_sync()
    app.wait_applied("False", "Unappliable")
    app.set_content("v1")
    app.request_sync()


def hook_failed_then_sync(app: App) -> None:
    """A reconcile that fails without being transient (HookFailed: its preApply hook is
    Degraded), then the hook taken away (a /sync too)."""
    widgets.create(app, "migrate", "Degraded")
    subresources.put(app, "lifecycle", widgets.pre_apply_hook())
    app.wait_applied("False", "HookFailed")
    subresources.delete(app, "lifecycle")


#: Events that start a reconcile between two failures, and reset nothing: a spec change
#: (a max equal to the default changes the generation, not the ladder), a /sync, and
#: failures that are not transient (neither a success nor a hold).
BETWEEN_FAILURES: dict[str, Callable[[App], object]] = {
    "spec-change": lambda app: app.patch(
        {"spec": {"syncPolicy": {"retryBackoff": {"max": f"{DEFAULT_MAX:g}s"}}}}
    ),
    "sync": lambda app: app.request_sync(),
    "Unappliable": unappliable_then_sync,
    "HookFailed": hook_failed_then_sync,
}


@pytest.mark.parametrize("event", [case(e, e, "BACK-4.nothing-else") for e in BETWEEN_FAILURES])
def test_an_event_between_failures_does_not_reset_the_failure_count(
    release_with: Callable[..., Ladder], timing: Timing, event: str
) -> None:
    """Four failures, then an event whose reconcile fails too: failure 5 (an Unappliable or
    HookFailed reconcile between them counts no failure, and resets nothing). The count goes
    on, so the next retry waits 16 s, or comes when the one due 8 s after the fourth failure
    does; a reset count would retry 1 s after the event's failure. The 8 s leave the event's
    steps room even on a loaded machine."""
    ladder = release_with({"initial": "1s", "factor": 2})
    app = ladder.app
    ladder.reserve([1, 2, 4], besides=timing.reconcile)
    ladder.climb([1, 2, 4], app.request_sync, what="4 failures")
    since = app.releases.recorder.mark()
    BETWEEN_FAILURES[event](app)
    failed = app.wait_attempts(since=since)[0].at
    first_delay = 1 + timing.slack(1, ladder.latency)
    due = ladder.last_attempt + 8 - timing.early
    assert failed + first_delay < due, (
        f"the {event} took {failed - ladder.last_attempt:.2f} s: too late to tell the delays "
        "apart (the controller or the machine is too slow for this test)"
    )
    seen = app.quiet(first_delay - (app.releases.recorder.mark() - failed), since=failed + 1e-6)
    print(
        f"{event} {failed - ladder.last_attempt:.2f} s after the fourth failure; "
        f"{len(seen)} attempt(s) in the {first_delay:.2f} s after its failure"
    )
    assert seen == [], (
        f"a retry {seen[0].at - failed:.2f} s after the failure that followed the {event}: "
        "the first delay, as if the count had been reset"
    )


#: The lower wave's creation and deletion, beside the ladders.
LOWER_WAVE_SECONDS = 3.0


@pytest.mark.clause("BACK-4.hold-WaitingForWave")
def test_a_waiting_for_wave_hold_resets_the_failure_count(
    release_with: Callable[..., Ladder],
) -> None:
    """An automatic Release of wave 1 fails three times; then a Release of wave 0 appears,
    whose Widget never turns Healthy, and the retry holds (WaitingForWave). The lower wave goes
    away again (its deletion starts no reconcile), and a /sync fails: the first delay again.
    The hold does not end by the lower wave turning Healthy: its status change and its
    wave's completion would each start a reconcile, two failures at once."""
    ladder = release_with({"initial": "1s", "factor": 2}, wave=1)
    app = ladder.app
    ladder.reserve([1, 2, 4], [1, 2], besides=LOWER_WAVE_SECONDS)
    ladder.climb([1, 2], app.request_sync, what="3 failures")
    low = app.releases.app(
        "low", sync_policy={"automatic": True}, wave=0, extra=[widgets.widget("low-worker")]
    )
    app.wait_applied("False", "WaitingForWave")
    ladder.outlast(4)
    low.delete()
    # counting on from 3 failures, the first retry would wait 1 s x 2^3 = 8 s
    ladder.climb([1, 2], app.request_sync, what="after WaitingForWave")


@pytest.mark.clause("BACK-5.restart")
@pytest.mark.stops_controller
def test_a_controller_restart_resets_the_failure_count(
    release_with: Callable[..., Ladder], restartable_controller: ControllerUnderTest
) -> None:
    """The restarted controller's initial list reconciles the Release: that is attempt 0."""
    controller = restartable_controller
    ladder = release_with({"initial": "1s", "factor": 2})
    ladder.reserve([1, 2])  # the restart starts a new resync period
    ladder.climb([1, 2], ladder.app.request_sync, what="3 failures before the restart")
    controller.stop()
    # counting on from 3 failures, the first retry would wait 1 s x 2^3 = 8 s; the restarted
    # controller's first reconcile may wait for its leadership
    first = ladder.timing.takeover
    ladder.climb([1, 2], controller.start, what="after the restart", first_within=first)
