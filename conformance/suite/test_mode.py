"""Automatic and manual mode."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance.harness.marks import case
from conformance.observe import widgets
from conformance.observe.releases import (
    App,
    Releases,
    applied_automatic_app,
    applied_is,
    content_mutations,
    content_object,
    present_condition,
)
from conformance.observe.resync import ResyncClock
from conformance.observe.witness import WitnessTimeout
from conformance.timing import Timing
from convoyapi import LIFECYCLE, MUTATIONS

AUTOMATIC = {"automatic": True}
#: Manual Releases here are reconciled every second, so a quiet period sees several reconciles.
INTERVAL = 1.0


@pytest.mark.clause("MAN-2.never-applied", "MAN-3.never-applied")
@pytest.mark.parametrize(
    "sync_policy",
    [
        case(None, "no-syncPolicy", "MODE-1.unset", "MODE-1.no-default"),
        case({}, "empty-syncPolicy", "MODE-1.unset", "MODE-1.no-default"),
        case(
            {"interval": f"{INTERVAL:g}s", "retryBackoff": {"initial": "1s"}},
            "other-fields-only",
            "MODE-1.unset",
            "MODE-1.no-default",
        ),
        case({"automatic": False, "interval": f"{INTERVAL:g}s"}, "false", "MODE-1.false"),
    ],
)
def test_without_automatic_true_the_release_is_manual_and_waits_for_sync(
    releases: Releases, timing: Timing, sync_policy: dict | None
) -> None:
    app = releases.app("web", sync_policy=sync_policy)
    app.wait_applied("False", "WaitingForSync")
    app.stays("False", "WaitingForSync", timing.quiet_for(INTERVAL))
    assert app.attempts() == [], "manual mode applied or dry-ran without a /sync request"
    assert app.live_object() is None
    written = app.get()["spec"].get("syncPolicy")
    assert written == sync_policy, f"spec.syncPolicy is now {written}, not {sync_policy}"


@pytest.mark.clause("MODE-1.true", "TRIG-1.automatic")
def test_automatic_true_applies_on_creation(releases: Releases) -> None:
    app = releases.app("web", sync_policy=AUTOMATIC)
    app.wait_applied("True", "Applied")
    assert app.rendered_object()["data"] == {"content": "v1"}


@pytest.mark.clause("MODE-1.changed")
def test_a_change_of_automatic_switches_the_mode_at_the_reconcile_it_starts(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    """The source changes first (no event), then the spec change's reconcile decides."""
    app = releases.app("web", sync_policy=AUTOMATIC)
    app.wait_applied("True", "Applied")
    resync_clock.quiet_slot(timing.reconcile)  # no resync may apply v2 in between
    app.set_content("v2")
    app.patch({"spec": {"syncPolicy": {"automatic": False}}})
    app.wait_applied("False", "WaitingForSync")
    assert app.rendered_object()["data"] == {"content": "v1"}, "applied after automatic: false"
    app.patch({"spec": {"syncPolicy": {"automatic": True}}})
    app.wait_content("v2")
    app.wait_applied("True", "Applied")


@pytest.mark.clause("AUTO-1.unchanged")
def test_automatic_mode_applies_at_each_reconcile_also_when_nothing_changed(
    releases: Releases,
) -> None:
    app = releases.app("web", sync_policy=AUTOMATIC)
    app.wait_applied("True", "Applied")
    first = app.attempts(dry_run=False)[-1]
    unchanged = app.rendered_object()["metadata"]["resourceVersion"]
    for _ in range(2):
        since = first.at
        app.request_sync()  # starts a reconcile and changes nothing
        first = app.wait_attempts(since=since + 1e-6)[-1]
        print(f"apply attempt {first.at - since:.3f} s after the previous one")
    assert app.rendered_object()["metadata"]["resourceVersion"] == unchanged


@pytest.mark.clause("AUTO-1.unchanged")
def test_automatic_mode_keeps_applying_a_render_whose_rollout_failed(
    releases: Releases, timing: Timing
) -> None:
    """failurePolicy Halt: v1's Widget never reports, its rollout times out and ends Failed.
    A Failed render is not held (the API reference): each reconcile still applies it, and so
    restores the drift the target has."""
    timeout = 2.0
    app = releases.app(
        "web",
        sync_policy=AUTOMATIC,
        extra=[widgets.widget("worker")],
        failurePolicy={"action": "Halt", "healthTimeout": f"{timeout:g}s"},
    )
    app.wait_applied("True", "Applied")
    app.wait_rollout("Failed", timeout=timeout + timing.slack(timeout) + timing.reconcile)
    app.drift()
    since = app.releases.recorder.mark()
    app.request_sync()  # a reconcile of the Failed render, nothing else changed
    try:
        app.wait_attempts(since=since)
    except WitnessTimeout as missing:
        raise AssertionError(
            f"AUTO-1.unchanged: a reconcile of a render whose rollout failed (Halt) applied "
            f"nothing; expected an apply; {missing}"
        ) from None
    app.wait_content("v1")


