"""The action's "Find your controller's Deployment" step, run by bash against a real API server."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kubernetes import client

from conformance.clusters.base import Cluster
from tests.helpers import run_action_step


def find_deployment(
    cluster: Cluster, kubectl: str, namespace: str, named: str, tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], str]:
    """The action's "controller" step; return the process and what it wrote to GITHUB_OUTPUT."""
    env = {
        "KUBECONFIG": str(cluster.kubeconfig),
        "HOME": str(tmp_path),  # kubectl's discovery cache goes under $HOME/.kube
        "NAMESPACE": namespace,
        "DEPLOYMENT": named,
    }
    ran = run_action_step("controller", tmp_path, [Path(kubectl).parent], env)
    return ran.process, ran.written


def create_deployment(k8s: client.ApiClient, namespace: str, name: str) -> None:
    labels = {"app": name}
    client.AppsV1Api(k8s).create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "never-pulled:v0"}]},
                },
            },
        },
    )


def test_the_one_deployment_of_the_namespace_is_the_controller(
    cluster: Cluster, k8s: client.ApiClient, kubectl: str, namespace: str, tmp_path: Path
) -> None:
    create_deployment(k8s, namespace, "acme-convoy")
    proc, written = find_deployment(cluster, kubectl, namespace, "", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert written == f"deployment={namespace}/acme-convoy\n"


@pytest.mark.parametrize("count", [0, 2])
def test_none_or_several_deployments_ask_for_the_input(
    cluster: Cluster,
    k8s: client.ApiClient,
    kubectl: str,
    namespace: str,
    tmp_path: Path,
    count: int,
) -> None:
    for n in range(count):
        create_deployment(k8s, namespace, f"part-{n}")
    proc, written = find_deployment(cluster, kubectl, namespace, "", tmp_path)
    assert proc.returncode == 1 and written == ""
    assert f"input 'controller-deployment': namespace {namespace} has {count} Deployments" in (
        proc.stdout
    )


def test_a_named_deployment_is_taken_as_given(
    cluster: Cluster, kubectl: str, namespace: str, tmp_path: Path
) -> None:
    proc, written = find_deployment(cluster, kubectl, namespace, "acme-convoy", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert written == f"deployment={namespace}/acme-convoy\n"
