"""What the model-based run draws, checked without a cluster: the retryBackoff specs it
writes, the request times it derives from the Release's state, and each shard's seed."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from conformance.document.model import ReleaseModel, RetryBackoff
from conformance.document.model_profiles import Profile
from conformance.harness.model_based import (
    BACKOFFS,
    STEP_SECONDS,
    backoff_spec,
    carries_sync,
    request_time,
    step_seconds,
)
from conformance.observe.witness import Attempt, GroupVersionKind
from conformance.timing import Timing
from convoyapi import SYNC_REQUESTED_AT

HANDLED = datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC)


def test_a_backoff_spec_leaves_unset_fields_out_and_writes_a_whole_factor_as_an_integer() -> None:
    assert backoff_spec(RetryBackoff()) == {}
    assert backoff_spec(RetryBackoff(1.0)) == {"initial": "1000ms"}
    assert backoff_spec(RetryBackoff(1.0, 3.0, 1.5)) == {
        "initial": "1000ms",
        "factor": 3,
        "max": "1500ms",
    }
    assert type(backoff_spec(RetryBackoff(1.0, 2.0))["factor"]) is int
    assert backoff_spec(RetryBackoff(1.0, 1.9))["factor"] == 1.9


@pytest.mark.parametrize(
    ("name", "ladder"),
    [
        ("1s", [1.0, 2.0, 4.0]),  # factor unset: 2
        ("1s-x0.5", [1.0, 2.0, 4.0]),  # below 1: 2
        ("1s-x1", [1.0, 1.0, 1.0]),
        ("1s-x1.9", [1.0, 1.9, 1.9**2]),
        ("3s-x2-max1s", [1.0, 1.0, 1.0]),  # max below initial caps the first retry too
    ],
)
def test_each_drawn_backoff_climbs_the_ladder_the_document_gives(
    name: str, ladder: list[float]
) -> None:
    assert [BACKOFFS[name].delay(n) for n in (1, 2, 3)] == pytest.approx(ladder)


def test_request_times_are_relative_to_the_second_of_their_base() -> None:
    model = ReleaseModel(last_handled_sync=HANDLED)
    model.sync_requested_at = HANDLED + timedelta(seconds=7, microseconds=250_000)
    now = HANDLED + timedelta(minutes=1)
    assert request_time(model, "handled", 1.0, now) == HANDLED + timedelta(seconds=1.4)
    assert request_time(model, "requested", -5.0, now) == HANDLED + timedelta(seconds=2.4)


def test_a_base_without_a_time_counts_from_now() -> None:
    now = HANDLED + timedelta(seconds=0.75)
    assert request_time(ReleaseModel(), "handled", -5.0, now) == HANDLED - timedelta(seconds=4.6)
    assert request_time(ReleaseModel(), "now", 3.0, now) == now + timedelta(seconds=3)


def test_each_shard_draws_its_own_sequences_and_replays_alone() -> None:
    shards = [Profile.chosen("ci", None, certifying=False, shard=n) for n in range(2)]
    assert shards[0].shard_seed != shards[1].shard_seed
    assert "-k 'test_generated_event_sequences_match_the_sync_policy_model[1]'" in (
        shards[1].replay
    )


def test_a_longer_settle_period_gives_each_step_a_longer_slot() -> None:
    """A step waits for the controller to settle, so a run on a slow cluster (settle up to its
    certifying maximum) must keep resync ticks out of a longer slot; at the default, a step
    lasts what a rehearsal's clock takes it to."""
    default = Timing().settle
    longest = next(f.metadata["maximum"] for f in dataclasses.fields(Timing) if f.name == "settle")
    assert step_seconds(default) == STEP_SECONDS
    assert step_seconds(longest) - step_seconds(default) >= longest - default


def release_write(annotations: dict[str, str]) -> Attempt:
    """An update of a Release by its controller that stores `annotations`."""
    return Attempt(
        at=0.0,
        wall=HANDLED,
        uid="uid",
        operation="UPDATE",
        kind=GroupVersionKind("convoy.example.com", "v1alpha1", "Release"),
        namespace="ns",
        name="web-1",
        subresource="",
        dry_run=False,
        field_manager=None,
        user="controller",
        resource_version="1",
        annotations=annotations,
    )


def test_the_observers_sync_is_the_write_that_sets_its_instant_in_any_form() -> None:
    """Not a controller's other writes of its Release (a label, a finalizer, another time)."""
    assert carries_sync(release_write({SYNC_REQUESTED_AT: "2026-12-03T10:00:00Z"}), HANDLED)
    assert carries_sync(release_write({SYNC_REQUESTED_AT: "2026-12-03T11:00:00+01:00"}), HANDLED)
    assert not carries_sync(release_write({SYNC_REQUESTED_AT: "2026-12-03T10:00:01Z"}), HANDLED)
    assert not carries_sync(release_write({SYNC_REQUESTED_AT: "soon"}), HANDLED)
    assert not carries_sync(release_write({"example.com/note": "x"}), HANDLED)
