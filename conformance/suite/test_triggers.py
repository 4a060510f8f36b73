"""What starts a reconcile, and what must not.

An automatic Release applies at every reconcile, so each apply attempt the witness records is a
reconcile. Checks that nothing starts one run in a quiet period clear of resync ticks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from conformance.certification import measurements, verdicts
from conformance.harness.marks import case
from conformance.observe import subresources, widgets
from conformance.observe.releases import (
    DISTANT_RETRY,
    NO_RENDER,
    App,
    Obj,
    Releases,
    applied_automatic_app,
    applied_is,
    applied_manual_app,
    condition,
    condition_status,
    content_mutations,
    present_condition,
    rfc3339,
)
from conformance.observe.resync import ResyncClock
from conformance.observe.witness import WitnessTimeout
from conformance.timing import DOCUMENT_RESYNC, Timing, gaps_between
from convoyapi import GROUP, PIN, SYNC_FORCE_REQUESTED_AT, SYNC_REQUESTED_AT

AUTOMATIC = {"automatic": True}


def assert_no_reconcile(
    app: App, resync_clock: ResyncClock, timing: Timing, change: Callable[[], object], what: str
) -> None:
    """Make `change`, then watch a quiet period: no apply attempt may follow."""
    resync_clock.quiet_slot(timing.quiet)
    since = app.releases.recorder.mark()
    change()
    seen = app.quiet(timing.quiet, since=since)
    assert seen == [], f"{what} started a reconcile: {[a.describe() for a in seen]}"
    print(f"no reconcile in the {timing.quiet:g} s after {what}")


@pytest.mark.parametrize(
    "sync_policy",
    [case(AUTOMATIC, "automatic", "TRIG-1.automatic"), case(None, "manual", "TRIG-1.manual")],
)
def test_creating_a_release_starts_a_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, sync_policy
) -> None:
    resync_clock.quiet_slot(timing.reconcile)  # only the creation can explain a reconcile
    app = releases.app("web", sync_policy=sync_policy)
    if sync_policy:
        app.wait_attempts()
    else:
        app.wait_applied("False", "WaitingForSync")


@pytest.mark.parametrize(
    "automatic",
    [case(True, "automatic", "TRIG-2.automatic"), case(False, "manual", "TRIG-2.manual")],
)
def test_a_spec_change_changes_the_generation_and_starts_a_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, automatic: bool
) -> None:
    """Automatic: the reconcile applies. Manual: it reports the new generation."""
    app = releases.app("web", sync_policy={"automatic": automatic})
    app.wait_for(lambda r: condition(r), "a first reconcile")
    resync_clock.quiet_slot(timing.reconcile)  # only the spec change can explain a reconcile
    before = app.get()["metadata"]["generation"]
    since = app.releases.recorder.mark()
    app.patch({"spec": {"syncPolicy": {"automatic": automatic, "interval": "0s"}}})
    assert app.get()["metadata"]["generation"] == before + 1
    if automatic:
        app.wait_attempts(since=since)
    else:
        app.wait_for(
            lambda r: (r.get("status") or {}).get("observedGeneration") == before + 1,
            "status.observedGeneration of the changed spec",
        )


#: Events that come while a failure's backoff retry is scheduled, each with its clause.
EVENTS_DURING_BACKOFF: dict[str, tuple[str, Callable[[App], object]]] = {
    "sync-requested-at": ("SYNC-2.during-backoff", App.request_sync),
    "spec-change": (
        "TRIG-2.during-backoff",
        lambda app: app.patch({"spec": {"syncPolicy": {"interval": "0s"}}}),
    ),
}


@pytest.mark.parametrize(
    "event", [case(name, name, clause) for name, (clause, _) in EVENTS_DURING_BACKOFF.items()]
)
def test_an_event_during_a_backoff_wait_starts_a_reconcile_at_once(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, event: str
) -> None:
    """An automatic Release's apply is refused (DeployFailed, transient): its retry is ten
    minutes off. An event then starts a reconcile at once, as it would with nothing scheduled:
    the backoff delays retries, not the events the document lists."""
    clause, make_event = EVENTS_DURING_BACKOFF[event]
    app = applied_automatic_app(releases, sync_policy={"retryBackoff": DISTANT_RETRY})
    app.deny_applies()
    app.request_sync()
    app.wait_applied("False", "DeployFailed")
    resync_clock.quiet_slot(timing.reconcile + timing.settle)  # no resync may do it instead
    app.settle()  # the failed reconcile is over: the event comes while its retry waits
    since = releases.recorder.mark()
    make_event(app)
    try:
        attempt = app.wait_attempts(since=since)[0]
    except WitnessTimeout as error:
        raise AssertionError(
            f"{clause}: no reconcile within {timing.reconcile:g} s of the {event} made while a "
            f"retry was scheduled {DISTANT_RETRY['initial']} after a DeployFailed: {error}"
        ) from None
    print(f"{event} during the backoff wait: apply attempt {attempt.at - since:.3f} s after it")


#: Changes of metadata that start no reconcile: (change, what it is). A label is removed by
#: a Release created with it.
#: "force-annotation" and "pin-annotation" are made per Release (metadata_change): a pending
#: forced request's time, and its current render, which holds nothing.
METADATA_CHANGES: dict[str, Obj] = {
    "label-added": {"metadata": {"labels": {"team": "payments"}}},
    "label-removed": {"metadata": {"labels": {"tier": None}}},
    "other-annotation": {"metadata": {"annotations": {"example.com/owner": "payments"}}},
}
CLAUSE_OF = {
    "label-added": "TRIG-3.label",
    "label-removed": "TRIG-3.label",
    "other-annotation": "TRIG-3.other-annotation",
    "force-annotation": "TRIG-3.force-annotation",
    "pin-annotation": "TRIG-3.pin-annotation",
}


def metadata_change(app: App, name: str) -> Obj:
    if name == "force-annotation":
        forced = rfc3339(datetime.now(UTC))
        return {"metadata": {"annotations": {SYNC_FORCE_REQUESTED_AT: forced}}}
    if name == "pin-annotation":
        return {"metadata": {"annotations": {PIN: app.settled_status()["renderRef"]}}}
    return METADATA_CHANGES[name]


@pytest.mark.parametrize("change", [case(name, name, clause) for name, clause in CLAUSE_OF.items()])
def test_labels_and_other_annotations_change_no_generation_and_start_no_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, change: str
) -> None:
    """A reconcile of an automatic Release would apply: the force annotation alone would be a
    pending forced request, the pin equals the current render and holds nothing."""
    app = applied_automatic_app(releases, labels={"tier": "web"})
    before = app.get()["metadata"]["generation"]
    body = metadata_change(app, change)
    assert_no_reconcile(app, resync_clock, timing, lambda: app.patch(body), change)
    assert app.get()["metadata"]["generation"] == before


def add_a_condition(app: App) -> Obj:
    """A condition of another client's, beside the controller's."""
    foreign = {
        "type": "ExampleCheck",
        "status": "True",
        "reason": "Example",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    return {"conditions": [*app.settled_status()["conditions"], foreign]}


def set_back_the_observed_generation(app: App) -> Obj:
    """status.observedGeneration behind metadata.generation, as a stale client writes it."""
    return {"observedGeneration": app.get()["metadata"]["generation"] - 1}


#: What another client's status write changes.
STATUS_WRITES = {
    "a-condition": add_a_condition,
    "observedGeneration": set_back_the_observed_generation,
}


@pytest.mark.clause("TRIG-8.any-writer")
@pytest.mark.parametrize("write", sorted(STATUS_WRITES))
def test_a_status_write_changes_no_generation_and_starts_no_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, write: str
) -> None:
    app = applied_automatic_app(releases)
    before = app.get()["metadata"]["generation"]
    body = STATUS_WRITES[write](app)

    def write_status() -> None:
        app.patch({"status": body}, subresource="status")

    assert_no_reconcile(app, resync_clock, timing, write_status, f"a status write of {write}")
    assert app.get()["metadata"]["generation"] == before


@pytest.mark.clause("TRIG-8.own-writes")
def test_the_controllers_own_status_writes_do_not_loop(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    app = applied_automatic_app(releases)  # the controller wrote status at least once
    since = app.attempts(dry_run=False)[-1].at + 1e-6
    seen = app.quiet(timing.quiet, since=since, dry_run=False)
    assert seen == [], f"the controller reconciled again after its own status write: {seen}"


# -- TRIG-4: the informer resync --------------------------------------------------------------


#: Resync periods measured in one go: a Release's place in a tick's burst of reconciles (a
#: controller of one worker, slow reconciles) moves its tick by up to a second from one burst
#: to the next, which a single period's band (0.7 s early at 30 s) does not hold, and two
#: periods' band (1.3 s) does: the band is the rule's, on the measured span.
RESYNC_PERIODS = 2


def assert_resync_period(app: App, timing: Timing, period: float, clause: str) -> None:
    """RESYNC_PERIODS periods between resync ticks of `app`, once the reconciles its setup
    started are done (an observer's /sync for the applied render, say, which would be a tick
    too early), are as many times `period`."""
    app.settle()
    since = app.releases.recorder.mark()
    expected = RESYNC_PERIODS * period
    ticks = app.wait_attempts(
        count=RESYNC_PERIODS + 1, since=since, timeout=expected + period + timing.slack(expected)
    )[: RESYNC_PERIODS + 1]
    span = ticks[-1].at - ticks[0].at
    measurements.record("resync period", timing, [expected], [span])
    gaps = ", ".join(f"{gap:.2f}" for gap in gaps_between(tick.at for tick in ticks))
    print(f"resync ticks {gaps} s apart: {span:.2f} s for {RESYNC_PERIODS} x {period:g} s")
    assert timing.fits(span, expected), (
        f"{clause}: {RESYNC_PERIODS} resync periods took {span:.2f} s (gaps {gaps} s), expected "
        f"{RESYNC_PERIODS} x {period:g} s (accepted {timing.band_text(expected)})"
    )


@pytest.mark.clause("TRIG-4.flag")
def test_the_resync_flag_sets_the_resync_period(releases: Releases, timing: Timing) -> None:
    period = timing.controller_resync
    if period == DOCUMENT_RESYNC:
        verdicts.certifying_only(
            "the controller runs as shipped, without --resync; the long phase checks the flag"
        )
    assert_resync_period(applied_automatic_app(releases), timing, period, "TRIG-4.flag")


def automatic_app_an_hour_apart(releases: Releases) -> App:
    """An automatic Release with interval 1h, applied, whose source then changed."""
    app = applied_automatic_app(releases, sync_policy={"interval": "1h"})
    app.settle()
    app.set_content("v2")
    return app


def automatic_app_backing_off_an_hour(releases: Releases) -> App:
    """An automatic Release whose apply failed (DeployFailed) with its retry an hour away
    (retryBackoff initial 1h); then its source changed (no event), and applies are let through."""
    app = applied_automatic_app(releases, sync_policy={"retryBackoff": {"initial": "1h"}})
    app.deny_applies(1)
    app.request_sync()
    app.wait_applied("False", "DeployFailed")
    app.settle()
    app.set_content("v2")
    return app


#: Releases the resync reconciles too, besides an automatic one without an interval: each
#: in sync (or failed) and settled (the observer's /sync and health data for the applied
#: render come before the change, not after it), then its source changed (no event): only a
#: reconcile shows the new render, and only the resync starts one.
RESYNCED = {
    "manual": applied_manual_app,
    "automatic-with-an-interval": automatic_app_an_hour_apart,
    "automatic-backing-off": automatic_app_backing_off_an_hour,
}


@pytest.mark.clause("TRIG-4.flag")
@pytest.mark.parametrize("kind", sorted(RESYNCED))
def test_the_resync_reconciles_manual_releases_and_those_an_interval_or_a_retry_defers(
    releases: Releases, timing: Timing, kind: str
) -> None:
    """A manual Release reports the new render (WaitingForSync); an automatic one, whose
    interval or backoff retry is an hour away, applies it; each within a resync period."""
    app = RESYNCED[kind](releases)
    period = timing.controller_resync
    within = period + timing.slack(period) + timing.reconcile
    started = app.releases.recorder.mark()
    if kind == "manual":
        app.wait_applied("False", "WaitingForSync", timeout=within)
    else:
        app.wait_content("v2", timeout=within)
    print(f"{kind}: the new render showed {app.releases.recorder.mark() - started:.1f} s later")


@pytest.mark.clause("TRIG-4.default")
def test_without_the_flag_the_resync_period_is_2_minutes(
    releases: Releases, timing: Timing
) -> None:
    if timing.controller_resync != DOCUMENT_RESYNC:
        verdicts.certifying_only(
            f"this run's controller has --resync {timing.controller_resync:g}s, not the shipped "
            "default"
        )
    app = applied_automatic_app(releases)
    assert_resync_period(app, timing, DOCUMENT_RESYNC, "TRIG-4.default")


@pytest.mark.long
@pytest.mark.clause("TRIG-4.flag")
def test_a_long_resync_flag_defers_the_resync_past_the_default_period(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    """The long phase's controller runs with --resync far above 2 minutes: no resync comes
    where the default's would, two and a half default periods after the start."""
    if timing.controller_resync <= 3 * DOCUMENT_RESYNC:
        verdicts.certifying_only("the long phase (a resync period far above 2 minutes) checks it")
    app = applied_automatic_app(releases)
    quiet = 2.5 * DOCUMENT_RESYNC
    resync_clock.quiet_slot(quiet)
    seen = app.quiet(quiet, since=app.releases.recorder.mark())
    assert seen == [], f"reconciled without an event under --resync {timing.controller_resync:g}s"
    print(f"no resync in {quiet:g} s with --resync {timing.controller_resync:g}s")


