"""The witness on a real API server: the facts the suite's timing and dry-run checks rely on.

Validating webhooks are called synchronously, before the API server answers the client, so an
attempt is in the record by the time the client's call returns: these tests read the record
right after a call, without waiting.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client, dynamic
from kubernetes.dynamic.discovery import Discoverer

from conformance.kube import read_or_none
from conformance.observe.witness import (
    DENIAL,
    Attempt,
    GroupVersionKind,
    Recorder,
    Witness,
    WitnessTimeout,
    configuration_name,
)
from tests.helpers import wait_until

NAME = "rendered"
MANAGER = "convoy"
CLIENT_MANAGER = "convoy-test"
FINALIZER = "conformance.convoy.kumodo.io/held"
CREATES = 50
CONFIG_MAP = GroupVersionKind("", "v1", "ConfigMap")


def manifest(namespace: str, value: str = "v1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": namespace},
        "data": {"key": value},
    }


def apply(
    config_maps: dynamic.Resource, namespace: str, value: str = "v1", dry_run: str | None = None
) -> Any:
    """A server-side apply as the reference controller does it: manager "convoy", forced."""
    return config_maps.server_side_apply(
        body=manifest(namespace, value),
        namespace=namespace,
        field_manager=MANAGER,
        force_conflicts=True,
        dry_run=dry_run,
    )


def stored_data(core: client.CoreV1Api, namespace: str) -> dict[str, str] | None:
    stored = read_or_none(lambda: core.read_namespaced_config_map(NAME, namespace))
    return stored and stored.data


def message(error: client.ApiException) -> str:
    return json.loads(error.body)["message"]


# -- a. writes through the main resource -----------------------------------------------------


def create(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, manifest(namespace), field_manager=CLIENT_MANAGER)


def replace(core: client.CoreV1Api, namespace: str) -> None:
    body = manifest(namespace, "replaced")
    core.replace_namespaced_config_map(NAME, namespace, body, field_manager=CLIENT_MANAGER)


def patch(core: client.CoreV1Api, namespace: str) -> None:
    body = {"data": {"key": "patched"}}
    core.patch_namespaced_config_map(NAME, namespace, body, field_manager=CLIENT_MANAGER)


@pytest.mark.parametrize(
    ("write", "operation"),
    [
        pytest.param(create, "CREATE", id="create"),
        pytest.param(replace, "UPDATE", id="replace"),
        pytest.param(patch, "UPDATE", id="patch"),
    ],
)
def test_a_write_is_recorded_with_its_operation_manager_user_and_time(
    write: Callable[[client.CoreV1Api, str], None],
    operation: str,
    k8s: client.ApiClient,
    namespace: str,
    recorder: Recorder,
    username: str,
) -> None:
    core = client.CoreV1Api(k8s)
    old_version = None
    if operation == "UPDATE":
        old_version = core.create_namespaced_config_map(
            namespace, manifest(namespace)
        ).metadata.resource_version
    before = recorder.mark()
    write(core, namespace)
    after = recorder.mark()
    [attempt] = recorder.attempts(name=NAME, since=before)
    assert (attempt.operation, attempt.kind, attempt.namespace) == (
        operation,
        CONFIG_MAP,
        namespace,
    )
    assert (attempt.field_manager, attempt.user) == (CLIENT_MANAGER, username)
    assert attempt.resource_version == old_version
    assert not attempt.dry_run and not attempt.denied
    assert before <= attempt.at <= after


# -- b. server-side apply, also when it changes nothing --------------------------------------


def test_a_server_side_apply_is_recorded_also_when_it_changes_nothing(
    config_maps: dynamic.Resource, namespace: str, recorder: Recorder
) -> None:
    first = apply(config_maps, namespace)
    since = recorder.mark()
    second = apply(config_maps, namespace)
    version = first.metadata.resourceVersion
    assert second.metadata.resourceVersion == version, "the second apply changed the object"
    [no_op] = recorder.attempts(since=since, name=NAME)
    assert (no_op.operation, no_op.field_manager, no_op.resource_version) == (
        "UPDATE",
        MANAGER,
        version,
    )
    operations = [a.operation for a in recorder.attempts(name=NAME, field_manager=MANAGER)]
    assert operations == ["CREATE", "UPDATE"]
    print(f"no-op server-side apply reached the witness (resourceVersion stayed {version})")


# -- c. dry runs -----------------------------------------------------------------------------


@pytest.mark.parametrize(("exists", "operation"), [(False, "CREATE"), (True, "UPDATE")])
def test_a_dry_run_apply_is_recorded_as_a_dry_run_and_stores_nothing(
    exists: bool,
    operation: str,
    k8s: client.ApiClient,
    config_maps: dynamic.Resource,
    namespace: str,
    recorder: Recorder,
) -> None:
    core = client.CoreV1Api(k8s)
    if exists:
        apply(config_maps, namespace)
    before = stored_data(core, namespace)
    since = recorder.mark()
    apply(config_maps, namespace, "dry", dry_run="All")
    [attempt] = recorder.attempts(since=since, name=NAME)
    assert (attempt.operation, attempt.dry_run, attempt.field_manager) == (operation, True, MANAGER)
    assert stored_data(core, namespace) == before


# -- d. denying on request -------------------------------------------------------------------


@pytest.mark.parametrize("code", [403, 422])
def test_deny_once_refuses_exactly_the_next_matching_attempt(
    code: int, config_maps: dynamic.Resource, namespace: str, recorder: Recorder
) -> None:
    recorder.deny(times=1, name=NAME, field_manager=MANAGER, code=code, message="test d")
    with pytest.raises(client.ApiException) as refused:
        apply(config_maps, namespace)
    assert refused.value.status == code
    assert f"{DENIAL}: test d" in message(refused.value)
    apply(config_maps, namespace)
    assert [(a.operation, a.denied) for a in recorder.attempts(name=NAME)] == [
        ("CREATE", True),
        ("CREATE", False),
    ]


def test_deny_without_times_refuses_matching_attempts_until_allow_all(
    config_maps: dynamic.Resource, namespace: str, recorder: Recorder
) -> None:
    """A failing pre-apply dry run on demand: only dry runs are refused."""
    recorder.deny(dry_run=True, name=NAME)
    for _ in range(2):
        with pytest.raises(client.ApiException, match="witness"):
            apply(config_maps, namespace, dry_run="All")
    apply(config_maps, namespace)
    recorder.allow_all()
    apply(config_maps, namespace, dry_run="All")
    assert [(a.dry_run, a.denied) for a in recorder.attempts(name=NAME)] == [
        (True, True),
        (True, True),
        (False, False),
        (True, False),
    ]


def test_a_gate_holds_the_write_until_it_is_opened_and_then_lets_it_through(
    k8s: client.ApiClient, config_maps: dynamic.Resource, namespace: str, recorder: Recorder
) -> None:
    """While the write waits at the gate, the writer is blocked in its call: what the test does
    meanwhile happens during it. The next write passes the spent gate at once."""
    gate = recorder.gate(name=NAME)
    finished: list[float] = []
    writer = threading.Thread(target=lambda: (apply(config_maps, namespace), finished.append(1)))
    writer.start()
    gate.wait_entered(timeout=10)
    held_since = time.monotonic()
    assert finished == [], "the write went through a closed gate"
    gate.open()
    writer.join(timeout=10)
    assert finished == [1] and time.monotonic() - held_since < 5
    apply(config_maps, namespace, "v2")
    assert stored_data(client.CoreV1Api(k8s), namespace) == {"key": "v2"}


# -- e. scope --------------------------------------------------------------------------------


def test_objects_in_a_namespace_the_witness_does_not_watch_never_reach_it(
    witness: Witness,
    config_maps: dynamic.Resource,
    namespace: str,
    unwatched_namespace: str,
    recorder: Recorder,
) -> None:
    apply(config_maps, unwatched_namespace)
    apply(config_maps, namespace)
    assert [a.namespace for a in recorder.attempts(name=NAME)] == [namespace]

    def in_unwatched(attempt: Attempt) -> bool:
        return attempt.namespace == unwatched_namespace

    assert not witness.strays.attempts(subresource=None, where=in_unwatched)


def core_event(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "noise"},
        "involvedObject": {"kind": "ConfigMap", "name": NAME, "namespace": namespace},
        "reason": "Noise",
        "message": "not an apply",
        "type": "Normal",
    }


def new_event(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "noise"},
        "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": "conformance.convoy.kumodo.io/test",
        "reportingInstance": "test",
        "action": "Noise",
        "reason": "Noise",
        "type": "Normal",
        "regarding": {"kind": "ConfigMap", "name": NAME, "namespace": namespace},
    }


def lease(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "noise"},
        "spec": {"holderIdentity": "test"},
    }


@pytest.mark.parametrize("noise", [core_event, new_event, lease])
def test_events_and_leases_are_not_sent_to_the_witness(
    noise: Callable[[str], dict[str, Any]],
    witness: Witness,
    resources: Discoverer,
    config_maps: dynamic.Resource,
    namespace: str,
    recorder: Recorder,
) -> None:
    body = noise(namespace)
    resource = resources.get(api_version=body["apiVersion"], kind=body["kind"])
    resource.create(body=body, namespace=namespace)
    apply(config_maps, namespace)
    assert recorder.attempts(name=NAME), "the webhook was not called at all"
    for seen in (recorder, witness.strays):
        assert not seen.attempts(subresource=None, kind=body["kind"])


def test_a_status_write_is_recorded_apart_from_the_main_resource_and_its_annotations(
    k8s: client.ApiClient, namespace: str, recorder: Recorder
) -> None:
    """Status writes show a controller's reconciles; default queries leave them out. A
    main-resource write keeps the annotations it stores (which write set a /sync).

    A Service, because no controller writes the status of a ClusterIP Service: a concurrent
    writer would make the API server retry the patch, and the witness see it twice.
    """
    core = client.CoreV1Api(k8s)
    annotations = {"example.com/note": "written"}
    service = {
        "metadata": {"name": NAME, "annotations": annotations},
        "spec": {"ports": [{"port": 80}]},
    }
    core.create_namespaced_service(namespace, service, field_manager=CLIENT_MANAGER)
    condition = {
        "type": "Witnessed",
        "status": "True",
        "reason": "Test",
        "message": "a status write",
        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    status = {"status": {"conditions": [condition]}}
    core.patch_namespaced_service_status(NAME, namespace, status, field_manager=CLIENT_MANAGER)
    mine = {"name": NAME, "field_manager": CLIENT_MANAGER}
    [created] = recorder.attempts(**mine)
    assert (created.operation, created.annotations) == ("CREATE", annotations)
    [write] = recorder.attempts(subresource="status", **mine)
    assert (write.operation, write.kind.kind, write.annotations) == ("UPDATE", "Service", {})


# -- f. cleanup ------------------------------------------------------------------------------


def test_close_removes_the_webhook_configuration(
    k8s: client.ApiClient, witness: Witness, namespace: str
) -> None:
    admission = client.AdmissionregistrationV1Api(k8s)
    name = configuration_name(namespace)
    with witness.watch(namespace) as watching:
        admission.read_validating_webhook_configuration(name)
    with pytest.raises(client.ApiException) as gone:
        admission.read_validating_webhook_configuration(name)
    assert gone.value.status == 404
    watching.close()  # idempotent


def test_a_watched_namespace_can_be_deleted_while_the_webhook_is_registered(
    k8s: client.ApiClient, namespace: str, recorder: Recorder
) -> None:
    """Deletes pass the witness by; the finalizer removal is an update that it allows."""
    core = client.CoreV1Api(k8s)
    held = {"metadata": {"name": NAME, "finalizers": [FINALIZER]}}
    core.create_namespaced_config_map(namespace, held)
    core.delete_namespace(namespace)

    def terminating() -> bool:
        return (
            core.read_namespaced_config_map(NAME, namespace).metadata.deletion_timestamp is not None
        )

    wait_until(terminating, 60, f"the namespace controller to delete ConfigMap {NAME}")
    core.patch_namespaced_config_map(NAME, namespace, {"metadata": {"finalizers": None}})

    def gone() -> bool:
        return read_or_none(lambda: core.read_namespace(namespace)) is None

    took = wait_until(gone, 60, f"namespace {namespace} to be deleted")
    print(f"namespace deleted {took:.2f} s after its last finalizer was removed")
    assert recorder.attempts(name=NAME, operation="UPDATE"), "the finalizer removal went unseen"
    client.AdmissionregistrationV1Api(k8s).read_validating_webhook_configuration(
        configuration_name(namespace)
    )


# -- overhead --------------------------------------------------------------------------------


def test_the_webhook_round_trip_overhead_is_measured(
    k8s: client.ApiClient, namespace: str, unwatched_namespace: str, recorder: Recorder
) -> None:
    """Creates alternate between the two namespaces, so drift of the machine's load cancels."""
    core = client.CoreV1Api(k8s)
    seconds: dict[str, list[float]] = {namespace: [], unwatched_namespace: []}
    for index in range(CREATES):
        for target, times in seconds.items():
            started = time.perf_counter()
            core.create_namespaced_config_map(target, {"metadata": {"name": f"load-{index}"}})
            times.append(time.perf_counter() - started)
    assert len(recorder.attempts(kind="ConfigMap", where=lambda a: a.name.startswith("load-"))) == (
        CREATES
    )
    watched = statistics.median(seconds[namespace]) * 1000
    unwatched = statistics.median(seconds[unwatched_namespace]) * 1000
    print(
        f"{CREATES} creates, median per create: {watched:.2f} ms watched, "
        f"{unwatched:.2f} ms unwatched, overhead {watched - unwatched:.2f} ms; totals "
        f"{sum(seconds[namespace]):.3f} s and {sum(seconds[unwatched_namespace]):.3f} s"
    )


