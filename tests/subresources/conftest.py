"""Fixtures for the subresource API on the local control plane, served by the host controller.

The suite's `controller` fixture starts the reference controller, which serves the API and
registers its APIService (conformance/install/subresources.py). Requests go through the
kube-apiserver like any client's, or straight to the controller's port to test what the
aggregator alone can do there (the front proxy's certificate).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes import client

from conformance.clusters import pki
from conformance.clusters.base import Cluster
from conformance.clusters.local import LocalControlPlane
from conformance.install.host import HostController
from conformance.install.subresources import LocalSubresourceAPI
from convoy import api
from convoyapi import SUBRESOURCE_GROUP
from tests.subresources.support import Direct

RELEASE = "app"
Obj = dict[str, Any]


@pytest.fixture
def subresources(controller: HostController | None) -> LocalSubresourceAPI:
    if controller is None or controller.subresources is None:
        pytest.skip("the suite did not start the reference controller with its subresource API")
    return controller.subresources


@pytest.fixture
def release(k8s: client.ApiClient, namespace: str, subresources: LocalSubresourceAPI) -> str:
    """A manual Release whose source renders one ConfigMap: it waits for a /sync."""
    manifests = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "content"}}
    client.CoreV1Api(k8s).create_namespaced_config_map(
        namespace,
        {"metadata": {"name": "source"}, "data": {"manifests.yaml": yaml.safe_dump(manifests)}},
    )
    client.CustomObjectsApi(k8s).create_namespaced_custom_object(
        api.GROUP,
        api.VERSION,
        namespace,
        api.RELEASES,
        {
            "apiVersion": api.API_VERSION,
            "kind": "Release",
            "metadata": {"name": RELEASE},
            "spec": {"source": {"name": "source"}, "syncPolicy": {"automatic": False}},
        },
    )
    return RELEASE


@pytest.fixture
def read_release(k8s: client.ApiClient, namespace: str) -> Callable[[str], Obj]:
    objects = client.CustomObjectsApi(k8s)
    return lambda name: objects.get_namespaced_custom_object(
        api.GROUP, api.VERSION, namespace, api.RELEASES, name
    )


# -- RBAC and impersonation ------------------------------------------------------------------------
@pytest.fixture
def grant(k8s: client.ApiClient, namespace: str) -> Callable[[str, str, list[str]], None]:
    """Give a user `verbs` on releases/<subresource> of the subresource group, in the namespace."""
    rbac = client.RbacAuthorizationV1Api(k8s)

    def bind(user: str, subresource: str, verbs: list[str]) -> None:
        role = f"{user}-{subresource}"
        rules = [
            {
                "apiGroups": [SUBRESOURCE_GROUP],
                "resources": [f"releases/{subresource}"],
                "verbs": verbs,
            }
        ]
        rbac.create_namespaced_role(namespace, {"metadata": {"name": role}, "rules": rules})
        rbac.create_namespaced_role_binding(
            namespace,
            {
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
                ],
            },
        )

    return bind


@pytest.fixture
def impersonating(cluster: Cluster) -> Iterator[Callable[[str], client.ApiClient]]:
    """API clients that the admin credentials make act as another user (Impersonate-User)."""
    opened: list[client.ApiClient] = []

    def as_user(user: str) -> client.ApiClient:
        api_client = cluster.api_client()
        api_client.set_default_header("Impersonate-User", user)
        opened.append(api_client)
        return api_client

    yield as_user
    for api_client in opened:
        api_client.close()


@pytest.fixture
def direct(subresources: LocalSubresourceAPI) -> Direct:
    return Direct(subresources.port, subresources.certificate.ca.cert_pem)


@pytest.fixture
def local_plane(cluster: Cluster) -> LocalControlPlane:
    if not isinstance(cluster, LocalControlPlane):
        pytest.skip("needs the front proxy's keys: the local provider only")
    return cluster


@pytest.fixture
def front_proxy_cert(local_plane: LocalControlPlane) -> tuple[Path, Path]:
    """The certificate the kube-apiserver's aggregator presents (CN front-proxy-client)."""
    return local_plane.proxy_client


@pytest.fixture
def front_proxy_ca(local_plane: LocalControlPlane) -> pki.KeyPair:
    """The requestheader CA itself, to sign certificates with names the server must refuse."""
    cert_path = local_plane.front_proxy_ca_path
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    key = serialization.load_pem_private_key(
        cert_path.with_suffix(".key").read_bytes(), password=None
    )
    return pki.KeyPair(cert, key)
