"""Forced sync: no pre-apply dry run, for one reconcile only, always recorded as handled."""

from __future__ import annotations

from datetime import datetime

import pytest

from conformance.releases import App, Releases, parse_time
from conformance.witness import Attempt


def applied_manual_app(releases: Releases, **spec) -> App:
    """A manual Release applied once, with a new render waiting for the next request."""
    app = releases.app("web", **spec)
    app.request_sync()
    app.wait_applied("True", "Applied")
    app.set_content("v2")
    return app


def request_forced_sync(app: App) -> datetime:
    """A forced request a second after the last handled one, so that it is pending too."""
    return parse_time(app.request_sync(at=app.next_pending_time(), force=True))


def kinds(attempts: list[Attempt]) -> list[str]:
    return ["dry-run" if a.dry_run else "apply" for a in attempts]


@pytest.mark.rule("FORCE-2", "FORCE-5")
def test_a_forced_request_applies_without_a_dry_run_and_is_recorded(releases: Releases) -> None:
    app = applied_manual_app(releases)
    since = app.releases.recorder.mark()
    written = request_forced_sync(app)
    app.wait_for(lambda _: app.live_object()["data"] == {"content": "v2"}, "v2 applied")
    app.wait_for(lambda r: r["status"].get("lastHandledForceSyncAt"), "lastHandledForceSyncAt")
    assert kinds(app.attempts(since=since)) == ["apply"], "a forced reconcile ran a dry run"
    handled = parse_time(app.status()["lastHandledForceSyncAt"])
    assert handled.replace(microsecond=0) == written.replace(microsecond=0)


@pytest.mark.rule("FORCE-4")
def test_the_reconcile_after_a_forced_one_runs_the_dry_run_again(releases: Releases) -> None:
    app = applied_manual_app(releases)
    request_forced_sync(app)
    app.wait_for(lambda r: r["status"].get("lastHandledForceSyncAt"), "the forced reconcile")
    app.set_content("v3")
    since = app.releases.recorder.mark()
    app.request_sync(at=app.next_pending_time())
    app.wait_for(lambda _: app.live_object()["data"] == {"content": "v3"}, "v3 applied")
    assert kinds(app.attempts(since=since)) == ["dry-run", "apply"]


@pytest.mark.rule("FORCE-4", "FORCE-5")
def test_a_failed_forced_reconcile_is_handled_and_its_retry_runs_the_dry_run(
    releases: Releases,
) -> None:
    app = applied_manual_app(releases, sync_policy={"retryBackoff": {"initial": "1s"}})
    app.deny_applies()
    since = app.releases.recorder.mark()
    written = request_forced_sync(app)
    app.wait_applied("False", "DeployFailed")
    app.wait_for(lambda r: r["status"].get("lastHandledForceSyncAt"), "lastHandledForceSyncAt")
    handled = parse_time(app.status()["lastHandledForceSyncAt"])
    assert handled.replace(microsecond=0) == written.replace(microsecond=0)
    app.wait_attempts(count=2, since=since)  # the forced attempt and the retry's apply
    assert kinds(app.attempts(since=since))[:3] == ["apply", "dry-run", "apply"], (
        "the forced reconcile must skip the dry run and its retry must run it"
    )
