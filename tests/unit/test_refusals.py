"""The controller check's reading of refusals in the reference controller's log.

Right after a restart kube-apiserver refuses what a role grants, until its RBAC caches are
filled (seen here: a get the service account may do answered 403 a second before /readyz); so
a refusal logged during an outage the suite caused is not held against the manifests.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from conformance.clusters.base import Outage
from conformance.install.host import IDENTITY_USER, OUTAGE_GRACE, check_not_refused

REFUSAL = f'releases is forbidden: User "{IDENTITY_USER}" cannot watch resource "releases"'


def at(seconds: float) -> float:
    return datetime(2026, 12, 1, 22, 27, 0).timestamp() + seconds


def entry(seconds: float, message: str) -> str:
    stamp = datetime.fromtimestamp(at(seconds)).strftime("%Y-%m-%d %H:%M:%S,%f")[:23]
    return f"{stamp} WARNING {message}"


OUTAGE = Outage(at(10), at(20))


@pytest.mark.parametrize(
    "line",
    [entry(5, "watch ReleaseInventory failed: 403 Forbidden"), entry(5, REFUSAL)],
    ids=["failed watch", "api message"],
)
def test_a_refusal_fails_the_check(line: str) -> None:
    with pytest.raises(PermissionError, match="refused the controller 1 times"):
        check_not_refused(f"{entry(1, 'started')}\n{line}\n")


@pytest.mark.parametrize("seconds", [10, 15, 20, 20 + OUTAGE_GRACE])
def test_a_refusal_during_an_outage_or_just_after_is_excused(seconds: float) -> None:
    check_not_refused(entry(seconds, "watch Release failed: 403 Forbidden"), [OUTAGE])


@pytest.mark.parametrize("seconds", [9.9, 20 + OUTAGE_GRACE + 0.1])
def test_a_refusal_before_or_after_an_outage_is_not(seconds: float) -> None:
    with pytest.raises(PermissionError):
        check_not_refused(entry(seconds, "watch Release failed: 403 Forbidden"), [OUTAGE])


def test_a_tracebacks_lines_have_their_entrys_time() -> None:
    during = "\n".join([entry(12, "reconcile failed"), "Traceback:", f"  {REFUSAL}"])
    check_not_refused(during, [OUTAGE])
    after = during.replace(entry(12, "reconcile failed"), entry(30, "reconcile failed"))
    with pytest.raises(PermissionError, match="cannot watch"):
        check_not_refused(after, [OUTAGE])


def test_a_forbidden_create_in_a_terminating_namespace_is_no_refusal() -> None:
    """The API server's 403 for new objects in a namespace being deleted names no user."""
    check_not_refused(
        entry(
            5,
            'HTTP response body: {"message":"unable to create new content in namespace '
            't-1 because it is being terminated","reason":"Forbidden","code":403}',
        )
    )
