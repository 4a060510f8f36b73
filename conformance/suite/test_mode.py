"""Automatic and manual mode."""

from __future__ import annotations

import pytest

from conformance.releases import App, Releases, condition
from conformance.timing import Timing

AUTOMATIC = {"automatic": True}


@pytest.mark.rule("MODE-1", "MAN-2")
@pytest.mark.parametrize(
    "sync_policy", [None, {}, {"automatic": False}], ids=["no-syncPolicy", "unset", "false"]
)
def test_without_automatic_the_release_is_manual(
    releases: Releases, timing: Timing, sync_policy: dict | None
) -> None:
    app = releases.app("web", sync_policy=sync_policy)
    app.wait_applied("False", "WaitingForSync")
    assert app.quiet(timing.quiet) == [], "manual mode applied without a /sync request"
    assert app.live_object() is None


@pytest.mark.rule("MODE-1", "AUTO-1")
def test_automatic_true_applies_on_creation(releases: Releases) -> None:
    app = releases.app("web", sync_policy=AUTOMATIC)
    app.wait_applied("True", "Applied")
    assert app.live_object()["data"] == {"content": "v1"}


@pytest.mark.rule("AUTO-1")
def test_automatic_mode_applies_at_each_reconcile_also_when_nothing_changed(
    releases: Releases,
) -> None:
    app = releases.app("web", sync_policy=AUTOMATIC)
    app.wait_applied("True", "Applied")
    first = app.attempts(dry_run=False)[-1]
    unchanged = app.live_object()["metadata"]["resourceVersion"]
    for _ in range(2):
        since = first.at
        app.request_sync()  # starts a reconcile and changes nothing
        first = app.wait_attempts(since=since + 1e-6)[-1]
        print(f"apply attempt {first.at - since:.3f} s after the previous one")
    assert app.live_object()["metadata"]["resourceVersion"] == unchanged


@pytest.mark.rule("AUTO-2", "INT-1", "TRIG-5")
def test_automatic_mode_restores_drift_at_the_periodic_reconcile(
    releases: Releases, timing: Timing
) -> None:
    interval = 2.0
    app = releases.app("web", sync_policy={**AUTOMATIC, "interval": f"{interval:g}s"})
    app.wait_applied("True", "Applied")
    start = app.releases.recorder.mark()
    app.drift()
    app.wait_for(
        lambda _: (app.live_object() or {}).get("data") == {"content": "v1"},
        "the drifted object restored",
        timeout=interval + timing.slack(interval),
    )
    print(f"drift corrected {app.releases.recorder.mark() - start:.2f} s after it was made")


INTERVAL = 1.0


def synced_manual_app(releases: Releases) -> App:
    """A manual Release reconciled every second, its first /sync applied."""
    app = releases.app("web", sync_policy={"interval": f"{INTERVAL:g}s"})
    app.request_sync()
    app.wait_applied("True", "Applied")
    return app


@pytest.mark.rule("MAN-1", "MAN-3")
def test_manual_mode_in_sync_says_so_and_applies_nothing(
    releases: Releases, timing: Timing
) -> None:
    app = synced_manual_app(releases)
    app.drift()
    # Periodic reconciles (and resync ticks) happen meanwhile: none may apply or dry-run.
    since = app.releases.recorder.mark()
    assert app.quiet(timing.quiet_for(INTERVAL), since=since) == [], (
        "manual mode applied or dry-ran without /sync"
    )
    assert app.live_object()["data"] == {"content": "drifted"}, "drift was corrected"
    applied = condition(app.get())
    assert (applied["status"], applied["reason"]) == ("True", "Applied")
    message = applied["message"].lower()
    assert "in sync" in message and "/sync" in message, applied["message"]


@pytest.mark.rule("MAN-2", "MAN-3")
def test_manual_mode_with_a_new_render_waits_for_sync_and_applies_nothing(
    releases: Releases, timing: Timing
) -> None:
    app = synced_manual_app(releases)
    app.set_content("v2")
    app.wait_applied("False", "WaitingForSync", timeout=INTERVAL + timing.slack(INTERVAL))
    assert app.quiet(timing.quiet_for(INTERVAL), since=app.releases.recorder.mark()) == []
    assert app.live_object()["data"] == {"content": "v1"}
