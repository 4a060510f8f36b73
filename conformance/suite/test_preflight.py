"""Preflight: the cluster under test is a working Kubernetes API. No rule is checked here."""

from __future__ import annotations

from kubernetes import client

from conformance.clusters.base import Cluster


def test_the_api_server_answers_with_its_version(cluster: Cluster) -> None:
    version = cluster.server_version()
    print(f"{cluster.describe()}: Kubernetes {version}")
    assert version.startswith("v1.")


def test_a_test_namespace_is_usable(k8s: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(k8s)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "preflight"}})
    assert core.read_namespaced_config_map("preflight", namespace).metadata.name == "preflight"
