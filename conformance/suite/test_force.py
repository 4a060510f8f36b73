"""Forced sync: no pre-apply dry run, for one reconcile only, always recorded as handled."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from conformance.clusters.base import Cluster
from conformance.harness.marks import case
from conformance.observe import subresources, widgets
from conformance.observe.releases import (
    App,
    Obj,
    Releases,
    applied_automatic_app,
    applied_manual_app,
    condition_status,
    kinds,
    parse_time,
    rfc3339,
    same_second,
)
from conformance.observe.resync import ResyncClock
from conformance.observe.witness import Attempt
from conformance.timing import Timing
from convoyapi import LIFECYCLE, PIN, SYNC_FORCE_REQUESTED_AT, SYNC_REQUESTED_AT

AUTOMATIC = {"automatic": True}


def request_forced_sync(app: App) -> datetime:
    """A forced request a second after the last handled one, so that it is pending too."""
    return parse_time(app.request_sync(at=app.next_pending_time(), force=True))


def wait_force_handled(app: App, written: datetime, before: str | None = None) -> None:
    """lastHandledForceSyncAt is the forced request's time, to the second (once it is other
    than `before`, the value it had before the request)."""
    release = app.wait_for(
        lambda r: r["status"].get("lastHandledForceSyncAt") not in (None, before),
        "lastHandledForceSyncAt",
    )
    handled = parse_time(release["status"]["lastHandledForceSyncAt"])
    assert handled.replace(microsecond=0) == written.replace(microsecond=0), (
        f"lastHandledForceSyncAt {handled} is not the forced request's second {written}"
    )


@pytest.mark.clause("FORCE-2.manual", "FORCE-5.success", "FORCE-3.no-failurePolicy")
def test_a_forced_request_applies_without_a_dry_run_and_is_recorded(releases: Releases) -> None:
    app = applied_manual_app(releases)
    since = app.releases.recorder.mark()
    written = request_forced_sync(app)
    app.wait_content("v2")
    wait_force_handled(app, written)
    assert kinds(app.attempts(since=since)) == ["apply"], "a forced reconcile ran a dry run"
    assert "rollout" not in app.status(), "a forced reconcile without failurePolicy rolled out"


@pytest.mark.clause("FORCE-2.manual", "FORCE-5.success")
def test_each_forced_request_has_effect_not_only_the_first(releases: Releases) -> None:
    """Two forced requests, one after the other: the second skips the dry run as the first
    did, and its time is the one recorded."""
    app = applied_manual_app(releases)
    for content in ("v2", "v3"):
        app.set_content(content)
        before = app.status().get("lastHandledForceSyncAt")
        since = app.releases.recorder.mark()
        written = request_forced_sync(app)
        app.wait_content(content)
        wait_force_handled(app, written, before)
        assert kinds(app.attempts(since=since)) == ["apply"], (
            f"the forced request for {content} ran a dry run"
        )


@pytest.mark.clause("FORCE-2.automatic", "FORCE-4.after-success")
def test_in_automatic_mode_a_forced_request_skips_the_dry_run_of_one_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    app = applied_automatic_app(releases)
    resync_clock.quiet_slot(timing.reconcile)  # a resync would add a reconcile of its own
    since = app.releases.recorder.mark()
    written = parse_time(app.request_sync(force=True))
    app.wait_attempts(since=since)
    wait_force_handled(app, written)
    forced = app.attempts(since=since)
    assert kinds(forced) == ["apply"], "the forced reconcile ran a dry run"
    since = app.releases.recorder.mark()
    app.request_sync()
    app.wait_attempts(since=since)
    assert kinds(app.attempts(since=since)) == ["dry-run", "apply"], (
        "the reconcile after the forced one skipped the dry run"
    )


#: UTC offsets a client may write the force annotation in: west, and east in hours and minutes
#: (the digits of its second are then another instant's).
OFFSETS = {
    "utc": None,
    "west": timedelta(hours=-5),
    "east-hours-and-minutes": timedelta(hours=5, minutes=30),
}


@pytest.mark.clause("FORCE-5.success")
@pytest.mark.parametrize("offset", sorted(OFFSETS))
def test_the_force_is_handled_with_its_own_time_not_the_sync_requests(
    releases: Releases, offset: str
) -> None:
    """Both annotations in one write, the force three seconds before the /sync (as any client
    may write them, in any UTC offset): lastHandledForceSyncAt takes the force annotation's
    instant, to the second."""
    app = applied_automatic_app(releases)
    now = datetime.now(UTC)
    forced = now - timedelta(seconds=3)
    since = app.releases.recorder.mark()
    written = rfc3339(forced, offset=OFFSETS[offset])
    app.annotate({SYNC_REQUESTED_AT: rfc3339(now), SYNC_FORCE_REQUESTED_AT: written})
    app.wait_attempts(since=since)
    wait_force_handled(app, forced)
    assert kinds(app.attempts(since=since)) == ["apply"], "the forced reconcile ran a dry run"


@pytest.mark.clause("FORCE-2.own-release")
def test_a_forced_request_skips_only_its_own_releases_dry_run(releases: Releases) -> None:
    """Two manual Releases side by side: a forced request to one, an ordinary one to the
    other at the same moment. Only the first skips its dry run."""
    forced, plain = (applied_manual_app(releases, name) for name in ("forced", "plain"))
    since = forced.releases.recorder.mark()
    request_forced_sync(forced)
    plain.request_sync(at=plain.next_pending_time())
    for app in (forced, plain):
        app.wait_content("v2")
    assert kinds(forced.attempts(since=since)) == ["apply"]
    assert kinds(plain.attempts(since=since)) == ["dry-run", "apply"], (
        "a neighbour's forced request made this Release skip its dry run"
    )


@pytest.mark.clause("FORCE-4.after-success")
def test_the_reconcile_after_a_forced_one_runs_the_dry_run_again(releases: Releases) -> None:
    app = applied_manual_app(releases)
    request_forced_sync(app)
    app.wait_for(lambda r: r["status"].get("lastHandledForceSyncAt"), "the forced reconcile")
    app.set_content("v3")
    since = app.releases.recorder.mark()
    app.request_sync(at=app.next_pending_time())
    app.wait_content("v3")
    assert kinds(app.attempts(since=since)) == ["dry-run", "apply"]


def remove_the_source(app: App) -> None:
    app.releases.core.delete_namespaced_config_map(app.source_name, app.namespace)  # no event


def give_back_the_source(app: App) -> None:
    app.set_content("v2")  # no event: the backoff retry renders it


VALUES, CLUSTER, SECRET = "web-values", "target", "target-kubeconfig"


def values_spec(releases: Releases) -> Obj:
    """The Release reads its values from a ConfigMap, there from the start."""
    give_back_the_values(App(releases, "web"))
    return {"values": {"configMapRef": {"name": VALUES}}}


def remove_the_values(app: App) -> None:
    app.releases.core.delete_namespaced_config_map(VALUES, app.namespace)  # no event


def give_back_the_values(app: App) -> None:
    body = {"metadata": {"name": VALUES}, "data": {"greeting": "hello"}}
    app.releases.core.create_namespaced_config_map(app.namespace, body)


def cluster_spec(releases: Releases) -> Obj:
    """The Release targets a Cluster with an empty spec: the controller's own cluster."""
    releases.cluster(CLUSTER)
    return {"clusterRef": {"name": CLUSTER}}


