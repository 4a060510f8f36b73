"""A vendor's manifests applied by --convoy-install=PATH, on the real API server."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client

from conformance.clusters.base import Cluster
from conformance.install import vendor


def test_the_manifests_of_a_directory_are_applied(
    cluster: Cluster, k8s: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    settings = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "vendor-settings", "namespace": namespace},
        "data": {"mode": "test"},
    }
    (tmp_path / "settings.yaml").write_text(yaml.safe_dump(settings))
    installed = vendor.install(tmp_path, cluster.kubeconfig)
    assert installed.objects == ["ConfigMap/vendor-settings"]
    assert installed.deployments == []
    found = client.CoreV1Api(k8s).read_namespaced_config_map("vendor-settings", namespace)
    assert found.data == {"mode": "test"}
