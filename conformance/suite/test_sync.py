"""The /sync request: pending requests, the comparison to the second, what a failure leaves."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest

from conformance.clusters.base import Cluster
from conformance.harness.marks import case
from conformance.install.base import ControllerUnderTest, stopped
from conformance.observe import subresources, widgets
from conformance.observe.releases import (
    DISTANT_RETRY,
    NO_RENDER,
    App,
    Obj,
    Releases,
    ago,
    applied_automatic_app,
    applied_is,
    applied_manual_app,
    condition_status,
    content_object,
    invalid_object,
    kinds,
    parse_time,
    rfc3339,
    same_second,
    synced_manual_app,
)
from conformance.observe.resync import ResyncClock
from conformance.observe.witness import witness_deletes
from conformance.polling import poll_until
from conformance.timing import OBSERVER_PERIOD, Timing
from convoyapi import GROUP, LIFECYCLE, PIN, SYNC_FORCE_REQUESTED_AT, SYNC_REQUESTED_AT

AUTOMATIC = {"automatic": True}
#: Manual Releases that a test watches over a quiet period are reconciled every second.
INTERVAL = 1.0
PERIODIC = {"interval": f"{INTERVAL:g}s"}


def last_handled(app: App) -> datetime:
    """status.lastHandledSyncAt once the status has settled (it may come after the condition
    a test waited for)."""
    return parse_time(app.settled_status()["lastHandledSyncAt"])


def wait_handled(app: App, request: datetime, timeout: float | None = None) -> None:
    second = request.replace(microsecond=0)
    app.wait_for(
        lambda r: bool(
            (r.get("status") or {}).get("lastHandledSyncAt")
            and same_second(parse_time(r["status"]["lastHandledSyncAt"]), second)
        ),
        f"the request of {second} applied (lastHandledSyncAt)",
        timeout,
    )


# -- SYNC-1: the POST writes the current time -------------------------------------------------


@pytest.mark.clause("SYNC-1.current-time", "SYNC-1.named-release")
def test_post_sync_writes_the_current_time_on_the_named_release(
    releases: Releases, timing: Timing
) -> None:
    app = releases.app("web", annotations={SYNC_REQUESTED_AT: rfc3339(ago(3600))})
    neighbour = releases.app("neighbour")
    before = datetime.now(UTC)
    subresources.post_sync(app)
    after = datetime.now(UTC)
    written = parse_time(subresources.annotations_of(app.get())[SYNC_REQUESTED_AT])
    print(f"sync-requested-at is {(written - before).total_seconds():+.3f} s from the POST")
    # A time written to the second is the current time too; clocks may differ by `late`.
    earliest = before.replace(microsecond=0) - timedelta(seconds=timing.late)
    latest = after + timedelta(seconds=timing.late)
    assert earliest <= written <= latest, (
        f"sync-requested-at {written} is not the time of the POST ({before} to {after})"
    )
    assert SYNC_REQUESTED_AT not in subresources.annotations_of(neighbour.get()), (
        "the POST to one Release wrote sync-requested-at on another"
    )


# -- SYNC-2: a change of the annotation starts a reconcile -----------------------------------

#: The annotation's value before each change: a minute ago, a tenth into its second.
BEFORE_CHANGE = ago(60).replace(microsecond=100_000)
#: Changes of sync-requested-at from BEFORE_CHANGE (None: removed), each with its clause. Any
#: change counts: one within the same second, which no comparison to the second would see, and
#: the same instant in another UTC offset, which no comparison of instants would.
CHANGES = {
    "later": (rfc3339(datetime.now(UTC)), "SYNC-2.later"),
    "later-in-the-same-second": (
        rfc3339(BEFORE_CHANGE.replace(microsecond=600_000)),
        "SYNC-2.later",
    ),
    "earlier": (rfc3339(ago(3600)), "SYNC-2.earlier"),
    "removed": (None, "SYNC-2.removed"),
    "same-instant": (rfc3339(BEFORE_CHANGE, offset=timedelta(hours=2)), "SYNC-2.same-instant"),
}


@pytest.mark.clause("TRIG-3.sync-requested-at")
@pytest.mark.parametrize(
    "change", [case(name, name, clause) for name, (_, clause) in CHANGES.items()]
)
def test_a_change_of_sync_requested_at_starts_a_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, change: str
) -> None:
    """Automatic mode applies at every reconcile, so the apply attempt is the reconcile."""
    app = releases.app(
        "web", sync_policy=AUTOMATIC, annotations={SYNC_REQUESTED_AT: rfc3339(BEFORE_CHANGE)}
    )
    app.wait_applied("True", "Applied")
    resync_clock.quiet_slot(timing.reconcile)  # only the change can explain a reconcile
    since = app.releases.recorder.mark()
    app.annotate({SYNC_REQUESTED_AT: CHANGES[change][0]})
    attempt = app.wait_attempts(since=since)[0]
    print(f"{change}: apply attempt {attempt.at - since:.3f} s after the annotation changed")


@pytest.mark.clause("SYNC-2.while-reconciling")
def test_a_change_during_a_reconcile_starts_another_one_after_it(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    """The witness holds the apply of a first request at a gate, so that its reconcile is
    under way when a second request is written: the second is handled after the first."""
    app = releases.app("web")
    app.wait_applied("False", "WaitingForSync")
    resync_clock.quiet_slot(timing.reconcile + timing.settle)  # no resync may do it instead
    gate = app.releases.recorder.gate(name=app.object_name, dry_run=False)
    app.request_sync(at=ago(3))
    gate.wait_entered(timing.reconcile)
    second = parse_time(app.request_sync(at=ago(1)))
    gate.open()
    wait_handled(app, second)


# -- SYNC-3 and SYNC-4: which requests are pending -------------------------------------------


@pytest.mark.clause("SYNC-3.later", "SYNC-5.after-success")
def test_a_pending_request_is_applied_and_recorded_as_handled(releases: Releases) -> None:
    app = releases.app("web")
    app.wait_applied("False", "WaitingForSync")
    assert "lastHandledSyncAt" not in app.settled_status(), "lastHandledSyncAt before any apply"
    written = parse_time(app.request_sync(at=ago(2.5)))
    app.wait_applied("True", "Applied")
    assert app.rendered_object()["data"] == {"content": "v1"}
    handled = last_handled(app)
    assert same_second(handled, written), (
        f"lastHandledSyncAt {handled} is not the second of the handled request {written}"
    )


@pytest.mark.clause("SYNC-3.in-sync")
def test_a_pending_request_is_applied_when_the_render_is_the_applied_one(
    releases: Releases,
) -> None:
    """A request is applied whatever the render: one that is already applied (Applied=True,
    in sync) is applied again, dry run and all, and so mends the drift the target has."""
    app = synced_manual_app(releases)
    app.wait_applied("True", "Applied")  # in sync: the render is the applied one
    app.drift()
    since = app.releases.recorder.mark()
    written = parse_time(app.request_sync(at=app.next_pending_time()))
    wait_handled(app, written)
    app.wait_content("v1")
    seen = kinds(app.attempts(since=since))
    assert seen[:2] == ["dry-run", "apply"], f"the request's reconcile made {seen}"


@pytest.mark.clause("SYNC-3.not-later")
def test_a_request_earlier_than_the_last_handled_one_is_not_pending(
    releases: Releases, timing: Timing
) -> None:
    app = synced_manual_app(releases, sync_policy=PERIODIC)
    app.set_content("v2")
    app.request_sync(at=last_handled(app) - timedelta(seconds=5))
    app.wait_applied("False", "WaitingForSync")
    app.stays("False", "WaitingForSync", timing.quiet_for(INTERVAL))
    assert app.rendered_object()["data"] == {"content": "v1"}


@pytest.mark.clause("SYNC-3.not-force-alone")
def test_in_manual_mode_the_force_annotation_alone_is_no_request(
    releases: Releases, timing: Timing
) -> None:
    """sync-force-requested-at written alone, later than lastHandledSyncAt (a client's write:
    a POST writes both): no request is pending, so the periodic reconcile reports the new
    render and applies nothing."""
    app = synced_manual_app(releases, sync_policy=PERIODIC)
    app.set_content("v2")
    app.annotate({SYNC_FORCE_REQUESTED_AT: rfc3339(last_handled(app) + timedelta(seconds=3))})
    app.wait_applied("False", "WaitingForSync")
    app.stays("False", "WaitingForSync", timing.quiet_for(INTERVAL))
    assert app.rendered_object()["data"] == {"content": "v1"}, (
        "SYNC-3.not-force-alone: the force annotation alone was applied as a request"
    )


#: Offsets east of UTC (a west one is the same, negated): whole hours, and hours and minutes,
#: whose minutes take the offset's sign too.
OFFSETS = {"whole-hours": timedelta(hours=5), "hours-and-minutes": timedelta(hours=5, minutes=30)}


@pytest.mark.clause("SYNC-3.absolute-time")
@pytest.mark.parametrize("offset", sorted(OFFSETS))
def test_request_times_compare_as_instants_whatever_their_utc_offset(
    releases: Releases, timing: Timing, offset: str
) -> None:
    """West of UTC the digits of a later instant can be smaller; east of it those of an
    earlier instant larger: only the instant counts."""
    east = OFFSETS[offset]
    app = synced_manual_app(releases, sync_policy=PERIODIC)
    handled = last_handled(app)
    app.set_content("v2")
    later = handled + timedelta(seconds=3)
    app.annotate({SYNC_REQUESTED_AT: rfc3339(later, offset=-east)})
    app.wait_content("v2")
    wait_handled(app, later)
    app.set_content("v3")
    earlier = later - timedelta(seconds=2)
    app.annotate({SYNC_REQUESTED_AT: rfc3339(earlier, offset=east)})
    app.wait_applied("False", "WaitingForSync")
    app.stays("False", "WaitingForSync", timing.quiet_for(INTERVAL))


@pytest.mark.clause("SYNC-3.absolute-time", "SYNC-3.not-later")
def test_a_request_on_another_date_compares_by_its_date_too(
    releases: Releases, timing: Timing
) -> None:
    """The time of day alone does not decide: a request a day after the last handled one but
    an hour earlier in the day is pending; one a day before it but an hour later is not."""
    app = synced_manual_app(releases, sync_policy=PERIODIC)
    handled = last_handled(app)
    app.set_content("v2")
    earlier_date = handled - timedelta(days=1) + timedelta(hours=1)
    app.annotate({SYNC_REQUESTED_AT: rfc3339(earlier_date)})
    app.wait_applied("False", "WaitingForSync")
    app.stays("False", "WaitingForSync", timing.quiet_for(INTERVAL))
    assert app.rendered_object()["data"] == {"content": "v1"}, (
        f"SYNC-3.not-later: a request of {earlier_date} was applied after one of {handled}"
    )
    later_date = handled + timedelta(days=1) - timedelta(hours=1)
    app.annotate({SYNC_REQUESTED_AT: rfc3339(later_date)})
    app.wait_content("v2")
    wait_handled(app, later_date)


#: The same instant as RFC 3339 allows it to be written (with the time to write).
FORMS = {
    "no-fraction": lambda at: at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    "milliseconds": lambda at: at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
    "nanoseconds": lambda at: at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z",
    "zero-offset": lambda at: at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00",
}


@pytest.mark.clause("SYNC-3.any-form")
@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_request_time_is_read_in_every_rfc_3339_form(releases: Releases, form: str) -> None:
    app = synced_manual_app(releases)
    app.set_content("v2")
    later = last_handled(app) + timedelta(seconds=1, milliseconds=250)
    app.annotate({SYNC_REQUESTED_AT: FORMS[form](later)})
    app.wait_content("v2")
    wait_handled(app, later)


@pytest.mark.clause("SYNC-3.at-creation")
def test_a_request_written_before_the_release_exists_is_applied_at_its_creation(
    releases: Releases,
) -> None:
    written = ago(2.5)
    app = releases.app("web", annotations={SYNC_REQUESTED_AT: rfc3339(written)})
    app.wait_applied("True", "Applied")
    assert same_second(last_handled(app), written)


@pytest.mark.clause("SYNC-3.per-release")
def test_a_request_to_one_release_applies_nothing_of_its_neighbour(
    releases: Releases, timing: Timing
) -> None:
    web, neighbour = (synced_manual_app(releases, n, sync_policy=PERIODIC) for n in ("web", "nb"))
    handled = last_handled(neighbour)
    for app in (web, neighbour):
        app.set_content("v2")
    neighbour.wait_applied("False", "WaitingForSync")
    web.request_sync(at=web.next_pending_time())
    web.wait_content("v2")
    neighbour.stays("False", "WaitingForSync", timing.quiet_for(INTERVAL))
    assert last_handled(neighbour) == handled, "the neighbour's lastHandledSyncAt changed"


@pytest.mark.clause("SYNC-4.same-second", "SYNC-4.next-second", "SYNC-3.any-form")
def test_the_pending_check_compares_whole_seconds(releases: Releases, timing: Timing) -> None:
    """The start and the end of the last handled request's second are not pending: the end
    in microseconds, and in the nine digits Go writes (RFC3339Nano), which rounded to
    microseconds would be the next second."""
    app = synced_manual_app(releases, sync_policy=PERIODIC)
    second = last_handled(app).replace(microsecond=0)
    app.set_content("v2")  # any apply now would show
    same_second = (
        rfc3339(second),
        rfc3339(second + timedelta(microseconds=999_999)),
        f"{second:%Y-%m-%dT%H:%M:%S}.999999999Z",
    )
    for written in same_second:
        app.annotate({SYNC_REQUESTED_AT: written})
        app.wait_applied("False", "WaitingForSync")
        app.stays("False", "WaitingForSync", timing.quiet_for(INTERVAL))
    app.request_sync(at=second + timedelta(seconds=1))
    app.wait_content("v2")


# -- SYNC-5 and SYNC-6: what a failure or a wait leaves ---------------------------------------


@pytest.mark.clause("SYNC-5.not-on-failure", "SYNC-6.transient-failure")
def test_a_failed_apply_leaves_the_request_pending_and_the_retry_applies_it(
    releases: Releases,
) -> None:
    app = releases.app("web", sync_policy={"retryBackoff": {"initial": "1s"}})
    app.deny_applies()
    written = parse_time(app.request_sync(at=ago(2.5)))
    app.wait_applied("False", "DeployFailed")
    app.wait_attempts(count=2)  # the first apply and at least one retry, both refused
    assert "lastHandledSyncAt" not in app.settled_status(), (
        "lastHandledSyncAt written after a failure"
    )
    app.releases.recorder.allow_all()  # no new request: only a retry can apply now
    app.wait_applied("True", "Applied")
    assert same_second(last_handled(app), written)


@pytest.mark.clause("SYNC-6.transient-failure")
def test_a_request_withdrawn_before_its_retry_is_not_applied_by_the_retry(
    releases: Releases, timing: Timing
) -> None:
    """The request stays pending after a failure only while its annotation says so: the retry
    finds it withdrawn and applies nothing. (The model-based run found this unpinned.)"""
    delay = 2.0
    app = synced_manual_app(releases, sync_policy={"retryBackoff": {"initial": f"{delay:g}s"}})
    app.set_content("v2")
    app.deny_applies(times=1)
    since = app.releases.recorder.mark()
    app.request_sync()
    app.wait_applied("False", "DeployFailed")
    app.annotate({SYNC_REQUESTED_AT: None})
    app.wait_applied("False", "WaitingForSync")
    app.stays("False", "WaitingForSync", delay + timing.slack(delay))  # the retry's moment
    refused = app.attempts(since=since, dry_run=False)
    assert len(refused) == 1, f"applied after the request was withdrawn: {kinds(refused)}"
    assert app.rendered_object()["data"] == {"content": "v1"}, "the withdrawn request was applied"


#: Only the restart can apply a request a failure leaves pending: its retry is far off.
AFTER_THE_RESTART = {"retryBackoff": DISTANT_RETRY}


def refused_before_the_stop(app: App, controller: ControllerUnderTest) -> str:
    """The request's apply is refused (DeployFailed); while the controller is down the
    witness lets applies through again."""
    app.deny_applies()
    written = app.request_sync(at=app.next_pending_time())
    app.wait_applied("False", "DeployFailed")
    with stopped(controller):
        app.releases.recorder.allow_all()
    return written


def written_while_down(app: App, controller: ControllerUnderTest) -> str:
    with stopped(controller):
        return app.request_sync(at=app.next_pending_time())


#: How a request is pending when the controller starts again (each stops and starts it).
PENDING_AT_THE_START = {
    "refused-before-the-stop": refused_before_the_stop,
    "written-while-down": written_while_down,
}


@pytest.mark.clause("SYNC-6.across-a-restart")
@pytest.mark.stops_controller
@pytest.mark.parametrize("pending", sorted(PENDING_AT_THE_START))
def test_a_pending_request_is_applied_by_the_restarted_controller(
    releases: Releases, timing: Timing, restartable_controller: ControllerUnderTest, pending: str
) -> None:
    """A restart loses no request: the annotation, not the controller's memory, says what is
    pending, and the restarted controller's first reconcile of the Release applies it."""
    app = applied_manual_app(releases, sync_policy=AFTER_THE_RESTART)
    written = parse_time(PENDING_AT_THE_START[pending](app, restartable_controller))
    # the restarted controller's first reconcile may wait for its leadership
    wait_handled(app, written, timeout=timing.takeover)
    app.wait_content("v2")