def lose_the_kubeconfig(app: App) -> None:
    """The Cluster names a kubeconfig Secret that does not exist: ClusterNotReady (a change
    of the Cluster is no event of the Release)."""
    app.releases.patch_cluster(CLUSTER, {"kubeconfigSecretRef": {"name": SECRET}})


def target_the_own_cluster(app: App) -> None:
    app.releases.patch_cluster(CLUSTER, {"kubeconfigSecretRef": None})


def no_spec(releases: Releases) -> Obj:
    return {}


@dataclass(frozen=True)
class ForcedFailure:
    """A failure of a forced reconcile: caused with no event that starts a reconcile, ended
    by `fix` (None: it stays); `attempts` from the forced request on: the forced apply (none
    where the render failed), then the retry's dry run and apply. `spec`: the Release's other
    fields, and what they need in place first."""

    fail: Callable[[App], object]
    fix: Callable[[App], object] | None
    attempts: list[str]
    spec: Callable[[Releases], Obj] = no_spec


RENDER_FAILED = ["dry-run", "apply"]
FAILURES = {
    "DeployFailed": ForcedFailure(App.deny_applies, None, ["apply", "dry-run", "apply"]),
    "SourceNotReady": ForcedFailure(remove_the_source, give_back_the_source, RENDER_FAILED),
    "ValuesNotReady": ForcedFailure(
        remove_the_values, give_back_the_values, RENDER_FAILED, values_spec
    ),
    "ClusterNotReady": ForcedFailure(
        lose_the_kubeconfig, target_the_own_cluster, RENDER_FAILED, cluster_spec
    ),
}
#: The forced reconcile's retry comes this long after it: its writes are over by then.
FIRST_RETRY = 2.0


