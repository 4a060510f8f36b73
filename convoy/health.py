"""Health assessment: of one live object, of a render, and the Release's Healthy condition.

docs/api-reference.md ("Observer and health") is the definition. Custom resources (such as the
test-only Widget) follow the Ready/Stalled convention; built-in kinds follow kstatus
(sigs.k8s.io/cli-utils/pkg/kstatus) for the kinds it knows, and are Current once they exist
otherwise. Everything here but `assess` is pure, so it is unit-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kubernetes import client
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from convoy.targets import Target, api_message

Obj = dict[str, Any]

#: API groups served by Kubernetes itself (besides every group ending in .k8s.io).
_BUILT_IN_GROUPS = frozenset({"", "apps", "batch", "autoscaling", "policy"})


class Health(StrEnum):
    HEALTHY = "Healthy"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    MISSING = "Missing"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Assessment:
    health: Health
    message: str


def is_built_in(api_version: str) -> bool:
    group = api_version.rpartition("/")[0]
    return group in _BUILT_IN_GROUPS or group.endswith(".k8s.io")


def assess_object(obj: Obj | None, api_version: str) -> Assessment:
    """The health of one live object (None: not found)."""
    if obj is None:
        return Assessment(Health.MISSING, "not found")
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return Assessment(Health.PROGRESSING, "being deleted")
    if is_built_in(api_version):
        return _kstatus(obj)
    return _custom(obj)


def assess(target: Target, ref: Obj) -> Assessment:
    """Read the object `ref` ({apiVersion, kind, namespace?, name}) and assess it."""
    try:
        resource = target.resource(ref["apiVersion"], ref["kind"])
        live = resource.get(name=ref["name"], namespace=ref.get("namespace")).to_dict()
    except (NotFoundError, ResourceNotFoundError):
        live = None
    except client.ApiException as error:
        return Assessment(Health.UNKNOWN, f"could not be read: {api_message(error)}")
    return assess_object(live, ref["apiVersion"])


def render_health(healths: Iterable[Health]) -> Health:
    """Degraded if any is; else Progressing if any is Progressing or Missing; else Unknown if any
    is; else Healthy (also for no objects at all)."""
    seen = set(healths)
    if Health.DEGRADED in seen:
        return Health.DEGRADED
    if seen & {Health.PROGRESSING, Health.MISSING}:
        return Health.PROGRESSING
    if Health.UNKNOWN in seen:
        return Health.UNKNOWN
    return Health.HEALTHY


def healthy_condition(inventory: Obj | None, applied_ref: str | None) -> tuple[str, str, str]:
    """(status, reason, message) of the Release's Healthy condition, from its inventory."""
    status = (inventory or {}).get("status") or {}
    if not applied_ref:
        return "Unknown", "NotAssessed", "nothing applied yet"
    if status.get("renderRef") != applied_ref or not status.get("health"):
        return "Unknown", "NotAssessed", f"render {applied_ref} not assessed yet"
    health = status["health"]
    if health == Health.HEALTHY:
        return "True", "Healthy", f"every object of render {applied_ref} is Healthy"
    if health == Health.UNKNOWN:
        return "Unknown", "NotAssessed", _unhealthy(status, "could not be assessed")
    return "False", health, _unhealthy(status, health)


def _unhealthy(status: Obj, what: str) -> str:
    """Name the objects that keep the render from being Healthy, in a bounded message."""
    names = [
        f"{e['kind']} {e['name']} {e['health']}"
        for e in status.get("entries") or []
        if e["health"] != Health.HEALTHY
    ]
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"render {what}: {', '.join(names[:5])}{more}"


# -- custom resources: Ready and Stalled -------------------------------------------------------
def _custom(obj: Obj) -> Assessment:
    conditions = _conditions(obj)
    stalled, ready = conditions.get("Stalled"), conditions.get("Ready")
    if stalled and stalled.get("status") == "True":
        return Assessment(Health.DEGRADED, f"Stalled: {_why(stalled)}")
    if ready and ready.get("status") == "False" and "Failed" in (ready.get("reason") or ""):
        return Assessment(Health.DEGRADED, f"Ready=False: {_why(ready)}")
    if not ready or ready.get("status") != "True":
        return Assessment(Health.PROGRESSING, "not Ready yet")
    if not _generation_observed(obj):
        return Assessment(Health.PROGRESSING, "Ready, but for an older generation")
    return Assessment(Health.HEALTHY, "Ready")