def app_whose_next_prune_fails(releases: Releases) -> App:
    """A manual Release applied with an object that its new render (v2) drops, and whose
    delete, the prune, the witness refuses; nothing requests v2 yet."""
    dropped = witness_deletes(content_object("web-dropped", "old"))
    app = synced_manual_app(
        releases, extra=[dropped], sync_policy={"retryBackoff": {"initial": "1s"}}
    )
    app.releases.recorder.deny(operation="DELETE", name="web-dropped", message="prune refused")
    app.set_content("v2")  # without the dropped object: the next apply prunes it
    return app


@pytest.mark.clause("SYNC-5.not-on-failure", "SYNC-6.transient-failure")
def test_a_request_whose_prune_fails_stays_pending_until_the_prune_succeeds(
    releases: Releases, timing: Timing
) -> None:
    """The apply succeeds, the prune of an object the render dropped is refused: the sync is
    not done (PruneFailed), so the request is not handled yet."""
    app = app_whose_next_prune_fails(releases)
    handled = last_handled(app)
    written = parse_time(app.request_sync(at=app.next_pending_time()))
    app.wait_applied("False", "PruneFailed")
    app.holds_for(
        lambda r: parse_time(r["status"]["lastHandledSyncAt"]) == handled,
        "lastHandledSyncAt unchanged while the prune fails",
        timing.quiet,
    )
    assert app.rendered_object()["data"] == {"content": "v2"}, "the apply did not happen"
    app.releases.recorder.allow_all()  # no new request: only a retry can finish the sync now
    wait_handled(app, written)
    app.wait_applied("True", "Applied")


