"""The kill run's lanes: a mutant's run on a control plane that runs before it and after it,
which the next run finds as the lane's first run left it (conformance.lanes)."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from conformance.cli import SUITE_DIR
from conformance.clusters import binaries
from conformance.clusters.local import ReusedControlPlane
from conformance.harness.namespaces import RUN_LABEL
from conformance.kill_run import run_selection
from conformance.lanes import Lanes
from convoyapi import API_SERVICE

#: a short test of the suite that installs the controller and makes namespaces of its own
SHORT_TEST = f"{SUITE_DIR}/test_force.py::test_post_sync_without_force_writes_no_force_annotation"


def test_two_runs_on_one_lane_share_its_control_plane_and_leave_nothing_behind(
    tmp_path: Path,
) -> None:
    options = ["--cluster=local", "--timing", "controller_resync=30s"]
    with Lanes(binaries.resolve(), 1, tmp_path / "lanes") as lanes:
        runs = [
            run_selection(f"run-{n}", [SHORT_TEST], None, tmp_path, options, lanes) for n in (1, 2)
        ]
        with lanes.borrow("probe") as plane:
            namespaces, api_services = what_is_left(plane)
    assert [run.clean for run in runs] == [True, True], runs
    assert lanes.replaced == [], "a lane got a fresh control plane"
    # the runs were on the lane's cluster (the controller's identity is there), and their
    # namespaces and the APIService of their controller (gone with it) are not
    assert "convoy-system" in namespaces
    assert [name for name, labelled in namespaces.items() if labelled] == []
    assert API_SERVICE not in api_services


def test_a_run_that_leaves_a_cluster_wide_object_gets_the_lane_a_fresh_control_plane(
    tmp_path: Path,
) -> None:
    with Lanes(binaries.resolve(), 1, tmp_path / "lanes") as lanes:
        with lanes.borrow("first") as plane:
            first = plane
        with lanes.borrow("leaky") as plane, ReusedControlPlane(plane).api_client() as api:
            leak = client.V1ClusterRole(metadata=client.V1ObjectMeta(name="left-behind"))
            client.RbacAuthorizationV1Api(api).create_cluster_role(leak)
        with lanes.borrow("next") as plane:
            fresh = plane
            with ReusedControlPlane(plane).api_client() as api:
                roles = client.RbacAuthorizationV1Api(api).list_cluster_role().items
    assert fresh != first
    assert "left-behind" not in {role.metadata.name for role in roles}
    assert len(lanes.replaced) == 1
    assert lanes.replaced[0].startswith("lane-0 after leaky: left ['ClusterRole/left-behind']")


def what_is_left(plane: Path) -> tuple[dict[str, bool], set[str]]:
    """Each namespace (labelled by a run or not) and each APIService's name."""
    with ReusedControlPlane(plane).api_client() as api:
        namespaces = client.CoreV1Api(api).list_namespace().items
        services = client.ApiregistrationV1Api(api).list_api_service().items
    labelled = {n.metadata.name: RUN_LABEL in (n.metadata.labels or {}) for n in namespaces}
    return labelled, {s.metadata.name for s in services}