# -- TRIG-6, TRIG-7: the observer and the waves -----------------------------------------------


def assert_reconciled_by_the_inventory(
    app: App, resync_clock: ResyncClock, timing: Timing, change: Callable[[], object]
) -> None:
    """Make `change` to a Widget in a resync-free slot: the observer's new health data, not
    a /sync, must start a reconcile (an apply attempt of the automatic Release)."""
    app.settle()  # the observer's /syncs of the setup were handled, and nothing runs
    resync_clock.quiet_slot(timing.reconcile)
    requested = subresources.annotations_of(app.get()).get(SYNC_REQUESTED_AT)
    since = app.releases.recorder.mark()
    change()
    app.wait_attempts(since=since)
    assert subresources.annotations_of(app.get()).get(SYNC_REQUESTED_AT) == requested, (
        "the reconcile came from a /sync, not from the inventory"
    )


@pytest.mark.clause("TRIG-6.new-health")
def test_new_health_data_in_the_inventory_starts_a_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    app = releases.app("web", sync_policy=AUTOMATIC, extra=[widgets.widget("worker")])
    widgets.set_health(app, "worker", "Healthy")
    app.wait_for(lambda r: condition_status(r, "Healthy") == "True", "Healthy")
    assert_reconciled_by_the_inventory(
        app, resync_clock, timing, lambda: widgets.set_health(app, "worker", "Degraded")
    )
    app.wait_for(
        lambda r: condition_status(r, "Healthy") == "False",
        "Healthy=False after the reconcile",
    )


