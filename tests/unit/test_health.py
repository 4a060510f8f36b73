"""Health assessment of one object, of a render, and the Healthy condition (pure logic)."""

from __future__ import annotations

import pytest

from convoy.health import Health, assess_object, healthy_condition, render_health

WIDGET = "testing.convoy.kumodo.io/v1"
REF = "sha256:" + "a" * 64


def widget(*conditions: dict, generation: int = 2, observed: int | None = 2) -> dict:
    status: dict = {"conditions": list(conditions)}
    if observed is not None:
        status["observedGeneration"] = observed
    return {
        "apiVersion": WIDGET,
        "kind": "Widget",
        "metadata": {"name": "w", "generation": generation},
        "status": status,
    }


def ready(status: str = "True", reason: str = "") -> dict:
    return {"type": "Ready", "status": status, "reason": reason}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (widget(ready()), Health.HEALTHY),
        (widget(ready(), observed=1), Health.PROGRESSING),
        (widget(ready(), observed=None), Health.PROGRESSING),
        (widget(), Health.PROGRESSING),
        (widget(ready("False", "Installing")), Health.PROGRESSING),
        (widget(ready("False", "InstallFailed")), Health.DEGRADED),
        (widget(ready(), {"type": "Stalled", "status": "True"}), Health.DEGRADED),
        (widget(ready("Unknown")), Health.PROGRESSING),
        (None, Health.MISSING),
    ],
    ids=[
        "ready",
        "ready-for-older-generation",
        "ready-without-observed-generation",
        "no-conditions",
        "not-ready",
        "ready-false-failed",
        "stalled",
        "ready-unknown",
        "missing",
    ],
)
def test_custom_resource_health(obj: dict | None, expected: Health) -> None:
    assert assess_object(obj, WIDGET).health == expected


def test_built_in_kinds_without_status_are_healthy_once_they_exist() -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert assess_object(config_map, "v1").health == Health.HEALTHY
    assert assess_object(None, "v1").health == Health.MISSING


def test_an_object_being_deleted_is_progressing() -> None:
    obj = widget(ready())
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert assess_object(obj, WIDGET).health == Health.PROGRESSING


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (
            {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2},
            Health.HEALTHY,
        ),
        (
            {"observedGeneration": 1, "updatedReplicas": 2, "availableReplicas": 1},
            Health.PROGRESSING,
        ),
        (
            {"observedGeneration": 0, "updatedReplicas": 2, "availableReplicas": 2},
            Health.PROGRESSING,
        ),
        (
            {
                "observedGeneration": 1,
                "conditions": [
                    {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
                ],
            },
            Health.DEGRADED,
        ),
    ],
    ids=["available", "unavailable", "old-generation", "deadline-exceeded"],
)
def test_deployment_follows_kstatus(status: dict, expected: Health) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "generation": 1},
        "spec": {"replicas": 2},
        "status": status,
    }
    assert assess_object(deployment, "apps/v1").health == expected


@pytest.mark.parametrize(
    ("healths", "expected"),
    [
        ([], Health.HEALTHY),
        ([Health.HEALTHY, Health.HEALTHY], Health.HEALTHY),
        ([Health.HEALTHY, Health.MISSING], Health.PROGRESSING),
        ([Health.UNKNOWN, Health.PROGRESSING], Health.PROGRESSING),
        ([Health.HEALTHY, Health.UNKNOWN], Health.UNKNOWN),
        ([Health.PROGRESSING, Health.DEGRADED, Health.UNKNOWN], Health.DEGRADED),
    ],
)
def test_render_health(healths: list[Health], expected: Health) -> None:
    assert render_health(healths) == expected


def inventory(health: str, ref: str = REF) -> dict:
    entries = [{"kind": "Widget", "name": "w", "health": health}]
    return {"status": {"renderRef": ref, "health": health, "entries": entries}}


@pytest.mark.parametrize(
    ("found", "applied", "expected"),
    [
        (inventory("Healthy"), REF, ("True", "Healthy")),
        (inventory("Progressing"), REF, ("False", "Progressing")),
        (inventory("Degraded"), REF, ("False", "Degraded")),
        (inventory("Unknown"), REF, ("Unknown", "NotAssessed")),
        (inventory("Healthy", "sha256:" + "b" * 64), REF, ("Unknown", "NotAssessed")),
        (None, REF, ("Unknown", "NotAssessed")),
        (inventory("Healthy"), None, ("Unknown", "NotAssessed")),
    ],
    ids=["healthy", "progressing", "degraded", "unknown", "other-render", "none", "unapplied"],
)
def test_healthy_condition(found: dict | None, applied: str | None, expected: tuple) -> None:
    assert healthy_condition(found, applied)[:2] == expected
