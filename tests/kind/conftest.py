"""Fixtures for the kind path's tests: a bare control plane of their own and its kubectl."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from conformance.clusters import binaries
from conformance.clusters.local import LocalControlPlane

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def found_binaries(pytestconfig: pytest.Config) -> binaries.Binaries:
    return binaries.resolve(
        pytestconfig.getoption("kube_version"), pytestconfig.getoption("etcd_version")
    )


@pytest.fixture(scope="session")
def kubectl(found_binaries: binaries.Binaries) -> str:
    """The kubectl the local provider uses (built or cached with the control plane's binaries)."""
    return str(found_binaries.kubectl)


@pytest.fixture(scope="session")
def bare_cluster(found_binaries: binaries.Binaries) -> Iterator[LocalControlPlane]:
    """A local control plane of these tests' own.

    They install convoy-system, cluster-wide RBAC and the APIService
    v1alpha1.subresources.convoy.kumodo.io, and delete them again: on the session's cluster that
    APIService is the suite's registration of its own controller, which they must not touch.
    Its kube-controller-manager runs the clusterrole-aggregation controller too, which fills
    the controller's aggregated targets role as it does on kind.
    """
    plane = LocalControlPlane(found_binaries).start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def bare_k8s(bare_cluster: LocalControlPlane) -> Iterator[client.ApiClient]:
    with bare_cluster.api_client() as api:
        yield api
