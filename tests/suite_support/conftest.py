"""Fixtures for the tests of what the suite builds on: clients, a user, a second namespace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client, dynamic
from kubernetes.dynamic.discovery import Discoverer

from conformance.harness.namespaces import RUN_LABEL, delete_namespace, namespace_name
from conformance.kube import dynamic_api


@pytest.fixture(scope="session")
def resources(k8s: client.ApiClient) -> Discoverer:
    """The dynamic client's resources, the way the reference controller applies objects."""
    return dynamic_api(k8s).resources


@pytest.fixture(scope="session")
def config_maps(resources: Discoverer) -> dynamic.Resource:
    return resources.get(api_version="v1", kind="ConfigMap")


@pytest.fixture(scope="session")
def username(k8s: client.ApiClient) -> str:
    """Who the suite's client is to the API server, as the witness sees it on any provider."""
    review = client.AuthenticationV1Api(k8s).create_self_subject_review({})
    return review.status.user_info.username


@pytest.fixture
def unwatched_namespace(
    request: pytest.FixtureRequest, k8s: client.ApiClient, run_id: str
) -> Iterator[str]:
    """A second namespace of the test's, which the witness is not told to watch."""
    core = client.CoreV1Api(k8s)
    name = namespace_name(f"unwatched-{request.node.name}")
    core.create_namespace({"metadata": {"name": name, "labels": {RUN_LABEL: run_id}}})
    try:
        yield name
    finally:
        delete_namespace(core, name)
