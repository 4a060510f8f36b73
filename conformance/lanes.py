"""Local control planes reused across the kill run's mutant runs: one per run at a time (a lane).

A mutant's run then starts no control plane of its own (pytest's --reuse-control-plane): the
start and the stop, about 3.5 s and 3 CPU-seconds, a third of a short run's CPU, go to the
mutants' tests instead.

Between two runs of a lane, the hand-over makes the next run find the cluster as the lane's
first run left it:
- it deletes the APIService that the finished run's controller registered: its server is
  gone, and while an aggregated API fails discovery the namespace controller finishes no
  namespace's deletion (the next run's controller registers it again);
- it waits until the run's namespaces are gone;
- it compares the cluster-wide objects with those the lane's first run left. A difference (a
  leak) or a control plane that died gets the lane a fresh control plane, and the kill run
  says which and why.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client
from kubernetes.client.rest import ApiException

from conformance.clusters.binaries import Binaries
from conformance.clusters.local import LocalControlPlane
from conformance.harness.namespaces import RUN_LABEL
from conformance.polling import poll_until
from convoyapi import API_SERVICE

#: How long a hand-over waits for the finished run's namespaces to go.
HANDOVER_TIMEOUT = 30.0
NOT_FOUND = 404


@dataclass
class Lane:
    name: str
    plane: LocalControlPlane
    #: the cluster-wide objects the lane's first run left: what every later run must leave
    known: frozenset[str] | None = None
    runs: int = 0


@dataclass
class Lanes:
    """`width` control planes, each lent to one run at a time."""

    binaries: Binaries
    width: int
    base_dir: Path
    #: why a lane got a fresh control plane, one line each
    replaced: list[str] = field(default_factory=list)
    _free: queue.Queue[Lane] = field(default_factory=queue.Queue)
    _lanes: list[Lane] = field(default_factory=list)
    #: Threads that start the control planes and outlive them: a control plane's processes
    #: die with the thread that started them (PR_SET_PDEATHSIG, conformance.clusters.processes),
    #: and a run's thread may end first.
    _starters: ThreadPoolExecutor | None = None

    def __enter__(self) -> Lanes:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._starters = ThreadPoolExecutor(max_workers=self.width)
        starts = [self._starters.submit(self._start_here) for _ in range(self.width)]
        self._lanes = [Lane(f"lane-{n}", start.result()) for n, start in enumerate(starts)]
        for lane in self._lanes:
            self._free.put(lane)
        return self

    def __exit__(self, *exc: object) -> None:
        for lane in self._lanes:
            lane.plane.stop()
        if self._starters:
            self._starters.shutdown()

    @contextlib.contextmanager
    def borrow(self, run: str) -> Iterator[Path]:
        """A lane's control plane directory for `run`, handed over when the run has ended."""
        lane = self._free.get()
        try:
            yield lane.plane.dir
        finally:
            lane.runs += 1
            if problem := self._hand_over(lane):
                self.replaced.append(f"{lane.name} after {run}: {problem}")
                lane.plane.stop()
                lane.plane, lane.known = self._start(), None
            self._free.put(lane)

    def _start(self) -> LocalControlPlane:
        assert self._starters, "lanes not entered"
        return self._starters.submit(self._start_here).result()

    def _start_here(self) -> LocalControlPlane:
        return LocalControlPlane(self.binaries, base_dir=self.base_dir).start()

    def _hand_over(self, lane: Lane) -> str | None:
        """None when the cluster is as the lane's first run left it; else what differs."""
        try:
            lane.plane.check_health()
            with lane.plane.api_client() as api:
                unregister_subresources(api)
                wait_namespaces_gone(api)
                found = cluster_wide(api)
        except Exception as error:  # whatever went wrong, the lane gets a fresh control plane
            return f"{type(error).__name__}: {error}"
        if lane.known is None:
            lane.known = found
            return None
        if found == lane.known:
            return None
        return f"left {sorted(found - lane.known)}, removed {sorted(lane.known - found)}"


def unregister_subresources(api: client.ApiClient) -> None:
    try:
        client.ApiregistrationV1Api(api).delete_api_service(API_SERVICE)
    except ApiException as error:
        if error.status != NOT_FOUND:
            raise


def wait_namespaces_gone(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)

    def left() -> list[str]:
        return [n.metadata.name for n in core.list_namespace(label_selector=RUN_LABEL).items]

    poll_until(
        lambda: not left() or None,
        timeout=HANDOVER_TIMEOUT,
        step=0.2,
        failure=lambda: TimeoutError(f"namespaces not gone after {HANDOVER_TIMEOUT:g} s: {left()}"),
    )


def cluster_wide(api: client.ApiClient) -> frozenset[str]:
    """Every namespace and every cluster-wide object that a run may create, as kind/name."""
    rbac, admission = client.RbacAuthorizationV1Api(api), client.AdmissionregistrationV1Api(api)
    extensions = client.ApiextensionsV1Api(api)
    listed = {
        "Namespace": client.CoreV1Api(api).list_namespace(),
        "CustomResourceDefinition": extensions.list_custom_resource_definition(),
        "ClusterRole": rbac.list_cluster_role(),
        "ClusterRoleBinding": rbac.list_cluster_role_binding(),
        "APIService": client.ApiregistrationV1Api(api).list_api_service(),
        "ValidatingWebhookConfiguration": admission.list_validating_webhook_configuration(),
        "MutatingWebhookConfiguration": admission.list_mutating_webhook_configuration(),
    }
    return frozenset(f"{kind}/{o.metadata.name}" for kind, got in listed.items() for o in got.items)