# -- built-in kinds: kstatus -------------------------------------------------------------------
def _kstatus(obj: Obj) -> Assessment:
    """kstatus: generic conditions and observedGeneration first, then the kind's own rules."""
    conditions = _conditions(obj)
    stalled, reconciling = conditions.get("Stalled"), conditions.get("Reconciling")
    if stalled and stalled.get("status") == "True":
        return Assessment(Health.DEGRADED, f"Stalled: {_why(stalled)}")
    if not _generation_observed(obj):
        return Assessment(Health.PROGRESSING, "status is for an older generation")
    if reconciling and reconciling.get("status") == "True":
        return Assessment(Health.PROGRESSING, f"Reconciling: {_why(reconciling)}")
    rule = _KIND_RULES.get(obj.get("kind", ""))
    return rule(obj) if rule else Assessment(Health.HEALTHY, "exists")


def _replicas(obj: Obj, ready_field: str) -> Assessment:
    """Workloads: every desired replica updated and ready (kstatus' replica checks)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    desired = spec.get("replicas", 1)
    for field in ("updatedReplicas", ready_field):
        if status.get(field, 0) < desired:
            return Assessment(Health.PROGRESSING, f"{field}: {status.get(field, 0)} of {desired}")
    return Assessment(Health.HEALTHY, f"{desired} replicas ready")


def _deployment(obj: Obj) -> Assessment:
    progressing = _conditions(obj).get("Progressing") or {}
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        return Assessment(Health.DEGRADED, "progress deadline exceeded")
    return _replicas(obj, "availableReplicas")


def _daemon_set(obj: Obj) -> Assessment:
    status = obj.get("status") or {}
    desired = status.get("desiredNumberScheduled", 0)
    for field in ("updatedNumberScheduled", "numberAvailable"):
        if status.get(field, 0) < desired:
            return Assessment(Health.PROGRESSING, f"{field}: {status.get(field, 0)} of {desired}")
    return Assessment(Health.HEALTHY, f"{desired} pods available")


def _pod(obj: Obj) -> Assessment:
    phase = (obj.get("status") or {}).get("phase")
    if phase == "Failed":
        return Assessment(Health.DEGRADED, "pod failed")
    if phase == "Succeeded" or (_conditions(obj).get("Ready") or {}).get("status") == "True":
        return Assessment(Health.HEALTHY, f"pod {phase}")
    return Assessment(Health.PROGRESSING, f"pod {phase or 'pending'}, not ready")


def _job(obj: Obj) -> Assessment:
    conditions = _conditions(obj)
    if (conditions.get("Failed") or {}).get("status") == "True":
        return Assessment(Health.DEGRADED, f"job failed: {_why(conditions['Failed'])}")
    if (conditions.get("Complete") or {}).get("status") == "True":
        return Assessment(Health.HEALTHY, "job complete")
    return Assessment(Health.PROGRESSING, "job running")


def _phase(wanted: str) -> Callable[[Obj], Assessment]:
    """Kinds whose status.phase says it all (PersistentVolumeClaim, Namespace)."""

    def rule(obj: Obj) -> Assessment:
        phase = (obj.get("status") or {}).get("phase")
        healthy = phase == wanted
        return Assessment(Health.HEALTHY if healthy else Health.PROGRESSING, f"phase {phase}")

    return rule


def _crd(obj: Obj) -> Assessment:
    established = (_conditions(obj).get("Established") or {}).get("status") == "True"
    return Assessment(
        Health.HEALTHY if established else Health.PROGRESSING,
        "established" if established else "not established yet",
    )


_KIND_RULES = {
    "Deployment": _deployment,
    "StatefulSet": lambda obj: _replicas(obj, "readyReplicas"),
    "ReplicaSet": lambda obj: _replicas(obj, "readyReplicas"),
    "DaemonSet": _daemon_set,
    "Pod": _pod,
    "Job": _job,
    "PersistentVolumeClaim": _phase("Bound"),
    "Namespace": _phase("Active"),
    "CustomResourceDefinition": _crd,
}


# -- helpers -----------------------------------------------------------------------------------
def _conditions(obj: Obj) -> dict[str, Obj]:
    found = (obj.get("status") or {}).get("conditions") or []
    return {c["type"]: c for c in found if isinstance(c, dict) and "type" in c}


def _generation_observed(obj: Obj) -> bool:
    """status.observedGeneration equals metadata.generation; custom resources must say so,
    built-in kinds without the field (ConfigMap, ...) count as observed, as in kstatus."""
    observed = (obj.get("status") or {}).get("observedGeneration")
    generation = (obj.get("metadata") or {}).get("generation")
    if observed is None:
        return is_built_in(obj.get("apiVersion", ""))
    return observed == generation


def _why(condition: Obj) -> str:
    return condition.get("message") or condition.get("reason") or condition.get("status", "")
