"""Tests on the kind host's engine: `make test-kind` starts it and passes its options.

They share one kind cluster (a cluster's creation is the longest part of most of them): the
vendor's way in first, then the in-cluster run, then the whole suite, and last the kernel
settings' check, which ends the cluster's life (MODULE_ORDER).

One after another, not side by side: the whole suite on a second cluster, run beside the
others, took the stage from about 13 to 8 minutes, but with the cores then 60 % busy and at
100 % during builds, loads and the in-cluster Job, its backoff delays came up to 0.52 s late
(p95 0.14 to 0.34 s, against 0.07 s alone), and a model-based retry 0.6 s late failed one
run of three.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from conformance.clusters.kind import KindProvider, get_clusters_argv
from conformance.install import kind_commands
from conformance.kindhost.engine import Engine, host_address
from tests.kindhost import vendor_manifests
from tests.kindhost.settings import kernel_settings


@pytest.fixture(scope="session")
def engine() -> Engine:
    running = Engine()
    if not running.answers() or os.environ.get("DOCKER_HOST") != running.docker_host:
        pytest.fail(
            "the kind host's engine is not running or DOCKER_HOST is not its socket: "
            "make test-kind, or `python -m conformance.kindhost up` and its env and options"
        )
    return running


def own_kind_cluster(config: pytest.Config, name: str) -> KindProvider:
    """A cluster of a test's own on the engine, with the run's kind options."""
    option = config.getoption
    return KindProvider(
        name,
        image=option("kind_image"),
        kind_bin=option("kind_bin"),
        kubectl_bin=option("kind_kubectl_bin"),
        config_file=option("kind_config"),
        node_address=option("kind_node_address"),
    )


#: The composite action's own cluster name (its steps name it); every kind-host test runs on it.
CLUSTER = "convoy-conformance"
#: A "vendor" controller: the reference image under another name.
VENDOR_IMAGE = "vendor.example/convoy-like:1.0"
#: The order of the modules: each leaves the cluster as it found it; the last deletes it.
MODULE_ORDER = (
    "test_vendor_on_kind",
    "test_long_phase_on_a_vendor_deployment",
    "test_the_guide_by_hand",
    "test_in_cluster",
    "test_whole_suite_on_kind",
    "test_kernel_settings",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        module = item.nodeid.partition("::")[0].rpartition("/")[2].removesuffix(".py")
        return MODULE_ORDER.index(module) if module in MODULE_ORDER else -1

    items.sort(key=rank)


@dataclass
class SharedCluster:
    """The kind-host tests' cluster, and this machine's kernel settings before it existed."""

    cluster: KindProvider
    settings_before: dict[str, str]
    #: the suite's options that reach this engine's cluster (with --cluster=kind)
    kind_options: list[str]

    def end(self) -> None:
        self.cluster.stop()


@pytest.fixture(scope="session")
def shared_cluster(engine: Engine, pytestconfig: pytest.Config) -> Iterator[SharedCluster]:
    before = kernel_settings()
    cluster = own_kind_cluster(pytestconfig, CLUSTER)
    refuse_a_cluster_of_another_run(cluster)
    cluster.start()
    option = pytestconfig.getoption
    try:
        subprocess.run(
            [str(cluster.kubectl_path), f"--kubeconfig={cluster.kubeconfig}", "wait",
             "--for=condition=Ready", "node", "--all", "--timeout=180s"],
            check=True,
        )  # fmt: skip
        yield SharedCluster(
            cluster,
            before,
            [
                f"--kind-image={option('kind_image')}",
                f"--kind-bin={cluster.kind_path}",
                f"--kind-kubectl-bin={cluster.kubectl_path}",
                "--kind-node-address",
                f"--callback-host={host_address()}",
            ],
        )
    finally:
        cluster.stop()  # once more, should a test have failed before the last one


def refuse_a_cluster_of_another_run(cluster: KindProvider) -> None:
    """These tests create and delete their cluster: one of the same name already on the engine
    belongs to another run on this machine, which it would be wrong to reuse or to delete."""
    listed = subprocess.run(
        get_clusters_argv(cluster.kind_path), capture_output=True, text=True, check=True
    )
    if CLUSTER in listed.stdout.split():
        pytest.fail(
            f"a kind cluster named {CLUSTER!r} already exists on the engine at "
            f"{os.environ.get('DOCKER_HOST')}: another run of the kind-host tests is using it; "
            "wait for it to end, or `python -m conformance.kindhost down` if none is running"
        )


@dataclass
class Vendor:
    cluster: KindProvider
    #: its manifests directory, of its own (no suite file names it), and what they install
    install: vendor_manifests.VendorInstall
    #: the suite's options that reach this engine's cluster (the action's own come first)
    kind_options: list[str]

    @property
    def manifests(self) -> Path:
        return self.install.manifests

    @property
    def container_option(self) -> list[str]:
        """Its Deployment runs a sidecar first: the suite's option that names the controller's."""
        return [f"--convoy-controller-container={self.install.container}"]

    @property
    def kubectl_argv(self) -> list[str]:
        kubeconfig = Path(self.cluster.kubeconfig).resolve()  # for commands run elsewhere too
        return [str(self.cluster.kubectl_path), f"--kubeconfig={kubeconfig}"]

    def kubectl(self, *args: str) -> None:
        subprocess.run([*self.kubectl_argv, *args], check=True)

    def load(self, image: str) -> None:
        """Put a local image on the cluster's node (no registry)."""
        kind = str(self.cluster.kind_path)
        subprocess.run(kind_commands.kind_load_argv(kind, CLUSTER, image), check=True)


