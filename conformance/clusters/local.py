"""The local provider: real etcd, kube-apiserver and kube-controller-manager as child processes.

Like controller-runtime's envtest, plus kube-controller-manager (namespaces finish deleting,
garbage collection runs) and the front proxy (aggregated APIs work). Everything listens on
127.0.0.1 on free ports; state lives in a temporary directory removed on stop.
"""

from __future__ import annotations

import json
import logging
import shutil
import ssl
import tempfile
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conformance.clusters import pki
from conformance.clusters.base import CallbackAddress, Cluster, Outage
from conformance.clusters.binaries import Binaries
from conformance.clusters.kubeconfig import render_kubeconfig
from conformance.clusters.ports import LOOPBACK, release_port, reserve_port
from conformance.clusters.processes import ChildDied, ManagedProcess
from conformance.polling import wait_http_ok

log = logging.getLogger(__name__)

SERVICE_CIDR = "10.0.0.0/24"
FRONT_PROXY_CLIENT = "front-proxy-client"
ADMIN_KUBECONFIG = "admin.kubeconfig"
START_TIMEOUT = 90.0
#: Starts of a control plane whose port something else took meanwhile (then it starts again
#: with new ports, and says so).
START_ATTEMPTS = 3
# Controllers that act on API objects alone: no nodes, kubelets or clouds here.
CONTROLLERS = (
    "namespace",
    "garbage-collector",
    "serviceaccount",
    "serviceaccount-token",
    "root-ca-certificate-publisher",
    "resourcequota",
    "deployment",
    "replicaset",
    "job",
    "clusterrole-aggregation",
)


class ControlPlaneError(RuntimeError):
    """The control plane could not start; the message says which part and why."""


class OnLoopback(Cluster):
    """A control plane on this machine's loopback, reached by the admin kubeconfig in its
    directory: one this process runs, or one it reuses."""

    provider = "local"
    owned = True

    def __init__(self, directory: Path) -> None:
        self._kubeconfig = directory / ADMIN_KUBECONFIG

    @property
    def kubeconfig(self) -> Path:
        return self._kubeconfig

    @property
    def callback(self) -> CallbackAddress:
        return CallbackAddress(host=LOOPBACK)


