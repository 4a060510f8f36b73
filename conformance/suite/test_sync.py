"""The /sync request: pending requests, the comparison to the second, what a failure leaves."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from conformance import subresources, widgets
from conformance.clusters.base import Cluster
from conformance.releases import (
    GROUP,
    SYNC_FORCE_REQUESTED_AT,
    SYNC_REQUESTED_AT,
    App,
    Releases,
    parse_time,
)
from conformance.resync import ResyncClock
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


@pytest.mark.rule("SYNC-1")
def test_post_sync_writes_the_current_time_to_sync_requested_at(
    releases: Releases, timing: Timing
) -> None:
    app = releases.app("web")
    before = datetime.now(UTC)
    subresources.post_sync(app)
    written = parse_time(subresources.annotations(app.get())[SYNC_REQUESTED_AT])
    skew = (written - before).total_seconds()
    print(f"sync-requested-at is {skew:+.3f} s from the time of the POST")
    assert -timing.tolerance <= skew <= timing.reconcile
    assert SYNC_FORCE_REQUESTED_AT not in subresources.annotations(app.get())


SUBRESOURCE_WRITES = {
    "pin": lambda app: {"renderRef": app.status()["renderRef"]},
    "mutations": lambda app: [],
    "lifecycle": lambda app: {},
}


@pytest.mark.rule("SYNC-8")
@pytest.mark.parametrize("subresource", sorted(SUBRESOURCE_WRITES))
def test_a_subresource_write_sets_sync_requested_at_and_counts_as_a_request(
    releases: Releases, subresource: str
) -> None:
    app = releases.app("web")
    app.wait_applied("False", "WaitingForSync")
    before = app.get()
    answer = subresources.put(app, subresource, SUBRESOURCE_WRITES[subresource](app))
    until = answer.body["metadata"]["resourceVersion"]
    _, after = subresources.update_changing(app, before, until, SYNC_REQUESTED_AT)
    assert f"{GROUP}/{subresource}" in subresources.annotations(after), (
        f"the write of /{subresource} did not carry its data in the same update"
    )
    written = parse_time(subresources.annotations(after)[SYNC_REQUESTED_AT])
    app.wait_applied("True", "Applied")  # in manual mode the write was a /sync request
    assert last_handled(app).replace(microsecond=0) == written.replace(microsecond=0)


@pytest.mark.rule("SYNC-10")
def test_kubectl_convoy_release_sync_sends_the_post(
    releases: Releases, cluster: Cluster, timing: Timing
) -> None:
    app = releases.app("web")
    done = subresources.kubectl_convoy(
        cluster.kubeconfig, app.namespace, "release", "sync", app.name
    )
    assert done.returncode == 0, done.stderr
    annotations = subresources.annotations(app.get())
    assert SYNC_REQUESTED_AT in annotations and SYNC_FORCE_REQUESTED_AT not in annotations
    app.wait_applied("True", "Applied")


def a_while_ago() -> datetime:
    """A request time seconds in the past, so that a /sync sent now is in a later second."""
    return datetime.now(UTC) - timedelta(seconds=3)


def wait_for_observer_sync(app: App, previous: str) -> datetime:
    """The time of the /sync the observer sends (a new sync-requested-at)."""
    release = app.wait_for(
        lambda r: subresources.annotations(r).get(SYNC_REQUESTED_AT) != previous,
        "a /sync from the observer",
    )
    return parse_time(subresources.annotations(release)[SYNC_REQUESTED_AT])


def wait_handled(app: App, request: datetime) -> None:
    second = request.replace(microsecond=0)
    app.wait_for(
        lambda r: (
            (r.get("status") or {}).get("lastHandledSyncAt")
            and parse_time(r["status"]["lastHandledSyncAt"]).replace(microsecond=0) == second
        ),
        f"the request of {second} applied (lastHandledSyncAt)",
    )


@pytest.mark.rule("SYNC-9")
def test_the_observer_sends_a_sync_when_health_reaches_a_new_render(releases: Releases) -> None:
    app = releases.app("web", extra=[widgets.widget("worker")])
    previous = app.request_sync(at=a_while_ago())
    app.wait_applied("True", "Applied")
    app.set_content("v2", extra=[widgets.widget("worker")])  # a request would apply v2
    widgets.set_health(app, "worker", "Healthy")
    request = wait_for_observer_sync(app, previous)
    wait_handled(app, request)  # manual mode: the observer's /sync was a request
    assert app.live_object()["data"] == {"content": "v2"}


@pytest.mark.rule("SYNC-9")
def test_the_observer_sends_the_next_wave_a_sync_when_a_wave_completes(
    releases: Releases,
) -> None:
    low = releases.app(
        "low", sync_policy={"automatic": True}, wave=0, extra=[widgets.widget("low-worker")]
    )
    high = releases.app("high", wave=1)
    high.wait_applied("False", "WaitingForSync")
    previous = subresources.annotations(high.get()).get(SYNC_REQUESTED_AT)
    widgets.set_health(low, "low-worker", "Healthy")
    request = wait_for_observer_sync(high, previous)
    wait_handled(high, request)


@pytest.mark.rule("SYNC-9")
def test_the_observer_sends_a_sync_when_a_hook_batch_completes(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    hooks = {"preApply": [[widgets.widget("migrate")]]}
    app = releases.app("web", annotations={f"{GROUP}/lifecycle": json.dumps(hooks)})
    previous = app.request_sync(at=a_while_ago())
    app.wait_applied("False", "WaitingForHooks")
    # A resync reconcile would find the batch done before the observer could say so.
    resync_clock.quiet_slot(timing.reconcile)
    widgets.set_health(app, "migrate", "Healthy")
    request = wait_for_observer_sync(app, previous)
    wait_handled(app, request)
    app.wait_applied("True", "Applied")
