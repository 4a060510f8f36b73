"""The reference controller when its caches lag behind the API server.

A busy API server delivers watch events late. Between a reconcile's apply and the moment the
cache shows the status write that names the new render, the cache still names the old render
as applied. An observer that trusted it would take the old render for a new one turning
Healthy, and announce it with a /sync: in manual mode a request, which applies whatever the
render is by then. And between the inventory write of a reconcile's own assessment and its
event, a reconcile that read the inventory cache would take in older health data, and the
write's late event would look like news (TRIG-6 says it starts no reconcile). Here the
controller runs in this process on a control plane of its own (no other controller there), with
the watch events of one kind delivered a second late.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from kubernetes import client

from conformance import resources
from conformance.clusters import binaries
from conformance.clusters.local import LocalControlPlane
from conformance.install import manifests
from conformance.kube import dynamic_api
from conformance.observe.releases import content_object, parse_time, rfc3339, same_second
from conformance.polling import poll_until, quiet_period
from convoy.controller import Controller
from convoy.informer import Informer
from convoy.observer import PERIOD
from convoy.triggers import INVENTORY_HEALTH
from convoyapi import API_VERSION, SYNC_REQUESTED_AT

Obj = dict[str, Any]
NAMESPACE = "lagging"
#: How late each Release watch event reaches the controller's cache.
LAG = 1.0
DEADLINE = 30.0


@pytest.fixture
def api() -> Iterator[client.ApiClient]:
    plane = LocalControlPlane(binaries.resolve())
    try:
        with plane.start().api_client() as api_client:
            manifests.apply(api_client, manifests.load(resources.CRDS))
            client.CoreV1Api(api_client).create_namespace({"metadata": {"name": NAMESPACE}})
            yield api_client
    finally:
        plane.stop()


def lagging(informer: Informer) -> None:
    """Deliver `informer`'s watch events to its cache LAG seconds late."""
    deliver = informer._deliver  # the watch's hand-over to the cache

    def late(*args: Any) -> None:
        time.sleep(LAG)
        deliver(*args)

    informer._deliver = late  # type: ignore[method-assign]


@pytest.fixture
def lagging_controller(api: client.ApiClient) -> Iterator[Controller]:
    controller = Controller(api, resync=120.0, workers=1)
    lagging(controller.informer)
    controller.start()
    yield controller
    controller.stop()


@pytest.fixture
def lagging_inventories(api: client.ApiClient) -> Iterator[tuple[Controller, list[str]]]:
    """A controller whose inventory cache lags, and the triggers of the reconciles it queues."""
    controller = Controller(api, resync=120.0, workers=1)
    lagging(controller.inventory_informer)
    triggers: list[str] = []
    enqueue = controller.enqueue

    def recorded(key: str, why: str) -> None:
        triggers.append(why)
        enqueue(key, why)

    controller.enqueue = recorded  # type: ignore[method-assign]
    controller.start()
    yield controller, triggers
    controller.stop()


