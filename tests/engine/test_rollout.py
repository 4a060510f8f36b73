"""failurePolicy: rollout phases, the health timeout, rollback, and a forced sync (FORCE-3)."""

from __future__ import annotations

from conformance.observe.releases import App, condition, parse_time
from tests.engine.conftest import SETTLE, Engine, healthy, widget

AUTOMATIC = {"automatic": True}
#: The rollback tests' healthTimeout: their first render turns Healthy at once, and the
#: observer's next look at it may come a whole period (2 s) after the apply that started the
#: rollout; their second render never does, and its rollout is to time out soon.
ROLLBACK_HEALTH_TIMEOUT = "4s"


def rollout_of(release: dict) -> dict:
    return (release.get("status") or {}).get("rollout") or {}


def rollout(app: App) -> dict:
    return rollout_of(app.get())


def wait_phase(app: App, phase: str) -> dict:
    release = app.wait_for(
        lambda r: rollout_of(r).get("phase") == phase, f"rollout phase {phase}", SETTLE
    )
    return rollout_of(release)


def wait_new_rollout(app: App, after: dict) -> dict:
    release = app.wait_for(
        lambda r: rollout_of(r)["startedAt"] != after["startedAt"], "a new rollout", SETTLE
    )
    return rollout_of(release)


def healthy_rollback_release(engine: Engine) -> tuple[App, str]:
    """A Release with failurePolicy Rollback whose first render rolled out; and that render."""
    app = engine.app(
        "web",
        extra=[widget("w")],
        sync_policy=AUTOMATIC,
        failurePolicy={"healthTimeout": ROLLBACK_HEALTH_TIMEOUT, "action": "Rollback"},
    )
    engine.wait_inventory("web", lambda s: s.get("entries"), "an assessment")
    engine.set_widget("w")
    return app, wait_phase(app, "Succeeded")["renderRef"]


def test_a_rollout_succeeds_when_its_render_is_healthy(engine: Engine) -> None:
    app = engine.app(
        "web", extra=[widget("w")], sync_policy=AUTOMATIC, failurePolicy={"healthTimeout": "5m"}
    )
    release = app.wait_applied("True", "Applied")
    started = wait_phase(app, "Progressing")
    assert started["renderRef"] == release["status"]["renderRef"]
    engine.set_widget("w")
    done = wait_phase(app, "Succeeded")
    assert done["startedAt"] == started["startedAt"]


def test_a_render_healthy_at_its_own_assessment_ends_its_rollout_in_that_reconcile(
    engine: Engine,
) -> None:
    """The Widget is Healthy before the controller applies it: the reconcile's own assessment
    finds the render Healthy, and that reconcile goes on with it (no /sync, no other event)."""
    engine.widgets.create(body=widget("w"), namespace=engine.namespace)
    engine.set_widget("w")
    app = engine.app(
        "web", extra=[widget("w")], sync_policy=AUTOMATIC, failurePolicy={"healthTimeout": "1h"}
    )
    release = app.wait_for(lambda r: condition(r, "Healthy") is not None, "a Healthy condition")
    assert condition(release, "Healthy")["status"] == "True", condition(release, "Healthy")
    assert rollout_of(release).get("phase") == "Succeeded", rollout_of(release)


def test_halt_fails_and_a_forced_sync_starts_a_new_rollout(engine: Engine) -> None:
    app = engine.app(
        "web", extra=[widget("w")], sync_policy=AUTOMATIC, failurePolicy={"healthTimeout": "2s"}
    )
    failed = wait_phase(app, "Failed")
    assert app.live_object() is not None, "Halt keeps the objects as applied"
    engine.set_widget("w")
    healthy(app, "True", "Healthy")
    assert rollout(app)["phase"] == "Failed", "a Failed rollout turned Succeeded by itself"

    app.request_sync(force=True)
    renewed = wait_new_rollout(app, failed)
    assert parse_time(renewed["startedAt"]) > parse_time(failed["startedAt"])
    assert renewed["renderRef"] == failed["renderRef"]
    wait_phase(app, "Succeeded")


def test_rollback_applies_the_previous_render_and_holds(engine: Engine) -> None:
    app, good = healthy_rollback_release(engine)

    app.set_content("v2", extra=[widget("w"), widget("canary")])
    app.request_sync()
    bad = wait_phase(app, "RolledBack")
    assert bad["renderRef"] != good
    held = app.wait_applied("False", "Pinned")
    assert good in condition(held)["message"] and bad["renderRef"] in condition(held)["message"]
    assert held["status"]["lastSuccessful"]["renderRef"] == good
    assert app.live_object()["data"]["content"] == "v1"
    app.wait_for(lambda _: not engine.widget_exists("canary"), "the canary pruned", SETTLE)

    app.request_sync()  # a plain /sync does not end the hold
    app.wait_applied("False", "Pinned")
    app.request_sync(force=True)  # a forced one does: a new rollout of the bad render
    assert wait_new_rollout(app, bad)["renderRef"] == bad["renderRef"]
    app.wait_for(lambda _: engine.widget_exists("canary"), "the bad render applied again")


def test_rollback_to_a_render_with_an_empty_spec(engine: Engine) -> None:
    """The previous render has `spec: {}` where the failed one has `spec: {version: 2}`: the
    rollback applies `{}` over fields convoy owned, which kube-apiserver would turn into null."""
    app, good = healthy_rollback_release(engine)

    app.set_content("v2", extra=[widget("w", version=2)])
    app.request_sync()
    assert wait_phase(app, "RolledBack")["renderRef"] != good
    held = app.wait_applied("False", "Pinned")
    assert held["status"]["lastSuccessful"]["renderRef"] == good
    assert engine.get_widget("w")["spec"] == {}
