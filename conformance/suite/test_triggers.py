"""What starts a reconcile, and what must not.

An automatic Release applies at every reconcile, so each apply attempt the witness records is a
reconcile. Checks that nothing starts one run in a quiet period clear of resync ticks.
"""

from __future__ import annotations

import json

import pytest

from conformance import subresources, widgets
from conformance.releases import GROUP, SYNC_REQUESTED_AT, App, Releases, condition
from conformance.resync import ResyncClock
from conformance.timing import Timing

AUTOMATIC = {"automatic": True}


def applied_automatic_app(releases: Releases) -> App:
    app = releases.app("web", sync_policy=AUTOMATIC)
    app.wait_applied("True", "Applied")
    return app


def assert_no_reconcile(app: App, resync_clock: ResyncClock, timing: Timing, change, what: str):
    """Make `change`, then watch a quiet period: no apply attempt may follow."""
    resync_clock.quiet_slot(timing.quiet)
    since = app.releases.recorder.mark()
    change()
    seen = app.quiet(timing.quiet, since=since)
    assert seen == [], f"{what} started a reconcile: {[a.describe() for a in seen]}"
    print(f"no reconcile in the {timing.quiet:g} s after {what}")


@pytest.mark.rule("TRIG-1")
@pytest.mark.parametrize("sync_policy", [AUTOMATIC, None], ids=["automatic", "manual"])
def test_creating_a_release_starts_a_reconcile(releases: Releases, sync_policy) -> None:
    app = releases.app("web", sync_policy=sync_policy)
    if sync_policy:
        app.wait_attempts()
    else:
        app.wait_applied("False", "WaitingForSync")


@pytest.mark.rule("TRIG-2")
def test_a_spec_change_changes_the_generation_and_starts_a_reconcile(releases: Releases) -> None:
    app = applied_automatic_app(releases)
    before = app.get()["metadata"]["generation"]
    since = app.releases.recorder.mark()
    app.patch({"spec": {"syncPolicy": {"automatic": True, "interval": "0s"}}})
    assert app.get()["metadata"]["generation"] == before + 1
    app.wait_attempts(since=since)


@pytest.mark.rule("TRIG-2", "TRIG-3")
@pytest.mark.parametrize(
    "change",
    [
        {"metadata": {"labels": {"team": "payments"}}},
        {"metadata": {"annotations": {"example.com/owner": "payments"}}},
    ],
    ids=["label", "other-annotation"],
)
def test_labels_and_other_annotations_change_no_generation_and_start_no_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, change: dict
) -> None:
    app = applied_automatic_app(releases)
    before = app.get()["metadata"]["generation"]
    assert_no_reconcile(app, resync_clock, timing, lambda: app.patch(change), str(change))
    assert app.get()["metadata"]["generation"] == before


