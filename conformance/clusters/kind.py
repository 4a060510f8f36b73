"""The kind provider: pytest-kind-ng's KindCluster, always with kind and kubectl from PATH."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from pytest_kind import KindCluster

from conformance.clusters.base import CallbackAddress, Cluster


class KindError(RuntimeError):
    """kind cannot be used here; the message says what is missing."""


def tool_path(name: str, given: str | None) -> Path:
    """An explicit path, else PATH; never a download (pytest-kind-ng would fetch old versions)."""
    found = given or shutil.which(name)
    if not found:
        raise KindError(f"{name} is not on PATH; install it or pass --{name}-bin")
    return Path(found)


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
    ) -> None:
        self.keep = keep
        self.kind = KindCluster(
            name,
            image=image,
            kind_path=tool_path("kind", kind_bin),
            kubectl_path=tool_path("kubectl", kubectl_bin),
        )

    def start(self) -> KindProvider:
        """Create the cluster, or reuse one of the same name."""
        self.kind.create()
        return self

    @property
    def kubeconfig(self) -> Path:
        return Path(self.kind.kubeconfig_path)

    @property
    def callback(self) -> CallbackAddress | None:
        """The kind network's gateway: the host as seen from the node containers."""
        proc = subprocess.run(
            ["docker", "network", "inspect", "kind", "-f", "{{(index .IPAM.Config 0).Gateway}}"],
            capture_output=True,
            text=True,
            check=False,
        )
        gateway = proc.stdout.strip()
        return CallbackAddress(gateway) if proc.returncode == 0 and gateway else None

    def stop(self) -> None:
        if not self.keep:
            self.kind.delete()

    def describe(self) -> str:
        return f"kind cluster {self.kind.name!r} (kubeconfig {self.kubeconfig})"
