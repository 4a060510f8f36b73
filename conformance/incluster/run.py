"""The caller's side of an in-cluster run: create the run's objects (conformance.incluster.
objects), follow the suite's log, wait for the Job, bring the report back into the report
directory, and delete everything the run created, also when it fails or is interrupted."""

from __future__ import annotations

import base64
import functools
import io
import sys
import tarfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import urllib3
from kubernetes import client

from conformance.clusters.kubeconfig import api_client
from conformance.incluster import objects
from conformance.kube import dynamic_api, read_or_none
from conformance.polling import poll_until

POD_START_TIMEOUT = 300.0
LOG_CONNECT_TIMEOUT = 30.0
#: A followed log silent this long is opened again: the long phase prints nothing for ~40
#: minutes, and a load balancer may drop an idle connection without a word.
LOG_IDLE_TIMEOUT = 60.0
#: After the Job's deadline, the cluster needs a moment to mark it Failed.
JOB_END_GRACE = 60.0
POLL_STEP = 1.0
NAMESPACE_GONE_TIMEOUT = 120.0
#: Waiting reasons of a container that will not start by itself.
STUCK = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError"}


class InClusterError(RuntimeError):
    """The run's Job could not start, or ended without a report."""


def run_in_cluster(
    kubeconfig: Path, spec: objects.RunSpec, report_dir: Path, out: TextIO = sys.stdout
) -> int:
    """Run the suite as `spec`'s Job; return pytest's exit code in the pod."""
    with api_client(kubeconfig) as api:
        created: list[objects.Obj] = []
        try:
            for obj in objects.all_objects(spec):
                _create(api, obj)
                created.append(obj)
            print(f"in-cluster: run {spec.run_id} in namespace {spec.namespace}", file=out)
            pod = _wait_started(api, spec)
            _follow_log(api, spec, pod, out)
            _wait_ended(api, spec)
            return _bring_back(api, spec, report_dir, out)
        finally:
            _delete(api, created, spec.namespace)
            _wait_gone(api, spec, out)


def _create(api: client.ApiClient, obj: objects.Obj) -> None:
    resource = dynamic_api(api).resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    resource.create(body=obj, namespace=obj["metadata"].get("namespace"))


def _delete(api: client.ApiClient, created: list[objects.Obj], run_namespace: str) -> None:
    """Cluster-scoped objects and those in the controller's namespace one by one; deleting the
    run's namespace takes the rest with it."""
    resources = dynamic_api(api).resources
    for obj in reversed(created):
        meta = obj["metadata"]
        if meta.get("namespace") == run_namespace:
            continue
        resource = resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        delete = functools.partial(
            resource.delete,
            name=meta["name"],
            namespace=meta.get("namespace"),
            propagation_policy="Background",
        )
        read_or_none(delete)


def _wait_gone(api: client.ApiClient, spec: objects.RunSpec, out: TextIO) -> None:
    """Until the run's namespace has gone, so that a run leaves nothing behind it."""
    core = client.CoreV1Api(api)
    try:
        poll_until(
            lambda: read_or_none(lambda: core.read_namespace(spec.namespace)) is None,
            timeout=NAMESPACE_GONE_TIMEOUT,
            step=POLL_STEP,
            failure=lambda: TimeoutError(spec.namespace),
        )
    except TimeoutError:
        print(
            f"in-cluster: namespace {spec.namespace} still terminating after "
            f"{NAMESPACE_GONE_TIMEOUT:.0f} s; it goes by itself",
            file=out,
        )


def _pods(api: client.ApiClient, spec: objects.RunSpec) -> list[Any]:
    selector = ",".join(f"{k}={v}" for k, v in spec.labels.items())
    core = client.CoreV1Api(api)
    return core.list_namespaced_pod(spec.namespace, label_selector=selector).items


def _stuck(pod: Any) -> str | None:
    for status in pod.status.container_statuses or []:
        waiting = status.state.waiting
        if waiting and waiting.reason in STUCK:
            return f"{waiting.reason}: {waiting.message or ''}"
    return None


def _wait_started(api: client.ApiClient, spec: objects.RunSpec) -> str:
    """The pod's name once its container runs (or already ended)."""
    seen: dict[str, str] = {}

    def started() -> str | None:
        for pod in _pods(api, spec):
            if reason := _stuck(pod):
                raise InClusterError(f"the suite's pod {pod.metadata.name} cannot start: {reason}")
            seen["phase"] = pod.status.phase
            if pod.status.phase in ("Running", "Succeeded", "Failed"):
                return pod.metadata.name
        return None

    return poll_until(
        started,
        timeout=POD_START_TIMEOUT,
        step=POLL_STEP,
        failure=lambda: InClusterError(
            f"the suite's pod did not start within {POD_START_TIMEOUT:.0f} s "
            f"(phase {seen.get('phase', 'none yet')}); see the events of {spec.namespace}"
        ),
    )


