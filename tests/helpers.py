"""Helpers shared by the project's own tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import datetime

import pytest
from kubernetes import client

from conformance.kube import read_or_none
from conformance.polling import poll_until
from conformance.releases import App, parse_time, same_second

#: The status fields that record a handled /sync and a handled forced one.
HANDLED, FORCE_HANDLED = "lastHandledSyncAt", "lastHandledForceSyncAt"


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll `check` until it holds; return the seconds it took, or fail naming `what`."""
    started = time.monotonic()
    poll_until(
        check,
        timeout=timeout,
        step=0.05,
        failure=lambda: pytest.fail.Exception(f"timed out after {timeout:g} s waiting for {what}"),
    )
    return time.monotonic() - started


def pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def namespace_deleted(core: client.CoreV1Api, name: str) -> bool:
    """Deleted, or on its way: the namespace controller finishes the rest."""
    found = read_or_none(lambda: core.read_namespace(name))
    return found is None or found.metadata.deletion_timestamp is not None


def wait_handled(app: App, field: str, request: datetime) -> None:
    """Wait until status.<field> records `request`, to the second."""
    app.wait_for(
        lambda r: (
            bool((r.get("status") or {}).get(field))
            and same_second(parse_time(r["status"][field]), request)
        ),
        f"the request of {request:%H:%M:%S} handled ({field})",
    )
