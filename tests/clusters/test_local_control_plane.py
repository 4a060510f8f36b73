"""The local provider starts a real control plane, and fails loudly and cleanly."""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from conformance import versions
from conformance.clusters import binaries
from conformance.clusters.base import Cluster
from conformance.clusters.local import ControlPlaneError, LocalControlPlane
from conformance.clusters.processes import ChildDied, kill_now
from conformance.kube import dynamic_api, read_or_none
from tests.helpers import pid_running, wait_until

pytestmark = pytest.mark.usefixtures("cluster")

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.smoke.convoy.kumodo.io"},
    "spec": {
        "group": "smoke.convoy.kumodo.io",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                        },
                    }
                },
            }
        ],
    },
}


def test_version_reports_the_built_release(cluster: Cluster) -> None:
    expected = versions.default_versions()["kubernetes"]
    assert cluster.server_version() == f"v{expected}"


def test_a_crd_becomes_established_and_serves_objects(
    k8s: client.ApiClient, namespace: str
) -> None:
    extensions = client.ApiextensionsV1Api(k8s)
    extensions.create_custom_resource_definition(WIDGET_CRD)
    try:

        def established() -> bool:
            crd = extensions.read_custom_resource_definition(WIDGET_CRD["metadata"]["name"])
            return any(
                c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
            )

        took = wait_until(established, 30, "the CRD to become Established")
        print(f"CRD Established after {took:.2f} s")
        gadgets = dynamic_api(k8s).resources.get(
            api_version="smoke.convoy.kumodo.io/v1", kind="Gadget"
        )
        gadgets.create(
            body={
                "apiVersion": "smoke.convoy.kumodo.io/v1",
                "kind": "Gadget",
                "metadata": {"name": "g1"},
                "spec": {"size": 3},
            },
            namespace=namespace,
        )
        assert gadgets.get(name="g1", namespace=namespace).spec.size == 3
    finally:
        extensions.delete_custom_resource_definition(WIDGET_CRD["metadata"]["name"])


def test_namespace_deletion_completes(k8s: client.ApiClient) -> None:
    """Only kube-controller-manager's namespace controller finishes a deletion."""
    core = client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": "deletion-check"}})
    core.create_namespaced_config_map("deletion-check", {"metadata": {"name": "content"}})
    core.delete_namespace("deletion-check")

    def gone() -> bool:
        return read_or_none(lambda: core.read_namespace("deletion-check")) is None

    took = wait_until(gone, 60, "the namespace deletion to complete")
    print(f"namespace deleted in {took:.2f} s")


@pytest.fixture
def spare_control_plane() -> LocalControlPlane:
    """A second control plane beside the session's, stopped after the test in any case."""
    plane = LocalControlPlane(binaries.resolve())
    try:
        yield plane.start()
    finally:
        plane.stop()


def test_two_control_planes_run_side_by_side(
    cluster: Cluster, spare_control_plane: LocalControlPlane
) -> None:
    assert spare_control_plane.kubeconfig != cluster.kubeconfig
    with spare_control_plane.api_client() as api:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "only-in-the-spare"}})
    with cluster.api_client() as api:
        names = [ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items]
    assert "only-in-the-spare" not in names


def test_stop_leaves_no_process_and_no_files() -> None:
    started = time.monotonic()
    plane = LocalControlPlane(binaries.resolve()).start()
    print(f"warm start: {time.monotonic() - started:.2f} s")
    pids = [process.pid for process in plane.processes]
    assert len(pids) == 3 and all(map(pid_running, pids))
    plane.stop()
    assert not any(map(pid_running, pids))
    assert not plane.dir.exists()


@pytest.mark.parametrize("victim", ["etcd", "kube-apiserver", "kube-controller-manager"])
def test_a_killed_child_is_reported_by_name_with_its_log(
    spare_control_plane: LocalControlPlane, victim: str
) -> None:
    kill_now(spare_control_plane.process(victim))
    with pytest.raises(ChildDied) as died:
        spare_control_plane.check_health()
    message = str(died.value)
    assert victim in message and "exited with code -9" in message and "last lines" in message
    # what a failed set-up after the start shows of the cluster (conformance.plugin); the
    # others may have ended meanwhile (the controller manager, without its API server)
    parts = spare_control_plane.health_report().split("\n\n")
    assert any(p.startswith(victim) and "exited with code -9" in p for p in parts), parts


def test_a_child_that_cannot_start_fails_the_start_clearly(tmp_path) -> None:
    broken = tmp_path / "etcd"
    broken.write_text("#!/bin/sh\necho 'etcd: cannot open data dir' >&2\nexit 3\n")
    broken.chmod(0o755)
    found = binaries.resolve()
    plane = LocalControlPlane(
        binaries.Binaries(
            broken,
            found.kube_apiserver,
            found.kube_controller_manager,
            found.kubectl,
            found.kubernetes_version,
        )
    )
    with pytest.raises(ControlPlaneError, match=r"(?s)etcd .*exited with code 3.*cannot open"):
        plane.start()
    assert not plane.dir.exists()