class Manual:
    """A manual Release (by default reconciled every second), with its source."""

    def __init__(self, api: client.ApiClient, interval: str | None = "1s") -> None:
        self.core = client.CoreV1Api(api)
        resources = dynamic_api(api).resources
        self.releases = resources.get(api_version=API_VERSION, kind="Release")
        self.inventories = resources.get(api_version=API_VERSION, kind="ReleaseInventory")
        self.set_content("v1")
        spec: Obj = {"source": {"name": "src"}}
        if interval:
            spec["syncPolicy"] = {"interval": interval}
        body = {"apiVersion": API_VERSION, "kind": "Release", "metadata": {"name": "web"}}
        self.releases.create(body={**body, "spec": spec}, namespace=NAMESPACE)

    def set_content(self, content: str) -> None:
        text = yaml.safe_dump(content_object("web-content", content))
        body = {"metadata": {"name": "src"}, "data": {"manifests.yaml": text}}
        try:
            self.core.replace_namespaced_config_map("src", NAMESPACE, body)
        except client.ApiException as error:
            if error.status != 404:
                raise
            self.core.create_namespaced_config_map(NAMESPACE, body)

    def get(self) -> Obj:
        return self.releases.get(name="web", namespace=NAMESPACE).to_dict()

    def request(self, at: datetime | None = None) -> str:
        written = rfc3339(at or datetime.now(UTC))
        body = {"metadata": {"annotations": {SYNC_REQUESTED_AT: written}}}
        self.releases.patch(
            name="web", namespace=NAMESPACE, body=body, content_type="application/merge-patch+json"
        )
        return written

    def apply_on_request(self, content: str) -> str:
        """Write `content` and request it; wait until it is applied and the request handled."""
        self.set_content(content)
        written = self.request()
        self.wait(lambda: self.content() == content, f"{content} applied")
        self.wait(lambda: self.handled(written), f"the request of {written} handled")
        return written

    def content(self) -> str | None:
        try:
            found = self.core.read_namespaced_config_map("web-content", NAMESPACE)
        except client.ApiException:
            return None
        return (found.data or {}).get("content")

    def handled(self, request: str) -> bool:
        """Is lastHandledSyncAt the second of `request`?"""
        handled = (self.get().get("status") or {}).get("lastHandledSyncAt")
        return bool(handled) and same_second(parse_time(handled), parse_time(request))

    def cached(self, controller: Controller) -> bool:
        """Does the controller's inventory cache hold the inventory as the API server has it?"""
        stored = self.inventories.get(name="web", namespace=NAMESPACE).to_dict()
        held = controller.inventory_informer.get(f"{NAMESPACE}/web") or {}
        version = stored["metadata"]["resourceVersion"]
        return (held.get("metadata") or {}).get("resourceVersion") == version

    def requested(self) -> str | None:
        return (self.get()["metadata"].get("annotations") or {}).get(SYNC_REQUESTED_AT)

    def wait(self, holds: Callable[[], bool], what: str) -> None:
        poll_until(
            lambda: holds() or None,
            timeout=DEADLINE,
            step=0.1,
            failure=lambda: AssertionError(f"no {what} after {DEADLINE:g} s: {self.get()}"),
        )


def test_a_lagging_cache_brings_no_sync_for_a_render_applied_before(
    api: client.ApiClient, lagging_controller: Controller
) -> None:
    """v2 applied on request; v3 written: nothing may apply it, and nothing may request it."""
    release = Manual(api)
    release.apply_on_request("v1")
    written = release.apply_on_request("v2")
    release.set_content("v3")

    def nothing_new() -> None:
        # Each render was Healthy at its apply: no /sync but the test's.
        assert release.requested() == written, "a /sync nobody but the test may send"
        assert release.content() == "v2", "v3 applied without a request"

    quiet_period(nothing_new, seconds=3 * PERIOD + LAG, step=0.2)


def test_the_late_event_of_a_reconciles_own_assessment_starts_no_reconcile(
    api: client.ApiClient, lagging_inventories: tuple[Controller, list[str]]
) -> None:
    """v2 applied on request: its reconcile's own assessment writes the inventory, whose event
    comes a second late. A request in the same second (no request: a hold) starts a reconcile
    that reads the inventory meanwhile. The late event must start none."""
    controller, triggers = lagging_inventories
    release = Manual(api, interval=None)
    release.apply_on_request("v1")
    release.wait(lambda: release.cached(controller), "the inventory cache caught up")
    written = release.apply_on_request("v2")
    requested = parse_time(written)
    again = requested.replace(microsecond=(requested.microsecond + 500_000) % 1_000_000)
    triggers.clear()
    release.request(again)

    def no_news() -> None:
        news = [why for why in triggers if why == INVENTORY_HEALTH]
        assert not news, f"TRIG-6: reconciles queued since the hold's request: {triggers}"

    quiet_period(no_news, seconds=LAG + 2 * PERIOD, step=0.2)
    assert triggers, "the hold's request queued no reconcile: nothing read the lagging cache"
