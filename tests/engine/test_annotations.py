"""Pin, mutations and lifecycle hooks: read from the Release's annotations.

REQ-2 (Pinned and HookFailed are not transient), TRIG-9 (a change of the annotations through
the main resource starts no reconcile and is used at the next periodic one), SYNC-9 (a hook
batch that turns Healthy sends a /sync).
"""

from __future__ import annotations

import json

from conformance.observe.releases import App, condition, invalid_object
from conformance.observe.resync import ResyncClock
from conformance.polling import poll_until
from conformance.timing import Timing
from convoyapi import SYNC_REQUESTED_AT
from tests.engine.conftest import SETTLE, Engine, annotation, wait_sync_request, widget

PIN = "convoy.kumodo.io/pin"
MUTATIONS = "convoy.kumodo.io/mutations"
LIFECYCLE = "convoy.kumodo.io/lifecycle"
AUTOMATIC = {"automatic": True}


def content(app: App) -> str | None:
    live = app.live_object()
    return live["data"]["content"] if live else None


def content_mutation(app: App, value: str) -> str:
    target = {"apiVersion": "v1", "kind": "ConfigMap", "name": app.object_name}
    return json.dumps([{"target": target, "patch": {"data": {"content": value}}}])


def test_a_pin_holds_the_release_and_is_not_retried(
    engine: Engine, resync_clock: ResyncClock, timing: Timing
) -> None:
    app = engine.releases.app("web", sync_policy=AUTOMATIC)
    applied = app.wait_applied("True", "Applied")
    app.annotate({PIN: applied["status"]["renderRef"]})
    since = app.releases.recorder.mark()
    app.request_sync()
    app.wait_attempts(since=since)  # a pin equal to the current render changes nothing

    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    app.set_content("v2")
    since = app.releases.recorder.mark()
    app.request_sync()
    pinned = app.wait_applied("False", "Pinned")
    assert applied["status"]["renderRef"] in condition(pinned)["message"]
    assert app.quiet(timing.quiet, since=since) == [], "a pinned Release applied"
    assert content(app) == "v1"
    assert len(engine.reconciles(app, "Pinned")) == 1, "Pinned was retried"

    app.annotate({PIN: None})
    app.request_sync()
    app.wait_applied("True", "Applied")
    assert content(app) == "v2"


def test_mutations_patch_the_render_and_change_its_ref(engine: Engine) -> None:
    app = engine.releases.app("web", sync_policy=AUTOMATIC)
    plain = app.wait_applied("True", "Applied")["status"]["renderRef"]
    app.annotate({MUTATIONS: content_mutation(app, "mutated")})
    app.request_sync()
    mutated = app.wait_for(lambda r: r["status"]["renderRef"] != plain, "a new renderRef")
    assert content(app) == "mutated"
    assert mutated["status"]["lastSuccessful"]["renderRef"] == mutated["status"]["renderRef"]

    app.annotate({MUTATIONS: "[{}]"})
    app.request_sync()
    unappliable = app.wait_applied("False", "Unappliable")
    assert MUTATIONS in condition(unappliable)["message"]


def test_an_annotation_change_starts_no_reconcile(
    engine: Engine, resync_clock: ResyncClock, timing: Timing
) -> None:
    """TRIG-9, without an interval: nothing happens until something else starts a reconcile."""
    app = engine.releases.app("web", sync_policy=AUTOMATIC)
    generation = app.wait_applied("True", "Applied")["metadata"]["generation"]
    resync_clock.quiet_slot(timing.quiet)
    since = app.releases.recorder.mark()
    app.annotate({MUTATIONS: content_mutation(app, "mutated"), LIFECYCLE: "{}"})
    assert app.quiet(timing.quiet, since=since) == []
    assert app.get()["metadata"]["generation"] == generation
    assert content(app) == "v1"
    app.request_sync()
    app.wait_for(lambda _: content(app) == "mutated", "the mutation applied after a /sync")


