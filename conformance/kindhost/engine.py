"""The suite's own Docker engine: Debian's dockerd in a network namespace of its own.

Everything the engine changes on the network is inside that namespace (its bridges, the nodes'
forwarding), except one veth pair and one route on this machine: the route sends the kind
network's addresses to the namespace, so the suite reaches a node's API server at the node's
own address, and the nodes reach the suite's servers at the veth's address on this side.
dockerd runs with --iptables=false and --ip-forward=false, so it changes no firewall rule and
no kernel setting; `down` stops it by its own PID and removes the namespace, veth and route.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from conformance.clusters.binaries import cache_root
from conformance.clusters.kind import KIND_NETWORK
from conformance.polling import poll_until

log = logging.getLogger("conformance")

NETNS = "convoy-kindhost"
HOST_VETH, NAMESPACE_VETH = "cvk-host", "cvk-ns"
#: The veth pair's link: this machine is .1, the engine's namespace .2.
LINK = ipaddress.ip_network("10.251.0.0/30")
#: The subnet of the `kind` Docker network (KIND_NETWORK), made by the engine before kind would
#: make one of its own (whose subnet kind picks without looking at this machine's routes).
KIND_SUBNET = ipaddress.ip_network("10.252.0.0/24")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0


class EngineError(RuntimeError):
    """The engine cannot start or stop here; the message says which step and why."""


def run(argv: list[str], what: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise EngineError(f"{what}: `{' '.join(argv)}` exited {proc.returncode}: {detail}")
    return proc.stdout


def host_address() -> str:
    """This machine's address on the veth: where nodes and pods call the suite back."""
    return str(LINK[1])


def namespace_address() -> str:
    return str(LINK[2])


def oci_runtime() -> Path:
    return Path(str(resources.files("conformance.kindhost").joinpath("oci_runtime.py")))


@dataclass
class Engine:
    #: the socket, PID file and dockerd's exec root (state that ends with the engine)
    run_dir: Path = Path("/run/convoy-kindhost")
    #: images and containers, kept between runs: the node image is built once per version
    data_root: Path = field(default_factory=lambda: cache_root() / "kindhost" / "docker")

    @property
    def socket(self) -> Path:
        return self.run_dir / "docker.sock"

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pid_file(self) -> Path:
        return self.run_dir / "dockerd.pid"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "dockerd.log"

    def docker_argv(self, *args: str) -> list[str]:
        return ["docker", "--host", self.docker_host, *args]

    def docker(self, *args: str, what: str) -> str:
        return run(self.docker_argv(*args), what)

    def succeeds(self, *args: str) -> bool:
        """Whether a docker command exits 0 (a probe: its output and error are not wanted)."""
        return subprocess.run(self.docker_argv(*args), capture_output=True).returncode == 0

    def pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.pid_file.read_text())
            os.kill(pid, 0)
            return pid
        return None

    def answers(self) -> bool:
        return self.succeeds("version", "--format", "{{.Server.Version}}")

    # -- up ---------------------------------------------------------------------------------
    def up(self) -> Engine:
        """Start the engine unless it runs already; idempotent."""
        if self.pid() and self.answers():
            return self
        check_prerequisites()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.data_root.mkdir(parents=True, exist_ok=True)
        make_namespace()
        self._start_dockerd()
        self._ensure_kind_network()
        log.info("kindhost: dockerd %s in netns %s", self.pid(), NETNS)
        return self

    def _start_dockerd(self) -> None:
        argv = [
            "nsenter",
            f"--net=/run/netns/{NETNS}",
            "dockerd",
            f"--host={self.docker_host}",
            f"--data-root={self.data_root}",
            f"--exec-root={self.run_dir / 'exec'}",
            f"--pidfile={self.pid_file}",
            "--iptables=false",
            "--ip-forward=false",
            "--ip-masq=false",
            f"--add-runtime=convoy-caps={oci_runtime()}",
            "--default-runtime=convoy-caps",
        ]
        with self.log_path.open("ab") as out:
            subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # the engine outlives the command that started it
            )
        poll_until(
            lambda: self.pid() and self.answers(),
            timeout=START_TIMEOUT,
            step=0.2,
            failure=lambda: EngineError(
                f"dockerd not answering after {START_TIMEOUT:.0f} s:\n"
                + "\n".join(self.log_path.read_text(errors="replace").splitlines()[-15:])
            ),
        )

    def _ensure_kind_network(self) -> None:
        listed = self.docker("network", "ls", "--format", "{{.Name}}", what="listing networks")
        if KIND_NETWORK in listed.split():
            return
        gateway = str(KIND_SUBNET[1])
        self.docker(
            "network",
            "create",
            "--driver=bridge",
            f"--subnet={KIND_SUBNET}",
            f"--gateway={gateway}",
            "--opt=com.docker.network.bridge.enable_ip_masquerade=false",
            KIND_NETWORK,
            what="creating the kind network",
        )

    # -- down -------------------------------------------------------------------------------
    def down(self) -> None:
        """Remove the engine's containers, stop dockerd (by its PID), remove the network
        namespace, veth and route. Images stay in the data root."""
        pid = self.pid()
        if pid:
            with contextlib.suppress(EngineError):
                ids = self.docker("ps", "--all", "--quiet", what="listing containers").split()
                if ids:
                    self.docker("rm", "--force", *ids, what="removing containers")
            os.kill(pid, signal.SIGTERM)
            try:
                poll_until(
                    lambda: not self.pid(), timeout=STOP_TIMEOUT, step=0.2, failure=TimeoutError
                )
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
        remove_namespace()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": self.docker_host}