def _follow_log(api: client.ApiClient, spec: objects.RunSpec, pod: str, out: TextIO) -> None:
    """Print the suite's output as it comes, until its container ends."""
    core, namespace = client.CoreV1Api(api), spec.namespace

    def open_stream() -> Iterator[bytes]:
        response = core.read_namespaced_pod_log(
            pod,
            namespace,
            container=objects.CONTAINER,
            follow=True,
            timestamps=True,
            _preload_content=False,
            _request_timeout=(LOG_CONNECT_TIMEOUT, LOG_IDLE_TIMEOUT),
        )
        try:
            yield from response.stream(4096)
        finally:
            response.release_conn()

    def ended() -> bool:
        found = read_or_none(lambda: core.read_namespaced_pod(pod, namespace))
        return found is None or _container_ended(found)

    follow_log(open_stream, ended, out, timeout=spec.deadline + JOB_END_GRACE)


def follow_log(
    open_stream: Callable[[], Iterable[bytes]],
    ended: Callable[[], bool],
    out: TextIO,
    *,
    timeout: float,
) -> None:
    """Print a followed log (its lines timestamped by the kubelet) as it comes, until its
    container has ended and the stream is read to its end. A stream that goes silent for
    LOG_IDLE_TIMEOUT or breaks (a load balancer in between drops idle connections, or resets
    them) is opened again, and its lines up to the last one printed are skipped: the run goes
    on, and what decides it is the Job (`_wait_ended`), never its log."""
    printed = LogPosition()

    def read_on() -> bool:
        try:
            printed.print_new(open_stream(), out)
        except (urllib3.exceptions.HTTPError, OSError, client.ApiException) as broke:
            print(f"in-cluster: the log stream broke ({broke!r}); reading it again", file=out)
            return False
        return ended()

    poll_until(
        read_on,
        timeout=timeout,
        step=POLL_STEP,
        failure=lambda: InClusterError(f"the suite's log did not end within {timeout:.0f} s"),
    )


@dataclass
class LogPosition:
    """How far a log has been printed: the last line's timestamp, and how many lines with that
    very timestamp (the kubelet's are to the nanosecond, but two lines may share one)."""

    timestamp: str = ""
    at_timestamp: int = 0

    def print_new(self, chunks: Iterable[bytes], out: TextIO) -> None:
        """Print the lines after this position (a line cut short by a broken stream is read
        again with the next one)."""
        pending, seen_at_last = b"", 0
        for chunk in chunks:
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                stamp, _, text = line.decode(errors="replace").partition(" ")
                if stamp < self.timestamp:
                    continue
                if stamp == self.timestamp:
                    seen_at_last += 1
                    if seen_at_last <= self.at_timestamp:
                        continue
                    self.at_timestamp += 1
                else:
                    self.timestamp, self.at_timestamp, seen_at_last = stamp, 1, 1
                out.write(text + "\n")
            out.flush()


def _container_ended(pod: Any) -> bool:
    return pod.status.phase in ("Succeeded", "Failed") or any(
        status.name == objects.CONTAINER and status.state.terminated is not None
        for status in pod.status.container_statuses or []
    )


def _job_finished(job: Any) -> str | None:
    for condition in job.status.conditions or []:
        if condition.type in ("Complete", "Failed") and condition.status == "True":
            return condition.type
    return None


def _wait_ended(api: client.ApiClient, spec: objects.RunSpec) -> str:
    batch = client.BatchV1Api(api)
    return poll_until(
        lambda: _job_finished(batch.read_namespaced_job(objects.JOB, spec.namespace)),
        timeout=spec.deadline + JOB_END_GRACE,
        step=POLL_STEP,
        failure=lambda: InClusterError(f"the Job {spec.namespace}/{objects.JOB} did not end"),
    )


def _bring_back(api: client.ApiClient, spec: objects.RunSpec, report_dir: Path, out: TextIO) -> int:
    core = client.CoreV1Api(api)
    found = read_or_none(
        lambda: core.read_namespaced_config_map(objects.REPORT_CONFIGMAP, spec.namespace)
    )
    if found is None:
        raise InClusterError(
            f"the suite's pod wrote no {objects.REPORT_CONFIGMAP} ConfigMap: see its log above"
        )
    archive = base64.b64decode(found.binary_data[objects.ARCHIVE_KEY])
    report_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(report_dir, filter="data")
    print(f"in-cluster: report brought back into {report_dir}", file=out)
    return int(found.data[objects.EXIT_CODE_KEY])