def test_an_annotation_change_is_used_at_the_next_periodic_reconcile(engine: Engine) -> None:
    """TRIG-9, with an interval."""
    app = engine.releases.app("web", sync_policy={"automatic": True, "interval": "2s"})
    app.wait_applied("True", "Applied")
    since = app.releases.recorder.mark()
    app.annotate({MUTATIONS: content_mutation(app, "mutated")})
    app.wait_for(lambda _: content(app) == "mutated", "the mutation applied", SETTLE)
    assert annotation(app, SYNC_REQUESTED_AT) is None, "the change was not applied by a /sync"
    assert app.attempts(since=since, dry_run=False)


def test_a_degraded_hook_is_hook_failed_and_not_retried(engine: Engine) -> None:
    lifecycle = {"preApply": [[widget("migrate", step=1)]]}
    app = engine.releases.app(
        "web",
        sync_policy={"automatic": True, "interval": "1s"},
        annotations={LIFECYCLE: json.dumps(lifecycle)},
    )
    app.wait_applied("False", "WaitingForHooks")
    hook = engine.get_widget("migrate")
    assert "convoy.kumodo.io/release" not in (hook["metadata"].get("labels") or {})
    engine.set_widget("migrate", ready="False", reason="MigrationFailed")
    failed = app.wait_applied("False", "HookFailed", SETTLE)
    assert "Widget" in condition(failed)["message"]
    assert app.live_object() is None, "the render was applied after a failed preApply hook"
    lines = engine.wait_reconciles(app, "HookFailed")
    assert not any(" retry " in line for line in lines), lines


def test_hook_batches_run_in_order_and_each_completed_batch_sends_a_sync(engine: Engine) -> None:
    """Manual mode: one /sync request carries the whole sync, hooks included (SYNC-9)."""
    lifecycle = {"preApply": [[widget("before")]], "postApply": [[widget("after")]]}
    app = engine.releases.app("web", annotations={LIFECYCLE: json.dumps(lifecycle)})
    app.wait_applied("False", "WaitingForSync")
    requested = app.request_sync()
    app.wait_applied("False", "WaitingForHooks")
    assert not engine.widget_exists("after")
    assert app.live_object() is None

    engine.set_widget("before")
    first = wait_sync_request(app, other_than=requested)
    waiting = app.wait_for(
        lambda _: engine.widget_exists("after"), "the postApply batch applied", SETTLE
    )
    assert content(app) == "v1"
    assert "lastHandledSyncAt" not in waiting["status"], "handled before the postApply hooks"
    app.wait_applied("False", "WaitingForHooks")

    engine.set_widget("after")
    wait_sync_request(app, other_than=first)
    done = app.wait_applied("True", "Applied", SETTLE)
    assert done["status"]["lastHandledSyncAt"]


def test_each_change_of_applied_is_an_event_on_the_release(engine: Engine) -> None:
    """kubectl describe release shows why a Release waits or failed: an Event per change of
    the Applied condition (Normal for an apply or a hold, Warning for a failure), none for a
    reconcile that changed nothing."""
    app = engine.app("web", sync_policy={"automatic": True})
    app.wait_applied("True", "Applied")
    app.pin_nowhere()
    app.request_sync()
    app.wait_applied("False", "Pinned")
    app.request_sync()  # a reconcile that changes nothing: no Event
    app.settled_status()
    app.annotate({PIN: None})
    app.set_content("v1", extra=[invalid_object("rejected")])
    app.request_sync()
    app.wait_applied("False", "Unappliable")

    def events() -> list[tuple[str, str]]:
        listed = engine.releases.core.list_namespaced_event(
            engine.namespace, field_selector=f"involvedObject.name={app.name}"
        ).items
        return sorted((event.type, event.reason) for event in listed)

    expected = [("Normal", "Applied"), ("Normal", "Pinned"), ("Warning", "Unappliable")]
    poll_until(
        lambda: events() == expected,
        timeout=SETTLE,
        step=0.2,
        failure=lambda: AssertionError(f"Events of {app.name}: {events()}, not {expected}"),
    )
