"""The existing provider: any cluster named by a kubeconfig, with a controller already installed.

The suite creates nothing cluster-wide here but its test CRDs and namespaces, and deletes
only what it created.
"""

from __future__ import annotations

from pathlib import Path

from conformance.clusters.base import CallbackAddress, Cluster, ServiceReference


class ExistingCluster(Cluster):
    provider = "existing"
    owned = False

    def __init__(
        self,
        kubeconfig: Path,
        callback_host: str | None = None,
        witness_service: ServiceReference | None = None,
    ) -> None:
        if not kubeconfig.is_file():
            raise FileNotFoundError(f"--kubeconfig {kubeconfig}: no such file")
        self._kubeconfig = kubeconfig
        self._callback: CallbackAddress | None = None
        if witness_service:
            self._callback = CallbackAddress.behind(witness_service)
        elif callback_host:
            self._callback = CallbackAddress(callback_host)

    @property
    def kubeconfig(self) -> Path:
        return self._kubeconfig

    @property
    def callback(self) -> CallbackAddress | None:
        return self._callback

    def stop(self) -> None:
        """Nothing to stop: the cluster is not ours."""