@pytest.mark.clause("FORCE-4.after-failure", "FORCE-5.failure")
@pytest.mark.parametrize("reason", sorted(FAILURES))
def test_a_failed_forced_reconcile_is_handled_and_its_retry_runs_the_dry_run(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, reason: str
) -> None:
    """The forced reconcile fails at its apply (DeployFailed) or before it, its render not
    made (the source, the values or the Cluster not ready): that reconcile itself writes
    lastHandledForceSyncAt, not its retry, and the retry that follows is no forced one."""
    failure = FAILURES[reason]
    policy = {"retryBackoff": {"initial": f"{FIRST_RETRY:g}s"}}
    app = applied_manual_app(releases, sync_policy=policy, **failure.spec(releases))
    resync_clock.quiet_slot(timing.reconcile + FIRST_RETRY)  # a resync adds a reconcile
    failure.fail(app)
    since = app.releases.recorder.mark()
    written = request_forced_sync(app)
    app.wait_applied("False", reason)
    ended = app.reconcile_end(since, calm=FIRST_RETRY / 2)
    wait_force_handled(app, written)
    handled_at = next(w.at for w in app.status_writes(since=since) if handles(w, written))
    assert handled_at <= ended, (
        f"FORCE-5.failure: lastHandledForceSyncAt was written {handled_at - ended:.2f} s after "
        f"the forced reconcile that failed ({reason}) ended, by a later reconcile; expected: "
        "by the forced reconcile itself"
    )
    if failure.fix is not None:
        failure.fix(app)
    expected = failure.attempts
    app.wait_attempts(count=expected.count("apply"), since=since)
    assert kinds(app.attempts(since=since))[: len(expected)] == expected, (
        f"FORCE-4.after-failure: after a forced reconcile that failed ({reason}) expected "
        f"the attempts {expected}"
    )


def handles(write: Attempt, forced: datetime) -> bool:
    """Does this status write record the forced request as handled?"""
    text = (write.status or {}).get("lastHandledForceSyncAt")
    return isinstance(text, str) and same_second(parse_time(text), forced)


#: A preApply hook whose Widget reports nothing until the test makes it Healthy.
HOOK = "migrate"


def unpin_and_request(app: App) -> None:
    app.annotate({PIN: None})
    app.request_sync(at=app.next_pending_time())


def add_a_hook(app: App) -> None:
    app.annotate({LIFECYCLE: json.dumps(widgets.pre_apply_hook(HOOK))})  # no event


def complete_the_hook(app: App) -> None:
    widgets.set_health(app, HOOK, "Healthy")  # the observer's /sync follows


#: A hold a forced reconcile meets: how to make it, and how to end it with a reconcile.
HOLDS = {
    "Pinned": (App.pin_nowhere, unpin_and_request),
    "WaitingForHooks": (add_a_hook, complete_the_hook),
}


@pytest.mark.clause("FORCE-4.after-wait", "FORCE-5.wait")
@pytest.mark.parametrize("hold", sorted(HOLDS))
def test_a_forced_reconcile_that_waits_is_handled_and_the_next_one_runs_the_dry_run(
    releases: Releases, hold: str
) -> None:
    """A pin, or hooks to wait for, hold also a forced reconcile (the rollback hold is the
    one force skips); the reconcile that ends the hold is no forced one."""
    make, end = HOLDS[hold]
    app = applied_manual_app(releases)
    make(app)
    written = request_forced_sync(app)
    app.wait_applied("False", hold)
    wait_force_handled(app, written)
    since = app.releases.recorder.mark()
    end(app)
    app.wait_content("v2")
    assert kinds(app.attempts(since=since)) == ["dry-run", "apply"], (
        "the reconcile after a forced one that waited skipped the dry run"
    )


