"""Target clusters: the API server a Release's objects go to.

A Release without spec.clusterRef, or naming a Cluster without spec.kubeconfigSecretRef, targets
the cluster the controller runs against. A Cluster with a kubeconfig Secret gets its own API
client, built once per Secret resourceVersion and checked for reachability at every reconcile,
so an unreachable cluster says ClusterNotReady instead of failing later as DeployFailed.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from kubernetes.dynamic.resource import Resource

from convoy.api import CLUSTERS, GROUP, VERSION, Reason
from convoyapi.discovery import dynamic_client

#: Seconds the reachability check (GET /version) may take.
PROBE_TIMEOUT = 5.0
DEFAULT_KUBECONFIG_KEY = "kubeconfig"
#: Name of the target that is the controller's own cluster.
LOCAL = "local"

#: kubeconfig fields that would make the controller run a command or read one of its own files
#: on behalf of whoever can write a Secret: a kubeconfig in a Secret must carry its data inline.
_FORBIDDEN = (
    ("users", "user", ("exec", "auth-provider", "tokenFile", "client-certificate", "client-key")),
    ("clusters", "cluster", ("certificate-authority",)),
)


class TargetError(Exception):
    """The target cluster cannot be used; the message says what to fix."""

    reason = Reason.CLUSTER_NOT_READY


def api_message(error: client.ApiException) -> str:
    """The API server's own words from an error's Status body, else what the client has."""
    body = error.body.decode(errors="replace") if isinstance(error.body, bytes) else error.body
    try:
        message = json.loads(body or "").get("message")
    except (ValueError, AttributeError):
        message = None
    return message or body or f"{error.status} {error.reason}"


@dataclass
class Target:
    """An API server to render for and apply to."""

    api: client.ApiClient
    dynamic: DynamicClient
    name: str
    #: Only positive answers are kept: a kind that is unknown now may be served after a CRD apply.
    _scopes: dict[tuple[str, str], bool] = field(default_factory=dict, init=False, repr=False)

    def resource(self, api_version: str, kind: str) -> Resource:
        """The served resource of a kind; raises ResourceNotFoundError after one discovery refresh.

        The dynamic client's LazyDiscoverer refreshes its cache once when a lookup misses.
        """
        try:
            return self.dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            raise ResourceNotFoundError(
                f"the API server does not serve kind {kind} in {api_version}"
            ) from None

    def scope_of(self, api_version: str, kind: str) -> bool | None:
        """True for a namespaced kind, False for a cluster-scoped one, None if not served."""
        key = (api_version, kind)
        if key not in self._scopes:
            try:
                self._scopes[key] = self.resource(api_version, kind).namespaced
            except ResourceNotFoundError:
                return None
        return self._scopes[key]


class Targets:
    """Resolves the target of each Release; one per controller process, caching API clients."""

    def __init__(self, api: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api)
        self._custom = client.CustomObjectsApi(api)
        self._own = Target(api, dynamic_client(api), LOCAL)
        #: (namespace, Secret name) -> (Secret resourceVersion, Target)
        self._remote: dict[tuple[str, str], tuple[str, Target]] = {}

    def for_release(self, release: dict[str, Any]) -> Target:
        """The Release's target cluster, reachable now; raises TargetError."""
        ref = (release.get("spec") or {}).get("clusterRef")
        if not ref:
            return self._own
        namespace = release["metadata"]["namespace"]
        cluster = f"{namespace}/{ref['name']}"
        spec = self._read_cluster(namespace, ref["name"]).get("spec") or {}
        secret_ref = spec.get("kubeconfigSecretRef")
        if not secret_ref:
            return self._own
        secret = self._read_secret(namespace, secret_ref["name"], cluster)
        key = secret_ref.get("key") or DEFAULT_KUBECONFIG_KEY
        return self._remote_target(cluster, secret, key)

    def close(self) -> None:
        """Close the clients built for Clusters (not the one given to the constructor)."""
        for _, target in self._remote.values():
            target.api.close()
        self._remote.clear()

    def _read_cluster(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return self._custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, CLUSTERS, name
            )
        except client.ApiException as error:
            if error.status == 404:
                raise TargetError(f"Cluster {namespace}/{name} not found") from None
            raise TargetError(
                f"could not read Cluster {namespace}/{name}: {api_message(error)}"
            ) from None

    def _read_secret(self, namespace: str, name: str, cluster: str) -> client.V1Secret:
        try:
            return self._core.read_namespaced_secret(name, namespace)
        except client.ApiException as error:
            if error.status == 404:
                raise TargetError(
                    f"kubeconfig Secret {namespace}/{name} of Cluster {cluster} not found: "
                    "create it or fix spec.kubeconfigSecretRef.name"
                ) from None
            raise TargetError(
                f"could not read kubeconfig Secret {namespace}/{name}: {api_message(error)}"
            ) from None

    def _remote_target(self, cluster: str, secret: client.V1Secret, key: str) -> Target:
        """The cached Target for this Secret version, or a new one (closing the outdated one)."""
        cache_key = (secret.metadata.namespace, secret.metadata.name)
        version = f"{secret.metadata.resource_version}/{key}"
        cached = self._remote.get(cache_key)
        if cached and cached[0] == version:
            _probe(cached[1].api, cluster)
            return cached[1]
        where = f"Secret {cache_key[0]}/{cache_key[1]} key {key}"
        encoded = (secret.data or {}).get(key)
        if encoded is None:
            raise TargetError(
                f"{where} not found: put the kubeconfig of Cluster {cluster} there, "
                "or set spec.kubeconfigSecretRef.key to the key that holds it"
            )
        api = _api_client(encoded, where)
        try:
            # Probe first: the dynamic client runs discovery in its constructor, with retries.
            _probe(api, cluster)
            target = Target(api, dynamic_client(api), cluster)
        except (client.ApiException, urllib3.exceptions.HTTPError) as error:
            api.close()
            detail = api_message(error) if isinstance(error, client.ApiException) else error
            raise TargetError(f"Cluster {cluster}: discovery failed: {detail}") from None
        except BaseException:
            api.close()
            raise
        if cached:
            cached[1].api.close()
        self._remote[cache_key] = (version, target)
        return target


