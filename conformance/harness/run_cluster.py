"""A run's cluster: which provider, started how, shared how.

Under pytest-xdist the local provider starts one control plane per worker: each worker owns
its child processes outright (they die with it), and a start costs seconds. kind and existing
clusters are shared by the workers; kind is created under a file lock and deleted once, by the
process that ran the session (conformance.plugin.pytest_sessionfinish).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import filelock
import pytest

from conformance.clusters import binaries
from conformance.clusters.base import Cluster, ServiceReference
from conformance.clusters.existing import ExistingCluster
from conformance.clusters.kind import KindProvider
from conformance.clusters.local import LocalControlPlane, ReusedControlPlane
from conformance.clusters.select import Choice, choose
from conformance.harness.stash import RUN_ID
from conformance.versions import KindError, kind_versions

XDIST_WORKER = "workerinput"
CHOICE = pytest.StashKey[Choice]()
#: --keep-namespaces: leave no test's namespace, a failed test's, or every test's.
KEEP_CHOICES = ("never", "on-failure", "always")


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, XDIST_WORKER)


def xdist_worker_index() -> int:
    """N of xdist worker gwN (set in the worker's environment); 0 without xdist."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))


def shared_run_id(config: pytest.Config) -> str:
    """The part of the run ID that every xdist worker of the run has (RUN_ID adds the worker)."""
    return config.stash[RUN_ID].split("-", 1)[0]


def provider_choice(config: pytest.Config) -> Choice:
    """Decided once per run (the xdist controller decides for its workers), then cached."""
    if CHOICE not in config.stash:
        option = config.getoption
        config.stash[CHOICE] = choose(
            option("cluster"),
            kubeconfig=option("kubeconfig"),
            kind_image=option("kind_image") or kind_node_image(option("kube_version")),
        )
    return config.stash[CHOICE]


def kind_node_image(kube_version: str | None) -> str | None:
    """The versions file's node image for --kube-version (default: the newest), if it has one."""
    try:
        return kind_versions().node_image(kube_version)
    except KindError:
        return None


def kind_provider(config: pytest.Config, *, keep: bool) -> KindProvider:
    return KindProvider(
        config.getoption("cluster_name"),
        image=config.getoption("kind_image"),
        kind_bin=config.getoption("kind_bin"),
        kubectl_bin=config.getoption("kind_kubectl_bin"),
        keep=keep,
        kube_version=config.getoption("kube_version"),
        callback_host=config.getoption("callback_host"),
        config_file=config.getoption("kind_config"),
        node_address=config.getoption("kind_node_address"),
    )


def start_cluster(config: pytest.Config, temp_dir: Path) -> Cluster:
    """`temp_dir`: pytest's for the session, where a local control plane keeps its data, so
    that pytest removes what a killed session (an xdist worker cut short) leaves there."""
    option = config.getoption
    choice = provider_choice(config)
    if choice.provider == "local" and option("reuse_control_plane"):
        return ReusedControlPlane(option("reuse_control_plane"))
    if choice.provider == "local":
        found = binaries.resolve(option("kube_version"), option("etcd_version"))
        return LocalControlPlane(found, base_dir=temp_dir).start()
    if choice.provider == "existing":
        service = option("witness_service")
        return ExistingCluster(
            Path(option("kubeconfig")),
            option("callback_host"),
            ServiceReference.parse(service) if service else None,
        )
    # Deleted once, by pytest_sessionfinish of the process that ran the session, because
    # xdist workers share the cluster.
    kind = kind_provider(config, keep=True)
    lock = Path(tempfile.gettempdir()) / f"convoy-kind-{option('cluster_name')}.lock"
    with filelock.FileLock(lock):
        return kind.start()