@pytest.mark.clause("FORCE-1.written")
def test_post_sync_force_also_writes_sync_force_requested_at_in_the_same_update(
    releases: Releases,
) -> None:
    app = releases.app("web")
    before = app.get()
    answer = subresources.post_sync(app, force="true")
    until = answer.body["metadata"]["resourceVersion"]
    _, after = subresources.update_changing(app, before, until, SYNC_FORCE_REQUESTED_AT)
    written = subresources.annotations_of(after)
    assert written[SYNC_FORCE_REQUESTED_AT] == written.get(SYNC_REQUESTED_AT), written


@pytest.mark.clause("FORCE-1.not-without-force")
@pytest.mark.parametrize("force", [None, "false"], ids=["no-force", "force-false"])
def test_post_sync_without_force_writes_no_force_annotation(
    releases: Releases, force: str | None
) -> None:
    app = releases.app("web")
    subresources.post_sync(app, force=force)
    written = subresources.annotations_of(app.get())
    assert SYNC_REQUESTED_AT in written and SYNC_FORCE_REQUESTED_AT not in written, written


@pytest.mark.clause("FORCE-6.post")
def test_kubectl_convoy_release_sync_force_sends_the_forced_post(
    releases: Releases, cluster: Cluster
) -> None:
    app = applied_manual_app(releases)
    done = subresources.kubectl_convoy(
        cluster.kubeconfig, app.namespace, "release", "sync", app.name, "--force"
    )
    assert done.returncode == 0, done.stderr
    written = subresources.annotations_of(app.get())
    assert written[SYNC_FORCE_REQUESTED_AT] == written[SYNC_REQUESTED_AT]


@pytest.mark.parametrize(
    "ended",
    [
        case("Failed", "Failed", "FORCE-3.Failed"),
        case("RolledBack", "RolledBack", "FORCE-3.RolledBack"),
        case("Succeeded", "Succeeded", "FORCE-3.Succeeded"),
        case("Progressing", "Progressing", "FORCE-3.Progressing"),
    ],
)
def test_a_forced_sync_starts_a_new_progressing_rollout_whatever_the_last_one(
    releases: Releases, timing: Timing, ended: str
) -> None:
    """A rollout that is to succeed, or to stay Progressing, gets a healthTimeout no loaded
    machine reaches (it must not fail before its Widget's health is seen); one that is to fail
    or roll back, a short one. "Progressing" is the rollout in flight: its Widget never
    reports."""
    short, long = "2s", "1h"
    failure = {"action": "Rollback" if ended == "RolledBack" else "Halt"}
    app = releases.app(
        "web",
        sync_policy=AUTOMATIC,
        extra=[widgets.widget("worker")],
        failurePolicy={**failure, "healthTimeout": short if ended == "Failed" else long},
    )
    if ended in ("Succeeded", "RolledBack"):  # a successful render: to end, or roll back to
        widgets.set_health(app, "worker", "Healthy")
        app.wait_rollout("Succeeded")
    if ended == "RolledBack":  # a new render that never turns Healthy, with the short timeout
        app.patch({"spec": {"failurePolicy": {**failure, "healthTimeout": short}}})
        app.set_content("v2", extra=[widgets.widget("worker", version=2)])
        app.request_sync()
    last = app.wait_rollout(ended, timeout=2 + timing.slack(2) + timing.reconcile)
    if ended == "Succeeded":  # so that the new rollout cannot succeed at once
        widgets.set_health(app, "worker", "Progressing")
        app.wait_for(lambda r: condition_status(r, "Healthy") == "False", "Healthy=False")
    app.request_sync()  # an ordinary request starts no new rollout
    app.holds_for(
        lambda r: r["status"]["rollout"] == last,
        f"the {ended} rollout after a /sync without force",
        timing.quiet,
    )
    subresources.post_sync(app, force="true")
    started = app.wait_for(
        lambda r: (r["status"].get("rollout") or {}).get("startedAt") != last["startedAt"],
        "a new rollout",
    )["status"]["rollout"]
    assert started["phase"] == "Progressing", started
