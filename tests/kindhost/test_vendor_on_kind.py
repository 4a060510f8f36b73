"""The vendor's way in, on a real kind cluster: a "vendor" controller (the reference image under
another name, installed from a manifests directory of its own) certified through the composite
action's own steps, and tested with --convoy-install=PATH.

The action's steps run as bash scripts, taken from action.yml, with the environment GitHub would
give them. Its suite step runs `convoy-conformance certify`; here SUITE_ARGS selects MODE-1's
tests (both phases of the whole suite take about 50 minutes) and points the suite at this
engine's cluster, and the check is that the report says MODE-1 passed.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from conformance.clusters.kind import KindProvider
from conformance.install import kind_commands, on_kind
from conformance.kindhost.engine import Engine, host_address
from tests.helpers import run_action_step
from tests.kindhost.conftest import own_kind_cluster

pytestmark = pytest.mark.kindhost

#: The action's own cluster name (its steps name it).
CLUSTER = "convoy-conformance"
VENDOR_IMAGE = "vendor.example/convoy-like:1.0"
#: MODE-1's tests: the module's name, whole ("test_mode" matches test_model_based.py too), and
#: without spaces (the action splits its suite-args on them).
SELECTION = ("-k", "test_mode.py")


@dataclass
class Vendor:
    cluster: KindProvider
    manifests: Path
    #: the suite's options that reach this engine's cluster (the action's own come first)
    kind_options: list[str]


@pytest.fixture(scope="module")
def vendor(
    engine: Engine, pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Vendor]:
    cluster = own_kind_cluster(pytestconfig, CLUSTER).start()
    try:
        subprocess.run(kind_commands.docker_build_argv(VENDOR_IMAGE), check=True)
        manifests = on_kind.write_overlay(
            tmp_path_factory.mktemp("vendor") / "manifests", image=VENDOR_IMAGE
        )
        option = pytestconfig.getoption
        yield Vendor(
            cluster,
            manifests,
            [
                f"--kind-image={option('kind_image')}",
                f"--kind-bin={cluster.kind_path}",
                f"--kind-kubectl-bin={cluster.kubectl_path}",
                "--kind-node-address",
                f"--callback-host={host_address()}",
            ],
        )
    finally:
        cluster.stop()


def run_step(name: str, vendor: Vendor, tmp_path: Path, **env: str) -> dict[str, str]:
    """Run one of the action's steps against the vendor's cluster; return its outputs."""
    tools = [Path(sys.executable).parent, vendor.cluster.kind_path.parent]
    tools.append(vendor.cluster.kubectl_path.parent)
    env = {"KUBECONFIG": str(vendor.cluster.kubeconfig), **env}
    ran = run_action_step(name, tmp_path, tools, env)
    print(ran.process.stdout[-3000:], ran.process.stderr[-3000:])
    assert ran.process.returncode == 0, f"step {name!r} failed"
    return ran.outputs


def mode_results(report: Path) -> dict[str, str]:
    rules = yaml.safe_load(report.read_text())["rules"]
    mode = next(rule for rule in rules if rule["id"] == "MODE-1")
    return {clause["id"]: clause["result"] for clause in mode["clauses"]}


def test_the_actions_steps_install_and_test_a_vendors_controller(
    vendor: Vendor, tmp_path: Path
) -> None:
    run_step(
        "Load images and install your controller",
        vendor,
        tmp_path,
        IMAGES=VENDOR_IMAGE,
        MANIFESTS=str(vendor.manifests),
        NAMESPACE=kind_commands.NAMESPACE,
        WAIT_TIMEOUT="300",
    )
    found = run_step(
        "Find your controller's Deployment",
        vendor,
        tmp_path,
        NAMESPACE=kind_commands.NAMESPACE,
        DEPLOYMENT="",
    )
    assert found["deployment"] == f"{kind_commands.NAMESPACE}/{kind_commands.DEPLOYMENT}"
    reports = tmp_path / "reports"
    ran = run_step(
        "Run the conformance suite",
        vendor,
        tmp_path,
        REPORT_DIR=str(reports),
        SUITE_ARGS=shlex.join([*vendor.kind_options, *SELECTION]),
        REQUIRE_CERTIFYING="false",
        DEPLOYMENT=found["deployment"],
        ORGANIZATION="Vendor Example",
        PROJECT="convoy-like",
        VERSION="1.0",
        URL="https://vendor.example/convoy-like",
        CONTACT="conformance@vendor.example",
    )
    results = mode_results(Path(ran["report"]))
    assert set(results.values()) == {"passed"}, results
    uninstall = ["kubectl", f"--kubeconfig={vendor.cluster.kubeconfig}", "delete", "--wait"]
    subprocess.run([*uninstall, "-k", str(vendor.manifests)], check=True)


def test_convoy_install_path_installs_a_vendors_manifests_and_tests_them(
    vendor: Vendor, tmp_path: Path
) -> None:
    subprocess.run(
        [str(vendor.cluster.kind_path), "load", "docker-image", "--name", CLUSTER, VENDOR_IMAGE],
        check=True,
    )
    reports = tmp_path / "reports"
    argv = [
        str(Path(sys.executable).parent / "convoy-conformance"),
        "run",
        "--cluster=kind",
        f"--cluster-name={CLUSTER}",
        "--keep-cluster",
        f"--convoy-install={vendor.manifests}",
        f"--report-dir={reports}",
        *vendor.kind_options,
        *SELECTION,
    ]
    proc = subprocess.run(argv, cwd=kind_commands.REPO_ROOT, capture_output=True, text=True)
    print(proc.stdout[-3000:], proc.stderr[-3000:])
    assert proc.returncode == 0
    results = mode_results(reports / "conformance-report.yaml")
    assert set(results.values()) == {"passed"}, results