# -- the recorder's waits, on its own --------------------------------------------------------


def review(recorder: Recorder, name: str) -> dict[str, Any]:
    """What the server does with an AdmissionReview request for an update of `name`."""
    request = {
        "uid": f"uid-{name}",
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "operation": "UPDATE",
        "namespace": recorder.namespace,
        "name": name,
        "userInfo": {"username": "someone"},
        "options": {"fieldManager": MANAGER},
    }
    return recorder.review(request, time.monotonic(), datetime.now(UTC))


Schedule = Callable[[float, Callable[[], Any]], None]


@pytest.fixture
def later() -> Iterator[Schedule]:
    """Run a call on a timer thread; every timer is cancelled when the test ends."""
    timers: list[threading.Timer] = []

    def schedule(delay: float, call: Callable[[], Any]) -> None:
        timers.append(threading.Timer(delay, call))
        timers[-1].start()

    yield schedule
    for timer in timers:
        timer.cancel()
        timer.join()


def test_wait_for_wakes_on_the_attempt_it_waits_for(later: Schedule) -> None:
    recorder = Recorder("ns")
    later(0.2, lambda: review(recorder, "late"))
    started = time.monotonic()
    [attempt] = recorder.wait_for(name="late", timeout=10)
    assert attempt.name == "late" and time.monotonic() - started < 5


def test_wait_for_times_out_naming_what_it_waited_for_and_what_came() -> None:
    recorder = Recorder("ns")
    review(recorder, "other")
    with pytest.raises(WitnessTimeout, match=r"(?s)name='wanted'.*UPDATE ConfigMap/other"):
        recorder.wait_for(name="wanted", timeout=0.2)


def test_quiet_returns_at_the_first_matching_attempt_or_empty_after_the_period(
    later: Schedule,
) -> None:
    recorder = Recorder("ns")
    assert recorder.quiet(0.2, name="noisy") == []
    later(0.2, lambda: review(recorder, "noisy"))
    started = time.monotonic()
    assert [a.name for a in recorder.quiet(10, name="noisy")] == ["noisy"]
    assert time.monotonic() - started < 5