@pytest.mark.clause("TRIG-6.new-entries")
def test_new_health_of_one_object_starts_a_reconcile_while_the_render_health_stays(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    """One Widget Degraded, one not reporting yet: the render is Degraded. The second turns
    Healthy: the inventory's entry for it changes, the render's health does not."""
    extra = [widgets.widget("broken"), widgets.widget("starting")]
    app = releases.app("web", sync_policy=AUTOMATIC, extra=extra)
    widgets.set_health(app, "broken", "Degraded")

    def degraded(release: Obj) -> bool:
        return (condition(release, "Healthy") or {}).get("reason") == "Degraded"

    app.wait_for(degraded, "Healthy=False, Degraded")
    assert_reconciled_by_the_inventory(
        app, resync_clock, timing, lambda: widgets.set_health(app, "starting", "Healthy")
    )
    assert degraded(app.get()), "the render's health changed: the test is void"


def wave_app(releases: Releases, name: str, wave: int, **spec) -> App:
    return releases.app(name, sync_policy=AUTOMATIC, wave=wave, **spec)


def healthy_low_wave(releases: Releases, name: str = "low", **spec) -> App:
    """Wave 0, automatic, with a Widget of its own that is Healthy: Applied and Healthy."""
    low = wave_app(releases, name, 0, extra=[widgets.widget(f"{name}-worker")], **spec)
    widgets.set_health(low, f"{name}-worker", "Healthy")
    low.wait_for(lambda r: condition_status(r, "Healthy") == "True", "Healthy")
    return low


@pytest.mark.clause(
    "TRIG-7.Healthy",
    "TRIG-7.every-higher-wave",
    "TRIG-7.not-other-cluster",
    "TRIG-7.not-other-namespace",
)
def test_a_lower_wave_health_change_reconciles_every_higher_wave_of_its_cluster_only(
    releases: Releases,
    neighbour_releases: Releases,
    resync_clock: ResyncClock,
    timing: Timing,
) -> None:
    """Wave 1 is manual and in sync: its reconcile changes nothing, so wave 2 is reconciled
    by the lower wave's change itself, not by a change of wave 1. Beside them, Releases of
    wave 1 on another Cluster and in another namespace (another Cluster too), each with a new
    render no event announced: a reconcile of either writes it to its status, whatever its
    outcome (were it of the same Cluster, it would wait for the lower wave and apply nothing)."""
    releases.cluster("elsewhere")
    low = healthy_low_wave(releases)
    middle = releases.app("middle", wave=1)
    middle.request_sync()
    top = wave_app(releases, "top", 2)
    other = wave_app(releases, "other", 1, clusterRef={"name": "elsewhere"})
    away = wave_app(neighbour_releases, "away", 1)
    for app in (low, middle, top, other, away):
        app.wait_applied("True", "Applied")
    low.settle()  # the /syncs of the waves completed above are handled
    away.settle()
    resync_clock.quiet_slot(timing.quiet + timing.reconcile + 2 * timing.settle)
    revealed = [(app, app.new_render()) for app in (other, away)]
    since = low.releases.recorder.mark()
    widgets.set_health(low, "low-worker", "Degraded")  # low: Healthy True -> False
    top.wait_applied("False", "WaitingForWave")
    assert condition_status(middle.get()) == "True", "wave 1 changed: the test is void"
    other.quiet(timing.quiet, since=since)  # the quiet period, for both
    for app, reconciled in revealed:
        seen = app.attempts(since=since)
        clause = "TRIG-7.not-other-cluster" if app is other else "TRIG-7.not-other-namespace"
        assert not reconciled(app.get()) and seen == [], (
            f"{clause}: a lower wave's health change on another Cluster reconciled "
            f"{app.namespace}/{app.name} (expected: no reconcile within {timing.quiet:g} s; "
            f"measured: its status took the new render: {reconciled(app.get())}, Applied "
            f"{present_condition(app.get())['reason']}, writes {[a.describe() for a in seen]})"
        )


@pytest.mark.clause("TRIG-7.Applied")
def test_a_lower_wave_applied_change_reconciles_the_higher_wave(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    """The pin makes the lower wave Applied=False; its Healthy condition stays True. Both name
    the same Cluster (the other test has them on the namespace's implicit one)."""
    releases.cluster("target")
    low = healthy_low_wave(releases, clusterRef={"name": "target"})
    high = wave_app(releases, "high", 1, clusterRef={"name": "target"})
    high.wait_applied("True", "Applied")
    resync_clock.quiet_slot(timing.reconcile)  # no resync may reconcile the higher wave
    subresources.put(low, "pin", {"renderRef": NO_RENDER})
    low.wait_applied("False", "Pinned")
    assert condition_status(low.get(), "Healthy") == "True"
    high.wait_applied("False", "WaitingForWave")


def unhealthy_low_wave(releases: Releases, name: str) -> App:
    """Wave 0, automatic, with a Widget of its own that reports nothing yet: Applied, and
    Healthy=False (Progressing), so that the waves above it wait."""
    low = wave_app(releases, name, 0, extra=[widgets.widget(f"{name}-worker")])
    low.wait_for(lambda r: condition_status(r, "Healthy") == "False", "Healthy=False")
    return low


def waiting_high_wave(releases: Releases) -> App:
    high = wave_app(releases, "high", 1)
    high.wait_applied("False", "WaitingForWave")
    return high


@pytest.mark.clause("TRIG-7.to-True")
def test_a_lower_wave_turning_healthy_reconciles_the_higher_wave_before_its_wave_completes(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    """Wave 0 holds two Releases, neither Healthy. One turns Healthy: a status change, but
    wave 0 is not complete, so no observer /sync comes; the change alone must reconcile wave
    1, which keeps waiting for the other. The new render of wave 1 reveals that reconcile."""
    first, second = (unhealthy_low_wave(releases, name) for name in ("low", "low-too"))
    high = waiting_high_wave(releases)
    # only the status change can explain a reconcile (a resync tick would reveal the render)
    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    revealed = high.new_render()
    widgets.set_health(first, "low-worker", "Healthy")
    first.wait_for(lambda r: condition_status(r, "Healthy") == "True", "Healthy=True")
    high.wait_for(revealed, "a reconcile after a lower wave's Healthy turned True")
    reason = present_condition(high.get())["reason"]
    assert reason == "WaitingForWave", f"{second.name} is not Healthy"


@pytest.mark.clause("TRIG-7.unsettled")
def test_a_lower_wave_applied_change_reconciles_the_higher_wave_while_it_stays_unsettled(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    """The lower wave is Applied and not Healthy; the pin turns its Applied False. A status
    change, though the lower wave was not Applied and Healthy before and is not after: the
    higher wave must be reconciled all the same. Its new render reveals that reconcile."""
    low = unhealthy_low_wave(releases, "low")
    high = waiting_high_wave(releases)
    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    revealed = high.new_render()
    subresources.put(low, "pin", {"renderRef": NO_RENDER})
    low.wait_applied("False", "Pinned")
    assert condition_status(low.get(), "Healthy") == "False", "Healthy changed: the test is void"
    high.wait_for(revealed, "a reconcile after a lower wave's Applied turned False")


@pytest.mark.clause("TRIG-7.first-status")
def test_a_new_lower_wave_release_makes_the_applied_higher_wave_wait(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    """The higher wave applied with no lower wave; then a manual Release of a lower wave is
    created. Its creation is no status change, its first status (WaitingForSync) is: the
    higher wave's reconcile must find it and wait."""
    high = wave_app(releases, "high", 1)
    high.wait_applied("True", "Applied")
    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    low = releases.app("low", wave=0)
    low.wait_applied("False", "WaitingForSync")
    high.wait_applied("False", "WaitingForWave")


@pytest.mark.clause("TRIG-7.not-reason-or-message")
def test_a_lower_wave_reason_or_message_change_does_not_reconcile_the_higher_wave(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    """The lower wave's Widget goes from Progressing to Degraded: its Healthy condition
    changes its reason and message, and stays False."""
    low = unhealthy_low_wave(releases, "low")
    high = waiting_high_wave(releases)
    before = present_condition(low.get(), "Healthy")
    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    revealed = high.new_render()
    since = releases.recorder.mark()
    widgets.set_health(low, "low-worker", "Degraded")
    after = present_condition(
        low.wait_for(
            lambda r: present_condition(r, "Healthy")["reason"] != before["reason"],
            "a new reason of Healthy",
        ),
        "Healthy",
    )
    assert after["status"] == before["status"], f"Healthy changed its status: {after}"
    high.holds_for(lambda r: not revealed(r), "no reconcile of the higher wave", timing.quiet)
    seen = high.attempts(since=since)
    assert seen == [], (
        f"the lower wave's Healthy reason {before['reason']} -> {after['reason']} reconciled "
        f"the higher wave: {[a.describe() for a in seen]}"
    )


#: A higher wave and the lower-wave Release to delete under it: once the deletion is seen, the
#: higher wave's next reconcile applies (nothing it waits for is left).
WaveDeletion = tuple[App, App]


def the_only_lower_wave_unsettled(releases: Releases) -> WaveDeletion:
    low = unhealthy_low_wave(releases, "low")
    return waiting_high_wave(releases), low


def an_unsettled_lower_wave_beside_a_settled_one(releases: Releases) -> WaveDeletion:
    """Its deletion leaves wave 0 all Applied and Healthy: a wave completed by no change of a
    Release (the API reference's "the wave completed"), so no observer /sync either."""
    healthy_low_wave(releases, "low-settled")
    low = unhealthy_low_wave(releases, "low")
    return waiting_high_wave(releases), low


def a_settled_lower_wave(releases: Releases) -> WaveDeletion:
    low = healthy_low_wave(releases)
    high = wave_app(releases, "high", 1)
    high.wait_applied("True", "Applied")
    return high, low


@pytest.mark.clause("TRIG-7.not-deletion")
@pytest.mark.parametrize(
    "setup",
    [
        pytest.param(the_only_lower_wave_unsettled, id="the-only-lower-wave"),
        pytest.param(an_unsettled_lower_wave_beside_a_settled_one, id="beside-a-settled-one"),
        pytest.param(a_settled_lower_wave, id="a-settled-lower-wave"),
    ],
)
def test_a_deleted_lower_wave_release_does_not_reconcile_the_higher_wave(
    releases: Releases,
    resync_clock: ResyncClock,
    timing: Timing,
    setup: Callable[[Releases], WaveDeletion],
) -> None:
    """A lower-wave Release is deleted: no status of a lower wave changed, so the higher wave
    is not reconciled, whether it waited for that Release (a reconcile would apply it, nothing
    left to wait for) or not. A new render of the higher wave reveals any reconcile, one that
    applies nothing included. It sees the deletion at its next reconcile: a /sync."""
    high, low = setup(releases)
    high.settle()
    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    revealed = high.new_render()
    since = releases.recorder.mark()
    releases.resource.delete(name=low.name, namespace=low.namespace)
    seen = high.quiet(timing.quiet, since=since)
    reconciled = revealed(high.get())
    assert seen == [] and not reconciled, (
        f"TRIG-7.not-deletion: deleting the lower wave's {low.name} reconciled the higher wave "
        f"within {timing.quiet:g} s (expected: no reconcile until its next one); measured: "
        f"its status took the new render: {reconciled}, applies "
        f"{[attempt.describe() for attempt in seen]}"
    )
    high.request_sync()
    high.wait_for(
        lambda r: revealed(r) and applied_is(r, "True", "Applied"),
        "Applied=True for the new render at the /sync after the deletion",
    )


@pytest.mark.parametrize(
    "wave",
    [case(0, "lower", "TRIG-7.not-lower-wave"), case(1, "same", "TRIG-7.not-same-wave")],
)
def test_a_wave_change_does_not_reconcile_a_lower_wave_or_its_own(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, wave: int
) -> None:
    """A Release of wave 1 changes its Healthy status; a Release of wave `wave`, below it or
    beside it in wave 1, is not reconciled: only a higher wave is."""
    other = applied_automatic_app(releases, "other", wave=wave)
    changed = wave_app(releases, "changed", 1, extra=[widgets.widget("worker")])
    widgets.set_health(changed, "worker", "Healthy")
    changed.wait_for(lambda r: condition_status(r, "Healthy") == "True", "Healthy")
    changed.settle()
    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    since = other.releases.recorder.mark()
    widgets.set_health(changed, "worker", "Degraded")
    changed.wait_for(lambda r: condition_status(r, "Healthy") == "False", "Healthy=False")
    seen = other.quiet(timing.quiet, since=since)
    assert seen == [], (
        f"a change of wave 1 reconciled a Release of wave {wave}: "
        f"{[attempt.describe() for attempt in seen]}"
    )


# -- TRIG-9, TRIG-10: mutations and lifecycle -------------------------------------------------


@pytest.mark.parametrize(
    ("method", "subresource"),
    [
        pytest.param(
            method,
            subresource,
            id=f"{method}-{subresource}",
            marks=pytest.mark.clause(f"TRIG-10.{method}-{subresource}"),
        )
        for method in ("PUT", "DELETE")
        for subresource in ("mutations", "lifecycle")
    ],
)
def test_a_write_through_mutations_or_lifecycle_starts_a_reconcile_at_once(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, method: str, subresource: str
) -> None:
    app = applied_automatic_app(
        releases, annotations={f"{GROUP}/mutations": "[]", f"{GROUP}/lifecycle": "{}"}
    )
    resync_clock.quiet_slot(timing.reconcile)  # only the write can explain a reconcile
    since = app.releases.recorder.mark()
    if method == "PUT":
        subresources.put(app, subresource, [] if subresource == "mutations" else {})
    else:
        subresources.delete(app, subresource)
    attempt = app.wait_attempts(since=since)[0]
    print(f"apply attempt {attempt.at - since:.3f} s after {method} /{subresource}")


def _mutation(app: App):
    return content_mutations(app), lambda: app.rendered_object()["data"] == {"content": "mutated"}


def _lifecycle(app: App):
    hooks = widgets.pre_apply_hook()
    return hooks, lambda: widgets.exists(app, "migrate")


CHANGES = {"mutations": _mutation, "lifecycle": _lifecycle}


@pytest.mark.parametrize(
    "field", [case(name, name, f"TRIG-9.{name}") for name in ("mutations", "lifecycle")]
)
def test_mutations_or_lifecycle_through_the_main_resource_wait_for_the_periodic_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, field: str
) -> None:
    app = applied_automatic_app(releases)
    generation = app.get()["metadata"]["generation"]
    value, effect = CHANGES[field](app)
    annotate = lambda: app.annotate({f"{GROUP}/{field}": json.dumps(value)})  # noqa: E731
    assert_no_reconcile(app, resync_clock, timing, annotate, f"the {field} annotation")
    assert app.get()["metadata"]["generation"] == generation
    period = timing.controller_resync  # the informer resync is the periodic reconcile here
    app.wait_for(lambda _: effect(), f"the {field} used", period + timing.slack(period))
