"""What every cluster provider offers the suite: one interface, three providers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from conformance.clusters.kubeconfig import api_client


@dataclass(frozen=True)
class ServiceReference:
    """A Service of the cluster in front of the suite's pod (an in-cluster run): the API
    server resolves it itself, so the cluster needs no DNS for it."""

    namespace: str
    name: str
    #: the first worker's port; xdist worker gwN serves on port + N
    port: int

    @property
    def dns_name(self) -> str:
        """The name the API server checks the serving certificate for."""
        return f"{self.name}.{self.namespace}.svc"

    @classmethod
    def parse(cls, text: str) -> ServiceReference:
        """NAMESPACE/NAME:PORT"""
        namespace, _, rest = text.partition("/")
        name, _, port = rest.partition(":")
        if not (namespace and name and port.isdigit()):
            raise ValueError(f"{text!r}: expected NAMESPACE/NAME:PORT")
        return cls(namespace, name, int(port))


@dataclass(frozen=True)
class CallbackAddress:
    """How the API server reaches a server the suite runs (webhooks, APIs).

    `host` is the address the suite's server binds and names in its certificate; the API server
    dials it. With `service`, the suite runs in a pod behind that Service, and the API server
    calls the Service instead.
    """

    host: str
    service: ServiceReference | None = None

    @classmethod
    def behind(cls, service: ServiceReference) -> CallbackAddress:
        return cls(service.dns_name, service)


@dataclass(frozen=True)
class Outage:
    """A part of the control plane down, by the wall clock (time.time()): from its stop until
    the API server answered ready again. Meanwhile the API server may refuse what its roles
    grant (its RBAC caches are not filled yet): such a refusal is the outage's, not a role's."""

    start: float
    end: float

    def covers(self, moment: float, grace: float) -> bool:
        return self.start <= moment <= self.end + grace


class Cluster(ABC):
    """A real Kubernetes API server the suite may use."""

    #: "local", "kind" or "existing"; printed and written into the report
    provider: str
    #: True when the suite created the cluster and may install cluster-wide objects freely
    owned: bool

    @property
    @abstractmethod
    def kubeconfig(self) -> Path: ...

    @property
    @abstractmethod
    def callback(self) -> CallbackAddress | None:
        """Where the API server can reach servers on this machine, if anywhere."""

    @abstractmethod
    def stop(self) -> None:
        """Release what the provider started (idempotent)."""

    @property
    def outages(self) -> list[Outage]:
        """Each time the suite took a part of the control plane down, until it was ready again."""
        return []

    def check_health(self) -> None:  # noqa: B027 - providers that run nothing keep this no-op
        """Raise with a clear message when a part the provider runs has died."""

    def health_report(self) -> str:
        """For a failure the cluster may explain: the state of each part the provider runs."""
        return ""

    def api_client(self) -> client.ApiClient:
        """A cluster the suite made keeps the client's credential files beside its kubeconfig,
        which go with it (a killed test process leaves none in the system temp directory)."""
        return api_client(self.kubeconfig, self.kubeconfig.parent if self.owned else None)

    def server_version(self) -> str:
        with self.api_client() as api:
            return client.VersionApi(api).get_code().git_version

    def describe(self) -> str:
        return f"{self.provider} cluster (kubeconfig {self.kubeconfig})"


class NoCallback(RuntimeError):
    """A cluster the suite made cannot call back to this machine: every check that needs the
    witness would be skipped, so the run is an error instead."""


def callback_address(cluster: Cluster) -> CallbackAddress | None:
    """Where the witness serves for `cluster`. None only for a cluster the suite did not make
    (an existing one without --callback-host): its witness checks are reported skipped."""
    if cluster.callback is not None:
        return cluster.callback
    if cluster.owned:
        raise NoCallback(
            f"{cluster.describe()}: no address of this machine that its API server can reach; "
            "pass --callback-host"
        )
    return None
