"""Target clusters: the controller's own, and Clusters reached by a kubeconfig in a Secret."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest
import yaml
from kubernetes import client

import convoy.targets
from conformance.clusters.base import Cluster
from convoy.api import CLUSTERS, GROUP, VERSION, Reason
from convoy.render import Obj
from convoy.targets import LOCAL, PROBE_TIMEOUT, Target, TargetError, Targets
from tests.helpers import wait_until

MakeCluster = Callable[..., Obj]


@pytest.fixture
def admin_kubeconfig(cluster: Cluster) -> dict:
    return yaml.safe_load(cluster.kubeconfig.read_text())


@pytest.fixture
def make_cluster(
    k8s: client.ApiClient, core: client.CoreV1Api, namespace: str, make_release: Callable[..., Obj]
) -> MakeCluster:
    """A Cluster "c" (with the Secret "kc" holding `kubeconfig` under `key`, unless None) and a
    Release that names it."""

    def create(kubeconfig: dict | str | None, key: str = "kubeconfig", **spec: object) -> Obj:
        if kubeconfig is not None:
            text = kubeconfig if isinstance(kubeconfig, str) else yaml.safe_dump(kubeconfig)
            secret = {"metadata": {"name": "kc"}, "stringData": {key: text}}
            core.create_namespaced_secret(namespace, secret)
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Cluster", "metadata": {"name": "c"}}
        client.CustomObjectsApi(k8s).create_namespaced_custom_object(
            GROUP, VERSION, namespace, CLUSTERS, {**body, "spec": spec}
        )
        return make_release(clusterRef={"name": "c"})

    return create


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_no_cluster_ref_is_the_own_cluster(target: Target, k8s: client.ApiClient) -> None:
    assert (target.name, target.api) == (LOCAL, k8s)


def test_cluster_without_kubeconfig_is_the_own_cluster(
    targets: Targets, target: Target, make_cluster: MakeCluster
) -> None:
    assert targets.for_release(make_cluster(None)) is target


@pytest.mark.parametrize("key", ["kubeconfig", "config"])
def test_cluster_from_kubeconfig_secret(
    targets: Targets,
    make_cluster: MakeCluster,
    admin_kubeconfig: dict,
    core: client.CoreV1Api,
    namespace: str,
    key: str,
) -> None:
    ref = {"name": "kc"} | ({} if key == "kubeconfig" else {"key": key})
    release = make_cluster(admin_kubeconfig, key, kubeconfigSecretRef=ref)
    remote = targets.for_release(release)
    assert remote.name == f"{namespace}/c"
    assert remote.api.configuration.host == admin_kubeconfig["clusters"][0]["cluster"]["server"]
    assert remote.resource("v1", "Namespace").get(name=namespace).metadata.name == namespace
    assert targets.for_release(release) is remote, "cached while the Secret is unchanged"
    core.patch_namespaced_secret("kc", namespace, {"metadata": {"labels": {"changed": "yes"}}})
    assert targets.for_release(release) is not remote, "rebuilt for a new Secret version"


def _with_server(kubeconfig: dict, server: str) -> dict:
    kubeconfig["clusters"][0]["cluster"]["server"] = server
    return kubeconfig


REF = {"kubeconfigSecretRef": {"name": "kc"}}


@pytest.mark.parametrize(
    ("spec", "kubeconfig", "key", "message"),
    [
        pytest.param(None, None, "kubeconfig", "Cluster {ns}/c not found", id="no-cluster"),
        pytest.param(
            REF,
            None,
            "kubeconfig",
            "kubeconfig Secret {ns}/kc of Cluster {ns}/c not found",
            id="no-secret",
        ),
        pytest.param(
            REF, lambda kc: kc, "other", "Secret {ns}/kc key kubeconfig not found", id="no-key"
        ),
        pytest.param(
            REF,
            lambda kc: "just text",
            "kubeconfig",
            "Secret {ns}/kc key kubeconfig is not a kubeconfig: expected a YAML mapping",
            id="not-a-kubeconfig",
        ),
        pytest.param(
            REF,
            lambda kc: {"apiVersion": "v1"},
            "kubeconfig",
            "Secret {ns}/kc key kubeconfig is not a usable kubeconfig",
            id="invalid-kubeconfig",
        ),
        pytest.param(
            REF,
            lambda kc: kc | {"users": [{"name": "x", "user": {"exec": {"command": "id"}}}]},
            "kubeconfig",
            "Secret {ns}/kc key kubeconfig uses exec",
            id="exec-credentials",
        ),
        pytest.param(
            REF,
            lambda kc: _with_server(kc, f"https://127.0.0.1:{closed_port()}"),
            "kubeconfig",
            "Cluster {ns}/c: API server https://127.0.0.1:",
            id="unreachable",
        ),
    ],
)
def test_target_errors(
    targets: Targets,
    make_cluster: MakeCluster,
    make_release: Callable[..., Obj],
    admin_kubeconfig: dict,
    namespace: str,
    spec: Obj | None,
    kubeconfig: Callable[[dict], dict | str] | None,
    key: str,
    message: str,
) -> None:
    if spec is None:
        release = make_release(clusterRef={"name": "c"})
    else:
        release = make_cluster(kubeconfig and kubeconfig(admin_kubeconfig), key, **spec)
    started = time.monotonic()
    with pytest.raises(TargetError) as raised:
        targets.for_release(release)
    assert time.monotonic() - started < PROBE_TIMEOUT
    assert raised.value.reason == Reason.CLUSTER_NOT_READY
    assert message.replace("{ns}", namespace) in str(raised.value)


def test_silent_api_server_times_out(
    targets: Targets,
    make_cluster: MakeCluster,
    admin_kubeconfig: dict,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that accepts connections and never answers: one attempt, bounded, no retries."""
    monkeypatch.setattr(convoy.targets, "PROBE_TIMEOUT", 0.5)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        server = f"https://127.0.0.1:{silent.getsockname()[1]}"
        release = make_cluster(_with_server(admin_kubeconfig, server), **REF)
        started = time.monotonic()
        with pytest.raises(TargetError, match="is not reachable"):
            targets.for_release(release)
    assert 0.5 <= time.monotonic() - started < 1.5


def test_scope_of_refreshes_discovery_on_a_miss(
    target: Target, k8s: client.ApiClient, gizmo_crd: Obj
) -> None:
    api_version = f"{gizmo_crd['spec']['group']}/v1"
    assert (target.scope_of("v1", "ConfigMap"), target.scope_of("v1", "Namespace")) == (True, False)
    assert target.scope_of(api_version, "Gizmo") is None
    extensions = client.ApiextensionsV1Api(k8s)
    extensions.create_custom_resource_definition(gizmo_crd)

    def established() -> bool:
        crd = extensions.read_custom_resource_definition(gizmo_crd["metadata"]["name"])
        conditions = crd.status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_until(established, 30, "the Gizmo CRD to be Established")
    assert target.scope_of(api_version, "Gizmo") is True
