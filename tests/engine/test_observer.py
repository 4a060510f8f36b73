"""The observer: health in the ReleaseInventory, the Healthy condition, drift on the interval.

TRIG-6 (new health data starts a reconcile, other writes do not), SYNC-9 (a /sync when health
reaches a new render), INT-2 (drift checked on spec.syncPolicy.interval).
"""

from __future__ import annotations

from conformance.observe.releases import parse_time
from conformance.observe.resync import ResyncClock
from conformance.timing import Timing
from convoyapi import SYNC_REQUESTED_AT
from tests.engine.conftest import Engine, annotation, healthy, settle, wait_sync_request, widget

AUTOMATIC = {"automatic": True}


def test_the_inventory_records_the_applied_render_and_its_health(engine: Engine) -> None:
    app = engine.app("web", extra=[widget("w")], sync_policy=AUTOMATIC)
    release = app.wait_applied("True", "Applied")
    ref = release["status"]["lastSuccessful"]["renderRef"]
    inventory = engine.inventory("web")
    assert inventory is not None
    owner = inventory["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "Release",
        "web",
        release["metadata"]["uid"],
    )
    assert inventory["spec"]["releaseName"] == "web"
    status = engine.wait_inventory("web", lambda s: s.get("renderRef") == ref, "an assessment")
    assert status["health"] == "Progressing"
    assert status["assessedAt"]
    health = {entry["kind"]: entry["health"] for entry in status["entries"]}
    assert health == {"ConfigMap": "Healthy", "Widget": "Progressing"}
    healthy(app, "False", "Progressing")

    engine.set_widget("w", stalled=True)
    healthy(app, "False", "Degraded")
    assert engine.inventory_status("web")["health"] == "Degraded"


def test_new_health_data_starts_a_reconcile_and_other_writes_do_not(
    engine: Engine, resync_clock: ResyncClock, timing: Timing
) -> None:
    app = engine.app("web", extra=[widget("w")], sync_policy=AUTOMATIC)
    app.wait_applied("True", "Applied")
    healthy(app, "False", "Progressing")
    assert annotation(app, SYNC_REQUESTED_AT) is None

    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    since = app.releases.recorder.mark()
    engine.set_widget("w")
    app.wait_attempts(since=since)  # automatic mode: each reconcile applies
    healthy(app, "True", "Healthy")
    wait_sync_request(app)  # SYNC-9: health reached the new render
    settle(app)  # the reconcile that /sync starts

    resync_clock.quiet_slot(timing.quiet + 1)
    since = app.releases.recorder.mark()
    engine.set_widget("w", reason="StillReady")  # a write that leaves the health as it was
    assert app.quiet(timing.quiet, since=since) == []


def test_drift_is_recorded_on_the_interval(engine: Engine) -> None:
    app = engine.releases.app("web", sync_policy={"interval": "2s"})  # manual: drift stays
    app.request_sync()
    app.wait_applied("True", "Applied")
    first = engine.wait_inventory("web", lambda s: "driftCheckedAt" in s, "a drift check")
    assert first["drift"] == []

    app.drift()
    drifted = engine.wait_inventory("web", lambda s: s.get("drift"), "the drift recorded")
    assert [(d["kind"], d["name"]) for d in drifted["drift"]] == [("ConfigMap", app.object_name)]
    gap = parse_time(drifted["driftCheckedAt"]) - parse_time(first["driftCheckedAt"])
    assert gap.total_seconds() >= 2 - 0.1, "drift checked more often than the interval"


def test_no_interval_no_drift_check(engine: Engine) -> None:
    app = engine.releases.app("web", sync_policy=AUTOMATIC)
    app.wait_applied("True", "Applied")
    engine.wait_inventory("web", lambda s: s.get("health") == "Healthy", "an assessment")
    assert "driftCheckedAt" not in engine.inventory_status("web")
