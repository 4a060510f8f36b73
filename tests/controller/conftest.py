"""Fixtures for the reference controller's render, apply and targets modules.

They run against the session's real API server (the plugin's `cluster`, `k8s`, `namespace`):
convoy's CRDs, the controller's Targets, and builders for sources, Releases and objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from conformance.harness.namespaces import delete_namespace
from conformance.kube import delete_if_present
from convoy.api import API_VERSION, RELEASE_LABEL, release_key
from convoy.render import Obj
from convoy.targets import Target, Targets

RELEASE = "app"


@pytest.fixture
def core(k8s: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(k8s)


@pytest.fixture
def targets(k8s: client.ApiClient, convoy_api: None) -> Iterator[Targets]:
    resolver = Targets(k8s)
    yield resolver
    resolver.close()


@pytest.fixture
def make_release(namespace: str) -> Callable[..., Obj]:
    """A Release as the engine hands it over (a plain dict); spec fields as keywords."""

    def make(name: str = RELEASE, **spec: object) -> Obj:
        return {
            "apiVersion": API_VERSION,
            "kind": "Release",
            "metadata": {"namespace": namespace, "name": name},
            "spec": {"source": {"name": "src"}, **spec},
        }

    return make


@pytest.fixture
def target(targets: Targets, make_release: Callable[..., Obj]) -> Target:
    """The controller's own cluster: what a Release without clusterRef targets."""
    return targets.for_release(make_release())


@pytest.fixture
def put(core: client.CoreV1Api, namespace: str) -> Callable[[str, str, dict[str, str]], None]:
    """Create a ConfigMap or a Secret (its data given as text) in the test's namespace."""

    def create(kind: str, name: str, data: dict[str, str]) -> None:
        metadata = {"name": name, "namespace": namespace}
        if kind == "Secret":
            core.create_namespaced_secret(namespace, {"metadata": metadata, "stringData": data})
        else:
            core.create_namespaced_config_map(namespace, {"metadata": metadata, "data": data})

    return create


@pytest.fixture
def config_map(namespace: str) -> Callable[..., Obj]:
    """A ConfigMap as the render of the Release "app" in the test's namespace makes it."""
    labels = {RELEASE_LABEL: release_key(namespace, RELEASE)}

    def build(name: str, into: str = namespace, **data: object) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": into, "labels": dict(labels)},
            "data": data,
        }

    return build


@pytest.fixture
def gizmo_crd(namespace: str, k8s: client.ApiClient) -> Iterator[Obj]:
    """A CRD of kind Gizmo in a group of this test's own; deleted afterwards if it was created."""
    group = f"{namespace}.example.com"
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    yield {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gizmos.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}],
        },
    }
    delete_if_present(
        lambda: client.ApiextensionsV1Api(k8s).delete_custom_resource_definition(f"gizmos.{group}")
    )


@pytest.fixture
def extra_namespace(namespace: str, core: client.CoreV1Api) -> Iterator[str]:
    """The name of a second namespace that a test's render creates; deleted afterwards."""
    name = f"{namespace}-x"
    yield name
    delete_namespace(core, name)
