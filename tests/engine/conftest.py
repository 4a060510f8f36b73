"""Helpers for the engine tests: the reference controller on the real local control plane.

The tests drive Releases with the suite's App helpers (conformance/observe/releases.py) and read
what the controller did from the cluster: conditions, the ReleaseInventory, the witness' record of
apply attempts, and (white-box) the controller's log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kubernetes import client, dynamic

from conformance.install.host import HostController
from conformance.kube import dynamic_api
from conformance.observe.releases import App, Releases, condition, content_object
from conformance.polling import poll_until
from convoyapi import API_VERSION, SYNC_REQUESTED_AT

Obj = dict[str, Any]
WIDGET_API = "testing.convoy.kumodo.io/v1"
MERGE = "application/merge-patch+json"
#: Waits that span a reconcile, an observer period and another reconcile, on a busy machine.
SETTLE = 45.0


def widget(name: str, **spec: Any) -> Obj:
    return {"apiVersion": WIDGET_API, "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def source(app: App, content: str, extra: list[Obj]) -> Obj:
    objects = [content_object(app.object_name, content), *extra]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": app.source_name},
        "data": {"manifests.yaml": yaml.safe_dump_all(objects, sort_keys=True)},
    }


@dataclass
class Engine:
    """The test's namespace as the engine tests see it."""

    releases: Releases
    controller: HostController

    def __post_init__(self) -> None:
        resources = dynamic_api(self.releases.api).resources
        self.widgets = resources.get(api_version=WIDGET_API, kind="Widget")
        self.inventories = resources.get(api_version=API_VERSION, kind="ReleaseInventory")
        self.clusters = resources.get(api_version=API_VERSION, kind="Cluster")

    @property
    def namespace(self) -> str:
        return self.releases.namespace

    def app(
        self,
        name: str,
        *,
        extra: list[Obj] | None = None,
        sync_policy: Obj | None = None,
        annotations: dict[str, str] | None = None,
        **spec: Any,
    ) -> App:
        """Like releases.app, with `extra` objects in the source before the Release exists."""
        created = App(self.releases, name)
        body = source(created, "v1", extra or [])
        self.releases.core.create_namespaced_config_map(self.namespace, body)
        spec = {"source": {"name": created.source_name}, **spec}
        if sync_policy is not None:
            spec["syncPolicy"] = sync_policy
        release = {
            "apiVersion": API_VERSION,
            "kind": "Release",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": spec,
        }
        self.releases.resource.create(body=release, namespace=self.namespace)
        return created

    def set_widget(
        self, name: str, *, ready: str = "True", reason: str = "Ready", stalled: bool = False
    ) -> None:
        """Write the Widget's status for its current generation."""
        generation = self.get_widget(name)["metadata"]["generation"]
        conditions = [{"type": "Ready", "status": ready, "reason": reason, "message": reason}]
        if stalled:
            conditions.append({"type": "Stalled", "status": "True", "reason": "Stuck"})
        body = {"status": {"observedGeneration": generation, "conditions": conditions}}
        self.widgets.status.patch(
            name=name, namespace=self.namespace, body=body, content_type=MERGE
        )

    def get_widget(self, name: str) -> Obj:
        return self.widgets.get(name=name, namespace=self.namespace).to_dict()

    def widget_exists(self, name: str) -> bool:
        try:
            self.get_widget(name)
        except dynamic.exceptions.NotFoundError:
            return False
        return True

    def inventory(self, name: str) -> Obj | None:
        try:
            return self.inventories.get(name=name, namespace=self.namespace).to_dict()
        except dynamic.exceptions.NotFoundError:
            return None

    def inventory_status(self, name: str) -> Obj:
        return (self.inventory(name) or {}).get("status") or {}

    def wait_inventory(self, name: str, check: Callable[[Obj], bool], what: str) -> Obj:
        return wait_for(lambda: self.inventory_status(name), check, what)

    def reconciles(self, app: App, outcome: str = "") -> list[str]:
        """White-box: the controller's log lines of the reconciles of `app` (ending so)."""
        key = f"reconcile {self.namespace}/{app.name} "
        return [
            line
            for line in self.controller.logs().splitlines()
            if key in line and f"-> {outcome}" in line
        ]

    def wait_reconciles(self, app: App, outcome: str) -> list[str]:
        """`reconciles`, once there is one: a reconcile is logged just after its status write,
        which the test may have seen first."""
        return poll_until(
            lambda: self.reconciles(app, outcome),
            timeout=SETTLE,
            step=0.1,
            failure=lambda: pytest.fail.Exception(
                f"no reconcile of {app.name} ending in {outcome} in the controller's log"
            ),
        )


def wait_for(read: Callable[[], Obj], check: Callable[[Obj], bool], what: str) -> Obj:
    """Poll `read()` until `check` holds on it; fail naming `what` and the last value."""
    value: Obj | None = None

    def holds() -> Obj | None:
        nonlocal value
        value = read()
        return value if check(value) else None

    return poll_until(
        holds,
        timeout=SETTLE,
        step=0.1,
        failure=lambda: pytest.fail.Exception(f"no {what} after {SETTLE:g} s; last seen: {value}"),
    )


def healthy(app: App, status: str, reason: str) -> Obj:
    """Wait for the Healthy condition."""

    def holds(release: Obj) -> bool:
        found = condition(release, "Healthy")
        return bool(found and (found["status"], found["reason"]) == (status, reason))

    return app.wait_for(holds, f"Healthy={status} with reason {reason}", SETTLE)


def annotation(app: App, name: str) -> str | None:
    return (app.get()["metadata"].get("annotations") or {}).get(name)


def wait_sync_request(app: App, other_than: str | None = None) -> str:
    """Wait until sync-requested-at is set to a value other than `other_than`."""
    release = app.wait_for(
        lambda r: (
            (r["metadata"].get("annotations") or {}).get(SYNC_REQUESTED_AT)
            not in (None, other_than)
        ),
        "a /sync request",
        SETTLE,
    )
    return release["metadata"]["annotations"][SYNC_REQUESTED_AT]


def settle(app: App, seconds: float = 3.0) -> None:
    """Wait until the controller leaves `app` alone for `seconds` (no apply attempt)."""
    deadline = time.monotonic() + SETTLE
    while app.quiet(seconds, since=app.releases.recorder.mark()):
        if time.monotonic() > deadline:
            pytest.fail(f"Release {app.name} still reconciled after {SETTLE:g} s")


@pytest.fixture
def engine(releases: Releases, controller: HostController | None) -> Engine:
    if controller is None:
        pytest.skip("the engine tests need the reference controller the suite runs")
    return Engine(releases, controller)


@pytest.fixture
def core(k8s: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(k8s)
