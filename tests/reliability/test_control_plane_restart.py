"""The reference controller through a restart of kube-apiserver or etcd in the middle of a run.

The session's local control plane restarts one part with the same flags, ports and data. The
controller's watches must reconnect (listing again when the server says their resourceVersion
is gone), the subresource API must answer again through the aggregator, a request written
after the restart must be applied, and nothing may be applied that nothing asked for.
"""

from __future__ import annotations

import base64
import json
import urllib.request

import pytest

from conformance.clusters.local import LocalControlPlane
from conformance.install.host import HostController
from conformance.kube import raw_request
from conformance.observe import subresources
from conformance.observe.releases import App, Releases, applied_manual_app, kinds, parse_time
from conformance.polling import poll_until
from conformance.timing import Timing
from convoyapi import SYNC_REQUESTED_AT
from tests.helpers import HANDLED, wait_handled

#: What the reference controller logs when a watch's resourceVersion is gone (410).
RELISTED = "expired; listing again"


def etcd_call(cluster: LocalControlPlane, method: str, body: dict) -> dict:
    """etcd's v3 JSON gateway (keys and values base64)."""
    request = urllib.request.Request(
        f"{cluster.etcd_url}/v3/{method}", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def compact_etcd(cluster: LocalControlPlane) -> int:
    """Write a key of the test's own and compact etcd's history up to it: every resourceVersion
    a client watched from before is then gone (410 at its next watch)."""
    key = base64.b64encode(b"/convoy-conformance-test/compaction").decode()
    written = etcd_call(cluster, "kv/put", {"key": key, "value": key})
    revision = int(written["header"]["revision"])
    etcd_call(cluster, "kv/compaction", {"revision": str(revision), "physical": True})
    return revision


def post_sync_once_served(app: App, timing: Timing) -> None:
    """POST /sync, once the aggregator routes to the controller's API again."""
    path = subresources.path(app, "sync")
    answers: list[int] = []

    def served() -> bool:
        answers.append(raw_request(app.releases.api, "POST", path).status)
        return 200 <= answers[-1] < 300

    poll_until(
        served,
        timeout=timing.reconcile,
        step=0.5,
        failure=lambda: AssertionError(f"POST {path} after the restart answered {answers}"),
    )
    print(f"POST {path}: {len(answers)} attempt(s) until served: {answers}")


@pytest.fixture
def local_cluster(cluster: object) -> LocalControlPlane:
    if not isinstance(cluster, LocalControlPlane):
        pytest.skip("restarts parts of the local control plane")
    return cluster


@pytest.mark.parametrize("part", ["kube-apiserver", "etcd"])
def test_a_request_after_a_restart_is_applied_once_and_nothing_else_is(
    releases: Releases,
    local_cluster: LocalControlPlane,
    controller: HostController,
    timing: Timing,
    part: str,
) -> None:
    app = applied_manual_app(releases)
    local_cluster.restart(part)
    since = releases.recorder.mark()
    post_sync_once_served(app, timing)
    app.wait_content("v2")
    requested = subresources.annotations_of(app.get())[SYNC_REQUESTED_AT]
    wait_handled(app, HANDLED, parse_time(requested))
    quiet = releases.recorder.quiet(timing.quiet, since=releases.recorder.mark())
    assert quiet == [], f"written with nothing pending: {[a.describe() for a in quiet]}"
    assert kinds(app.attempts(since=since)) == ["dry-run", "apply"]
    controller.check()


def test_watches_expired_by_compaction_list_again_and_see_a_request(
    releases: Releases,
    local_cluster: LocalControlPlane,
    controller: HostController,
    timing: Timing,
) -> None:
    """kube-apiserver goes down, etcd's history is compacted past every resourceVersion the
    controller watched from, and the API server comes back: the watches get 410 Gone."""
    app = applied_manual_app(releases)
    relists = controller.logs().count(RELISTED)
    local_cluster.restart("kube-apiserver", while_down=lambda: compact_etcd(local_cluster))
    since = releases.recorder.mark()
    written = parse_time(app.request_sync(at=app.next_pending_time()))
    app.wait_content("v2")
    wait_handled(app, HANDLED, written)
    assert kinds(app.attempts(since=since)) == ["dry-run", "apply"]

    def relisted() -> int:
        return controller.logs().count(RELISTED) - relists

    # The request may reach the controller by its resync before a watch comes back and lists.
    count = poll_until(
        relisted,
        timeout=timing.reconcile,
        step=0.2,
        failure=lambda: AssertionError(
            "no watch of the controller listed again after the compaction"
        ),
    )
    print(f"{count} watch(es) listed again after the compaction")
