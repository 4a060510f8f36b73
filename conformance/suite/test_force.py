"""Forced sync: no pre-apply dry run, for one reconcile only, always recorded as handled."""

from __future__ import annotations

from datetime import datetime

import pytest

from conformance import subresources, widgets
from conformance.clusters.base import Cluster
from conformance.releases import (
    SYNC_FORCE_REQUESTED_AT,
    SYNC_REQUESTED_AT,
    App,
    Releases,
    parse_time,
)
from conformance.timing import Timing
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


@pytest.mark.rule("FORCE-1")
def test_post_sync_force_also_writes_sync_force_requested_at_in_the_same_update(
    releases: Releases,
) -> None:
    app = releases.app("web")
    before = app.get()
    answer = subresources.post_sync(app, force=True)
    until = answer.body["metadata"]["resourceVersion"]
    _, after = subresources.update_changing(app, before, until, SYNC_FORCE_REQUESTED_AT)
    written = subresources.annotations(after)
    assert written[SYNC_FORCE_REQUESTED_AT] == written.get(SYNC_REQUESTED_AT), written


@pytest.mark.rule("FORCE-6")
def test_kubectl_convoy_release_sync_force_sends_the_forced_post(
    releases: Releases, cluster: Cluster
) -> None:
    app = applied_manual_app(releases)
    done = subresources.kubectl_convoy(
        cluster.kubeconfig, app.namespace, "release", "sync", app.name, "--force"
    )
    assert done.returncode == 0, done.stderr
    written = subresources.annotations(app.get())
    assert written[SYNC_FORCE_REQUESTED_AT] == written[SYNC_REQUESTED_AT]


def rollout(app: App) -> dict:
    return app.status().get("rollout") or {}


def wait_phase(app: App, phase: str, timeout: float | None = None) -> dict:
    app.wait_for(
        lambda r: ((r.get("status") or {}).get("rollout") or {}).get("phase") == phase,
        f"rollout phase {phase}",
        timeout,
    )
    return rollout(app)


@pytest.mark.rule("FORCE-3")
@pytest.mark.parametrize(("action", "ended"), [("Halt", "Failed"), ("Rollback", "RolledBack")])
def test_a_forced_sync_starts_a_new_progressing_rollout_clearing_the_failed_one(
    releases: Releases, timing: Timing, action: str, ended: str
) -> None:
    timeout = 2.0
    app = releases.app(
        "web",
        sync_policy={"automatic": True},
        extra=[widgets.widget("worker")],
        failurePolicy={"healthTimeout": f"{timeout:g}s", "action": action},
    )
    if action == "Rollback":  # a successful render first, to roll back to
        widgets.set_health(app, "worker", "Healthy")
        wait_phase(app, "Succeeded")
        app.set_content("v2", extra=[widgets.widget("worker", version=2)])
        app.request_sync()
    failed = wait_phase(app, ended, timeout=timeout + timing.slack(timeout) + timing.reconcile)
    app.request_sync()  # an ordinary request does not clear it
    app.holds_for(
        lambda r: r["status"]["rollout"] == failed,
        f"the {ended} rollout after a /sync without force",
        timing.quiet,
    )
    subresources.post_sync(app, force=True)
    started = app.wait_for(
        lambda r: (r["status"].get("rollout") or {}).get("startedAt") != failed["startedAt"],
        "a new rollout",
    )["status"]["rollout"]
    assert started["phase"] == "Progressing", started