class LocalControlPlane(OnLoopback):
    """A control plane of real processes on this machine."""

    def __init__(self, binaries: Binaries, base_dir: Path | None = None) -> None:
        self.binaries = binaries
        self.dir = Path(tempfile.mkdtemp(prefix="convoy-local-", dir=base_dir))
        super().__init__(self.dir)
        self.processes: list[ManagedProcess] = []
        self.ports: list[int] = []
        self.apiserver_port = 0
        self._outages: list[Outage] = []

    # -- Cluster interface -------------------------------------------------------------------
    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.apiserver_port}"

    def describe(self) -> str:
        return f"local control plane {self.binaries.kubernetes_version} at {self.server}"

    def check_health(self) -> None:
        for process in self.processes:
            process.check()

    def health_report(self) -> str:
        return "\n\n".join(process.report() for process in self.processes)

    def process(self, name: str) -> ManagedProcess:
        return next(p for p in self.processes if p.name == name)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> LocalControlPlane:
        """Start etcd, then the API server, then the controller manager; wait until ready.

        The ports are reserved (conformance.clusters.ports); should a process that is not the
        suite's still take one first, the start begins again with new ports.
        """
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._start_once()
            except ControlPlaneError as error:
                if "address already in use" not in str(error) or attempt == START_ATTEMPTS:
                    raise
                log.warning(
                    "local control plane: start %d of %d lost a port to another process; "
                    "starting again with new ports: %s",
                    attempt,
                    START_ATTEMPTS,
                    str(error).splitlines()[0],
                )
        raise AssertionError("unreachable")

    def _start_once(self) -> LocalControlPlane:
        started = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self._write_pki()
            self._start_etcd()
            self._start_apiserver()
            self._wait_ready()
            self._start_controller_manager()
        except BaseException:
            self.stop()
            raise
        log.info("%s ready in %.1f s", self.describe(), time.monotonic() - started)
        return self

    def stop(self) -> None:
        """The API server and the controller manager side by side (each may take its grace
        period on a loaded machine), then etcd, which they write to."""
        clients = [p for p in self.processes if p.name != "etcd"]
        with ThreadPoolExecutor(max_workers=len(clients) or 1) as pool:
            list(pool.map(ManagedProcess.stop, clients))
        for process in self.processes:
            process.stop()
        self.processes.clear()
        for port in self.ports:
            release_port(port)
        self.ports.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self, name: str, while_down: Callable[[], object] = lambda: None) -> None:
        """Stop one part (SIGTERM), call `while_down`, start the part again with the same flags,
        ports and data, and wait until the API server is ready and routes again to each
        aggregated API it served before (the next test finds the cluster as it was): the
        project's fault tests. The time down is recorded as an outage."""
        process = self.process(name)
        served = self._aggregated_paths()
        down = time.time()
        process.stop()
        while_down()
        process.start()
        self._wait_ready()
        # The aggregator is kube-apiserver's: a timeout names it and shows its log.
        apiserver, admin = self.process("kube-apiserver"), self._admin_context()
        for path in served:
            self._wait_https_ok(apiserver, f"{self.server}{path}", admin)
        self._outages.append(Outage(down, time.time()))

    @property
    def outages(self) -> list[Outage]:
        return list(self._outages)

    @property
    def etcd_url(self) -> str:
        return f"http://{LOOPBACK}:{self.etcd_port}"

    def _port(self) -> int:
        port = reserve_port()
        self.ports.append(port)
        return port

    def __enter__(self) -> LocalControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- parts -------------------------------------------------------------------------------
    def _write_pki(self) -> None:
        pki_dir = self.dir / "pki"
        pki_dir.mkdir()
        ca = pki.new_ca("convoy-local-ca")
        front_proxy_ca = pki.new_ca("convoy-local-front-proxy-ca")
        serving = pki.issue(
            ca,
            "kube-apiserver",
            dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
            ip_addresses=(LOOPBACK, "10.0.0.1"),
            server=True,
        )
        admin = pki.issue(ca, "convoy-admin", organizations=("system:masters",), client=True)
        proxy_client = pki.issue(front_proxy_ca, FRONT_PROXY_CLIENT, client=True)
        self.ca_path, _ = ca.write(pki_dir, "ca")
        self.front_proxy_ca_path, _ = front_proxy_ca.write(pki_dir, "front-proxy-ca")
        self.serving = serving.write(pki_dir, "apiserver")
        self.admin = admin.write(pki_dir, "admin")
        self.proxy_client = proxy_client.write(pki_dir, "front-proxy-client")
        self.sa_key, self.sa_pub = pki.write_signing_key(pki_dir, "service-account")

    def _spawn(self, name: str, argv: list[str]) -> ManagedProcess:
        process = ManagedProcess(name, argv, self.dir / f"{name}.log")
        process.start()
        self.processes.append(process)
        return process

    def _start_etcd(self) -> None:
        self.etcd_port, peer_port = self._port(), self._port()
        client_url, peer_url = self.etcd_url, f"http://{LOOPBACK}:{peer_port}"
        self._spawn(
            "etcd",
            [
                str(self.binaries.etcd),
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

    def _start_apiserver(self) -> None:
        self.apiserver_port = self._port()
        serving_cert, serving_key = self.serving
        proxy_cert, proxy_key = self.proxy_client
        self._spawn(
            "kube-apiserver",
            [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                f"--secure-port={self.apiserver_port}",
                f"--bind-address={LOOPBACK}",
                f"--advertise-address={LOOPBACK}",
                f"--cert-dir={self.dir / 'apiserver-certs'}",
                f"--tls-cert-file={serving_cert}",
                f"--tls-private-key-file={serving_key}",
                f"--client-ca-file={self.ca_path}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={self.sa_pub}",
                f"--service-account-signing-key-file={self.sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                # The front proxy: the aggregator presents this client certificate to
                # aggregated API servers, which verify it against the requestheader CA.
                f"--requestheader-client-ca-file={self.front_proxy_ca_path}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={proxy_cert}",
                f"--proxy-client-key-file={proxy_key}",
                # No kubelets and no real endpoints here: keep the kubernetes Service's
                # endpoints unmanaged instead of publishing a loopback address.
                "--endpoint-reconciler-type=none",
            ],
        )
        admin_cert, admin_key = self.admin
        self._kubeconfig.write_text(
            render_kubeconfig(
                self.server,
                self.ca_path.read_bytes(),
                admin_cert.read_bytes(),
                admin_key.read_bytes(),
            )
        )

    def _start_controller_manager(self) -> None:
        port = self._port()
        process = self._spawn(
            "kube-controller-manager",
            [
                str(self.binaries.kube_controller_manager),
                f"--kubeconfig={self._kubeconfig}",
                f"--authentication-kubeconfig={self._kubeconfig}",
                f"--authorization-kubeconfig={self._kubeconfig}",
                f"--secure-port={port}",
                f"--bind-address={LOOPBACK}",
                f"--cert-dir={self.dir / 'kcm-certs'}",
                "--leader-elect=false",
                f"--service-account-private-key-file={self.sa_key}",
                f"--root-ca-file={self.ca_path}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--use-service-account-credentials=false",
                # Only the controllers that act on API objects alone; no nodes or clouds here.
                "--controllers=" + ",".join(f"{name}-controller" for name in CONTROLLERS),
            ],
        )
        # Its serving certificate is self-signed; only liveness is asked of it here.
        insecure = ssl._create_unverified_context()
        self._wait_https_ok(process, f"https://{LOOPBACK}:{port}/healthz", insecure)

    def _wait_ready(self) -> None:
        url = f"{self.server}/readyz"
        self._wait_https_ok(self.process("kube-apiserver"), url, self._admin_context())

    def _admin_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_path))
        context.load_cert_chain(*map(str, self.admin))
        return context

    def _aggregated_paths(self) -> list[str]:
        """The discovery paths of the aggregated APIs (an APIService with a Service) available
        now: after a restart the aggregator routes to them again some seconds after /readyz."""
        url = f"{self.server}/apis/apiregistration.k8s.io/v1/apiservices"
        with urllib.request.urlopen(url, context=self._admin_context(), timeout=10) as answer:
            services = json.load(answer)["items"]
        return [
            f"/apis/{spec['group']}/{spec['version']}"
            for spec, status in ((s["spec"], s.get("status", {})) for s in services)
            if spec.get("service") and _available(status)
        ]

    def _wait_https_ok(self, process: ManagedProcess, url: str, context: ssl.SSLContext) -> None:
        """Poll `url` until it answers 200, failing fast when any child dies."""

        def alive() -> None:
            try:
                self.check_health()
            except ChildDied as died:
                raise ControlPlaneError(str(died)) from None

        wait_http_ok(
            url,
            alive=alive,
            timeout=START_TIMEOUT,
            step=0.1,
            context=context,
            failure=lambda last_error: ControlPlaneError(
                f"{process.name} not ready after {START_TIMEOUT:.0f} s ({url}: {last_error}); "
                f"last lines of its log:\n{process.tail()}"
            ),
        )


class ReusedControlPlane(OnLoopback):
    """A LocalControlPlane that another process started and stops (the kill run's lanes,
    conformance.lanes). The run that uses it deletes what it created, as on any cluster,
    and leaves the processes alone."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        if not self.kubeconfig.is_file():
            raise FileNotFoundError(f"{directory}: no local control plane's {ADMIN_KUBECONFIG}")

    def stop(self) -> None:
        """Nothing to stop: the processes are the starter's."""

    def describe(self) -> str:
        return f"local control plane reused from {self._kubeconfig.parent}"


def _available(status: dict) -> bool:
    conditions = status.get("conditions", [])
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)
