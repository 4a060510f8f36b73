"""An in-cluster run on a real kind cluster: the suite as a Job (`convoy-conformance run
--in-cluster`), its witness behind a Service of the cluster, against the "vendor" controller,
and the report brought back.

This cluster's API server could call back to this machine; the in-cluster run does not need
it: the suite in the pod passes no --callback-host, and the report says where the API server
called the witness. The selection covers the witness (an apply at a Release's creation),
`kubectl convoy` in the suite's image (SYNC-10) and the restart rule through the controller's
Deployment (BACK-5, the Role in the controller's namespace).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conformance.incluster import image, objects
from conformance.install import kind_commands
from convoyapi import API_SERVICE
from tests.kindhost.conftest import VENDOR_IMAGE, Vendor, convoy_conformance, results_by_test

pytestmark = pytest.mark.kindhost

SUITE_IMAGE = "vendor.example/convoy-conformance-suite:1.0"
#: The witness behind a Service (a reconcile's apply), `kubectl convoy` in the suite's image,
#: and the restart rule through the controller's Deployment (its Role in the controller's
#: namespace).
SELECTED = (
    "test_automatic_true_applies_on_creation",
    "test_kubectl_convoy_release_sync_sends_the_post",
    "test_a_controller_restart_resets_the_failure_count",
)
SELECTION = ("-k", " or ".join(SELECTED))
CONTROLLER = f"{kind_commands.NAMESPACE}/{kind_commands.DEPLOYMENT}"


@pytest.fixture
def installed(vendor: Vendor) -> Iterator[Vendor]:
    """The vendor's controller installed from its manifests, and the suite's image loaded."""
    image.build(SUITE_IMAGE, vendor.cluster.kubectl_path, base=VENDOR_IMAGE)
    for loaded in (VENDOR_IMAGE, SUITE_IMAGE):
        vendor.load(loaded)
    vendor.kubectl("apply", "--server-side", "-k", str(vendor.manifests))
    try:
        vendor.kubectl(
            "rollout",
            "status",
            f"deployment/{kind_commands.DEPLOYMENT}",
            f"--namespace={kind_commands.NAMESPACE}",
            "--timeout=300s",
        )
        vendor.kubectl(
            "wait",
            "--for=condition=Available",
            "--timeout=180s",
            f"apiservice/{API_SERVICE}",
        )
        yield vendor
    finally:
        vendor.kubectl("delete", "--wait", "-k", str(vendor.manifests))


def left_by_runs(vendor: Vendor) -> str:
    """Whatever carries an in-cluster run's label, anywhere in the cluster."""
    argv = [str(vendor.cluster.kubectl_path), f"--kubeconfig={vendor.cluster.kubeconfig}"]
    kinds = "namespaces,clusterroles,clusterrolebindings,roles,rolebindings,jobs,services"
    listed = subprocess.run(
        [*argv, "get", kinds, "--all-namespaces", "-l", objects.RUN_LABEL, "-o", "name"],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.strip()


def test_the_suite_runs_as_a_job_in_the_cluster_and_brings_its_report_back(
    installed: Vendor, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    convoy_conformance(
        "run",
        "--in-cluster",
        f"--suite-image={SUITE_IMAGE}",
        f"--kubeconfig={installed.cluster.kubeconfig}",
        f"--report-dir={reports}",
        "--workers=2",
        f"--convoy-controller-deployment={CONTROLLER}",
        *SELECTION,
    )
    report = reports / "conformance-report.yaml"
    environment = yaml.safe_load(report.read_text())["environment"]
    assert environment["provider"] == "existing"
    assert environment["witness"].startswith("service convoy-conformance-")
    assert results_by_test(report) == {name: {"passed"} for name in SELECTED}
    assert (reports / "junit.xml").is_file()
    assert left_by_runs(installed) == ""