@pytest.mark.clause("MAN-2.after-failed-prune")
def test_a_render_whose_prune_failed_is_not_the_last_successful_apply(releases: Releases) -> None:
    """v2 is applied and its prune refused (PruneFailed): v2 is no successful apply. The
    request withdrawn, the Release compares with lastSuccessful, still v1: WaitingForSync,
    not in sync."""
    app = app_whose_next_prune_fails(releases)
    applied = app.settled_status()["lastSuccessful"]["renderRef"]
    app.request_sync(at=app.next_pending_time())
    app.wait_applied("False", "PruneFailed")
    app.annotate({SYNC_REQUESTED_AT: None})
    app.wait_applied("False", "WaitingForSync")
    assert app.settled_status()["lastSuccessful"]["renderRef"] == applied, "lastSuccessful changed"


@dataclass(frozen=True)
class HookWait:
    """A request that the lifecycle hooks hold: the hooks, the reason it waits with, the data
    of the rendered object in the target by then (None: not applied), the Release's extras."""

    hooks: dict[str, Any]
    reason: str
    applied: dict[str, str] | None
    extra: tuple[Obj, ...] = ()


#: postApply hooks wait for the render to be Healthy after its apply (WaitingForHealth); a
#: preApply batch that is not Healthy holds the apply itself (WaitingForHooks).
HOOK_WAITS = {
    "postApply": HookWait(
        {"postApply": [[widgets.widget("notify")]]},
        "WaitingForHealth",
        {"content": "v1"},
        (widgets.widget("worker"),),
    ),
    "preApply": HookWait(widgets.pre_apply_hook(), "WaitingForHooks", None),
}


