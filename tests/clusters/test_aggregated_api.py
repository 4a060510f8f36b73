"""The path the subresource API takes: kube-apiserver -> APIService -> ExternalName "localhost".

A throwaway HTTPS server on this machine is registered as an aggregated API. A request through
the kube-apiserver reaches it with the front proxy's client certificate and the user in
headers; a direct request without that certificate is refused during the TLS handshake.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client

from conformance.clusters import pki
from conformance.kube import raw_request
from tests.helpers import wait_until

GROUP, VERSION = "smoke.convoy.kumodo.io", "v1"
SERVICE = "smoke-api"


class SmokeHandler(BaseHTTPRequestHandler):
    """Discovery for one resource, and an echo of who the front proxy says is calling."""

    def do_GET(self) -> None:
        if self.path == f"/apis/{GROUP}/{VERSION}":
            body = {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{GROUP}/{VERSION}",
                "resources": [
                    {"name": "echoes", "namespaced": True, "kind": "Echo", "verbs": ["get"]}
                ],
            }
        elif self.path.startswith(f"/apis/{GROUP}/{VERSION}/"):
            body = {
                "user": self.headers.get("X-Remote-User"),
                "groups": self.headers.get_all("X-Remote-Group"),
                "path": self.path,
            }
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        """Quiet: the aggregator polls discovery often."""


@pytest.fixture
def serving_ca() -> pki.KeyPair:
    return pki.new_ca("smoke-api-ca")


@pytest.fixture
def smoke_server(
    k8s: client.ApiClient, namespace: str, serving_ca: pki.KeyPair, tmp_path
) -> Iterator[int]:
    """The throwaway server: trusts only the requestheader CA for client certificates."""
    auth = client.CoreV1Api(k8s).read_namespaced_config_map(
        "extension-apiserver-authentication", "kube-system"
    )
    serving = pki.issue(serving_ca, SERVICE, dns_names=(f"{SERVICE}.{namespace}.svc",), server=True)
    cert, key = serving.write(tmp_path, "serving")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=auth.data["requestheader-client-ca-file"])
    server = ThreadingHTTPServer(("127.0.0.1", 0), SmokeHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def registered(
    k8s: client.ApiClient, namespace: str, smoke_server: int, serving_ca: pki.KeyPair
) -> Iterator[None]:
    client.CoreV1Api(k8s).create_namespaced_service(
        namespace,
        {
            "metadata": {"name": SERVICE},
            "spec": {
                "type": "ExternalName",
                "externalName": "localhost",
                "ports": [{"port": smoke_server}],
            },
        },
    )
    registration = client.ApiregistrationV1Api(k8s)
    name = f"{VERSION}.{GROUP}"
    registration.create_api_service(
        {
            "metadata": {"name": name},
            "spec": {
                "group": GROUP,
                "version": VERSION,
                "groupPriorityMinimum": 1000,
                "versionPriority": 15,
                "caBundle": base64.b64encode(serving_ca.cert_pem).decode(),
                "service": {"namespace": namespace, "name": SERVICE, "port": smoke_server},
            },
        }
    )
    try:

        def available() -> bool:
            conditions = registration.read_api_service(name).status.conditions or []
            return any(c.type == "Available" and c.status == "True" for c in conditions)

        took = wait_until(available, 60, f"APIService {name} to become Available")
        print(f"APIService Available after {took:.2f} s")
        yield
    finally:
        registration.delete_api_service(name)


@pytest.mark.usefixtures("registered")
def test_a_request_through_the_apiserver_reaches_the_server_as_the_caller(
    k8s: client.ApiClient, namespace: str
) -> None:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/echoes/hello"
    response = raw_request(k8s, "GET", path)
    assert response.ok, response
    answer = response.body
    assert answer["user"] == "convoy-admin"
    assert "system:masters" in answer["groups"]
    assert answer["path"] == path


def test_a_direct_request_without_the_front_proxy_certificate_is_refused(
    smoke_server: int, serving_ca: pki.KeyPair, namespace: str
) -> None:
    context = ssl.create_default_context(cadata=serving_ca.cert_pem.decode())
    context.check_hostname = False
    request = urllib.request.Request(
        f"https://127.0.0.1:{smoke_server}/apis/{GROUP}/{VERSION}/namespaces/x/echoes/e",
        headers={"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"},
    )
    with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
        urllib.request.urlopen(request, context=context, timeout=10)
