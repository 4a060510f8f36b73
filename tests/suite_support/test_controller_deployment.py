"""--convoy-controller-deployment: the suite restarts a vendor's controller through its Deployment.

The local control plane runs no kubelet: a stand-in marks the Deployment's pods Running and
Ready through the pods' status subresource, as a kubelet would report them. The Deployment
and ReplicaSet controllers of the real kube-controller-manager do the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from conformance.clusters.base import Cluster
from conformance.install import vendor
from conformance.install.deployment import DeploymentController, DeploymentError, label_selector
from conformance.polling import poll_until

NAME = "vendor-controller"
LABELS = {"app.kubernetes.io/name": "vendor-convoy"}


SIDECAR = {"name": "kube-rbac-proxy", "image": "never-pulled:v0", "args": ["--secure-listen"]}
CONTROLLER = {"name": "controller", "image": "never-pulled:v0", "args": ["--resync", "2m", "-v"]}


def controller_deployment(namespace: str, containers: list[dict] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {
                "matchLabels": LABELS,
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["control"]}],
            },
            "template": {
                "metadata": {"labels": {**LABELS, "tier": "control"}},
                "spec": {"containers": containers or [CONTROLLER]},
            },
        },
    }


def is_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


@pytest.fixture
def kubelet_stand_in(k8s: client.ApiClient, namespace: str) -> Iterator[None]:
    """Report every pod of the namespace Running and Ready, until the test ends."""
    core, stopping = client.CoreV1Api(k8s), threading.Event()

    def report_ready() -> None:
        while not stopping.wait(0.2):
            for pod in core.list_namespaced_pod(namespace).items:
                if pod.metadata.deletion_timestamp is None and not is_ready(pod):
                    now = datetime.now(UTC).isoformat()
                    ready = {"type": "Ready", "status": "True", "lastTransitionTime": now}
                    status = {"phase": "Running", "conditions": [ready]}
                    core.patch_namespaced_pod_status(
                        pod.metadata.name, namespace, {"status": status}
                    )

    reporter = threading.Thread(target=report_ready, daemon=True)
    reporter.start()
    yield
    stopping.set()
    reporter.join()


@pytest.fixture
def deployed(k8s: client.ApiClient, namespace: str, kubelet_stand_in: None) -> DeploymentController:
    client.AppsV1Api(k8s).create_namespaced_deployment(namespace, controller_deployment(namespace))
    return DeploymentController(k8s, namespace, NAME, timeout=60).attach()


def test_a_restart_scales_the_deployment_to_zero_and_back(deployed: DeploymentController) -> None:
    assert deployed.replicas == 1
    before = {pod.metadata.name for pod in deployed.pods()}
    deployed.stop()
    assert deployed.pods() == []
    deployed.start()
    after = {pod.metadata.name for pod in deployed.pods()}
    assert len(after) == 1 and not after & before, (before, after)
    assert deployed.started_at > 0
    assert "--- pod " in deployed.logs()  # no kubelet serves it: the reason, not a crash
    deployed.check()


def test_restore_scales_back_what_a_failed_restart_left(deployed: DeploymentController) -> None:
    deployed.stop()
    deployed.restore()
    scale = client.AppsV1Api(deployed.api).read_namespaced_deployment_scale(
        NAME, deployed.namespace
    )
    assert scale.spec.replicas == 1


def test_a_missing_deployment_is_a_clear_error(k8s: client.ApiClient, namespace: str) -> None:
    with pytest.raises(DeploymentError, match=f"Deployment {namespace}/absent not found"):
        DeploymentController.named(k8s, f"{namespace}/absent").attach()


@pytest.mark.parametrize("reference", ["vendor-controller", "a/b/c", "/name", "namespace/"])
def test_a_reference_other_than_namespace_slash_name_is_refused(
    k8s: client.ApiClient, reference: str
) -> None:
    with pytest.raises(DeploymentError, match="expected NAMESPACE/NAME"):
        DeploymentController.named(k8s, reference)


def test_the_one_deployment_of_vendor_manifests_is_the_controller(
    cluster: Cluster, namespace: str, kubelet_stand_in: None, tmp_path: Path
) -> None:
    (tmp_path / "controller.yaml").write_text(yaml.safe_dump(controller_deployment(namespace)))
    installed = vendor.install(tmp_path, cluster.kubeconfig)
    assert installed.deployments == [f"{namespace}/{NAME}"]


def test_a_label_selector_is_spelled_as_the_api_reads_it() -> None:
    selector = client.V1LabelSelector(
        match_labels={"b": "2", "a": "1"},
        match_expressions=[
            client.V1LabelSelectorRequirement(key="tier", operator="In", values=["x", "y"]),
            client.V1LabelSelectorRequirement(key="old", operator="NotIn", values=["z"]),
            client.V1LabelSelectorRequirement(key="owned", operator="Exists"),
            client.V1LabelSelectorRequirement(key="legacy", operator="DoesNotExist"),
        ],
    )
    assert label_selector(selector) == "a=1,b=2,tier in (x,y),old notin (z),owned,!legacy"


def deploy(
    k8s: client.ApiClient, namespace: str, containers: list[dict], container: str | None = None
) -> DeploymentController:
    deployment = controller_deployment(namespace, containers)
    client.AppsV1Api(k8s).create_namespaced_deployment(namespace, deployment)
    return DeploymentController(k8s, namespace, NAME, timeout=60, container=container).attach()


def args_of(deployed: DeploymentController) -> dict[str, list[str]]:
    template = client.AppsV1Api(deployed.api).read_namespaced_deployment(NAME, deployed.namespace)
    return {c.name: list(c.args or []) for c in template.spec.template.spec.containers}


def test_the_long_phase_sets_the_controllers_resync_and_never_a_sidecars(
    k8s: client.ApiClient, namespace: str, kubelet_stand_in: None
) -> None:
    """A sidecar listed before the controller (kube-rbac-proxy, as scaffolds put it) keeps its
    args; the controller's --resync is replaced, and restored afterwards."""
    deployed = deploy(k8s, namespace, [SIDECAR, CONTROLLER], container="controller")
    found = deployed.run_with_resync(3000)
    assert args_of(deployed) == {
        "kube-rbac-proxy": SIDECAR["args"],
        "controller": ["-v", "--resync=3000s"],
    }
    deployed.restore(found)
    assert args_of(deployed) == {
        "kube-rbac-proxy": SIDECAR["args"],
        "controller": CONTROLLER["args"],
    }


