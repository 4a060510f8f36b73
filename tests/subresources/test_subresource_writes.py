"""The subresource API through the kube-apiserver: what each request writes, and its errors.

SYNC-1 (POST sync writes sync-requested-at = now), FORCE-1 (?force=true writes both), SYNC-8
(a /pin, /mutations or /lifecycle write sets its annotation and sync-requested-at in one update,
and in manual mode that is a /sync request), TRIG-10 (such a write starts a reconcile at once).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from conformance.kube import raw_request
from convoy.api import Annotation
from convoy.subresources import release_path
from convoy.synctime import parse_sync_time, truncate_to_second
from convoyapi import SUBRESOURCE_GROUP, SUBRESOURCE_GROUP_VERSION
from tests.helpers import wait_until
from tests.subresources.support import annotations, update_changing

Obj = dict[str, Any]
MICROSECONDS_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
#: Both clocks are this machine's; the slack only absorbs rounding, not skew.
SLACK = timedelta(seconds=1)
RENDER_REF = "sha256:" + "ab" * 32
MUTATIONS = [
    {
        "target": {"apiVersion": "v1", "kind": "ConfigMap", "name": "content"},
        "patch": {"data": {"mutated": "yes"}},
    }
]
LIFECYCLE = {
    "preApply": [
        [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hook"}, "data": {}}]
    ]
}
#: subresource -> (annotation, a valid PUT body, the annotation's value after it)
WRITES = {
    "pin": (Annotation.PIN, {"renderRef": RENDER_REF}, RENDER_REF),
    "mutations": (Annotation.MUTATIONS, MUTATIONS, MUTATIONS),
    "lifecycle": (Annotation.LIFECYCLE, LIFECYCLE, LIFECYCLE),
}


def requested_at(release: Obj, annotation: str = Annotation.SYNC_REQUESTED_AT) -> datetime:
    text = annotations(release)[annotation]
    assert MICROSECONDS_Z.fullmatch(text), f"{annotation}={text!r}: not RFC 3339 µs with Z"
    return parse_sync_time(text)


def value(release: Obj, annotation: str) -> Any:
    text = annotations(release).get(annotation)
    return text if annotation == Annotation.PIN or text is None else json.loads(text)


def test_post_sync_writes_the_current_time(
    k8s: client.ApiClient, namespace: str, release: str, read_release: Callable[[str], Obj]
) -> None:
    """SYNC-1: sync-requested-at = now, and nothing forced."""
    before = datetime.now(UTC)
    response = raw_request(k8s, "POST", release_path(namespace, release, "sync"))
    after = datetime.now(UTC)
    assert response.status == 200, response
    stored = read_release(release)
    assert before - SLACK <= requested_at(stored) <= after + SLACK
    assert Annotation.SYNC_FORCE_REQUESTED_AT not in annotations(stored)
    assert response.body["kind"] == "PartialObjectMetadata"
    assert annotations(response.body) == annotations(stored)
    print(f"POST sync wrote {annotations(stored)[Annotation.SYNC_REQUESTED_AT]}")


def test_forced_sync_writes_both_times_in_one_update(
    k8s: client.ApiClient, namespace: str, release: str, read_release: Callable[[str], Obj]
) -> None:
    """FORCE-1: ?force=true writes sync-force-requested-at too, the same time, one update."""
    since = read_release(release)
    before = datetime.now(UTC)
    path = release_path(namespace, release, "sync")
    response = raw_request(k8s, "POST", path, query=[("force", "true")])
    assert response.status == 200, response
    until = response.body["metadata"]["resourceVersion"]
    _, after = update_changing(k8s, since, until, Annotation.SYNC_REQUESTED_AT)
    assert after["metadata"]["resourceVersion"] == until
    assert requested_at(after, Annotation.SYNC_FORCE_REQUESTED_AT) == requested_at(after)
    assert before - SLACK <= requested_at(after) <= datetime.now(UTC) + SLACK


@pytest.mark.parametrize(("force", "status"), [("false", 200), ("yes", 400)])
def test_force_is_true_or_false(
    k8s: client.ApiClient,
    namespace: str,
    release: str,
    read_release: Callable[[str], Obj],
    force: str,
    status: int,
) -> None:
    path = release_path(namespace, release, "sync")
    response = raw_request(k8s, "POST", path, query=[("force", force)])
    assert response.status == status, response
    assert Annotation.SYNC_FORCE_REQUESTED_AT not in annotations(read_release(release))


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
@pytest.mark.parametrize("subresource", sorted(WRITES))
def test_a_write_sets_its_data_and_a_sync_request_in_one_update(
    k8s: client.ApiClient,
    namespace: str,
    release: str,
    read_release: Callable[[str], Obj],
    subresource: str,
    method: str,
) -> None:
    """SYNC-8: the update that changes the data is the one that changes sync-requested-at."""
    annotation, body, expected = WRITES[subresource]
    path = release_path(namespace, release, subresource)
    if method == "DELETE":
        assert raw_request(k8s, "PUT", path, body=body).status == 200
        expected = None
    since = read_release(release)
    response = raw_request(k8s, method, path, body=body if method == "PUT" else None)
    assert response.status == 200, response
    until = response.body["metadata"]["resourceVersion"]
    before, after = update_changing(k8s, since, until, annotation)
    assert after["metadata"]["resourceVersion"] == until
    assert value(after, annotation) == expected
    stamp = Annotation.SYNC_REQUESTED_AT
    assert annotations(after)[stamp] != annotations(before).get(stamp)


@pytest.mark.parametrize("subresource", ["mutations", "lifecycle"])
def test_in_manual_mode_a_write_is_a_sync_request_handled_at_once(
    k8s: client.ApiClient,
    namespace: str,
    release: str,
    read_release: Callable[[str], Obj],
    subresource: str,
) -> None:
    """SYNC-8 and TRIG-10: a manual Release waiting for /sync applies after the write.

    The written value changes nothing the render needs (no mutation target, no hook), so the
    apply succeeds whatever the controller does with it; lastHandledSyncAt proves the request.
    """

    def applied() -> str | None:
        return condition(read_release(release)).get("reason")

    wait_until(lambda: applied() == "WaitingForSync", 60, "Applied=False WaitingForSync")
    body = [] if subresource == "mutations" else {}
    response = raw_request(k8s, "PUT", release_path(namespace, release, subresource), body=body)
    assert response.status == 200, response
    request = parse_sync_time(annotations(response.body)[Annotation.SYNC_REQUESTED_AT])

    def handled() -> bool:
        status = read_release(release).get("status") or {}
        last = status.get("lastHandledSyncAt")
        return last is not None and parse_sync_time(last) == truncate_to_second(request)

    took = wait_until(handled, 60, f"lastHandledSyncAt of the {subresource} write")
    print(f"{subresource} write handled as a /sync after {took:.2f} s")
    assert applied() == "Applied"


def condition(release: Obj, kind: str = "Applied") -> Obj:
    conditions = (release.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


# -- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("subresource", "body", "says"),
    [
        ("pin", {"renderRef": "sha256:abc"}, "is not sha256: and 64 lowercase hex digits"),
        ("pin", {"ref": RENDER_REF}, 'exactly one key, "renderRef"'),
        ("mutations", {"target": {}}, "expected a JSON list"),
        ("mutations", [{"target": {"kind": "ConfigMap"}, "patch": {}}], "target"),
        ("mutations", [{"target": MUTATIONS[0]["target"], "patch": 3}], "patch"),
        ("lifecycle", {"preapply": []}, "preApply"),
        ("lifecycle", {"preApply": [[]]}, "non-empty list"),
        ("lifecycle", {"postApply": [[{"kind": "ConfigMap"}]]}, "metadata.name"),
    ],
)
def test_an_invalid_body_is_400_saying_what_is_wrong(
    k8s: client.ApiClient,
    namespace: str,
    release: str,
    read_release: Callable[[str], Obj],
    subresource: str,
    body: Any,
    says: str,
) -> None:
    before = annotations(read_release(release))
    response = raw_request(k8s, "PUT", release_path(namespace, release, subresource), body=body)
    assert response.status == 400, response
    assert response.body["kind"] == "Status"
    assert response.body["reason"] == "BadRequest"
    assert says in response.body["message"], response.body["message"]
    assert annotations(read_release(release)) == before, "a rejected write changed the Release"


def test_a_body_that_is_not_json_is_400(
    k8s: client.ApiClient, namespace: str, release: str
) -> None:
    for body in ("{not json", ""):
        response = raw_request(k8s, "PUT", release_path(namespace, release, "pin"), body=body)
        assert response.status == 400, response
        assert "JSON" in response.body["message"]


def test_an_unknown_release_is_404(k8s: client.ApiClient, namespace: str, release: str) -> None:
    for method, subresource in (("POST", "sync"), ("PUT", "pin"), ("DELETE", "lifecycle")):
        path = release_path(namespace, "missing", subresource)
        response = raw_request(k8s, method, path, body={"renderRef": RENDER_REF})
        assert response.status == 404, response
        assert response.body["reason"] == "NotFound"
        assert response.body["message"] == 'releases.convoy.kumodo.io "missing" not found'


@pytest.mark.parametrize(
    ("method", "subresource", "allowed"),
    [("GET", "sync", "POST"), ("PUT", "sync", "POST"), ("POST", "pin", "PUT, DELETE")],
)
def test_a_wrong_method_is_405(
    k8s: client.ApiClient, namespace: str, release: str, method: str, subresource: str, allowed: str
) -> None:
    response = raw_request(k8s, method, release_path(namespace, release, subresource))
    assert response.status == 405, response
    assert response.body["reason"] == "MethodNotAllowed"
    assert f"allowed: {allowed}" in response.body["message"]


def test_an_unknown_subresource_is_404(k8s: client.ApiClient, namespace: str, release: str) -> None:
    response = raw_request(k8s, "POST", release_path(namespace, release, "rollback"))
    assert response.status == 404, response


def test_discovery_lists_the_subresources(k8s: client.ApiClient) -> None:
    response = raw_request(k8s, "GET", f"/apis/{SUBRESOURCE_GROUP_VERSION}")
    assert response.status == 200, response
    verbs = {r["name"]: r["verbs"] for r in response.body["resources"]}
    assert verbs == {
        "releases/sync": ["create"],
        "releases/pin": ["update", "delete"],
        "releases/mutations": ["update", "delete"],
        "releases/lifecycle": ["update", "delete"],
    }
    groups = client.ApisApi(k8s).get_api_versions().groups
    assert SUBRESOURCE_GROUP in {group.name for group in groups}
