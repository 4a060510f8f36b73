"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it, for a
controller run as several replicas (`--leader-elect`): one replica reconciles, the others wait.

A candidate takes the Lease when it is free, its own, or expired; expiry is judged on the
candidate's own clock, from when it last saw the record change (never from the holder's
renewTime: the clocks of two nodes may differ). So a new process waits a whole lease duration
after it first sees another holder's record, however old that record is, unless the old holder
released it on its way out (`--leader-elect-release-on-exit`; off by default, as in
controller-runtime). The holder renews every retry period and gives up, and so exits, when it
could not renew for the renew deadline.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

log = logging.getLogger("convoy")

#: client-go's and controller-runtime's defaults
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0


def micro_time(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaderElector:
    api: client.ApiClient
    namespace: str
    name: str
    identity: str
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD

    def __post_init__(self) -> None:
        self._leases = client.CoordinationV1Api(self.api)
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0

    def acquire(self, stop: threading.Event) -> bool:
        """Wait until this candidate holds the Lease (True) or `stop` is set (False)."""
        log.info("leader election: waiting for lease %s/%s", self.namespace, self.name)
        while not stop.is_set():
            if self._try_acquire_or_renew():
                log.info("leader election: %s acquired lease %s", self.identity, self.name)
                return True
            stop.wait(self.retry_period)
        return False

    def keep(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """Renew in a daemon thread; call `on_lost` when a renewal fails for the deadline."""

        def renew() -> None:
            last = time.monotonic()
            while not stop.wait(self.retry_period):
                if self._try_acquire_or_renew():
                    last = time.monotonic()
                elif time.monotonic() - last > self.renew_deadline:
                    log.error("leader election: lost lease %s", self.name)
                    on_lost()
                    return

        threading.Thread(target=renew, name="leader-election", daemon=True).start()

    def release(self) -> None:
        """Give the Lease up, so that another replica need not wait for it to expire."""
        lease = self._read()
        if lease is None or lease.spec.holder_identity != self.identity:
            return
        lease.spec.holder_identity = None
        lease.spec.lease_duration_seconds = 1
        self._leases.replace_namespaced_lease(self.name, self.namespace, lease)
        log.info("leader election: released lease %s", self.name)

    def _read(self) -> Any:
        try:
            return self._leases.read_namespaced_lease(self.name, self.namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def _try_acquire_or_renew(self) -> bool:
        now = dt.datetime.now(dt.UTC)
        try:
            lease = self._read()
            if lease is None:
                self._leases.create_namespaced_lease(self.namespace, self._body(now, now, 0))
                return True
            spec = lease.spec
            self._observe((spec.holder_identity, spec.renew_time, spec.lease_transitions))
            held_by_other = spec.holder_identity not in (None, "", self.identity)
            duration = spec.lease_duration_seconds or self.lease_duration
            if held_by_other and time.monotonic() < self._observed_at + duration:
                return False
            mine = spec.holder_identity == self.identity
            acquired = spec.acquire_time if mine else now
            transitions = (spec.lease_transitions or 0) + (0 if mine else 1)
            body = self._body(acquired, now, transitions)
            body["metadata"]["resourceVersion"] = lease.metadata.resource_version
            self._leases.replace_namespaced_lease(self.name, self.namespace, body)
            return True
        except client.ApiException as error:
            if error.status not in (409, 422):  # not merely another candidate writing first
                log.warning("leader election: %s %s", error.status, error.reason)
            return False
        except Exception as error:  # the API unreachable: try again at the next period
            log.warning("leader election: %s", error)
            return False

    def _observe(self, record: tuple[Any, ...]) -> None:
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()

    def _body(self, acquired: dt.datetime, renewed: dt.datetime, transitions: int) -> dict:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": micro_time(acquired),
                "renewTime": micro_time(renewed),
                "leaseTransitions": transitions,
            },
        }
