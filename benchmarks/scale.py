"""Benchmark: the reference controller with N automatic Releases on a local control plane.

N Releases (50 per namespace, each with its own source) are created while no controller runs;
then the controller starts, and the benchmark measures the seconds from its start until every
Release is Applied, its peak RSS, its CPU seconds per reconcile, and then, over two resync
periods in which it reconciles all N again, the latency of /sync requests to manual probe
Releases (from the annotation write to lastHandledSyncAt). Figures go to stdout and to
reports/benchmarks/scale-<N>.json.

    .venv/bin/python -m benchmarks.scale [--releases 1000] [--resync 30] [--profile]

--profile samples the controller's threads with py-spy (`pip install py-spy`) while the
Releases are applied, and writes a flame graph (SVG) beside the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from kubernetes import client, watch

from benchmarks.figures import percentile, write_figures
from conformance import resources
from conformance.clusters import binaries
from conformance.clusters.local import LocalControlPlane
from conformance.install import manifests
from conformance.install.host import HostController
from conformance.kube import dynamic_api
from conformance.observe.releases import content_object, rfc3339
from convoyapi import API_VERSION, SYNC_REQUESTED_AT

GROUP, VERSION = API_VERSION.split("/")
PER_NAMESPACE = 50
PROBES = 5
PROBE_NAMESPACE = "probes"
APPLY_DEADLINE = 1800.0


def release_body(name: str, automatic: bool) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "Release",
        "metadata": {"name": name},
        "spec": {"source": {"name": name}, "syncPolicy": {"automatic": automatic}},
    }


def create_release(api: client.ApiClient, namespace: str, name: str, automatic: bool) -> None:
    source = yaml.safe_dump(content_object(f"{name}-content", "v1"))
    client.CoreV1Api(api).create_namespaced_config_map(
        namespace, {"metadata": {"name": name}, "data": {"manifests.yaml": source}}
    )
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "releases", release_body(name, automatic)
    )


def create_all(api: client.ApiClient, count: int) -> list[tuple[str, str]]:
    """The N automatic Releases and the manual probes; return the probes' (namespace, name)."""
    namespaces = [f"scale-{i}" for i in range(-(-count // PER_NAMESPACE))] + [PROBE_NAMESPACE]
    core = client.CoreV1Api(api)
    for namespace in namespaces:
        core.create_namespace({"metadata": {"name": namespace}})
    work = [(f"scale-{i // PER_NAMESPACE}", f"app-{i}", True) for i in range(count)]
    work += [(PROBE_NAMESPACE, f"probe-{i}", False) for i in range(PROBES)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda item: create_release(api, *item), work))
    return [(PROBE_NAMESPACE, f"probe-{i}") for i in range(PROBES)]


def applied(release: dict) -> bool:
    conditions = (release.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Applied" and c["status"] == "True" for c in conditions)


def wait_all_applied(api: client.ApiClient, count: int, version: str, started: float) -> float:
    """Follow the Releases' watch until all N automatic ones are Applied; return the seconds."""
    done: set[str] = set()
    objects = client.CustomObjectsApi(api)
    while time.monotonic() - started < APPLY_DEADLINE:
        stream = watch.Watch().stream(
            objects.list_cluster_custom_object,
            GROUP,
            VERSION,
            "releases",
            resource_version=version,
            timeout_seconds=60,
        )
        for event in stream:
            release = event["object"]
            version = release["metadata"]["resourceVersion"]
            if release["metadata"]["namespace"] != PROBE_NAMESPACE and applied(release):
                done.add(f"{release['metadata']['namespace']}/{release['metadata']['name']}")
            if len(done) == count:
                return time.monotonic() - started
    raise TimeoutError(f"{len(done)} of {count} Releases Applied after {APPLY_DEADLINE:.0f} s")


def list_version(api: client.ApiClient) -> str:
    listed = client.CustomObjectsApi(api).list_cluster_custom_object(
        GROUP, VERSION, "releases", limit=1
    )
    return listed["metadata"]["resourceVersion"]


def sync_latency(api: client.ApiClient, namespace: str, name: str, at: datetime) -> float:
    """Write sync-requested-at = `at`; return the seconds until lastHandledSyncAt shows it."""
    objects = client.CustomObjectsApi(api)
    current = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, "releases", name)
    stream = watch.Watch().stream(
        objects.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        "releases",
        field_selector=f"metadata.name={name}",
        resource_version=current["metadata"]["resourceVersion"],
        timeout_seconds=120,
    )
    started = time.perf_counter()
    objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "releases",
        name,
        {"metadata": {"annotations": {SYNC_REQUESTED_AT: rfc3339(at)}}},
    )
    wanted = at.strftime("%Y-%m-%dT%H:%M:%S")
    for event in stream:
        handled = (event["object"].get("status") or {}).get("lastHandledSyncAt") or ""
        if handled[:19] == wanted:
            return time.perf_counter() - started
    raise TimeoutError(f"/sync {wanted} of {namespace}/{name} not handled within 120 s")


def syncs_under_resync(api: client.ApiClient, probes: list[tuple[str, str]], window: float) -> list:
    """A /sync to each probe in turn, one a second, for `window` seconds."""
    latencies, base, started = [], datetime.now(UTC).replace(microsecond=0), time.monotonic()
    number = 0
    while time.monotonic() - started < window:
        number += 1
        at = max(base + timedelta(seconds=number), datetime.now(UTC).replace(microsecond=0))
        latencies.append(sync_latency(api, *probes[number % len(probes)], at))
        base = at
        remaining = started + number - time.monotonic()
        time.sleep(max(0.0, remaining))  # a request a second, not a quiet period
    return latencies


def process_figures(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return {"peakRssMiB": round(peak_kib / 1024, 1), "cpuSeconds": round(cpu, 2)}


def reconciles(log: Path) -> int:
    return sum(" reconcile " in line for line in log.read_text(errors="replace").splitlines())


def start_profile(pid: int, out: Path) -> subprocess.Popen | None:
    spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    if spy is None:
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
    argv = [spy, "record", "--pid", str(pid), "--output", str(out), "--rate", "50", "--nonblocking"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_profile(profiler: subprocess.Popen | None) -> None:
    if profiler:
        profiler.send_signal(2)  # SIGINT: py-spy writes its flame graph and exits
        profiler.wait(60)


def measure(plane: LocalControlPlane, args: argparse.Namespace, work: Path) -> dict:
    with plane.api_client() as api:
        manifests.apply(api, manifests.load(resources.CRDS))
        dynamic_api(api)  # discovery before the clock starts
        created = time.monotonic()
        probes = create_all(api, args.releases)
        figures: dict = {"releases": args.releases, "createSeconds": time.monotonic() - created}
        version = list_version(api)
        log = work / "controller.log"
        controller = HostController(plane.kubeconfig, log, resync=args.resync, subresources=None)
        started = time.monotonic()
        controller.start()
        assert controller.process is not None
        pid = controller.process.pid
        name = f"scale-{args.releases}.svg"
        profiler = start_profile(pid, args.out / name) if args.profile else None
        try:
            figures["allAppliedSeconds"] = wait_all_applied(api, args.releases, version, started)
            stop_profile(profiler)
            figures |= process_figures(pid)
            count = reconciles(log)
            figures["reconciles"] = count
            figures["cpuMsPerReconcile"] = round(1000 * figures["cpuSeconds"] / count, 2)
            latencies = syncs_under_resync(api, probes, 2 * args.resync)
            figures |= {"syncs": len(latencies), "syncP50Seconds": percentile(latencies, 50)}
            figures |= {"syncP99Seconds": percentile(latencies, 99), "syncMax": max(latencies)}
            figures["reconcilesDuringSyncs"] = reconciles(log) - count
            figures["peakRssMiBAfterResyncs"] = process_figures(pid)["peakRssMiB"]
        finally:
            controller.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=1000)
    parser.add_argument("--resync", type=float, default=30.0, help="the controller's --resync")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="convoy-scale-"))
    try:
        with LocalControlPlane(binaries.resolve(), base_dir=work) as plane:
            figures = measure(plane, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_figures(args.out / f"scale-{args.releases}.json", figures)


if __name__ == "__main__":
    main()