@pytest.mark.rule("TRIG-8", "TRIG-2")
def test_a_status_write_changes_no_generation_and_starts_no_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    app = applied_automatic_app(releases)
    before = app.get()["metadata"]["generation"]
    foreign = {
        "type": "ExampleCheck",
        "status": "True",
        "reason": "Example",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    conditions = [*app.status()["conditions"], foreign]

    def write_status() -> None:
        app.patch({"status": {"conditions": conditions}}, subresource="status")

    assert_no_reconcile(app, resync_clock, timing, write_status, "a status write")
    assert app.get()["metadata"]["generation"] == before


@pytest.mark.rule("TRIG-8")
def test_the_controllers_own_status_writes_do_not_loop(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    resync_clock.quiet_slot(timing.quiet + timing.reconcile)
    app = applied_automatic_app(releases)  # the controller wrote status at least once
    since = app.attempts(dry_run=False)[-1].at + 1e-6
    seen = app.quiet(timing.quiet, since=since, dry_run=False)
    assert seen == [], f"the controller reconciled again after its own status write: {seen}"


@pytest.mark.rule("TRIG-4")
def test_the_informer_resync_reconciles_at_its_period(releases: Releases, timing: Timing) -> None:
    period = timing.controller_resync
    app = applied_automatic_app(releases)
    created = app.attempts(dry_run=False)[-1].at
    ticks = [a.at for a in app.wait_attempts(count=3, timeout=2 * period + timing.slack(period))]
    gap = ticks[2] - ticks[1]
    print(
        f"resync ticks {ticks[1] - created:.2f} s and {ticks[2] - created:.2f} s after "
        f"creation: period {gap:.2f} s (configured {period:g} s)"
    )
    assert abs(gap - period) <= timing.slack(period)


@pytest.mark.rule("TRIG-10")
@pytest.mark.parametrize(("subresource", "body"), [("mutations", []), ("lifecycle", {})])
def test_a_write_through_mutations_or_lifecycle_starts_a_reconcile_at_once(
    releases: Releases, subresource: str, body: object
) -> None:
    app = applied_automatic_app(releases)
    since = app.releases.recorder.mark()
    subresources.put(app, subresource, body)
    attempt = app.wait_attempts(since=since)[0]
    print(f"apply attempt {attempt.at - since:.3f} s after the write to /{subresource}")


@pytest.mark.rule("TRIG-6")
def test_new_health_data_in_the_inventory_starts_a_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    app = releases.app("web", sync_policy=AUTOMATIC, extra=[widgets.widget("worker")])
    widgets.set_health(app, "worker", "Healthy")
    app.wait_for(lambda r: (condition(r, "Healthy") or {}).get("status") == "True", "Healthy")
    app.settle()  # the observer's /sync for the Healthy render was handled, and nothing runs
    resync_clock.quiet_slot(timing.reconcile)
    requested = subresources.annotations(app.get()).get(SYNC_REQUESTED_AT)
    since = app.releases.recorder.mark()
    widgets.set_health(app, "worker", "Degraded")  # the observer writes new health data
    app.wait_attempts(since=since)
    app.wait_for(
        lambda r: (condition(r, "Healthy") or {}).get("status") == "False",
        "Healthy=False after the reconcile",
    )
    assert subresources.annotations(app.get()).get(SYNC_REQUESTED_AT) == requested, (
        "the reconcile came from a /sync, not from the inventory"
    )


def wave_app(releases: Releases, name: str, wave: int, **spec) -> App:
    return releases.app(name, sync_policy=AUTOMATIC, wave=wave, **spec)


@pytest.mark.rule("TRIG-7")
def test_a_lower_wave_condition_change_reconciles_higher_waves_of_the_same_cluster_only(
    releases: Releases, resync_clock: ResyncClock, timing: Timing
) -> None:
    releases.cluster("elsewhere")
    low = wave_app(releases, "low", 0, extra=[widgets.widget("worker")])
    high = wave_app(releases, "high", 1)
    other = wave_app(releases, "other", 1, clusterRef={"name": "elsewhere"})
    widgets.set_health(low, "worker", "Healthy")
    for app in (low, high, other):
        app.wait_applied("True", "Applied")
    resync_clock.quiet_slot(timing.quiet)
    since = low.releases.recorder.mark()
    widgets.set_health(low, "worker", "Degraded")  # low: Healthy True -> False
    high.wait_applied("False", "WaitingForWave")
    seen = other.quiet(timing.quiet, since=since)
    assert seen == [], "a condition change on another Cluster started a reconcile"


@pytest.mark.rule("TRIG-9", "TRIG-2")
@pytest.mark.parametrize("field", ["mutations", "lifecycle"])
def test_mutations_or_lifecycle_through_the_main_resource_wait_for_the_periodic_reconcile(
    releases: Releases, resync_clock: ResyncClock, timing: Timing, field: str
) -> None:
    app = applied_automatic_app(releases)
    generation = app.get()["metadata"]["generation"]
    value, effect = CHANGES[field](app)
    annotate = lambda: app.annotate({f"{GROUP}/{field}": json.dumps(value)})  # noqa: E731
    assert_no_reconcile(app, resync_clock, timing, annotate, f"the {field} annotation")
    assert app.get()["metadata"]["generation"] == generation
    period = timing.controller_resync  # the informer resync is the periodic reconcile here
    app.wait_for(lambda _: effect(), f"the {field} used", period + timing.slack(period))


def _mutation(app: App):
    patch = [
        {
            "target": {"apiVersion": "v1", "kind": "ConfigMap", "name": app.object_name},
            "patch": {"data": {"content": "mutated"}},
        }
    ]
    return patch, lambda: app.live_object()["data"] == {"content": "mutated"}


def _lifecycle(app: App):
    hooks = {"preApply": [[widgets.widget("migrate")]]}
    return hooks, lambda: widgets.exists(app, "migrate")


CHANGES = {"mutations": _mutation, "lifecycle": _lifecycle}
