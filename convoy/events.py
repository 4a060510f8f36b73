"""Events: each change of a Release's Applied condition, as `kubectl describe release` shows it.

A reconcile that changes the condition's status or reason records one core/v1 Event on the
Release: Warning for a failure, Normal for an apply or a hold. Like client-go's recorder, a
failure to record an Event is logged and never fails the reconcile.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from kubernetes import client

from convoy import synctime
from convoy.api import API_VERSION, HOLDS, Reason
from convoy.clock import Clock

log = logging.getLogger(__name__)

Obj = dict[str, Any]
COMPONENT = "convoy-controller"
#: The API server's limit on an Event's message.
MESSAGE_LIMIT = 1024


def applied_of(status: Obj | None) -> tuple[str, str] | None:
    """The Applied condition's (status, reason), None before it is set."""
    conditions = (status or {}).get("conditions") or []
    found = next((c for c in conditions if c.get("type") == "Applied"), None)
    return (found.get("status"), found.get("reason")) if found else None


def event_type(reason: Reason) -> str:
    return "Normal" if reason is Reason.APPLIED or reason in HOLDS else "Warning"


class EventRecorder:
    def __init__(self, core: client.CoreV1Api, clock: Clock) -> None:
        self._core = core
        self._clock = clock
        self._instance = socket.gethostname()

    def applied_changed(self, release: Obj, status: Obj, reason: Reason, message: str) -> None:
        """Record an Event when `status`, a reconcile's outcome, changed the Applied condition
        of `release` as the reconcile read it."""
        if applied_of(release.get("status")) == applied_of(status):
            return
        try:
            self._core.create_namespaced_event(
                release["metadata"]["namespace"], self.event(release, reason, message)
            )
        except client.ApiException as error:
            log.warning(
                "event for %s/%s not recorded: %s %s",
                release["metadata"]["namespace"],
                release["metadata"]["name"],
                error.status,
                error.reason,
            )

    def event(self, release: Obj, reason: Reason, message: str) -> Obj:
        meta = release["metadata"]
        now = synctime.format_sync_time(self._clock.wall())
        return {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": "Release",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason.value,
            "message": message[:MESSAGE_LIMIT],
            "type": event_type(reason),
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