@pytest.mark.clause("SYNC-5.not-while-waiting")
@pytest.mark.parametrize("held", sorted(HOOK_WAITS))
def test_a_request_the_lifecycle_hooks_hold_is_not_handled_yet(
    releases: Releases, timing: Timing, held: str
) -> None:
    """The sync is not done while its hooks wait, so lastHandledSyncAt stays unset."""
    wait = HOOK_WAITS[held]
    app = releases.app(
        "web", extra=list(wait.extra), annotations={LIFECYCLE: json.dumps(wait.hooks)}
    )
    app.request_sync(at=ago(2.5))
    app.wait_applied("False", wait.reason)
    app.holds_for(
        lambda r: "lastHandledSyncAt" not in r["status"],
        f"no lastHandledSyncAt while {wait.reason}",
        timing.quiet,
    )
    data = (app.live_object() or {}).get("data")
    assert data == wait.applied, f"{wait.reason}: the rendered object holds {data}"


def unhealthy_lower_wave(releases: Releases) -> None:
    releases.app("low", sync_policy=AUTOMATIC, wave=0, extra=[widgets.widget("low-worker")])


#: A preApply hook whose Widget is Degraded before the Release's reconcile applies it.
FAILING_HOOK = "migrate"


def degraded_hook(releases: Releases) -> None:
    widgets.create(App(releases, "web"), FAILING_HOOK, "Degraded")


@dataclass(frozen=True)
class NotYet:
    """A request that cannot be applied yet: the Release's spec and extra objects, and how
    its cause goes away without an event (what the Release needs first, if anything)."""

    release: dict[str, Any]
    remove_cause: Callable[[App], object]
    prepare: Callable[[Releases], object] = lambda releases: None


NOT_YET = {
    "Unappliable": NotYet(
        {"extra": [invalid_object("rejected")]},
        lambda app: app.set_content("v1"),  # the render passes the dry run now
    ),
    "Pinned": NotYet(
        {"annotations": {PIN: NO_RENDER}},
        lambda app: app.annotate({PIN: None}),  # through the main resource: no event
    ),
    "HookFailed": NotYet(
        {"annotations": {LIFECYCLE: json.dumps(widgets.pre_apply_hook(FAILING_HOOK))}},
        lambda app: widgets.set_health(app, FAILING_HOOK, "Healthy"),  # no event either
        degraded_hook,
    ),
    "WaitingForWave": NotYet(
        {"wave": 1},
        lambda app: App(app.releases, "low").delete(),  # a deletion starts no reconcile
        unhealthy_lower_wave,
    ),
}


