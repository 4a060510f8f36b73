"""Registering the controller's subresource API with a cluster: certificate, Service, APIService.

The aggregator reaches an APIService through a Service and checks the serving certificate
against ServerName <service>.<namespace>.svc and the APIService's caBundle. On the local
provider the controller is a host process, and an ExternalName Service "localhost" reaches it
(DESIGN.md, "The subresources"). The builders take the names and the port, so a provider that
runs the controller elsewhere can reuse them with a Service of its own.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from conformance.clusters import pki
from conformance.clusters.kubeconfig import api_client
from conformance.clusters.ports import LOOPBACK, reserve_port
from conformance.install import manifests
from conformance.kube import raw_request
from conformance.polling import poll_until
from convoyapi import API_SERVICE, SUBRESOURCE_GROUP, SUBRESOURCE_VERSION

NAMESPACE = "convoy-system"
SERVICE = "convoy-subresources"
AVAILABLE_TIMEOUT = 90.0
#: What the aggregator answers while it cannot reach the server behind an APIService.
UNAVAILABLE = 503

Obj = dict[str, Any]


@dataclass(frozen=True)
class ServingCertificate:
    """A CA of its own (the APIService's caBundle) and the serving certificate it signed."""

    ca: pki.KeyPair
    serving: pki.KeyPair


def serving_certificate(
    service: str = SERVICE,
    namespace: str = NAMESPACE,
    *,
    dns_names: tuple[str, ...] = ("localhost",),
    ip_addresses: tuple[str, ...] = (LOOPBACK,),
) -> ServingCertificate:
    """SANs: the name the aggregator verifies, plus the addresses tests dial directly."""
    ca = pki.new_ca(f"{service}-ca")
    verified = f"{service}.{namespace}.svc"
    serving = pki.issue(
        ca, verified, dns_names=(verified, *dns_names), ip_addresses=ip_addresses, server=True
    )
    return ServingCertificate(ca, serving)


def external_name_service(
    port: int,
    *,
    external_name: str = "localhost",
    service: str = SERVICE,
    namespace: str = NAMESPACE,
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service, "namespace": namespace},
        "spec": {"type": "ExternalName", "externalName": external_name, "ports": [{"port": port}]},
    }


def api_service(
    ca_pem: bytes, port: int, *, service: str = SERVICE, namespace: str = NAMESPACE
) -> Obj:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE},
        "spec": {
            "group": SUBRESOURCE_GROUP,
            "version": SUBRESOURCE_VERSION,
            "groupPriorityMinimum": 1000,
            "versionPriority": 15,
            "caBundle": base64.b64encode(ca_pem).decode(),
            "service": {"namespace": namespace, "name": service, "port": port},
        },
    }


def namespace_object(name: str = NAMESPACE) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def register(
    api: client.ApiClient, objects: list[Obj], timeout: float = AVAILABLE_TIMEOUT
) -> float:
    """Apply the objects (server-side, idempotent), then wait until the APIService is Available."""
    manifests.apply(api, objects)
    return wait_available(api, timeout)


def wait_available(api: client.ApiClient, timeout: float = AVAILABLE_TIMEOUT) -> float:
    """Seconds until the aggregator reports the API Available; fail with its last word."""
    registration = client.ApiregistrationV1Api(api)
    started = time.monotonic()
    available: Any = None

    def is_available() -> bool:
        nonlocal available
        conditions = registration.read_api_service(API_SERVICE).status.conditions or []
        available = next((c for c in conditions if c.type == "Available"), None)
        return bool(available and available.status == "True")

    def unavailable() -> TimeoutError:
        said = f"{available.reason}: {available.message}" if available else "no condition"
        return TimeoutError(f"APIService {API_SERVICE} not Available after {timeout:g} s ({said})")

    poll_until(is_available, timeout=timeout, step=0.2, failure=unavailable)
    return time.monotonic() - started


def wait_served(api: client.ApiClient, timeout: float = AVAILABLE_TIMEOUT) -> float:
    """Seconds until the kube-apiserver reaches the subresource API's server again (its
    discovery answers anything but 503) after a restart of the controller: the APIService's
    Available condition lags a new pod, and the aggregator answers 503 meanwhile."""
    path = f"/apis/{SUBRESOURCE_GROUP}/{SUBRESOURCE_VERSION}"
    started = time.monotonic()
    poll_until(
        lambda: raw_request(api, "GET", path).status != UNAVAILABLE,
        timeout=timeout,
        step=0.2,
        failure=lambda: TimeoutError(f"{path} still answers 503 after {timeout:g} s"),
    )
    return time.monotonic() - started


@dataclass
class LocalSubresourceAPI:
    """What a host controller needs to serve the API where the API server reaches localhost.

    The port and the certificate are chosen once, so a restarted controller serves the same
    endpoint and the registration stays valid.
    """

    port: int = field(default_factory=reserve_port)
    certificate: ServingCertificate = field(default_factory=serving_certificate)

    def flags(self, directory: Path) -> list[str]:
        """The controller's flags; writes the serving certificate and key into `directory`."""
        cert, key = self.certificate.serving.write(directory, "subresources-serving")
        return [
            f"--subresource-port={self.port}",
            f"--subresource-address={LOOPBACK}",
            f"--subresource-cert={cert}",
            f"--subresource-key={key}",
        ]

    def register(self, kubeconfig: Path) -> float:
        """Namespace, ExternalName Service "localhost" and APIService; seconds to Available."""
        objects = [
            namespace_object(),
            external_name_service(self.port),
            api_service(self.certificate.ca.cert_pem, self.port),
        ]
        # the local provider's kubeconfig, in the directory of its control plane
        with api_client(kubeconfig, kubeconfig.parent) as api:
            return register(api, objects)