@pytest.mark.clause("AUTO-1.unchanged")
def test_the_resync_reconcile_applies_an_automatic_release_whose_interval_is_far_off(
    releases: Releases, timing: Timing
) -> None:
    """interval 1h: nothing but the resync reconciles the Release within a resync period, and
    that reconcile applies, although neither the render nor the target changed."""
    app = applied_automatic_app(releases, sync_policy={"interval": "1h"})
    app.settle()  # the observer's /sync and health data for the render started theirs
    since = releases.recorder.mark()
    period = timing.controller_resync
    within = period + timing.slack(period) + timing.reconcile
    [attempt, *_] = app.wait_attempts(since=since, timeout=within)
    print(f"the resync's reconcile applied {attempt.at - since:.1f} s later (resync {period:g} s)")


@pytest.mark.clause("AUTO-1.whole-render")
def test_automatic_mode_applies_every_object_of_the_render_at_each_reconcile(
    releases: Releases,
) -> None:
    others = [content_object(f"web-part-{n}", f"part {n}") for n in (1, 2)]
    app = releases.app("web", sync_policy=AUTOMATIC, extra=others)
    app.wait_applied("True", "Applied")
    names = {app.object_name, *(o["metadata"]["name"] for o in others)}
    for _ in range(2):
        since = app.releases.recorder.mark()
        app.request_sync()  # a reconcile with nothing changed, nothing drifted
        applied = app.wait_applies_of(names, since=since)
        print(f"applied {sorted(applied)} after the /sync")


@pytest.mark.clause("TRIG-5.interval")
@pytest.mark.parametrize(
    "drift",
    [case("changed", "changed", "AUTO-2.changed"), case("deleted", "deleted", "AUTO-2.deleted")],
)
def test_automatic_mode_restores_drift_at_the_periodic_reconcile(
    releases: Releases, timing: Timing, drift: str
) -> None:
    interval = 2.0
    created = releases.recorder.mark()
    app = releases.app("web", sync_policy={**AUTOMATIC, "interval": f"{interval:g}s"})
    app.wait_applied("True", "Applied")
    latency = app.reconcile_time(created)
    start = app.releases.recorder.mark()
    if drift == "changed":
        app.drift()
    else:
        app.delete_object()
    app.wait_content("v1", timeout=interval + timing.slack(interval, latency))
    print(f"drift ({drift}) corrected {app.releases.recorder.mark() - start:.2f} s after it")


def applied_periodic_manual_app(releases: Releases, **spec: Any) -> App:
    """A manual Release reconciled every second, its first /sync applied and handled (the
    request's own event may start one more reconcile after the one that applied)."""
    app = releases.app("web", sync_policy={"interval": f"{INTERVAL:g}s"}, **spec)
    app.request_sync()
    app.wait_applied("True", "Applied")
    app.settle()
    return app


@pytest.mark.clause("MAN-1.in-sync", "MAN-1.message", "MAN-3.in-sync")
def test_manual_mode_in_sync_says_so_and_applies_nothing(
    releases: Releases, timing: Timing
) -> None:
    app = applied_periodic_manual_app(releases)
    app.drift()
    # Periodic reconciles (and resync ticks) happen meanwhile: none may apply or dry-run.
    app.stays("True", "Applied", timing.quiet_for(INTERVAL))
    assert app.rendered_object()["data"] == {"content": "drifted"}, "drift was corrected"
    message = present_condition(app.get())["message"]
    assert "in sync" in message.lower() and "/sync" in message, message


def mutate_the_content(app: App) -> None:
    """Mutations through the main resource (no event): the render includes them."""
    app.annotate({MUTATIONS: json.dumps(content_mutations(app))})


#: What makes a new render: a new source, or new mutations.
NEW_RENDERS = {"new-source": lambda app: app.set_content("v2"), "new-mutations": mutate_the_content}


@pytest.mark.clause("MAN-2.different", "MAN-3.different")
@pytest.mark.parametrize("change", sorted(NEW_RENDERS))
def test_manual_mode_with_a_new_render_waits_for_sync_and_applies_nothing(
    releases: Releases, timing: Timing, change: str
) -> None:
    app = applied_periodic_manual_app(releases)
    NEW_RENDERS[change](app)
    app.wait_applied("False", "WaitingForSync")
    app.stays("False", "WaitingForSync", timing.quiet_for(INTERVAL))
    assert app.rendered_object()["data"] == {"content": "v1"}


@pytest.mark.clause("MAN-2.different")
def test_manual_mode_waits_for_sync_when_the_render_returns_to_an_earlier_applied_one(
    releases: Releases, timing: Timing
) -> None:
    """Only status.lastSuccessful.renderRef is in sync: v1 applied, then v2 at a request,
    then the source back at v1, a render applied once but not the last successful one."""
    app = applied_periodic_manual_app(releases)
    app.set_content("v2")
    app.request_sync(at=app.next_pending_time())
    app.wait_content("v2")
    back = app.new_render("v1")  # once the report of v2's apply has settled
    app.wait_for(
        lambda release: back(release) and applied_is(release, "False", "WaitingForSync"),
        "MAN-2.different: Applied=False with reason WaitingForSync reported for the render back "
        "at v1",
    )
    app.stays("False", "WaitingForSync", timing.quiet_for(INTERVAL))
    assert app.rendered_object()["data"] == {"content": "v2"}