@pytest.mark.parametrize(
    "reason",
    [
        case("Unappliable", "Unappliable", "SYNC-5.not-on-failure", "SYNC-6.failure"),
        case("HookFailed", "HookFailed", "SYNC-5.not-on-failure", "SYNC-6.failure"),
        case("Pinned", "Pinned", "SYNC-5.not-while-waiting", "SYNC-6.wait"),
        case("WaitingForWave", "WaitingForWave", "SYNC-5.not-while-waiting", "SYNC-6.wait"),
    ],
)
def test_a_request_that_fails_or_waits_is_applied_when_a_periodic_reconcile_can(
    releases: Releases, timing: Timing, reason: str
) -> None:
    """None of the reasons is retried with backoff: the periodic reconcile, once the cause is
    gone, applies the request that stayed pending, without a new one."""
    not_yet = NOT_YET[reason]
    not_yet.prepare(releases)
    app = releases.app("web", sync_policy=PERIODIC, **not_yet.release)
    written = parse_time(app.request_sync(at=ago(2.5)))
    app.wait_applied("False", reason)
    app.holds_for(
        lambda r: "lastHandledSyncAt" not in r["status"],
        f"no lastHandledSyncAt while {reason}",
        timing.quiet_for(INTERVAL),
    )
    not_yet.remove_cause(app)
    app.wait_applied("True", "Applied")
    assert same_second(last_handled(app), written)


# -- SYNC-7: automatic mode ------------------------------------------------------------------


@pytest.mark.clause("SYNC-7.not-read")
def test_automatic_mode_does_not_read_last_handled_sync_at(releases: Releases) -> None:
    app = applied_automatic_app(releases)
    future = "2099-01-01T00:00:00Z"
    app.patch({"status": {"lastHandledSyncAt": future}}, subresource="status")
    since = app.releases.recorder.mark()
    app.request_sync()  # earlier than lastHandledSyncAt: still starts a reconcile that applies
    app.wait_attempts(since=since)


@pytest.mark.clause("SYNC-7.not-written")
def test_automatic_mode_does_not_write_last_handled_sync_at(releases: Releases) -> None:
    app = releases.app(
        "web", sync_policy=AUTOMATIC, annotations={SYNC_REQUESTED_AT: rfc3339(ago(2.5))}
    )
    app.wait_applied("True", "Applied")
    since = app.releases.recorder.mark()
    app.request_sync()
    app.wait_attempts(since=since)
    app.settle()  # the reconciles are done, their status written
    assert "lastHandledSyncAt" not in (settled := app.settled_status()), settled


@pytest.mark.clause("SYNC-7.not-written")
def test_automatic_mode_leaves_the_last_handled_sync_at_of_manual_mode_as_it_is(
    releases: Releases,
) -> None:
    """A Release applied at a request in manual mode, then switched to automatic: its
    reconciles neither clear nor rewrite lastHandledSyncAt."""
    app = synced_manual_app(releases)
    handled = app.settled_status()["lastHandledSyncAt"]
    app.patch({"spec": {"syncPolicy": {"automatic": True}}})
    since = app.releases.recorder.mark()
    app.request_sync()
    app.wait_attempts(since=since)
    app.settle()
    kept = app.settled_status().get("lastHandledSyncAt")
    assert kept == handled, (
        f"SYNC-7.not-written: automatic mode changed lastHandledSyncAt from {handled} to {kept}"
    )


@pytest.mark.clause("SYNC-3.later")
def test_a_request_automatic_mode_left_unhandled_is_pending_after_a_switch_to_manual(
    releases: Releases,
) -> None:
    """Automatic mode neither reads nor writes lastHandledSyncAt, so its last /sync is later
    than none: the first reconcile in manual mode finds it pending, applies the new render and
    records that request as handled."""
    app = applied_automatic_app(releases)
    since = app.releases.recorder.mark()
    written = parse_time(app.request_sync(at=ago(2.5)))
    app.wait_attempts(since=since)
    app.settle()
    app.set_content("v2")  # no event
    app.patch({"spec": {"syncPolicy": {"automatic": False}}})
    app.wait_content("v2")
    wait_handled(app, written)


def early_in_a_second(within: float = 0.2) -> None:
    """Wait (polling the wall clock) until the current second is less than `within` old, so
    that what follows at once falls into one second."""
    poll_until(
        lambda: datetime.now(UTC).microsecond < within * 1e6,
        timeout=2.0,
        step=0.005,
        failure=lambda: AssertionError("the wall clock never started a new second"),
    )


#: Tries at two /syncs in one second before the check is reported as not run.
SAME_SECOND_TRIES = 3


