"""Cluster waves and the TRIG-6/TRIG-7 predicates (pure logic)."""

from __future__ import annotations

import pytest

from convoy import waves
from convoy.informer import Event, EventType
from convoy.triggers import inventory_trigger, wave_trigger


def release(
    name: str,
    wave: int = 0,
    *,
    applied: str = "True",
    healthy: str = "True",
    cluster: str | None = None,
    namespace: str = "ns",
) -> dict:
    spec: dict = {"wave": wave}
    if cluster:
        spec["clusterRef"] = {"name": cluster}
    conditions = [
        {"type": "Applied", "status": applied, "reason": "Applied"},
        {"type": "Healthy", "status": healthy, "reason": "Healthy"},
    ]
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}"},
        "spec": spec,
        "status": {"conditions": conditions},
    }


def names(found: list[dict]) -> list[str]:
    return sorted(r["metadata"]["name"] for r in found)


def test_a_release_waits_for_unsettled_lower_waves_on_its_cluster_only() -> None:
    me = release("me", 2)
    others = [
        me,
        release("settled", 0),
        release("unapplied", 1, applied="False"),
        release("unhealthy", 0, healthy="Unknown"),
        release("same-wave", 2, applied="False"),
        release("higher", 3, applied="False"),
        release("other-cluster", 0, applied="False", cluster="east"),
        release("other-namespace", 0, applied="False", namespace="elsewhere"),
    ]
    assert names(waves.blocking(me, others)) == ["unapplied", "unhealthy"]


def test_the_same_cluster_is_the_same_clusterref_name_or_both_unset() -> None:
    east = release("east", 1, cluster="east")
    others = [release("a", 0, applied="False", cluster="east"), release("b", 0, applied="False")]
    assert names(waves.blocking(east, others)) == ["a"]


def test_higher_and_next_waves() -> None:
    low = release("low", 0)
    others = [low, release("w1", 1), release("w1b", 1), release("w3", 3), release("w0", 0)]
    others.append(release("x", 5, cluster="east"))
    assert names(waves.higher_waves(low, others)) == ["w1", "w1b", "w3"]
    assert names(waves.next_wave(low, others)) == ["w1", "w1b"]
    assert waves.next_wave(release("top", 3), others) == []


def test_a_wave_completes_when_its_last_release_settles() -> None:
    before = release("a", 0, healthy="False")
    after = release("a", 0)
    assert waves.wave_completed(before, after, [after, release("b", 0)])
    assert not waves.wave_completed(before, after, [after, release("b", 0, applied="False")])
    assert not waves.wave_completed(after, after, [after])


def modified(old: dict, new: dict) -> Event:
    return Event(EventType.MODIFIED, old, new)


def test_only_a_condition_status_change_concerns_higher_waves() -> None:
    base = release("a")
    other_reason = release("a")
    other_reason["status"]["conditions"][0]["reason"] = "Elsewhere"
    assert wave_trigger(modified(base, release("a", healthy="False")))
    assert wave_trigger(modified(base, release("a", applied="False")))
    assert not wave_trigger(modified(base, other_reason))
    assert not wave_trigger(Event(EventType.RESYNC, base, base))
    assert not wave_trigger(Event(EventType.ADDED, None, base))


def inventory(**status: object) -> dict:
    return {"metadata": {"name": "a", "namespace": "ns"}, "status": status}


@pytest.mark.parametrize(
    ("old", "new", "starts"),
    [
        ({}, {"health": "Healthy"}, True),
        ({"health": "Progressing"}, {"health": "Healthy"}, True),
        ({"renderRef": "x"}, {"renderRef": "y"}, True),
        ({"entries": []}, {"entries": [{"name": "w"}]}, True),
        (
            {"health": "Healthy", "drift": []},
            {"health": "Healthy", "drift": [{"name": "w"}]},
            False,
        ),
        ({"assessedAt": "1"}, {"assessedAt": "2", "driftCheckedAt": "2"}, False),
    ],
    ids=["first", "health", "render", "entries", "drift", "times"],
)
def test_inventory_health_data_changes_start_a_reconcile(
    old: dict, new: dict, starts: bool
) -> None:
    event = modified(inventory(**old), inventory(**new))
    assert (inventory_trigger(event) is not None) == starts


def test_a_created_inventory_starts_no_reconcile() -> None:
    assert inventory_trigger(Event(EventType.ADDED, None, inventory(health="Healthy"))) is None
