"""The pytest plugin: options, the session's cluster, and a fresh namespace per test.

Loaded by the `pytest11` entry point when the package is installed, so `pytest conformance`
and the project's own `pytest tests` share one set of fixtures.

Under pytest-xdist the local provider starts one control plane per worker: each worker owns
its child processes outright (they die with it), and a start costs seconds. kind and existing
clusters are shared by the workers; kind is created under a file lock and deleted once, by the
process that ran the session.
"""

from __future__ import annotations

import logging
import re
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path

import filelock
import pytest
from kubernetes import client

from conformance.clusters import binaries
from conformance.clusters.base import Cluster
from conformance.clusters.select import PROVIDERS, Choice, choose

log = logging.getLogger("conformance")

RUN_LABEL = "conformance.convoy.kumodo.io/run"
_XDIST_WORKER = "workerinput"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("convoy-conformance")
    group.addoption(
        "--cluster",
        choices=PROVIDERS,
        default="auto",
        help="cluster provider: kind where Docker runs privileged containers and kind is on "
        "PATH, else a local control plane; or an existing cluster by --kubeconfig",
    )
    group.addoption(
        "--kube-version",
        default=None,
        help="Kubernetes version of the local control plane (default: conformance/versions.yaml)",
    )
    group.addoption("--etcd-version", default=None, help="etcd version of the local provider")
    group.addoption(
        "--callback-host",
        default=None,
        help="existing clusters: an address of this machine that the API server can reach",
    )
    # pytest-kind-ng's own options serve the kind and existing providers unchanged:
    # --cluster-name, --keep-cluster, --kubeconfig, --kind-image, --kind-bin, --kind-kubectl-bin.


_run_id_key = pytest.StashKey[str]()
_choice_key = pytest.StashKey[Choice]()


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, _XDIST_WORKER)


def pytest_configure(config: pytest.Config) -> None:
    if is_xdist_worker(config):
        shared = config.workerinput  # type: ignore[attr-defined]
        config.stash[_run_id_key] = f"{shared['convoy_run_id']}-{shared['workerid']}"
        if "convoy_choice" in shared:
            config.stash[_choice_key] = Choice(*shared["convoy_choice"])
    else:
        config.stash[_run_id_key] = secrets.token_hex(4)


def provider_choice(config: pytest.Config) -> Choice:
    """Decided once per run (the xdist controller decides for its workers), then cached."""
    if _choice_key not in config.stash:
        option = config.getoption
        config.stash[_choice_key] = choose(
            option("cluster"), kubeconfig=option("kubeconfig"), kind_image=option("kind_image")
        )
    return config.stash[_choice_key]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # type: ignore[no-untyped-def]
    """xdist: hand each worker the run ID and the provider decided here."""
    choice = provider_choice(node.config)
    node.workerinput["convoy_run_id"] = node.config.stash[_run_id_key]
    node.workerinput["convoy_choice"] = [choice.provider, choice.reason]


def _start_cluster(config: pytest.Config) -> Cluster:
    option = config.getoption
    choice = provider_choice(config)
    if choice.provider == "local":
        from conformance.clusters.local import LocalControlPlane

        found = binaries.resolve(option("kube_version"), option("etcd_version"))
        return LocalControlPlane(found).start()
    if choice.provider == "existing":
        from conformance.clusters.existing import ExistingCluster

        return ExistingCluster(Path(option("kubeconfig")), option("callback_host"))
    from conformance.clusters.kind import KindProvider

    kind = KindProvider(
        option("cluster_name"),
        image=option("kind_image"),
        kind_bin=option("kind_bin"),
        kubectl_bin=option("kind_kubectl_bin"),
        # Deleted once, by pytest_sessionfinish of the process that ran the session,
        # because xdist workers share the cluster.
        keep=True,
    )
    lock = Path(tempfile.gettempdir()) / f"convoy-kind-{option('cluster_name')}.lock"
    with filelock.FileLock(lock):
        return kind.start()


@pytest.fixture(scope="session")
def run_id(pytestconfig: pytest.Config) -> str:
    """Labels everything this session creates, so a sweep finds what a crash left behind."""
    return pytestconfig.stash[_run_id_key]


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config, run_id: str) -> Iterator[Cluster]:
    """The session's real Kubernetes API server, started or reached once."""
    started = _start_cluster(pytestconfig)
    choice = provider_choice(pytestconfig)
    log.info("cluster: %s (%s: %s)", started.describe(), choice.provider, choice.reason)
    try:
        yield started
    finally:
        try:
            sweep_namespaces(started, run_id)
        finally:
            started.stop()


@pytest.fixture(scope="session")
def k8s(cluster: Cluster) -> Iterator[client.ApiClient]:
    """An API client with the cluster's admin kubeconfig."""
    with cluster.api_client() as api:
        yield api


def namespace_name(test_name: str) -> str:
    """A DNS label from the test's name plus a random suffix: readable and unique."""
    slug = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")
    return f"t-{slug[:48].rstrip('-')}-{secrets.token_hex(3)}"


@pytest.fixture
def namespace(
    request: pytest.FixtureRequest, cluster: Cluster, k8s: client.ApiClient, run_id: str
) -> Iterator[str]:
    """A fresh namespace for one test, deleted after it whether it passed or not."""
    cluster.check_health()
    core = client.CoreV1Api(k8s)
    name = namespace_name(request.node.name)
    core.create_namespace({"metadata": {"name": name, "labels": {RUN_LABEL: run_id}}})
    try:
        yield name
    finally:
        delete_namespace(core, name)


def delete_namespace(core: client.CoreV1Api, name: str) -> None:
    """Start the deletion; the namespace controller finishes it without the test waiting."""
    try:
        core.delete_namespace(name)
    except client.ApiException as error:
        if error.status != 404:
            raise


def sweep_namespaces(cluster: Cluster, run_id: str) -> None:
    """Delete whatever namespaces of this run a failing test or a crash left behind."""
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        leftovers = core.list_namespace(label_selector=f"{RUN_LABEL}={run_id}").items
        for leftover in leftovers:
            delete_namespace(core, leftover.metadata.name)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Delete the kind cluster once, after every worker is done with it (unless kept)."""
    config = session.config
    used_kind = _choice_key in config.stash and config.stash[_choice_key].provider == "kind"
    if used_kind and not is_xdist_worker(config):
        from conformance.clusters.kind import KindProvider

        KindProvider(
            config.getoption("cluster_name"),
            image=None,
            kind_bin=config.getoption("kind_bin"),
            kubectl_bin=config.getoption("kind_kubectl_bin"),
            keep=config.getoption("keep_cluster"),
        ).stop()
