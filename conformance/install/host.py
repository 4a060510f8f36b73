"""The controller under test when the suite runs it on this machine (the local provider).

The reference controller runs as a host process from the same entry point and flags as its
container. A mutant (mutants/) is the same process with one rule broken, selected by an
environment variable that only the mutant runner sets.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from conformance import resources
from conformance.clusters.base import Outage
from conformance.clusters.ports import reserve_port
from conformance.clusters.processes import ChildDied, ManagedProcess, kill_now
from conformance.install import manifests
from conformance.install.subresources import LocalSubresourceAPI
from conformance.polling import poll_until, wait_http_ok

#: From the controller's start to its /readyz, and to the aggregation of its subresource API:
#: twelve controllers started at once beside twelve control planes on two cores (the kill
#: run's runs that must pass) took over 30 s to log their first line.
READY_TIMEOUT = 120.0
#: The reference controller's identity and rights as its Deployment has them (its manifests).
IDENTITY_FILES = (
    "namespace.yaml",
    "serviceaccount.yaml",
    "rbac-controller.yaml",
    "rbac-targets.yaml",
    "rbac-aggregated-api.yaml",
    "rbac-leader-election.yaml",
)
IDENTITY_NAMESPACE, IDENTITY_NAME = "convoy-system", "convoy-controller"
IDENTITY_USER = f"system:serviceaccount:{IDENTITY_NAMESPACE}:{IDENTITY_NAME}"
TARGETS_ROLE = "convoy-controller-targets"
AGGREGATE_LABEL = "convoy.kumodo.io/aggregate-to-targets=true"
#: How a refusal to this service account shows in the reference controller's log: the API
#: server's message (in a reconcile's outcome), or the status of a failed list or watch.
FORBIDDEN = (f'"{IDENTITY_USER}" cannot', "failed: 403")
#: The controller's log lines start with their time (convoy/__main__.py's logging format).
LOG_TIME_FORMAT = "%Y-%m-%d %H:%M:%S,%f"
#: How long after an outage a refusal may still be logged (answered before its end).
OUTAGE_GRACE = 1.0
#: Long enough for the longest run (a certifying one); the token dies with the cluster.
TOKEN_SECONDS = 24 * 3600
#: Set only by the suite when it runs a mutant; the reference controller never reads it.
MUTANT_VARIABLE = "CONVOY_MUTANT"


@dataclass
class HostController:
    """`python -m convoy` against a kubeconfig, with its log kept for diagnostics."""

    #: the cluster's admin kubeconfig: the subresource API's registration uses it
    kubeconfig: Path
    log_path: Path
    #: --resync in seconds; None runs the controller as shipped, with the document's default
    resync: float | None
    namespace: str | None = None
    #: a mutant of mutants/ to run instead of the reference controller
    mutant: str | None = None
    process: ManagedProcess | None = None
    #: the subresource API it serves and registers; the API server must reach this machine's
    #: loopback (the local provider). None: the controller serves no subresource API.
    subresources: LocalSubresourceAPI | None = field(default_factory=LocalSubresourceAPI)
    #: the kubeconfig the process runs with, when not the admin's (service_account_kubeconfig)
    identity: Path | None = None
    #: the cluster's outages so far (Cluster.outages): refusals during one are excused
    outages: Callable[[], Sequence[Outage]] = tuple

    def argv(self, health_port: int) -> list[str]:
        argv = [
            sys.executable,
            "-m",
            self.module,
            f"--kubeconfig={self.identity or self.kubeconfig}",
            *([] if self.resync is None else [f"--resync={self.resync:g}s"]),
            f"--health-port={health_port}",
            "--metrics-port=0",
        ]
        argv += [f"--namespace={self.namespace}"] if self.namespace else []
        return argv + (self.subresources.flags(self.log_path.parent) if self.subresources else [])

    #: time.monotonic() of the last start: a restart starts the resync period anew
    started_at: float = 0.0

    @property
    def temp_dir(self) -> Path:
        """The process's TMPDIR, removed at stop: a controller the suite kills (or a mutant that
        crashes) cannot remove its own temporary files."""
        return self.log_path.with_name(f"{self.log_path.stem}-tmp")

    def start(self) -> HostController:
        port = reserve_port()
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "TMPDIR": str(self.temp_dir)}
        env |= {MUTANT_VARIABLE: self.mutant} if self.mutant else {}
        self.process = ManagedProcess("convoy controller", self.argv(port), self.log_path, env)
        self.started_at = time.monotonic()
        self.process.start()
        self._wait_ready(f"http://127.0.0.1:{port}/readyz")
        if self.subresources:
            self.subresources.register(self.kubeconfig)
        return self

    def stop(self) -> None:
        if self.process:
            self.process.stop()
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    @property
    def per_worker(self) -> bool:
        return True

    def restart(self) -> None:
        self.stop()
        self.start()

    def crash(self) -> None:
        if self.process:
            kill_now(self.process)
        self.restart()

    def check(self) -> None:
        """The process still runs; and with the Deployment's identity, the API server never
        refused it anything (a grant the manifests lack is an error, not a detail)."""
        if self.process:
            self.process.check()
        if self.identity:
            check_not_refused(self.logs(), self.outages())

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def module(self) -> str:
        """What `python -m` runs: the reference controller, or the mutant runner."""
        return "mutants" if self.mutant else "convoy"

    def describe(self) -> dict[str, Any]:
        return {
            "hostProcess": f"python -m {self.module}",
            "resync": "default" if self.resync is None else f"{self.resync:g}s",
            "identity": IDENTITY_USER if self.identity else "the cluster's admin",
            **({"mutant": self.mutant} if self.mutant else {}),
        }

    def _wait_ready(self, url: str) -> None:
        process = self.process
        assert process is not None
        wait_http_ok(
            url,
            alive=process.check,
            timeout=READY_TIMEOUT,
            step=0.05,
            request_timeout=2.0,
            failure=lambda _: ChildDied(
                f"controller not ready after {READY_TIMEOUT:.0f} s:\n{process.tail()}"
            ),
        )


def service_account_kubeconfig(api: client.ApiClient, admin: Path, path: Path) -> Path:
    """Give the cluster the reference controller's service account and roles from its manifests
    (conformance.resources), and write a kubeconfig (at `path`) that authenticates as it. A host
    controller run with it has exactly its Deployment's rights: a grant the manifests lack fails
    the run."""
    objects = manifests.load_files(resources.CONTROLLER, IDENTITY_FILES)
    manifests.apply(api, objects)
    wait_aggregated(client.RbacAuthorizationV1Api(api))
    token = client.CoreV1Api(api).create_namespaced_service_account_token(
        IDENTITY_NAME, IDENTITY_NAMESPACE, {"spec": {"expirationSeconds": TOKEN_SECONDS}}
    )
    document = yaml.safe_load(admin.read_text())
    for user in document["users"]:
        user["user"] = {"token": token.status.token}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def wait_aggregated(rbac: client.RbacAuthorizationV1Api) -> None:
    """Until kube-controller-manager has aggregated every labelled role into the targets role
    (before that, the controller's first applies would be refused). A controller installed
    from other manifests (a vendor's) may have no such role: nothing to wait for then."""
    try:
        rbac.read_cluster_role(TARGETS_ROLE)
    except client.ApiException as error:
        if error.status == 404:
            return
        raise

    def aggregated() -> bool:
        sources = rbac.list_cluster_role(label_selector=AGGREGATE_LABEL).items
        wanted = sum(len(role.rules or []) for role in sources)
        return len(rbac.read_cluster_role(TARGETS_ROLE).rules or []) >= wanted

    poll_until(
        aggregated,
        timeout=READY_TIMEOUT,
        step=0.1,
        failure=lambda: TimeoutError(f"{TARGETS_ROLE} not aggregated after {READY_TIMEOUT:.0f} s"),
    )


def check_not_refused(log: str, outages: Sequence[Outage] = ()) -> None:
    """Raise when the reference controller's log shows the API server refusing it anything,
    except while the control plane was down (the lines of a traceback have their entry's time)."""
    refused, entry = [], ""
    for line in log.splitlines():
        entry = line if line[:1].isdigit() else entry
        if any(mark in line for mark in FORBIDDEN) and not during(entry, outages):
            refused.append(line)
    if refused:
        raise PermissionError(
            f"the API server refused the controller {len(refused)} times; first:\n"
            + refused[0][:2000]
        )


def during(entry: str, outages: Sequence[Outage]) -> bool:
    """Whether the controller logged this entry during (or just after) one of the outages."""
    try:
        logged_at = datetime.strptime(entry[:23], LOG_TIME_FORMAT).timestamp()
    except ValueError:
        return False
    return any(outage.covers(logged_at, OUTAGE_GRACE) for outage in outages)
