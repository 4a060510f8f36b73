"""The cases the model-based run aims for (conformance.document.model_goals): each goal is
reached by the model's steps that show it and by no other, and the CI profile's seed reaches
them all, checked by rehearsal on the model alone (the draws never read the cluster)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conformance.document.model import Due, Prediction, ReleaseModel, RetryBackoff
from conformance.document.model_goals import (
    GOALS,
    HOLD_GOAL,
    OBSERVER_GOALS,
    PERIODIC_GOALS,
    REMOVED_GOAL,
    REQUEST_GOALS,
    Goals,
    ladder_goal,
)
from conformance.document.model_profiles import CI_SEED, SHARDS, Profile
from conformance.harness.model_based import BACKOFF_NAMES, BACKOFFS, Rehearsal, Sequence, rehearse

HANDLED = datetime(2026, 12, 4, 10, 0, 0, tzinfo=UTC)


def cause(
    sequence: Sequence, event: str, *args: object, refused: int = 0, **kwargs: object
) -> None:
    """A step of the rehearsed sequence: `event` on its model, the first `refused` applies
    refused, the reconciles it starts and their retries predicted as the run predicts them."""
    sequence.step(
        event,
        lambda model: getattr(model, event)(*args, **kwargs),
        lambda _: None,  # a rehearsal acts on no cluster
        refused=refused,
    )


def manual_with_a_handled_request() -> Sequence:
    model = ReleaseModel(last_handled_sync=HANDLED, sync_requested_at=HANDLED, exists=True)
    model.last_successful = model.render
    return Rehearsal().sequence("web", model)


@pytest.mark.parametrize(
    ("seconds", "case"),
    [(-5.6, "earlier"), (0.4, "same"), (0.999, "same"), (1.4, "next"), (2.4, None)],
)
def test_a_manual_request_reaches_the_goal_of_its_second_against_the_handled_one(
    seconds: float, case: str | None
) -> None:
    sequence = manual_with_a_handled_request()
    cause(sequence, "request_sync", HANDLED + timedelta(seconds=seconds))
    assert sequence.run.goals.reached == ({REQUEST_GOALS[case]} if case else set())


def test_a_forced_request_or_one_in_automatic_mode_reaches_no_request_goal() -> None:
    sequence = manual_with_a_handled_request()
    cause(sequence, "request_sync", HANDLED + timedelta(seconds=1.4), force=True)
    sequence.model.automatic = True
    cause(sequence, "request_sync", HANDLED + timedelta(seconds=0.4))
    assert not sequence.run.goals.reached


def test_a_removed_request_reaches_its_goal_only_where_its_reconcile_shows() -> None:
    sequence = manual_with_a_handled_request()
    cause(sequence, "resync")  # in sync: the Release shows Applied
    cause(sequence, "remove_sync_request")  # and shows it again
    assert REMOVED_GOAL not in sequence.run.goals.reached
    sequence.model.sync_requested_at = HANDLED
    cause(sequence, "edit_source", "v2")  # no reconcile: the Release still shows Applied
    cause(sequence, "remove_sync_request")  # now WaitingForSync
    assert sequence.run.goals.reached == {REMOVED_GOAL}


def test_a_removal_that_reconciles_an_automatic_release_reaches_its_goal() -> None:
    model = ReleaseModel(automatic=True, sync_requested_at=HANDLED)
    sequence = Rehearsal().sequence("web", model)
    cause(sequence, "remove_sync_request")
    assert sequence.run.goals.reached == {REMOVED_GOAL}


@pytest.mark.parametrize(("automatic", "applied"), [(True, "v2"), (False, "v1")])
def test_a_new_render_under_an_interval_reaches_the_goal_of_its_mode(
    automatic: bool, applied: str
) -> None:
    sequence = manual_with_a_handled_request()
    sequence.model.automatic = automatic
    sequence.periodic_render("3500ms", "v2", "0s")
    assert sequence.run.goals.reached == {PERIODIC_GOALS[automatic]}
    model = sequence.model
    assert (model.last_successful, model.render, model.periodic) == (applied, "v2-after", None)
    assert sequence.shown is not None
    assert (sequence.shown.applied, sequence.shown.reason) == (
        ("True", "Applied") if automatic else ("False", "WaitingForSync")
    )


@pytest.mark.parametrize(
    ("automatic", "newer", "goal"),
    [(True, None, "automatic"), (False, "v3", "manual"), (False, None, None)],
)
def test_a_render_turning_healthy_reaches_the_goal_of_its_mode(
    automatic: bool, newer: str | None, goal: str | None
) -> None:
    """The observer's /sync applies the newest render in either mode; in manual mode only a
    newer render written meanwhile reaches the goal (its /sync applies what no one asked)."""
    sequence = manual_with_a_handled_request()
    assert isinstance(sequence.run, Rehearsal)
    sequence.run.clock = HANDLED  # the observer's /sync comes a step after the request
    sequence.model.automatic = automatic
    sequence.render_turning_healthy("v2", newer)
    assert sequence.run.goals.reached == ({OBSERVER_GOALS[goal]} if goal else set())
    assert sequence.model.last_successful == (newer or "v2")
    assert sequence.healthy_widget == f"worker-{sequence.run.sequences}-v2"
    sequence.healthy_again()
    assert OBSERVER_GOALS["again"] in sequence.run.goals.reached


@pytest.mark.parametrize(("name", "retries"), [("1s-x0.5", 2), ("default", 5), ("3s-x2-max1s", 1)])
def test_a_ladder_reaches_its_goal_at_the_retries_its_curve_needs(name: str, retries: int) -> None:
    sequence = manual_with_a_handled_request()
    sequence.model.backoff = BACKOFFS[name]
    at = HANDLED + timedelta(seconds=10)
    cause(sequence, "request_sync", at, refused=retries - 1)
    assert ladder_goal(name) not in sequence.run.goals.reached
    cause(sequence, "request_sync", at + timedelta(seconds=10), refused=retries)
    assert ladder_goal(name) in sequence.run.goals.reached


@pytest.mark.parametrize(
    ("backoff", "reached"),
    [(RetryBackoff(1.0, 2.0), True), (RetryBackoff(1.0, 1.0), False)],
)
def test_the_hold_goal_needs_a_waiting_for_sync_hold_between_failures_and_distinct_delays(
    backoff: RetryBackoff, reached: bool
) -> None:
    goals = Goals(BACKOFF_NAMES)
    goals.observe_reconcile(0, _prediction("DeployFailed"), backoff)
    goals.observe_reconcile(1, _prediction("WaitingForSync"), backoff)
    goals.observe_reconcile(0, _prediction("DeployFailed"), backoff)
    assert (HOLD_GOAL in goals.reached) is reached


def test_a_restart_between_the_hold_and_the_failure_forgets_the_count() -> None:
    goals, backoff = Goals(BACKOFF_NAMES), RetryBackoff(1.0, 2.0)
    goals.observe_reconcile(1, _prediction("WaitingForSync"), backoff)
    goals.count_from_zero()
    goals.observe_reconcile(0, _prediction("DeployFailed"), backoff)
    assert HOLD_GOAL not in goals.reached


@pytest.mark.parametrize("profile", ["ci", "kill"])
def test_the_ci_seed_reaches_every_goal_where_the_run_restarts_its_own_controller(
    profile: str,
) -> None:
    reached: set[str] = set()
    for shard in range(SHARDS):
        reached |= rehearse(Profile(profile, CI_SEED, shard)).goals.reached
    missed = [goal for goal in GOALS if goal not in reached]
    assert not missed, (
        f"CI seed {CI_SEED} no longer reaches {missed}: the generator changed what it draws; "
        "choose a CI_SEED whose rehearsal (conformance.harness.model_based.rehearse) reaches "
        "them all"
    )


def _prediction(reason: str) -> Prediction:
    """A reconcile's outcome as the goals read it: a refused apply, or a hold."""
    return Prediction(
        dry_run=False,
        apply=reason == "DeployFailed",
        applied="False",
        reason=reason,
        last_handled_sync=None,
        last_handled_force=None,
        due=Due(),
    )