#: How much of a failed run's failures section is printed: each failing test's traceback and
#: diagnostics (its Releases, events, the controller's log), for a few failures.
FAILURES_SHOWN = 60_000


def convoy_conformance(*args: str) -> None:
    """The kit's command, from this venv, as a vendor runs it; print the end of its output,
    and when it fails its failures section too (CI's log is all a kind flake leaves)."""
    argv = [str(Path(sys.executable).parent / "convoy-conformance"), *args]
    proc = subprocess.run(argv, cwd=kind_commands.REPO_ROOT, capture_output=True, text=True)
    if proc.returncode != 0 and (start := proc.stdout.find("= FAILURES =")) >= 0:
        print(proc.stdout[start : start + FAILURES_SHOWN])
    print(proc.stdout[-5000:], proc.stderr[-3000:])
    assert proc.returncode == 0, f"convoy-conformance {args[0]} failed (its output is above)"


@pytest.fixture(scope="session")
def vendor(shared_cluster: SharedCluster, tmp_path_factory: pytest.TempPathFactory) -> Vendor:
    """The vendor's image built and its manifests written; each test installs and uninstalls
    the controller its own way."""
    subprocess.run(kind_commands.docker_build_argv(VENDOR_IMAGE), check=True)
    cluster = shared_cluster.cluster
    install = vendor_manifests.write(
        tmp_path_factory.mktemp("vendor") / "manifests",
        image=VENDOR_IMAGE,
        kubectl=cluster.kubectl_path,
    )
    return Vendor(cluster, install, shared_cluster.kind_options)


@pytest.fixture
def installed(vendor: Vendor) -> Iterator[Vendor]:
    """The vendor's controller installed from its manifests, as the guide says, and ready."""
    vendor.load(VENDOR_IMAGE)
    try:
        vendor_manifests.apply(vendor.kubectl_argv, vendor.install)
        yield vendor
    finally:
        vendor.kubectl("delete", "--wait", "-k", str(vendor.manifests))


def results_by_test(report: Path) -> dict[str, set[str]]:
    """The results a conformance-report.yaml lists for each test function (of all its
    parameters)."""
    found: dict[str, set[str]] = {}
    for test in yaml.safe_load(report.read_text())["tests"]:
        name = test["name"].rpartition("::")[2].partition("[")[0]
        found.setdefault(name, set()).add(test["result"])
    return found
