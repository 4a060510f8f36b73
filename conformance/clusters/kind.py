"""The kind provider: pytest-kind-ng's KindCluster, always with kind and kubectl from PATH.

The node image comes from `kind:` in conformance/versions.yaml (one per Kubernetes minor, pinned
by digest, copied from the release notes of the pinned kind release) unless --kind-image names
one. Installing the reference controller on the cluster is conformance.install.on_kind's job.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
from pathlib import Path

import yaml

from conformance.clusters.base import CallbackAddress, Cluster
from conformance.versions import KindError, kind_versions


def default_node_image() -> str:
    return kind_versions().node_image()


def tool_path(name: str, given: str | None) -> Path:
    """An explicit path, else PATH; never a download (pytest-kind-ng would fetch old versions)."""
    found = given or shutil.which(name)
    if not found:
        raise KindError(f"{name} is not on PATH; install it or pass --{name}-bin")
    return Path(found)


def get_clusters_argv(kind: Path) -> list[str]:
    return [str(kind), "get", "clusters"]


def export_kubeconfig_argv(kind: Path, name: str, kubeconfig: Path) -> list[str]:
    return [str(kind), "export", "kubeconfig", "--name", name, "--kubeconfig", str(kubeconfig)]


#: The Docker network kind puts its nodes on.
KIND_NETWORK = "kind"
#: The API server's port inside the control-plane node.
API_SERVER_PORT = 6443


def node_address_argv(node: str, network: str = KIND_NETWORK) -> list[str]:
    template = f"{{{{(index .NetworkSettings.Networks {json.dumps(network)}).IPAddress}}}}"
    return ["docker", "inspect", "--format", template, node]


def ipam_argv(network: str = KIND_NETWORK) -> list[str]:
    return ["docker", "network", "inspect", network, "-f", "{{json .IPAM.Config}}"]


def ipv4_gateway(ipam_config: str) -> str | None:
    """The host's address on a Docker network, from the JSON of its `.IPAM.Config`: the IPv4
    entry's gateway, else the first host of its subnet. kind makes its network with an IPv6
    ULA subnet of its own and no gateway, which Docker lists first."""
    try:
        entries = json.loads(ipam_config or "null") or []
    except json.JSONDecodeError:
        return None
    for entry in entries:
        try:
            subnet = ipaddress.ip_network(entry.get("Subnet") or "", strict=False)
        except ValueError:
            continue
        if subnet.version == 4:
            return entry.get("Gateway") or str(next(subnet.hosts()))
    return None


class KindProvider(Cluster):
    provider = "kind"
    owned = True

    def __init__(
        self,
        name: str,
        *,
        image: str | None,
        kind_bin: str | None = None,
        kubectl_bin: str | None = None,
        keep: bool = False,
        kube_version: str | None = None,
        callback_host: str | None = None,
        config_file: Path | None = None,
        node_address: bool = False,
    ) -> None:
        self.keep = keep
        self.callback_host = callback_host
        self.config_file = config_file
        self.node_address = node_address
        self.image = image or kind_versions().node_image(kube_version)
        self.kind_path = tool_path("kind", kind_bin)
        self.kubectl_path = tool_path("kubectl", kubectl_bin)
        # Imported here: `convoy-conformance run` imports this module before pytest loads
        # pytest-kind-ng as a plugin, which pytest can then no longer rewrite.
        from pytest_kind import KindCluster

        self.kind = KindCluster(
            name,
            image=self.image,
            kind_path=self.kind_path,
            kubectl_path=self.kubectl_path,
        )

    def start(self) -> KindProvider:
        """Create the cluster, or reuse one of the same name (made by helm/kind-action, say)."""
        self._export_kubeconfig_if_reused()
        self.kind.create(self.config_file)
        if self.node_address:
            self._point_kubeconfig_at_node()
        return self

    def _point_kubeconfig_at_node(self) -> None:
        """The server becomes https://<the control-plane node's IPv4 address>:6443, which the
        API server's certificate names (kubeadm's advertise address)."""
        node = f"{self.kind.name}-control-plane"
        proc = subprocess.run(node_address_argv(node), capture_output=True, text=True, check=True)
        document = yaml.safe_load(self.kubeconfig.read_text())
        for cluster in document["clusters"]:
            cluster["cluster"]["server"] = f"https://{proc.stdout.strip()}:{API_SERVER_PORT}"
        self.kubeconfig.write_text(yaml.safe_dump(document, sort_keys=False))

    def _export_kubeconfig_if_reused(self) -> None:
        """pytest-kind-ng reuses a cluster only with the kubeconfig it wrote itself: for a cluster
        created elsewhere, ask kind for it first."""
        kubeconfig = Path(self.kind.kubeconfig_path)
        if kubeconfig.exists() and kubeconfig.stat().st_size > 0:
            return
        listed = subprocess.run(
            get_clusters_argv(self.kind_path), capture_output=True, text=True, check=False
        )
        if self.kind.name in listed.stdout.split():
            subprocess.run(
                export_kubeconfig_argv(self.kind_path, self.kind.name, kubeconfig),
                capture_output=True,
                text=True,
                check=True,
            )

    @property
    def kubeconfig(self) -> Path:
        return Path(self.kind.kubeconfig_path)

    @property
    def callback(self) -> CallbackAddress | None:
        """--callback-host, else the kind network's IPv4 gateway: the host as the node
        containers see it."""
        if self.callback_host:
            return CallbackAddress(self.callback_host)
        proc = subprocess.run(ipam_argv(), capture_output=True, text=True, check=False)
        gateway = ipv4_gateway(proc.stdout) if proc.returncode == 0 else None
        return CallbackAddress(gateway) if gateway else None

    def stop(self) -> None:
        if not self.keep:
            self.kind.delete()

    def describe(self) -> str:
        return f"kind cluster {self.kind.name!r} ({self.image}, kubeconfig {self.kubeconfig})"
