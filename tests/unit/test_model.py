"""The sync-policy model, exactly: each rule of the document as the model predicts it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conformance.document.model import Due, ReleaseModel, RetryBackoff

T0 = datetime(2026, 12, 1, 12, 0, 30, 250000, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def created(**spec: object) -> ReleaseModel:
    model = ReleaseModel(**spec)  # type: ignore[arg-type]
    assert model.create()
    return model


def synced_manual(**spec: object) -> ReleaseModel:
    """A manual Release whose first request (T0) was applied; render v2 waits."""
    model = created(**spec)
    model.request_sync(T0)
    model.reconcile()
    model.edit_source("v2")
    return model


# -- mode --------------------------------------------------------------------------------------


def test_manual_mode_without_a_request_applies_nothing_and_waits_for_sync() -> None:
    first = created().reconcile()
    assert (first.dry_run, first.apply, first.applied, first.reason) == (
        False,
        False,
        "False",
        "WaitingForSync",
    )


def test_manual_mode_in_sync_says_applied_and_applies_nothing() -> None:
    model = created()
    model.request_sync(T0)
    model.reconcile()
    again = model.reconcile()
    assert (again.apply, again.applied, again.reason) == (False, "True", "Applied")


def test_automatic_mode_applies_the_whole_render_at_every_reconcile() -> None:
    model = created(automatic=True)
    for _ in range(3):
        prediction = model.reconcile()
        assert (prediction.dry_run, prediction.apply, prediction.reason) == (True, True, "Applied")
    assert model.last_handled_sync is None, "automatic mode does not use lastHandledSyncAt"


# -- /sync -------------------------------------------------------------------------------------


def test_a_pending_request_is_applied_and_handled_at_its_second() -> None:
    model = synced_manual()
    model.request_sync(at(5))
    applied = model.reconcile()
    assert (applied.dry_run, applied.apply, applied.reason) == (True, True, "Applied")
    assert applied.last_handled_sync == at(5).replace(microsecond=0)


@pytest.mark.parametrize(
    ("later", "pending"),
    [(0.7, False), (-3, False), (0.75, True), (1, True)],
    ids=["same-second", "earlier", "next-second", "a-second-later"],
)
def test_a_request_is_pending_only_when_its_second_is_later(later: float, pending: bool) -> None:
    """T0 is 30.25 s past the minute: +0.7 s is still second 30, +0.75 s is second 31."""
    model = synced_manual()
    model.request_sync(at(later))
    assert model.sync_pending is pending
    assert model.reconcile().apply is pending


def test_a_failed_apply_leaves_the_request_pending_and_the_next_reconcile_retries() -> None:
    model = synced_manual()
    model.refuse_applies(True)
    model.request_sync(at(5))
    failed = model.reconcile()
    assert (failed.apply, failed.applied, failed.reason) == (True, "False", "DeployFailed")
    assert failed.last_handled_sync == T0.replace(microsecond=0)
    model.refuse_applies(False)
    assert model.reconcile().last_handled_sync == at(5).replace(microsecond=0)


# -- force -------------------------------------------------------------------------------------


def test_a_forced_request_skips_the_dry_run_for_one_reconcile_even_when_it_fails() -> None:
    model = synced_manual()
    model.refuse_applies(True)
    model.request_sync(at(5), force=True)
    forced = model.reconcile()
    assert (forced.dry_run, forced.apply, forced.reason) == (False, True, "DeployFailed")
    assert forced.last_handled_force == at(5).replace(microsecond=0)
    retry = model.reconcile()
    assert (retry.dry_run, retry.apply) == (True, True), "the force lasted one reconcile"


def test_a_forced_request_on_a_pinned_release_is_handled_and_applies_nothing() -> None:
    model = synced_manual()
    model.write_pin("v1", at(2))
    model.request_sync(at(5), force=True)
    held = model.reconcile()
    assert (held.dry_run, held.apply, held.reason) == (False, False, "Pinned")
    assert held.last_handled_force == at(5).replace(microsecond=0)


@pytest.mark.parametrize("force", [False, True])
def test_a_request_that_waits_for_hooks_stays_pending_until_the_observers_sync(
    force: bool,
) -> None:
    """The batch comes after the dry run and before the apply: the wait is a hold that leaves
    lastHandledSyncAt as it was (a forced request is handled all the same); the batch turning
    Healthy starts nothing itself, and the observer's /sync applies the render."""
    model = synced_manual()
    model.failures = 2
    assert not model.write_lifecycle(waiting=True), "an annotation through the main resource"
    model.request_sync(at(5), force=force)
    waiting = model.reconcile()
    assert (waiting.dry_run, waiting.apply) == (not force, False)
    assert (waiting.applied, waiting.reason) == ("False", "WaitingForHooks")
    assert waiting.last_handled_sync == T0.replace(microsecond=0) and model.sync_pending
    assert waiting.last_handled_force == (at(5).replace(microsecond=0) if force else None)
    assert model.failures == 0, "a hold resets the count"
    assert not model.hook_batch_healthy()
    assert model.request_sync(at(9))
    applied = model.reconcile()
    assert (applied.dry_run, applied.apply, applied.reason) == (True, True, "Applied")
    assert applied.last_handled_sync == at(9).replace(microsecond=0)


