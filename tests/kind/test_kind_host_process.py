"""The container's command line, run as a host process: what the pod would run, on this machine.

The command is the Dockerfile's ENTRYPOINT (`python -m convoy`) and the args are read from
conformance/resources/manifests/controller/deployment.yaml. Two things differ from the pod,
and nothing else: --kubeconfig is added (no in-cluster configuration here), and the pod's
Secret volume is materialized: its files (a fresh serving certificate, as the kind installer
makes it) are written to a temporary directory, and args that point under its mount path point
there.
`python` is found on PATH with this interpreter's directory first, as in the image.

It runs against the bare control plane of tests/kind (the session's cluster has a controller of
its own). Checked: /healthz and /readyz (the probes) on --health-port, /metrics on
--metrics-port, and the subresource API on --subresource-port: HTTPS with the mounted
certificate, answering a request that carries the front proxy's client certificate.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import filelock
import pytest
import yaml

from conformance import resources
from conformance.clusters.local import LocalControlPlane
from conformance.clusters.processes import ManagedProcess
from conformance.install import kind_commands, manifests, on_kind
from conformance.polling import wait_http_ok

SERVER_NAME = "convoy-subresources.convoy-system.svc"


def port_of(args: list[str], flag: str) -> int:
    return int(next(a.split("=", 1)[1] for a in args if a.startswith(f"{flag}=")))


def port_free(port: int) -> bool:
    """As the controller's servers bind (SO_REUSEADDR: TIME_WAIT does not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def get(url: str, context: ssl.SSLContext | None = None, **headers: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def secret_mounts() -> dict[str, str]:
    """mountPath -> Secret name, for the controller container's Secret volumes."""
    spec = on_kind.deployment_manifest()["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    container = next(c for c in spec["containers"] if c["name"] == kind_commands.CONTAINER)
    return {
        m["mountPath"]: secrets[m["name"]]
        for m in container.get("volumeMounts", [])
        if m["name"] in secrets
    }


@pytest.fixture(scope="module")
def certificate() -> on_kind.ServingCertificate:
    return on_kind.serving_certificate()


@pytest.fixture
def command_line(
    bare_cluster: LocalControlPlane, certificate: on_kind.ServingCertificate, tmp_path: Path
) -> list[str]:
    mounts = secret_mounts()
    assert mounts == {"/var/run/convoy/serving-cert": kind_commands.SERVING_SECRET}
    data = {"tls.crt": certificate.cert_pem, "tls.key": certificate.key_pem}
    data["ca.crt"] = certificate.ca_pem
    materialized: dict[str, Path] = {}
    for mount_path in mounts:
        directory = tmp_path / "volumes" / mount_path.strip("/").replace("/", "_")
        directory.mkdir(parents=True)
        for key, content in data.items():
            (directory / key).write_bytes(content)
        materialized[mount_path] = directory

    def on_host(arg: str) -> str:
        flag, _, value = arg.partition("=")
        for mount_path, directory in materialized.items():
            if value.startswith(mount_path + "/"):
                return f"{flag}={directory}{value[len(mount_path) :]}"
        return arg

    args = [on_host(a) for a in on_kind.deployment_args()]
    return [*on_kind.image_entrypoint(), *args, f"--kubeconfig={bare_cluster.kubeconfig}"]


@pytest.fixture
def deployment_ports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The Deployment's ports are fixed: one test of this module at a time holds them, whatever
    xdist worker runs it (a lock file in the run's shared temporary directory)."""
    shared = tmp_path_factory.getbasetemp().parent
    with filelock.FileLock(str(shared / "convoy-deployment-ports.lock")):
        yield


@pytest.fixture
def container_process(
    command_line: list[str], bare_cluster: LocalControlPlane, tmp_path: Path, deployment_ports: None
) -> Iterator[ManagedProcess]:
    # The CRDs the controller lists (and nothing else of manifests/: no second APIService).
    with bare_cluster.api_client() as api:
        manifests.apply(api, manifests.load(resources.CRDS))
    flags = ("--health-port", "--metrics-port", "--subresource-port")
    busy = [p for p in (port_of(command_line, f) for f in flags) if not port_free(p)]
    if busy:
        pytest.skip(f"port(s) {busy} of the Deployment's args are in use on this machine")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    print("$", " ".join(command_line))
    process = ManagedProcess("convoy (container command line)", command_line, tmp_path / "log", env)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def wait_healthy(process: ManagedProcess, port: int, path: str = "/readyz") -> None:
    wait_http_ok(
        f"http://127.0.0.1:{port}{path}",
        alive=process.check,
        timeout=60,
        step=0.1,
        failure=lambda _: pytest.fail.Exception(f"{path} never answered 200:\n{process.tail()}"),
    )


def test_the_deployment_passes_the_documented_flags() -> None:
    assert on_kind.image_entrypoint() == ["python", "-m", "convoy"]
    # No --resync: the shipped controller runs with the document's default period.
    assert on_kind.deployment_args() == [
        "--health-port=8081",
        "--metrics-port=8080",
        "--subresource-port=8443",
        "--subresource-cert=/var/run/convoy/serving-cert/tls.crt",
        "--subresource-key=/var/run/convoy/serving-cert/tls.key",
    ]
    deployment = yaml.safe_load((resources.CONTROLLER / "deployment.yaml").read_text())
    ports = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert {p["name"]: p["containerPort"] for p in ports} == {
        "health": 8081,
        "metrics": 8080,
        "https": 8443,
    }


def test_the_container_command_line_serves_probes_metrics_and_the_api(
    container_process: ManagedProcess,
    command_line: list[str],
    bare_cluster: LocalControlPlane,
    certificate: on_kind.ServingCertificate,
) -> None:
    health = port_of(command_line, "--health-port")
    wait_healthy(container_process, health)
    assert get(f"http://127.0.0.1:{health}/healthz") == (200, "ok\n")
    code, body = get(f"http://127.0.0.1:{port_of(command_line, '--metrics-port')}/metrics")
    assert code == 200 and "convoy_workqueue_depth" in body
    assert "resync 120s" in container_process.log_path.read_text(), container_process.tail()

    # The aggregator's view: the mounted certificate verifies for the Service's name against
    # the CA that goes into the APIService's caBundle, and a request with the front proxy's
    # client certificate and user headers is answered.
    context = ssl.create_default_context(cadata=certificate.ca_pem.decode())
    context.load_cert_chain(*map(str, bare_cluster.proxy_client))
    https = port_of(command_line, "--subresource-port")

    class Named(urllib.request.HTTPSHandler):
        """Dial 127.0.0.1, verify the certificate for the Service's DNS name."""

        def https_open(self, request):  # type: ignore[no-untyped-def]
            return self.do_open(
                lambda host, **kw: _connection(host, SERVER_NAME, **kw), request, context=context
            )

    opener = urllib.request.build_opener(Named)
    request = urllib.request.Request(
        f"https://127.0.0.1:{https}/apis/subresources.convoy.kumodo.io/v1alpha1",
        headers={"X-Remote-User": "convoy-admin", "X-Remote-Group": "system:masters"},
    )
    with opener.open(request, timeout=10) as answer:
        discovery = json.loads(answer.read())
    assert discovery["groupVersion"] == "subresources.convoy.kumodo.io/v1alpha1", discovery


def _connection(host: str, server_name: str, **kwargs):  # type: ignore[no-untyped-def]
    import http.client

    class Connection(http.client.HTTPSConnection):
        def connect(self) -> None:
            sock = socket.create_connection((self.host, self.port), self.timeout)
            self.sock = self._context.wrap_socket(sock, server_hostname=server_name)

    return Connection(host, **kwargs)


def test_the_controller_stops_cleanly_on_sigterm(
    container_process: ManagedProcess, command_line: list[str]
) -> None:
    """Kubernetes stops a pod with SIGTERM: the controller exits 0 within the grace period."""
    wait_healthy(container_process, port_of(command_line, "--health-port"), "/healthz")
    assert container_process.popen is not None
    container_process.popen.terminate()
    assert container_process.popen.wait(30) == 0, container_process.tail()