@pytest.mark.clause("MAN-3.no-rollback")
def test_manual_mode_does_not_roll_back_a_rollout_whose_health_timeout_passed(
    releases: Releases, timing: Timing
) -> None:
    """failurePolicy Rollback. v1 applied at a /sync and Healthy (its rollout Succeeded:
    its healthTimeout is one no slow observer reaches); v2, with a healthTimeout of 2s,
    applied at the next /sync, its Widget never Healthy. The timeout passes with no /sync
    pending: a rollback would be an apply, so the rollout ends Failed and nothing is applied
    (v2 stays)."""
    timeout = 2.0
    app = releases.app(
        "web",
        extra=[widgets.widget("worker")],
        failurePolicy={"action": "Rollback", "healthTimeout": "1h"},
    )
    app.request_sync()
    app.wait_applied("True", "Applied")
    widgets.set_health(app, "worker", "Healthy")
    app.wait_rollout("Succeeded")
    app.settle()  # the observer's /sync for v1 turned Healthy is handled: the next is the test's
    app.patch({"spec": {"failurePolicy": {"healthTimeout": f"{timeout:g}s"}}})
    app.set_content("v2", extra=[widgets.widget("worker", version=2)])
    app.request_sync(at=app.next_pending_time())
    app.wait_content("v2")
    since = app.releases.recorder.mark()
    app.wait_rollout("Failed", timeout=timeout + timing.slack(timeout) + timing.reconcile)
    app.stays("True", "Applied", timing.quiet)
    assert app.attempts(since=since) == [], "applied after the rollout's healthTimeout"
    assert app.rendered_object()["data"] == {"content": "v2"}, "rolled back without a /sync"


@pytest.mark.clause("MAN-3.no-hooks", "MAN-3.never-applied")
@pytest.mark.parametrize("phase", ["preApply", "postApply"])
def test_manual_mode_waiting_for_sync_runs_no_lifecycle_hook(
    releases: Releases, timing: Timing, phase: str
) -> None:
    """A lifecycle hook is applied as part of a sync: while the render waits for /sync, its
    periodic reconciles apply no hook object, before the apply or after it."""
    lifecycle = {phase: [[widgets.widget("migrate")]]}
    app = releases.app(
        "web",
        sync_policy={"interval": f"{INTERVAL:g}s"},
        annotations={LIFECYCLE: json.dumps(lifecycle)},
    )
    app.wait_applied("False", "WaitingForSync")
    app.stays("False", "WaitingForSync", timing.quiet_for(INTERVAL))
    written = [attempt.describe() for attempt in app.target_writes()]
    assert written == [], f"MAN-3.no-hooks: {phase} hook run without a /sync: {written}"
    assert not widgets.exists(app, "migrate"), f"MAN-3.no-hooks: the {phase} hook was applied"


def settle_nothing_below(app: App) -> None:
    """A Release of a lower wave whose Widget never reports: not Healthy, ever."""
    app.releases.app("low", sync_policy=AUTOMATIC, wave=0, extra=[widgets.widget("worker")])


#: What would hold an apply of a Release of wave 1: a pin (read at the next periodic
#: reconcile), or a lower wave that is not settled.
HOLDS = {"pinned": App.pin_nowhere, "behind-a-lower-wave": settle_nothing_below}


@pytest.mark.clause("MAN-1.not-held", "MAN-2.not-held")
@pytest.mark.parametrize("hold", sorted(HOLDS))
def test_manual_mode_without_a_request_is_in_sync_or_waiting_for_sync_whatever_would_hold(
    releases: Releases, timing: Timing, hold: str
) -> None:
    """With no /sync pending there is no apply to hold: the Release says it is in sync, and
    WaitingForSync once its render changes, not the reason of the hold."""
    app = applied_periodic_manual_app(releases, wave=1)
    HOLDS[hold](app)
    app.stays("True", "Applied", timing.quiet_for(INTERVAL))
    app.set_content("v2")
    app.wait_applied("False", "WaitingForSync")
    app.stays("False", "WaitingForSync", timing.quiet_for(INTERVAL))


@pytest.mark.clause("MAN-1.render-back")
def test_manual_mode_is_in_sync_again_when_the_render_returns_to_the_applied_one(
    releases: Releases, timing: Timing
) -> None:
    app = applied_periodic_manual_app(releases)
    app.set_content("v2")
    app.wait_applied("False", "WaitingForSync")
    app.set_content("v1")
    app.wait_applied("True", "Applied")
    app.stays("True", "Applied", timing.quiet_for(INTERVAL))
