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
from pathlib import Path

import pytest
import yaml

from conformance.incluster import image, objects
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


@pytest.fixture
def with_suite_image(installed: Vendor) -> Vendor:
    """The vendor's controller installed, and the suite's image on the node."""
    image.build(SUITE_IMAGE, installed.cluster.kubectl_path, base=VENDOR_IMAGE)
    installed.load(SUITE_IMAGE)
    return installed


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
    with_suite_image: Vendor, tmp_path: Path
) -> None:
    installed = with_suite_image
    reports = tmp_path / "reports"
    convoy_conformance(
        "run",
        "--in-cluster",
        f"--suite-image={SUITE_IMAGE}",
        f"--kubeconfig={installed.cluster.kubeconfig}",
        f"--report-dir={reports}",
        "--workers=2",
        f"--convoy-controller-deployment={installed.install.deployment}",
        *installed.container_option,
        *SELECTION,
    )
    report = reports / "conformance-report.yaml"
    environment = yaml.safe_load(report.read_text())["environment"]
    assert environment["provider"] == "existing"
    assert environment["witness"].startswith("service convoy-conformance-")
    assert results_by_test(report) == {name: {"passed"} for name in SELECTED}
    assert (reports / "junit.xml").is_file()
    assert left_by_runs(installed) == ""