def test_a_deployment_of_several_containers_needs_the_controllers_named(
    k8s: client.ApiClient, namespace: str, kubelet_stand_in: None
) -> None:
    deployed = deploy(k8s, namespace, [SIDECAR, CONTROLLER])
    with pytest.raises(DeploymentError, match="runs containers kube-rbac-proxy, controller"):
        deployed.run_with_resync(3000)
    assert args_of(deployed)["kube-rbac-proxy"] == SIDECAR["args"]


def test_a_controller_that_may_not_apply_what_the_suite_renders_is_a_clear_error(
    k8s: client.ApiClient, namespace: str, deployed: DeploymentController
) -> None:
    """The Deployment runs as its namespace's default service account, which may do nothing:
    the error names every verb on ConfigMaps and Widgets it lacks. Granted them cluster-wide,
    as a controller that applies into the suite's namespaces needs, it passes."""
    with pytest.raises(DeploymentError, match="may not get configmaps, create configmaps") as err:
        deployed.check_rights()
    assert "delete widgets.testing.convoy.kumodo.io" in str(err.value)
    rbac, name = client.RbacAuthorizationV1Api(k8s), f"{namespace}-renders"
    rules = [
        {
            "apiGroups": [group],
            "resources": [resource],
            "verbs": ["get", "create", "patch", "delete"],
        }
        for group, resource in (("", "configmaps"), ("testing.convoy.kumodo.io", "widgets"))
    ]
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
    subject = {"kind": "ServiceAccount", "name": "default", "namespace": namespace}
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [subject],
    }
    rbac.create_cluster_role_binding(binding)

    def granted() -> bool:  # the API server's RBAC cache takes a moment to see the binding
        try:
            deployed.check_rights()
        except DeploymentError:
            return False
        return True

    try:
        poll_until(granted, timeout=10.0, step=0.2, failure=lambda: AssertionError("not granted"))
    finally:
        rbac.delete_cluster_role_binding(name)
        rbac.delete_cluster_role(name)
