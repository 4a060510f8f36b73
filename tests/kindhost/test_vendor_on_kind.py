"""The vendor's way in, on a real kind cluster: a "vendor" controller (the reference image under
another name, installed from a manifests directory of its own) certified through the composite
action's own steps, and tested with --convoy-install=PATH.

The action's steps run as bash scripts, taken from action.yml, with the environment GitHub would
give them. Its suite step runs `convoy-conformance certify`; here SUITE_ARGS selects one test
(both phases of the whole suite take about an hour) and points the suite at this engine's
cluster, and the check is that the report says it passed.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.helpers import run_action_step
from tests.kindhost import vendor_manifests
from tests.kindhost.conftest import (
    CLUSTER,
    VENDOR_IMAGE,
    Vendor,
    convoy_conformance,
    results_by_test,
)

pytestmark = pytest.mark.kindhost

#: A test that needs the witness and a reconcile of the vendor's controller, and no resync
#: tick (which the controller's default 2-minute resync would make a wait): one name, without
#: spaces (the action splits its suite-args on them).
SELECTED = "test_automatic_true_applies_on_creation"
SELECTION = ("-k", SELECTED)


def run_step(name: str, vendor: Vendor, tmp_path: Path, **env: str) -> dict[str, str]:
    """Run one of the action's steps against the vendor's cluster; return its outputs."""
    tools = [Path(sys.executable).parent, vendor.cluster.kind_path.parent]
    tools.append(vendor.cluster.kubectl_path.parent)
    kit = str(Path(sys.executable).parent)  # the install step's output: the kit's venv
    env = {"KUBECONFIG": str(vendor.cluster.kubeconfig), "KIT": kit, **env}
    ran = run_action_step(name, tmp_path, tools, env)
    print(ran.process.stdout[-3000:], ran.process.stderr[-3000:])
    assert ran.process.returncode == 0, f"step {name!r} failed"
    return ran.outputs


def test_the_actions_steps_install_and_test_a_vendors_controller(
    vendor: Vendor, tmp_path: Path
) -> None:
    run_step(
        "Load images and install your controller",
        vendor,
        tmp_path,
        IMAGES=VENDOR_IMAGE,
        MANIFESTS=str(vendor.manifests),
        NAMESPACE=vendor_manifests.NAMESPACE,
        WAIT_TIMEOUT="300",
    )
    found = run_step(
        "Find your controller's Deployment",
        vendor,
        tmp_path,
        NAMESPACE=vendor_manifests.NAMESPACE,
        DEPLOYMENT="",
    )
    assert found["deployment"] == vendor.install.deployment
    reports = tmp_path / "reports"
    ran = run_step(
        "Run the conformance suite",
        vendor,
        tmp_path,
        REPORT_DIR=str(reports),
        SUITE_ARGS=shlex.join([*vendor.kind_options, *SELECTION]),
        REQUIRE_CERTIFYING="false",
        DEPLOYMENT=found["deployment"],
        CONTAINER=vendor.install.container,
        ORGANIZATION="Vendor Example",
        PROJECT="convoy-like",
        VERSION="1.0",
        URL="https://vendor.example/convoy-like",
        CONTACT="conformance@vendor.example",
    )
    assert results_by_test(Path(ran["report"])) == {SELECTED: {"passed"}}
    vendor.kubectl("delete", "--wait", "-k", str(vendor.manifests))


def test_convoy_install_path_installs_a_vendors_manifests_and_tests_them(
    vendor: Vendor, tmp_path: Path
) -> None:
    vendor.load(VENDOR_IMAGE)
    reports = tmp_path / "reports"
    convoy_conformance(
        "run",
        "--cluster=kind",
        f"--cluster-name={CLUSTER}",
        "--keep-cluster",
        f"--convoy-install={vendor.manifests}",
        f"--report-dir={reports}",
        *vendor.kind_options,
        *vendor.container_option,
        *SELECTION,
    )
    assert results_by_test(reports / "conformance-report.yaml") == {SELECTED: {"passed"}}
    vendor.kubectl("delete", "--wait", "-k", str(vendor.manifests))
