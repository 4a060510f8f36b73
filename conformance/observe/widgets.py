"""Widgets (the test-only CRD whose health the suite sets) and ReleaseInventories.

A Widget is Healthy when its Ready condition is True for its current generation, Degraded
when Stalled is True; the suite writes that status itself, so health is controllable on
clusters where no Pod can run.
"""

from __future__ import annotations

from typing import Any

from kubernetes import dynamic

from conformance.kube import dynamic_api
from conformance.observe.releases import App
from convoyapi import API_VERSION

WIDGET_API = "testing.convoy.kumodo.io/v1"
MERGE = "application/merge-patch+json"
Obj = dict[str, Any]


def widget(name: str, **spec: Any) -> Obj:
    return {"apiVersion": WIDGET_API, "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def pre_apply_hook(name: str = "migrate") -> Obj:
    """A lifecycle of one preApply batch: Widget `name`."""
    return {"preApply": [[widget(name)]]}


def _resource(app: App, api_version: str, kind: str) -> dynamic.Resource:
    return dynamic_api(app.releases.api).resources.get(api_version=api_version, kind=kind)


def create(app: App, name: str, health: str) -> None:
    """Create Widget `name` as the suite's, with `health`: before the controller applies it."""
    _resource(app, WIDGET_API, "Widget").create(body=widget(name), namespace=app.namespace)
    _write_health(app, name, health)


def set_health(app: App, name: str, health: str) -> None:
    """Make Widget `name` Healthy, Progressing or Degraded, as a workload would report it."""
    app.wait_for(lambda _: exists(app, name), f"Widget {name} applied by the controller")
    _write_health(app, name, health)


def _write_health(app: App, name: str, health: str) -> None:
    widgets = _resource(app, WIDGET_API, "Widget")
    live = widgets.get(name=name, namespace=app.namespace).to_dict()
    conditions = {
        "Healthy": [{"type": "Ready", "status": "True"}],
        "Progressing": [{"type": "Ready", "status": "False", "reason": "Starting"}],
        "Degraded": [{"type": "Stalled", "status": "True", "reason": "Broken"}],
    }[health]
    status = {"observedGeneration": live["metadata"]["generation"], "conditions": conditions}
    widgets.status.patch(
        name=name, namespace=app.namespace, body={"status": status}, content_type=MERGE
    )


def inventory(app: App) -> Obj | None:
    """The Release's ReleaseInventory, or None before the observer wrote one."""
    inventories = _resource(app, API_VERSION, "ReleaseInventory")
    try:
        return inventories.get(name=app.name, namespace=app.namespace).to_dict()
    except dynamic.exceptions.NotFoundError:
        return None


def inventory_status(app: App) -> Obj:
    return (inventory(app) or {}).get("status") or {}


def exists(app: App, name: str) -> bool:
    try:
        _resource(app, WIDGET_API, "Widget").get(name=name, namespace=app.namespace)
    except dynamic.exceptions.NotFoundError:
        return False
    return True