# -- triggers ----------------------------------------------------------------------------------


def test_what_starts_a_reconcile() -> None:
    model = synced_manual()
    assert model.edit_spec(interval=30.0)
    assert not model.edit_source("v3")
    assert not model.edit_other_metadata()
    assert model.request_sync(at(5))
    assert not model.request_sync(at(5)), "the annotation did not change"
    assert model.write_pin("v3", at(6))
    assert model.remove_sync_request() and not model.remove_sync_request()
    assert model.resync() and model.restart()


# -- requeue, interval, backoff ----------------------------------------------------------------


@pytest.mark.parametrize(("interval", "periodic"), [(None, None), (0.0, None), (2.3, 2.3)])
def test_the_periodic_reconcile_comes_every_interval_and_never_without_one(
    interval: float | None, periodic: float | None
) -> None:
    assert created(interval=interval).reconcile().due == Due(periodic=periodic)


@pytest.mark.parametrize(
    ("backoff", "ladder"),
    [
        (RetryBackoff(1.0, 2.0), [1, 2, 4, 8]),
        (RetryBackoff(0.5, 3.0), [0.5, 1.5, 4.5, 13.5]),
        (RetryBackoff(1.0, 0.5), [1, 2, 4, 8]),
        (RetryBackoff(1.0, None), [1, 2, 4, 8]),
        (RetryBackoff(1.5, 1.0), [1.5, 1.5, 1.5, 1.5]),
        (RetryBackoff(1.0, 2.0, 3.0), [1, 2, 3, 3]),
        (RetryBackoff(5.0, 2.0, 2.0), [2, 2, 2, 2]),
        (RetryBackoff(), [0.005, 0.01, 0.02, 0.04]),
    ],
    ids=["doubling", "x3", "below-1", "unset", "exactly-1", "max", "max-below-initial", "none"],
)
def test_each_retry_waits_initial_times_factor_to_the_n_minus_1_up_to_max(
    backoff: RetryBackoff, ladder: list[float]
) -> None:
    model = created(automatic=True, backoff=backoff)
    model.refuse_applies(True)
    assert [model.reconcile().due.requeue for _ in ladder] == pytest.approx(ladder)


def test_the_default_limiter_and_an_unset_max_cap_at_1000_seconds() -> None:
    assert RetryBackoff().delay(19) == 1000.0 and RetryBackoff().delay(18) < 1000.0
    assert RetryBackoff(1.0, 2.0).delay(11) == 1000.0 and RetryBackoff(1.0, 2.0).delay(10) == 512


@pytest.mark.parametrize("reset", ["success", "pin", "restart", "waiting-for-sync"])
def test_a_success_a_hold_or_a_restart_resets_the_failure_count(reset: str) -> None:
    model = synced_manual(backoff=RetryBackoff(1.0, 2.0))
    model.refuse_applies(True)
    model.request_sync(at(5))
    assert [model.reconcile().due.requeue for _ in range(3)] == [1, 2, 4]
    if reset == "success":
        model.refuse_applies(False)
        assert model.reconcile().reason == "Applied"
        model.refuse_applies(True)
        model.request_sync(at(10))
    elif reset == "pin":
        model.write_pin("v1", at(6))
        assert model.reconcile().reason == "Pinned"
        model.write_pin(None, at(7))
    elif reset == "restart":
        assert model.restart()
    else:
        assert model.remove_sync_request()
        assert model.reconcile().reason == "WaitingForSync"
        model.request_sync(at(10))
    assert model.reconcile().due.requeue == 1


def test_holds_and_successes_are_not_retried_only_reconciled_periodically() -> None:
    model = created(interval=5.0)
    held = model.reconcile()
    assert held.reason == "WaitingForSync" and held.due == Due(requeue=None, periodic=5.0)


def test_a_spec_edit_that_changes_nothing_starts_no_reconcile() -> None:
    model = ReleaseModel(automatic=True, backoff=RetryBackoff(1.0, 0.5))
    assert not model.edit_spec(automatic=True, backoff=RetryBackoff(1.0, 0.5))
    assert model.edit_spec(backoff=RetryBackoff(1.0))
