"""The witness's opt-in DELETE interception, on a real API server.

Only objects labelled with DELETES_LABEL send their deletes to the witness: that is what lets
a test make a prune fail (PruneFailed) while a namespace, with everything else in it, still
deletes without the witness's say.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from conformance.kube import read_or_none
from conformance.observe.witness import (
    DELETES_LABEL,
    DENIAL,
    GroupVersionKind,
    Recorder,
    configuration_name,
    witness_deletes,
)
from tests.helpers import wait_until

LABELLED = "opted-in"
PLAIN = "plain"
CONFIG_MAP = GroupVersionKind("", "v1", "ConfigMap")


def config_map(name: str, *, opted_in: bool) -> dict[str, Any]:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    return witness_deletes(body) if opted_in else body


def config_map_or_none(core: client.CoreV1Api, name: str, namespace: str) -> Any:
    return read_or_none(lambda: core.read_namespaced_config_map(name, namespace))


def test_witness_deletes_adds_the_label_and_keeps_the_others() -> None:
    body = {"metadata": {"name": "x", "labels": {"app": "web"}}}
    assert witness_deletes(body)["metadata"]["labels"] == {"app": "web", DELETES_LABEL: "true"}
    assert body["metadata"]["labels"] == {"app": "web"}, "the argument was changed"


def test_a_delete_review_takes_name_and_kind_from_the_old_object() -> None:
    """A DELETE carries no object, only oldObject; the record still names what went."""
    recorder = Recorder("ns")
    request = {
        "uid": "uid-delete",
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "operation": "DELETE",
        "namespace": "ns",
        "name": "",
        "object": None,
        "oldObject": {"metadata": {"name": "gone", "resourceVersion": "42"}},
        "dryRun": False,
        "userInfo": {"username": "someone"},
        "options": {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    answer = recorder.review(request, time.monotonic(), datetime.now(UTC))
    assert answer == {"uid": "uid-delete", "allowed": True}
    [attempt] = recorder.attempts(operation="DELETE")
    assert (attempt.name, attempt.kind, attempt.resource_version) == ("gone", CONFIG_MAP, "42")
    assert attempt.field_manager is None


def test_deletes_of_labelled_objects_are_recorded_and_others_are_not_sent(
    k8s: client.ApiClient, namespace: str, recorder: Recorder, username: str
) -> None:
    core = client.CoreV1Api(k8s)
    for name, opted_in in ((LABELLED, True), (PLAIN, False)):
        core.create_namespaced_config_map(namespace, config_map(name, opted_in=opted_in))
    version = core.read_namespaced_config_map(LABELLED, namespace).metadata.resource_version
    before = recorder.mark()
    core.delete_namespaced_config_map(PLAIN, namespace)
    core.delete_namespaced_config_map(LABELLED, namespace, dry_run="All")
    core.delete_namespaced_config_map(LABELLED, namespace)
    after = recorder.mark()
    deletes = recorder.attempts(since=before, operation="DELETE")
    assert [(a.name, a.dry_run) for a in deletes] == [(LABELLED, True), (LABELLED, False)]
    attempt = deletes[-1]
    assert (attempt.kind, attempt.namespace, attempt.user) == (CONFIG_MAP, namespace, username)
    assert attempt.resource_version == version
    assert before <= attempt.at <= after and not attempt.denied
    assert config_map_or_none(core, LABELLED, namespace) is None


def test_deny_delete_refuses_it_until_allowed(
    k8s: client.ApiClient, namespace: str, recorder: Recorder
) -> None:
    core = client.CoreV1Api(k8s)
    core.create_namespaced_config_map(namespace, config_map(LABELLED, opted_in=True))
    recorder.deny(operation="DELETE", name=LABELLED, message="prune refused")
    for _ in range(2):
        with pytest.raises(client.ApiException) as refused:
            core.delete_namespaced_config_map(LABELLED, namespace)
        assert refused.value.status == 403
        assert f"{DENIAL}: prune refused" in json.loads(refused.value.body)["message"]
    assert config_map_or_none(core, LABELLED, namespace) is not None, "a denied delete deleted"
    recorder.allow_all()
    core.delete_namespaced_config_map(LABELLED, namespace)
    assert config_map_or_none(core, LABELLED, namespace) is None
    assert [a.denied for a in recorder.attempts(operation="DELETE")] == [True, True, False]


def test_a_namespace_with_a_labelled_object_deletes_while_the_webhook_is_registered(
    k8s: client.ApiClient, namespace: str, recorder: Recorder
) -> None:
    """The namespace controller's deletes of opted-in objects pass the witness (no deny rule);
    everything else in the namespace never reaches it."""
    core = client.CoreV1Api(k8s)
    core.create_namespaced_config_map(namespace, config_map(LABELLED, opted_in=True))
    core.create_namespaced_config_map(namespace, config_map(PLAIN, opted_in=False))
    core.delete_namespace(namespace)

    def gone() -> bool:
        return read_or_none(lambda: core.read_namespace(namespace)) is None

    try:
        took = wait_until(gone, 60, f"namespace {namespace} to be deleted")
    except pytest.fail.Exception:
        status = core.read_namespace(namespace).status
        why = [f"{c.type}={c.status} {c.reason}: {c.message}" for c in status.conditions or []]
        left = [a.describe() for a in recorder.attempts(operation="DELETE")]
        pytest.fail(f"namespace {namespace} not deleted in 60 s: {why}; deletes seen {left}")
    print(f"namespace with an opted-in object deleted in {took:.2f} s")
    assert [a.name for a in recorder.attempts(operation="DELETE")] == [LABELLED]
    client.AdmissionregistrationV1Api(k8s).read_validating_webhook_configuration(
        configuration_name(namespace)
    )