@pytest.mark.clause("SYNC-7.each-request")
def test_in_automatic_mode_each_sync_starts_a_reconcile_two_in_one_second_too(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    """The witness holds the dry run of a first /sync's reconcile, and a second /sync comes in
    the same second meanwhile: it must start a reconcile of its own (each POST writes the
    current time, so it changes the annotation again). Two POSTs that fell into two seconds
    prove nothing: then the pair is tried again."""
    app = applied_automatic_app(releases)
    for _ in range(SAME_SECOND_TRIES):
        resync_clock.quiet_slot(timing.reconcile + timing.settle)  # no resync may do it instead
        since = app.releases.recorder.mark()
        gate = app.releases.recorder.gate(name=app.object_name, dry_run=True)
        early_in_a_second()
        first = posted_sync_time(app)
        gate.wait_entered(timing.reconcile)
        second = posted_sync_time(app)
        gate.open()
        if same_second(first, second):
            print(f"the /syncs wrote {first} and then {second}")
            app.wait_attempts(2, since=since)
            return
        app.settle()  # the pair's reconciles are done: try again
    pytest.skip(f"no two /syncs in one second in {SAME_SECOND_TRIES} tries: not checked")


def posted_sync_time(app: App) -> datetime:
    """POST /sync; the time it wrote."""
    subresources.post_sync(app)
    return parse_time(subresources.annotations_of(app.get())[SYNC_REQUESTED_AT])


# -- SYNC-8: the other subresources -----------------------------------------------------------

#: What a PUT of each subresource sends; what a DELETE takes away (set beforehand directly).
PUT_BODIES = {
    # the current render: no hold
    "pin": lambda app: {"renderRef": app.settled_status()["renderRef"]},
    "mutations": lambda app: [],
    "lifecycle": lambda app: {},
}
DELETED_VALUES = {"pin": NO_RENDER, "mutations": "[]", "lifecycle": "{}"}


def write_subresource(app: App, method: str, subresource: str) -> subresources.RawResponse:
    if method == "PUT":
        return subresources.put(app, subresource, PUT_BODIES[subresource](app))
    return subresources.delete(app, subresource)


def write_is_a_request(
    releases: Releases, method: str, subresource: str, preset: dict[str, str] | None
) -> tuple[Obj, Obj]:
    """A manual Release, waiting, made with `preset` annotations, gets the write: it must set
    sync-requested-at, and in manual mode be handled as a request. Returns the Release just
    before and just after the update that set it."""
    app = releases.app("web", annotations=preset)
    app.wait_applied("False", "WaitingForSync")
    before = app.get()
    answer = write_subresource(app, method, subresource)
    until = answer.body["metadata"]["resourceVersion"]
    assert until != before["metadata"]["resourceVersion"], f"{method} /{subresource} wrote nothing"
    previous, after = subresources.update_changing(app, before, until, SYNC_REQUESTED_AT)
    written = parse_time(subresources.annotations_of(after)[SYNC_REQUESTED_AT])
    app.wait_applied("True", "Applied")  # in manual mode the write was a /sync request
    assert same_second(last_handled(app), written)
    return previous, after


@pytest.mark.parametrize(
    "target",
    [
        case((method, subresource), f"{method}-{subresource}", f"SYNC-8.{method}-{subresource}")
        for method in ("PUT", "DELETE")
        for subresource in PUT_BODIES
    ],
)
def test_a_subresource_write_sets_sync_requested_at_and_counts_as_a_request(
    releases: Releases, target: tuple[str, str]
) -> None:
    method, subresource = target
    annotation = f"{GROUP}/{subresource}"
    preset = {annotation: DELETED_VALUES[subresource]} if method == "DELETE" else None
    previous, after = write_is_a_request(releases, method, subresource, preset)
    data_before = subresources.annotations_of(previous).get(annotation)
    data_after = subresources.annotations_of(after).get(annotation)
    assert data_before != data_after and (data_after is not None) == (method == "PUT"), (
        f"{method} /{subresource}: {annotation} and sync-requested-at were not written in one "
        f"update: {annotation} was {data_before!r} before it and {data_after!r} after it"
    )


@pytest.mark.parametrize(
    "subresource",
    [case(s, f"DELETE-{s}-never-set", f"SYNC-8.DELETE-{s}") for s in PUT_BODIES],
)
def test_a_subresource_write_that_changes_no_data_counts_as_a_request_too(
    releases: Releases, subresource: str
) -> None:
    """A DELETE whose annotation was never set takes nothing away: it is a write all the
    same, so it sets sync-requested-at, a request in manual mode."""
    _, after = write_is_a_request(releases, "DELETE", subresource, preset=None)
    assert f"{GROUP}/{subresource}" not in subresources.annotations_of(after)


# -- SYNC-9: the observer's /sync -------------------------------------------------------------


def wait_for_observer_sync(app: App, previous: str | None) -> datetime:
    """The time of the /sync the observer sends (a new sync-requested-at)."""
    release = app.wait_for(
        lambda r: subresources.annotations_of(r).get(SYNC_REQUESTED_AT) != previous,
        "a /sync from the observer",
    )
    return parse_time(subresources.annotations_of(release)[SYNC_REQUESTED_AT])


@pytest.mark.clause("SYNC-9.new-render", "SYNC-9.new-render-once")
def test_the_observer_sends_a_sync_when_health_reaches_a_new_render(
    releases: Releases, timing: Timing
) -> None:
    """v1 turns Healthy: one /sync, which applies v2 (manual mode). v2 is Healthy from the
    apply on (its reconcile's own assessment says so), and stays Healthy: no more /sync. Nor
    when v2 turns Degraded and then Healthy again: it is no new render."""
    app = releases.app("web", extra=[widgets.widget("worker")])
    previous = app.request_sync(at=ago(3))
    app.wait_applied("True", "Applied")
    app.set_content("v2", extra=[widgets.widget("worker")])  # a request would apply v2
    widgets.set_health(app, "worker", "Healthy")
    request = wait_for_observer_sync(app, previous)
    wait_handled(app, request)  # manual mode: the observer's /sync was a request
    assert app.rendered_object()["data"] == {"content": "v2"}
    handled = subresources.annotations_of(app.get())[SYNC_REQUESTED_AT]
    quiet = timing.quiet_for(OBSERVER_PERIOD)

    def no_new_sync(release: Obj) -> bool:
        return subresources.annotations_of(release).get(SYNC_REQUESTED_AT) == handled

    app.holds_for(no_new_sync, "no further /sync while the render stays Healthy", quiet)
    for health, status in (("Degraded", "False"), ("Healthy", "True")):
        widgets.set_health(app, "worker", health)
        app.wait_for(functools.partial(healthy_is, status), f"Healthy={status}")
    app.holds_for(no_new_sync, "no /sync when the same render turns Healthy again", quiet)


@pytest.mark.clause("SYNC-9.new-render-once")
def test_a_render_applied_again_and_healthy_again_gets_no_new_sync(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    """Automatic mode: v1 turns Healthy (the observer's /sync). It turns Degraded, and the
    reconcile that news starts applies v1 again (each reconcile applies); then it turns
    Healthy again: still no new render, so no /sync."""
    app = applied_automatic_app(releases, extra=[widgets.widget("worker")])
    app.settle()
    previous = subresources.annotations_of(app.get()).get(SYNC_REQUESTED_AT)
    resync_clock.quiet_slot(timing.reconcile)  # a resync's reconcile would assess it first
    widgets.set_health(app, "worker", "Healthy")
    wait_for_observer_sync(app, previous)
    app.settle()
    handled = subresources.annotations_of(app.get())[SYNC_REQUESTED_AT]
    quiet = timing.quiet_for(OBSERVER_PERIOD)
    resync_clock.quiet_slot(timing.reconcile)  # nor applies it Healthy before the observer sees
    since = releases.recorder.mark()
    widgets.set_health(app, "worker", "Degraded")
    app.wait_for(functools.partial(healthy_is, "False"), "Healthy=False")
    app.wait_attempts(since=since)  # the news' reconcile applied v1 again
    widgets.set_health(app, "worker", "Healthy")
    app.wait_for(functools.partial(healthy_is, "True"), "Healthy=True")
    app.holds_for(
        functools.partial(sync_requested_at_is, handled),
        "no /sync when the render applied again turns Healthy again",
        quiet,
    )


@pytest.mark.clause("SYNC-9.wave", "SYNC-9.wave-complete")
def test_the_observer_sends_each_release_of_the_next_wave_a_sync_when_a_wave_completes(
    releases: Releases, timing: Timing
) -> None:
    """Wave 0 holds two Releases, and the next wave is wave 5 (the lowest above, not wave 1).
    The first of wave 0 turning Healthy completes nothing: no /sync. The second completes the
    wave: each Release of wave 5 gets a /sync, and applies it (manual mode)."""
    first, last = (
        releases.app(name, sync_policy=AUTOMATIC, wave=0, extra=[widgets.widget(f"{name}-worker")])
        for name in ("low", "low-too")
    )
    next_wave = [releases.app(name, wave=5) for name in ("high", "high-too")]
    previous = {}
    for app in next_wave:
        app.wait_applied("False", "WaitingForSync")
        previous[app.name] = subresources.annotations_of(app.get()).get(SYNC_REQUESTED_AT)

    def unrequested(release: Obj) -> bool:
        name = release["metadata"]["name"]
        return subresources.annotations_of(release).get(SYNC_REQUESTED_AT) == previous[name]

    widgets.set_health(first, "low-worker", "Healthy")
    first.wait_for(lambda r: condition_status(r, "Healthy") == "True", "Healthy=True")
    quiet_one, other = next_wave
    quiet_one.holds_for(unrequested, "no /sync while wave 0 is not complete", timing.quiet)
    assert unrequested(other.get()), "a /sync came while wave 0 was not complete"
    widgets.set_health(last, "low-too-worker", "Healthy")
    for app in next_wave:
        wait_handled(app, wait_for_observer_sync(app, previous[app.name]))


@pytest.mark.clause("SYNC-9.wave-once")
def test_a_completed_wave_sends_the_next_wave_its_syncs_once(
    releases: Releases, timing: Timing
) -> None:
    """Wave 0 completes: wave 1's manual Release gets its /sync and applies it. Then wave 0's
    Release is updated again (a /sync of its own: an annotation, and a reconcile that applies
    the same render) and stays Applied and Healthy: that completes nothing, so wave 1 gets no
    more /syncs, and its new render waits."""
    low = releases.app("low", sync_policy=AUTOMATIC, wave=0, extra=[widgets.widget("worker")])
    high = releases.app("high", wave=1)
    high.wait_applied("False", "WaitingForSync")
    previous = subresources.annotations_of(high.get()).get(SYNC_REQUESTED_AT)
    widgets.set_health(low, "worker", "Healthy")
    wait_handled(high, wait_for_observer_sync(high, previous))
    high.set_content("v2")  # from here, only a request applies it
    handled = subresources.annotations_of(high.get())[SYNC_REQUESTED_AT]
    since = releases.recorder.mark()
    low.request_sync()
    low.wait_attempts(since=since)
    high.holds_for(
        lambda r: subresources.annotations_of(r).get(SYNC_REQUESTED_AT) == handled,
        "no /sync from a wave updated after it completed",
        timing.quiet,
    )
    assert high.rendered_object()["data"] == {"content": "v1"}, "applied without a request"


@pytest.mark.clause("SYNC-9.wave-by-apply")
def test_a_wave_completed_by_an_apply_sends_the_next_wave_a_sync(
    releases: Releases, timing: Timing
) -> None:
    """Wave 0's one Release is pinned to another render (Applied=False, Pinned) and stays
    Healthy; unpinned, it applies again: Applied turning True completes the wave as Healthy
    would, and the next wave's Release gets a /sync that applies its new render."""
    low = releases.app("low", sync_policy=AUTOMATIC, wave=0)
    high = releases.app("high", wave=1)
    high.wait_applied("True", "Applied")  # wave 0 completed once: its /sync applied v1
    subresources.put(low, "pin", {"renderRef": NO_RENDER})
    low.wait_applied("False", "Pinned")
    assert condition_status(low.get(), "Healthy") == "True", "the pinned Release is not Healthy"
    high.set_content("v2")  # from here, only a request applies it
    previous = subresources.annotations_of(high.get()).get(SYNC_REQUESTED_AT)
    # Also what puts the next /sync a second past the one handled (else it is not pending).
    high.holds_for(
        lambda r: subresources.annotations_of(r).get(SYNC_REQUESTED_AT) == previous,
        "no /sync while wave 0 is pinned",
        timing.quiet,
    )
    subresources.delete(low, "pin")
    wait_handled(high, wait_for_observer_sync(high, previous))
    high.wait_content("v2")


def render_turning_healthy(releases: Releases) -> tuple[App, Callable[[], object]]:
    app = applied_automatic_app(releases, extra=[widgets.widget("worker")])
    return app, lambda: widgets.set_health(app, "worker", "Healthy")


def hook_batch_completing(releases: Releases) -> tuple[App, Callable[[], object]]:
    hooks = json.dumps(widgets.pre_apply_hook())
    app = releases.app("web", sync_policy=AUTOMATIC, annotations={LIFECYCLE: hooks})
    app.wait_applied("False", "WaitingForHooks")
    return app, lambda: widgets.set_health(app, "migrate", "Healthy")


def wave_completing(releases: Releases) -> tuple[App, Callable[[], object]]:
    low = releases.app("low", sync_policy=AUTOMATIC, wave=0, extra=[widgets.widget("worker")])
    high = releases.app("high", sync_policy=AUTOMATIC, wave=1)
    high.wait_applied("False", "WaitingForWave")
    return high, lambda: widgets.set_health(low, "worker", "Healthy")


#: Each occasion of the observer's /sync, for an automatic Release: the Release that is to
#: get it, and what makes the occasion come.
OCCASIONS = {
    "new-render": render_turning_healthy,
    "hooks": hook_batch_completing,
    "wave": wave_completing,
}


@pytest.mark.parametrize("occasion", [case(o, o, "SYNC-9.automatic") for o in OCCASIONS])
def test_the_observer_sends_its_sync_to_automatic_releases_too(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, occasion: str
) -> None:
    """The observer sends a /sync on each occasion whatever the mode; in automatic mode it
    only starts a reconcile (SYNC-7)."""
    app, occasion_comes = OCCASIONS[occasion](releases)
    app.settle()
    previous = subresources.annotations_of(app.get()).get(SYNC_REQUESTED_AT)
    # A resync reconcile would see the health first (it assesses as it applies), and leave
    # the observer no news to send a /sync for.
    resync_clock.quiet_slot(timing.reconcile)
    occasion_comes()
    wait_for_observer_sync(app, previous)


def waiting_for_hooks_of(app: App, batch: list[str], release: Obj) -> bool:
    """The Release waits for its hooks, and the hooks of `batch` are there."""
    waiting = applied_is(release, "False", "WaitingForHooks")
    return waiting and all(widgets.exists(app, name) for name in batch)


def sync_requested_at_is(value: str | None, release: Obj) -> bool:
    return subresources.annotations_of(release).get(SYNC_REQUESTED_AT) == value


def healthy_is(status: str, release: Obj) -> bool:
    return condition_status(release, "Healthy") == status


#: Lifecycle hooks, by case: each batch the Release waits for sends its own /sync.
HOOK_BATCHES = {
    "preApply": {"preApply": [["migrate"]]},
    "two-preApply-batches": {"preApply": [["migrate"], ["seed"]]},
    "a-batch-of-two": {"preApply": [["migrate", "seed"]]},
    "postApply": {"postApply": [["notify"]]},
}


@pytest.mark.parametrize("hooks", [case(h, h, "SYNC-9.hooks") for h in HOOK_BATCHES])
def test_the_observer_sends_a_sync_when_a_hook_batch_completes(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, hooks: str
) -> None:
    """Manual mode: each batch the Release waits for (WaitingForHooks), before or after the
    apply, sends one /sync when it turns Healthy; that request runs the next batch, and the
    last one's finishes the sync. A batch of two is complete only when both are Healthy: the
    first alone sends no /sync."""
    phases = HOOK_BATCHES[hooks]
    annotation = {
        phase: [[widgets.widget(name) for name in batch] for batch in batches]
        for phase, batches in phases.items()
    }
    app = releases.app("web", annotations={f"{GROUP}/lifecycle": json.dumps(annotation)})
    app.request_sync(at=ago(3))
    for batch in (batch for batches in phases.values() for batch in batches):
        app.wait_for(
            functools.partial(waiting_for_hooks_of, app, batch), f"WaitingForHooks, batch {batch}"
        )
        # No other reconcile may find the batch done before the observer says so: those the
        # setup started (the creation's, and the request's if it came after) must be over.
        app.settle()
        previous = subresources.annotations_of(app.get()).get(SYNC_REQUESTED_AT)
        # A resync reconcile would find the batch done before the observer could say so.
        *first, last = batch
        resync_clock.quiet_slot(timing.reconcile + (timing.quiet if first else 0.0))
        for name in first:
            widgets.set_health(app, name, "Healthy")
        if first:
            app.holds_for(
                functools.partial(sync_requested_at_is, previous),
                f"no /sync while only {', '.join(first)} of {batch} is Healthy",
                timing.quiet,
            )
        widgets.set_health(app, last, "Healthy")
        request = wait_for_observer_sync(app, previous)
    wait_handled(app, request)
    app.wait_applied("True", "Applied")


# -- SYNC-10 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "namespace_from",
    [
        case("flag", "namespace-flag", "SYNC-10.post"),
        case("context", "namespace-of-the-context", "SYNC-10.context-namespace"),
    ],
)
def test_kubectl_convoy_release_sync_sends_the_post(
    releases: Releases, cluster: Cluster, namespace_from: Literal["flag", "context"]
) -> None:
    """With `-n`, or without it in the namespace of the kubeconfig's current context."""
    app = releases.app("web")
    command = ("release", "sync", app.name)
    done = subresources.kubectl_convoy(
        cluster.kubeconfig, app.namespace, *command, namespace_from=namespace_from
    )
    assert done.returncode == 0, done.stderr
    annotations = subresources.annotations_of(app.get())
    assert SYNC_REQUESTED_AT in annotations and SYNC_FORCE_REQUESTED_AT not in annotations
    app.wait_applied("True", "Applied")