def check_prerequisites() -> None:
    if os.geteuid() != 0:
        raise EngineError("the kind host's engine needs root (network namespace, dockerd)")
    # debootstrap builds the node and controller base images (conformance.kindhost.images)
    commands = ("dockerd", "runc", "nsenter", "ip", "docker", "debootstrap")
    missing = [name for name in commands if not shutil.which(name)]
    if missing:
        raise EngineError(
            f"missing {', '.join(missing)}: `make kindhost-packages` installs Debian's docker.io "
            "and debootstrap"
        )


def _routes() -> list[dict]:
    return json.loads(run(["ip", "-json", "route", "show"], "listing routes") or "[]")


def check_no_overlap() -> None:
    """The link and the kind subnet must be free on this machine (another network using them
    would lose its traffic to the engine)."""
    ours = {HOST_VETH}
    for route in _routes():
        if route.get("dev") in ours or route.get("dst") in (None, "default"):
            continue
        with contextlib.suppress(ValueError):
            taken = ipaddress.ip_network(route["dst"], strict=False)
            for network in (LINK, KIND_SUBNET):
                if taken.overlaps(network):
                    raise EngineError(f"{network} overlaps this machine's route {route['dst']}")


def namespace_exists() -> bool:
    return NETNS in run(["ip", "netns", "list"], "listing network namespaces").split()


def make_namespace() -> None:
    if namespace_exists():
        return
    check_no_overlap()
    inside = ["ip", "netns", "exec", NETNS]
    steps = [
        ["ip", "netns", "add", NETNS],
        ["ip", "link", "add", HOST_VETH, "type", "veth", "peer", "name", NAMESPACE_VETH],
        ["ip", "link", "set", NAMESPACE_VETH, "netns", NETNS],
        ["ip", "addr", "add", f"{host_address()}/{LINK.prefixlen}", "dev", HOST_VETH],
        ["ip", "link", "set", HOST_VETH, "up"],
        [
            *inside,
            "ip",
            "addr",
            "add",
            f"{namespace_address()}/{LINK.prefixlen}",
            "dev",
            NAMESPACE_VETH,
        ],
        [*inside, "ip", "link", "set", NAMESPACE_VETH, "up"],
        [*inside, "ip", "link", "set", "lo", "up"],
        [*inside, "ip", "route", "add", "default", "via", host_address()],
        # forwarding between the veth and the kind bridge: the namespace's own setting
        [*inside, "sysctl", "--quiet", "--write", "net.ipv4.ip_forward=1"],
        ["ip", "route", "add", str(KIND_SUBNET), "via", namespace_address(), "dev", HOST_VETH],
    ]
    try:
        for argv in steps:
            run(argv, "making the engine's network namespace")
    except EngineError:
        remove_namespace()
        raise


def remove_namespace() -> None:
    """The route and the host's veth go with the peer, the peer with the namespace."""
    for argv in (
        ["ip", "route", "del", str(KIND_SUBNET), "dev", HOST_VETH],
        ["ip", "link", "del", HOST_VETH],
        ["ip", "netns", "del", NETNS],
    ):
        subprocess.run(argv, capture_output=True, check=False)
