"""What a failing test leaves for the person reading it: Releases, events, controller log."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from kubernetes import client

from conformance.kube import dynamic_api
from conformance.observe.resync import ResyncClock
from convoyapi import API_VERSION

LOG_LINES = 60


def collect(
    api: client.ApiClient,
    namespace: str,
    controller: Any | None,
    resync_clock: ResyncClock | None = None,
) -> str:
    """A text section for the test report; never raises (diagnostics must not hide a failure)."""
    parts = []
    # Where workers share a controller its log interleaves them: this test's lines and the
    # resync sentinel's (the ticks) are what explain a timing failure.
    mentioned = [namespace, *([resync_clock.namespace] if resync_clock else [])]
    for title, gather in (
        ("Releases", lambda: _releases(api, namespace)),
        ("Events", lambda: _events(api, namespace)),
        ("Resync ticks", lambda: _ticks(resync_clock)),
        ("Controller log", lambda: _log_tail(controller, mentioned)),
    ):
        try:
            parts.append(f"--- {title} ---\n{gather()}")
        except Exception as error:  # a broken cluster must not mask the test's own failure
            parts.append(f"--- {title} ---\n(could not collect: {error})")
    return "\n".join(parts)


def _releases(api: client.ApiClient, namespace: str) -> str:
    resource = dynamic_api(api).resources.get(api_version=API_VERSION, kind="Release")
    items = resource.get(namespace=namespace).to_dict()["items"]
    shown = [
        {
            "name": item["metadata"]["name"],
            "generation": item["metadata"].get("generation"),
            "annotations": item["metadata"].get("annotations"),
            "spec": item.get("spec"),
            "status": item.get("status"),
        }
        for item in items
    ]
    return yaml.safe_dump(shown, sort_keys=False) if shown else "(none)"


def _events(api: client.ApiClient, namespace: str) -> str:
    events = client.CoreV1Api(api).list_namespaced_event(namespace).items
    lines = [
        f"{e.last_timestamp or e.event_time} {e.type} {e.reason} "
        f"{e.involved_object.kind}/{e.involved_object.name}: {e.message}"
        for e in events
    ]
    return "\n".join(lines) or "(none)"


def _ticks(clock: ResyncClock | None) -> str:
    """The resync ticks this worker's clock saw, in UTC to line up with the controller's log."""
    if clock is None:
        return "(the test kept no quiet period)"
    now = time.monotonic()
    wall = datetime.now(UTC)
    shown = [(wall - timedelta(seconds=now - tick)).isoformat() for tick in clock.ticks()]
    return f"every {clock.period:g} s; seen at " + (", ".join(shown) or "(none yet)")


def _log_tail(controller: Any | None, mentioned: list[str]) -> str:
    """The controller's last lines that mention one of `mentioned` (its last lines if none do)."""
    if controller is None:
        return "(the suite did not start the controller)"
    lines = controller.logs().splitlines()
    if any(name in line for line in lines for name in mentioned):
        lines = [
            line
            for line in lines
            if line.startswith("--- pod ") or any(name in line for name in mentioned)
        ]
    return "\n".join(lines[-LOG_LINES:]) or "(empty)"
