"""The objects of an in-cluster run and the pod's command line (conformance.incluster); the run
itself is tests/kindhost/test_in_cluster.py, on a real kind cluster."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3

from conformance.cli import in_cluster_parser
from conformance.clusters.base import CallbackAddress, ServiceReference
from conformance.incluster import objects, pod, run

SPEC = objects.RunSpec(
    run_id="abc123",
    image="suite:1",
    workers=3,
    pytest_args=("-k", "test_mode.py", "--timing", "controller_resync=30s"),
    controller_deployment="acme-system/acme-convoy",
)


def by_kind(spec: objects.RunSpec) -> dict[str, list[objects.Obj]]:
    found: dict[str, list[objects.Obj]] = {}
    for obj in objects.all_objects(spec):
        found.setdefault(obj["kind"], []).append(obj)
    return found


def test_every_object_of_a_run_carries_its_id_and_lives_in_its_namespace_or_the_controllers():
    for obj in objects.all_objects(SPEC):
        meta = obj["metadata"]
        assert meta["labels"] == {objects.RUN_LABEL: "abc123"}, obj["kind"]
        assert meta.get("namespace") in (None, SPEC.namespace, "acme-system"), obj["kind"]
    assert objects.all_objects(SPEC)[0]["kind"] == "Namespace"
    assert objects.all_objects(SPEC)[-1]["kind"] == "Job"


def test_the_suite_has_its_cluster_role_under_the_runs_name_and_the_controller_a_role_only():
    kinds = by_kind(SPEC)
    (role,) = kinds["ClusterRole"]
    (binding,) = kinds["ClusterRoleBinding"]
    assert role["metadata"]["name"] == binding["roleRef"]["name"] == SPEC.role_name
    subject = {"kind": "ServiceAccount", "name": "convoy-conformance", "namespace": SPEC.namespace}
    assert binding["subjects"] == [subject]
    (controller_role,) = kinds["Role"]
    assert controller_role["metadata"]["namespace"] == "acme-system"
    deployments = controller_role["rules"][0]
    assert deployments["resourceNames"] == ["acme-convoy"]
    assert "Role" not in by_kind(objects.RunSpec("x", "suite:1", workers=1))


def test_the_service_has_each_workers_witness_port_and_selects_the_jobs_pod():
    kinds = by_kind(SPEC)
    (service,) = kinds["Service"]
    (job,) = kinds["Job"]
    ports = [p["port"] for p in service["spec"]["ports"]]
    assert ports == [objects.WITNESS_PORT + worker for worker in range(3)]
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert job["spec"]["backoffLimit"] == 0


@pytest.mark.parametrize("command", ["run", "certify"])
def test_the_pod_runs_the_suite_on_its_own_cluster_with_the_callers_pytest_arguments(command):
    spec = dataclasses.replace(SPEC, command=command)
    args = pod.parse_args(objects.pod_args(spec))
    argv = pod.suite_argv(Path("/tmp/kubeconfig"), Path("/tmp/reports"), args)
    assert argv[4] == command
    assert "--convoy-install=none" in argv
    assert "--convoy-controller-deployment=acme-system/acme-convoy" in argv
    witness = f"--witness-service={SPEC.namespace}/{objects.WITNESS_SERVICE}:8443"
    assert witness in argv
    assert argv[-4:] == list(SPEC.pytest_args)
    workers = ["--workers", "3"] if command == "certify" else ["-n", "3"]
    assert " ".join(workers) in " ".join(argv)


def test_the_pods_kubeconfig_names_the_kubernetes_service_by_address():
    document = pod.service_account_kubeconfig("fd00::1", "443", Path("/sa"))
    cluster = document["clusters"][0]["cluster"]
    assert cluster == {"server": "https://[fd00::1]:443", "certificate-authority": "/sa/ca.crt"}
    assert document["users"][0]["user"] == {"tokenFile": "/sa/token"}


def test_a_witness_behind_a_service_is_called_by_the_services_name():
    service = ServiceReference.parse("run-ns/witness:8443")
    assert CallbackAddress.behind(service).host == "witness.run-ns.svc"
    with pytest.raises(ValueError, match="NAMESPACE/NAME:PORT"):
        ServiceReference.parse("witness:8443")


def test_run_in_cluster_takes_its_own_options_and_leaves_the_rest_to_pytest():
    argv = ["--in-cluster", "--suite-image", "s:1", "--workers", "2", "-k", "sync", "-x"]
    args, rest = in_cluster_parser().parse_known_args(argv)
    assert (args.suite_image, args.workers, rest) == ("s:1", 2, ["-k", "sync", "-x"])


LOG = [
    b"2026-12-05T10:00:00.000000001Z collecting ...\n",
    b"2026-12-05T10:00:01.000000000Z test_a PASSED\n",
    b"2026-12-05T10:00:01.000000000Z test_b PASSED\n",
    b"2026-12-05T10:40:00.000000000Z test_c PASSED\n",
    b"2026-12-05T10:40:01.000000000Z 3 passed\n",
]


def test_a_log_stream_that_breaks_or_goes_silent_is_read_on_without_a_line_lost_or_repeated() -> (
    None
):
    """The long phase prints nothing for ~40 minutes: a load balancer drops the idle stream
    (a read timeout here), or resets it (a protocol error) after a line cut in two. Each time
    the log is read again, and the run goes on; only the container's end ends it."""
    streams = [
        [LOG[0], LOG[1], LOG[2][:20], urllib3.exceptions.ProtocolError("connection reset")],
        [*LOG[:3], urllib3.exceptions.ReadTimeoutError(None, "/log", "idle")],
        [*LOG[:4]],  # the stream ended, the container still runs
        LOG,
    ]
    ends = iter([False, True])

    def open_stream() -> Iterator[bytes]:
        for part in streams.pop(0):
            if isinstance(part, Exception):
                raise part
            yield part

    out = io.StringIO()
    run.follow_log(open_stream, lambda: next(ends), out, timeout=30)
    printed = [line for line in out.getvalue().splitlines() if not line.startswith("in-cluster")]
    assert printed == [
        "collecting ...",
        "test_a PASSED",
        "test_b PASSED",
        "test_c PASSED",
        "3 passed",
    ]
    assert out.getvalue().count("the log stream broke") == 2
    assert streams == []
