"""Benchmark: latency from a /sync annotation write to the Applied condition it produces.

Not a test: it prints p50 and p99 over N syncs of one manual Release on a local control plane
with the reference controller. Each request carries a time one second later than the last, so
every one is pending (the document compares to the second) and none waits for the clock.

    .venv/bin/python benchmarks/sync_latency.py [--syncs 200]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from kubernetes import client, dynamic, watch

from conformance import resources
from conformance.clusters import binaries
from conformance.clusters.local import LocalControlPlane
from conformance.install import manifests
from conformance.install.host import HostController
from conformance.kube import dynamic_api
from conformance.observe.releases import content_object, rfc3339
from convoyapi import API_VERSION, SYNC_REQUESTED_AT

NAMESPACE = "bench"


def setup(api: client.ApiClient) -> dynamic.Resource:
    manifests.apply(api, manifests.load(resources.CRDS))
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    core.create_namespaced_config_map(
        NAMESPACE,
        {
            "metadata": {"name": "source"},
            "data": {"manifests.yaml": yaml.safe_dump(content_object("content", "v1"))},
        },
    )
    releases = dynamic_api(api).resources.get(api_version=API_VERSION, kind="Release")
    releases.create(
        namespace=NAMESPACE,
        body={
            "apiVersion": API_VERSION,
            "kind": "Release",
            "metadata": {"name": "bench"},
            "spec": {"source": {"name": "source"}},
        },
    )
    return releases


def handled_second(release: dict) -> str | None:
    return ((release.get("status") or {}).get("lastHandledSyncAt") or "")[:19] or None


def one_sync(api: client.ApiClient, releases: dynamic.Resource, at: datetime) -> float:
    """Write the annotation; return the seconds until lastHandledSyncAt says it was applied."""
    current = releases.get(name="bench", namespace=NAMESPACE).to_dict()
    stream = watch.Watch().stream(
        client.CustomObjectsApi(api).list_namespaced_custom_object,
        "convoy.kumodo.io",
        "v1alpha1",
        NAMESPACE,
        "releases",
        resource_version=current["metadata"]["resourceVersion"],
        timeout_seconds=30,
    )
    started = time.perf_counter()
    releases.patch(
        name="bench",
        namespace=NAMESPACE,
        content_type="application/merge-patch+json",
        body={"metadata": {"annotations": {SYNC_REQUESTED_AT: rfc3339(at)}}},
    )
    wanted = at.strftime("%Y-%m-%dT%H:%M:%S")
    for event in stream:
        if handled_second(event["object"]) == wanted:
            return time.perf_counter() - started
    raise TimeoutError(f"request {wanted} not applied within 30 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--syncs", type=int, default=200)
    args = parser.parse_args()
    with LocalControlPlane(binaries.resolve()) as plane, plane.api_client() as api:
        releases = setup(api)
        log = Path(tempfile.mkdtemp()) / "controller.log"
        controller = HostController(plane.kubeconfig, log, resync=120).start()
        try:
            base = datetime.now(UTC) + timedelta(seconds=1)
            latencies = [
                one_sync(api, releases, base + timedelta(seconds=i)) for i in range(args.syncs)
            ]
        finally:
            controller.stop()
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * len(ordered)) - 1)]
    print(
        f"{args.syncs} syncs: p50 {statistics.median(ordered) * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
