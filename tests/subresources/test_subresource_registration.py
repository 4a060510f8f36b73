"""The host controller's registration: an APIService behind an ExternalName Service "localhost"."""

from __future__ import annotations

from kubernetes import client

from conformance.install.host import HostController
from conformance.install.subresources import NAMESPACE, SERVICE, LocalSubresourceAPI
from conformance.kube import raw_request
from convoy.subresources import release_path
from convoyapi import API_SERVICE


def test_the_api_service_is_available_with_tls_verified(
    k8s: client.ApiClient, subresources: LocalSubresourceAPI
) -> None:
    """Available: the aggregator verified the serving certificate against the caBundle."""
    registered = client.ApiregistrationV1Api(k8s).read_api_service(API_SERVICE)
    assert {(c.type, c.status) for c in registered.status.conditions} >= {("Available", "True")}
    assert not registered.spec.insecure_skip_tls_verify
    service = client.CoreV1Api(k8s).read_namespaced_service(SERVICE, NAMESPACE)
    assert (service.spec.type, service.spec.external_name) == ("ExternalName", "localhost")
    assert service.spec.ports[0].port == subresources.port


def test_a_restarted_controller_serves_the_same_endpoint(
    k8s: client.ApiClient, controller: HostController, namespace: str, release: str
) -> None:
    """Port and certificate survive a restart, so the registration stays valid (BACK-5 restarts)."""
    controller.restart()
    response = raw_request(k8s, "POST", release_path(namespace, release, "sync"))
    assert response.status == 200, response
