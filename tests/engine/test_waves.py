"""Cluster waves: a Release waits for the lower waves on its Cluster (WaitingForWave); a change
of their Applied or Healthy status reconciles the higher waves (TRIG-7), and a completed wave
sends the next one a /sync (SYNC-9)."""

from __future__ import annotations

from conformance.observe.releases import App
from conformance.observe.resync import ResyncClock
from conformance.timing import Timing
from tests.engine.conftest import SETTLE, Engine, healthy, settle, wait_sync_request, widget

AUTOMATIC = {"automatic": True}


def first_apply(app: App) -> float:
    """When the witness saw the Release's first apply. Not lastSuccessful.appliedAt: a later
    apply (the completed wave's /sync, handled after the wave change) moves that on."""
    return app.attempts(dry_run=False)[0].at


def test_waves_wait_and_go_in_order(engine: Engine) -> None:
    base = engine.app("base", extra=[widget("db")], sync_policy=AUTOMATIC)
    middle = engine.releases.app("middle", sync_policy=AUTOMATIC, wave=1)
    top = engine.releases.app("top", sync_policy=AUTOMATIC, wave=5)
    base.wait_applied("True", "Applied")
    middle.wait_applied("False", "WaitingForWave")
    top.wait_applied("False", "WaitingForWave")
    assert middle.live_object() is None and top.live_object() is None

    engine.set_widget("db")
    healthy(base, "True", "Healthy")
    middle.wait_applied("True", "Applied", SETTLE)
    wait_sync_request(middle)  # the completed wave 0 sends wave 1 a /sync
    top.wait_applied("True", "Applied", SETTLE)
    assert first_apply(middle) <= first_apply(top)
    wait_sync_request(top)


def test_a_manual_release_of_the_next_wave_syncs_when_its_wave_is_done(engine: Engine) -> None:
    base = engine.app("base", extra=[widget("db")], sync_policy=AUTOMATIC)
    manual = engine.releases.app("manual", wave=1)
    manual.wait_applied("False", "WaitingForSync")
    base.wait_applied("True", "Applied")
    engine.set_widget("db")
    manual.wait_applied("True", "Applied", SETTLE)
    assert manual.live_object() is not None


def test_a_lower_wave_change_reconciles_the_higher_waves_of_its_cluster_only(
    engine: Engine, resync_clock: ResyncClock, timing: Timing
) -> None:
    engine.clusters.create(
        body={
            "apiVersion": "convoy.kumodo.io/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": "east"},
            "spec": {},
        },
        namespace=engine.namespace,
    )
    low = engine.app("low", extra=[widget("db")], sync_policy=AUTOMATIC)
    high = engine.releases.app("high", sync_policy=AUTOMATIC, wave=1)
    east = engine.releases.app("east", sync_policy=AUTOMATIC, wave=1, clusterRef={"name": "east"})
    healthy(low, "False", "Progressing")
    high.wait_applied("False", "WaitingForWave")
    east.wait_applied("True", "Applied")

    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    since = engine.releases.recorder.mark()
    engine.set_widget("db")  # low: Healthy False -> True
    high.wait_applied("True", "Applied", SETTLE)
    assert high.attempts(since=since, dry_run=False)
    assert east.quiet(timing.quiet, since=since) == [], "another Cluster's Release reconciled"

    # A change in a higher wave concerns no lower wave.
    wait_sync_request(low)  # health reached low's render: the last /sync low gets
    settle(low)
    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    since = engine.releases.recorder.mark()
    high.annotate({"convoy.kumodo.io/pin": "sha256:" + "0" * 64})
    high.request_sync()
    high.wait_applied("False", "Pinned")
    assert low.quiet(timing.quiet, since=since) == [], "a higher wave's change reconciled wave 0"