def _api_client(encoded: str, where: str) -> client.ApiClient:
    """An ApiClient from base64 kubeconfig text, on a fresh Configuration (never the default)."""
    try:
        document = yaml.safe_load(base64.b64decode(encoded).decode())
    except (binascii.Error, UnicodeDecodeError, yaml.YAMLError) as error:
        raise TargetError(f"{where} is not a kubeconfig: {error}") from None
    if not isinstance(document, dict):
        raise TargetError(f"{where} is not a kubeconfig: expected a YAML mapping")
    _check_inline(document, where)
    configuration = client.Configuration()
    try:
        config.load_kube_config_from_dict(
            document, client_configuration=configuration, persist_config=False
        )
        return client.ApiClient(configuration)
    except (ConfigException, ValueError, TypeError, OSError) as error:
        raise TargetError(f"{where} is not a usable kubeconfig: {error}") from None


def _check_inline(document: dict[str, Any], where: str) -> None:
    for section, part, fields in _FORBIDDEN:
        for entry in document.get(section) or []:
            body = entry.get(part) if isinstance(entry, dict) else None
            found = [name for name in fields if isinstance(body, dict) and name in body]
            if found:
                raise TargetError(
                    f"{where} uses {', '.join(found)}, which the controller does not allow: "
                    "give credentials inline (token, client-certificate-data, client-key-data, "
                    "certificate-authority-data)"
                )


def _probe(api: client.ApiClient, cluster: str) -> None:
    """GET /version within PROBE_TIMEOUT, without retries (the client's default retries thrice)."""
    method, url, headers, _, _ = api.param_serialize(
        "GET",
        "/version",
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    where = f"Cluster {cluster}: API server {api.configuration.host}"
    try:
        response = api.rest_client.pool_manager.request(
            method, url, headers=headers, timeout=PROBE_TIMEOUT, retries=False
        )
    except urllib3.exceptions.HTTPError as error:
        raise TargetError(f"{where} is not reachable: {error}") from None
    if response.status != 200:
        raise TargetError(f"{where} answered GET /version with HTTP {response.status}")
