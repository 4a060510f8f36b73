"""The /sync request: pending requests, the comparison to the second, what a failure leaves."""

from __future__ import annotations

from datetime import timedelta

import pytest

from conformance.releases import App, Releases, parse_time
from conformance.timing import Timing


def synced_manual_app(releases: Releases) -> App:
    """A manual Release whose first /sync was applied: lastHandledSyncAt is set."""
    app = releases.app("web")
    app.request_sync()
    app.wait_for(lambda r: (r.get("status") or {}).get("lastHandledSyncAt"), "lastHandledSyncAt")
    return app


def last_handled(app: App):
    return parse_time(app.status()["lastHandledSyncAt"])


@pytest.mark.rule("SYNC-2", "TRIG-3")
def test_a_changed_sync_requested_at_starts_a_reconcile(releases: Releases) -> None:
    app = releases.app("web", sync_policy={"automatic": True})
    app.wait_applied("True", "Applied")
    since = app.releases.recorder.mark()
    app.request_sync()
    attempt = app.wait_attempts(since=since)[0]
    print(f"apply attempt {attempt.at - since:.3f} s after the annotation changed")


@pytest.mark.rule("SYNC-3", "SYNC-5")
def test_a_pending_request_is_applied_and_recorded_as_handled(releases: Releases) -> None:
    app = releases.app("web")
    app.wait_applied("False", "WaitingForSync")
    assert "lastHandledSyncAt" not in app.status(), "lastHandledSyncAt before any apply"
    written = parse_time(app.request_sync())
    app.wait_applied("True", "Applied")
    assert app.live_object()["data"] == {"content": "v1"}
    handled = last_handled(app)
    assert handled.replace(microsecond=0) == written.replace(microsecond=0), (
        f"lastHandledSyncAt {handled} is not the handled request's second {written}"
    )


@pytest.mark.rule("SYNC-3")
def test_a_request_not_later_than_the_last_handled_one_is_not_pending(
    releases: Releases, timing: Timing
) -> None:
    app = synced_manual_app(releases)
    app.set_content("v2")
    since = app.releases.recorder.mark()
    app.request_sync(at=last_handled(app) - timedelta(seconds=5))
    app.wait_applied("False", "WaitingForSync")
    assert app.quiet(timing.quiet, since=since) == [], "an old request was applied"
    assert app.live_object()["data"] == {"content": "v1"}


@pytest.mark.rule("SYNC-4")
def test_the_pending_check_compares_whole_seconds(releases: Releases, timing: Timing) -> None:
    app = synced_manual_app(releases)
    second = last_handled(app).replace(microsecond=0)
    app.set_content("v2")  # any apply now would show
    since = app.releases.recorder.mark()
    app.request_sync(at=second + timedelta(microseconds=900_000))
    app.wait_applied("False", "WaitingForSync")
    assert app.quiet(timing.quiet, since=since) == [], (
        "a request in the same second as lastHandledSyncAt was treated as pending"
    )
    since = app.releases.recorder.mark()
    app.request_sync(at=second + timedelta(seconds=1))
    app.wait_attempts(since=since)
    app.wait_for(lambda _: app.live_object()["data"] == {"content": "v2"}, "v2 applied")


@pytest.mark.rule("SYNC-5", "SYNC-6")
def test_a_failed_apply_leaves_the_request_pending_and_the_next_reconcile_retries(
    releases: Releases,
) -> None:
    app = releases.app("web", sync_policy={"retryBackoff": {"initial": "1s"}})
    app.deny_applies()
    written = parse_time(app.request_sync())
    app.wait_applied("False", "DeployFailed")
    app.wait_attempts(count=2)  # the first apply and at least one retry, both refused
    assert "lastHandledSyncAt" not in app.status(), "lastHandledSyncAt written after a failure"
    app.releases.recorder.allow_all()  # no new request: only a retry can apply now
    app.wait_applied("True", "Applied")
    assert last_handled(app).replace(microsecond=0) == written.replace(microsecond=0)


@pytest.mark.rule("SYNC-7")
def test_automatic_mode_does_not_use_last_handled_sync_at(releases: Releases) -> None:
    app = releases.app("web", sync_policy={"automatic": True})
    app.wait_applied("True", "Applied")
    future = "2099-01-01T00:00:00Z"
    app.patch({"status": {"lastHandledSyncAt": future}}, subresource="status")
    since = app.releases.recorder.mark()
    app.request_sync()  # earlier than lastHandledSyncAt: still starts a reconcile that applies
    app.wait_attempts(since=since)
