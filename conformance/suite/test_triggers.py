"""What starts a reconcile, and what must not.

An automatic Release applies at every reconcile, so each apply attempt the witness records is a
reconcile. Checks that nothing starts one run in a quiet period clear of resync ticks.
"""

from __future__ import annotations

import pytest

from conformance.releases import App, Releases
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
