"""The objects of one in-cluster run, as plain manifests: its namespace, the suite's
ServiceAccount and rights, the Service in front of the witness, the Job, and the ConfigMap
that brings the report back. Names the runner and the pod both use live here."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import yaml

from conformance import resources

Obj = dict[str, Any]

#: Labels everything of one run (the run's ID), so that a run's objects are found together.
RUN_LABEL = "conformance.convoy.kumodo.io/in-cluster-run"
SERVICE_ACCOUNT = "convoy-conformance"
WITNESS_SERVICE = "convoy-conformance-witness"
#: xdist worker gwN's witness serves on WITNESS_PORT + N (conformance.harness.fixtures.convoy).
WITNESS_PORT = 8443
JOB = "convoy-conformance"
CONTAINER = "suite"
#: Written by the pod at the end: the report directory as a gzipped tar, and pytest's exit code.
REPORT_CONFIGMAP = "convoy-conformance-report"
ARCHIVE_KEY = "reports.tar.gz"
EXIT_CODE_KEY = "exitCode"
#: Where the pod writes (an emptyDir: the image's root filesystem is read-only).
SCRATCH = "/tmp"
RBAC_GROUP = "rbac.authorization.k8s.io"
SUITE_ROLE = resources.MANIFESTS / "incluster" / "suite-role.yaml"


@dataclass(frozen=True)
class RunSpec:
    """What the caller asked for."""

    run_id: str
    image: str
    workers: int
    #: pytest's arguments for the suite in the pod (selection, --timing, --implementation-...)
    pytest_args: tuple[str, ...] = ()
    #: NAMESPACE/NAME of the controller's Deployment (BACK-5 restarts it), if given
    controller_deployment: str | None = None
    #: seconds the Job may run before the cluster stops it
    deadline: int = 7200
    image_pull_policy: str = "IfNotPresent"
    #: "run" (pytest once) or "certify" (both phases of a certifying run)
    command: str = "run"

    @property
    def labels(self) -> dict[str, str]:
        return {RUN_LABEL: self.run_id}

    @property
    def namespace(self) -> str:
        return f"convoy-conformance-{self.run_id}"

    @property
    def role_name(self) -> str:
        return f"convoy-conformance-suite-{self.run_id}"


def _metadata(spec: RunSpec, name: str, namespace: str | None = None) -> Obj:
    meta: Obj = {"name": name, "labels": dict(spec.labels)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _subject(spec: RunSpec) -> Obj:
    return {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": spec.namespace}


def namespace(spec: RunSpec) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _metadata(spec, spec.namespace)}


def service_account(spec: RunSpec) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(spec, SERVICE_ACCOUNT, spec.namespace),
    }


def cluster_role(spec: RunSpec) -> Obj:
    """The suite's rights (SUITE_ROLE), under the run's own name."""
    role = yaml.safe_load(SUITE_ROLE.read_text())
    role["metadata"] = _metadata(spec, spec.role_name)
    return role


def _binding(spec: RunSpec, role_kind: str, namespace: str | None = None) -> Obj:
    """The run's ServiceAccount bound to the run's role of `role_kind`."""
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": f"{role_kind}Binding",
        "metadata": _metadata(spec, spec.role_name, namespace),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": spec.role_name},
        "subjects": [_subject(spec)],
    }


def cluster_role_binding(spec: RunSpec) -> Obj:
    return _binding(spec, "ClusterRole")


def controller_role(spec: RunSpec) -> list[Obj]:
    """In the controller's namespace only: what the restart rule (BACK-5) and the long phase
    do to its Deployment (read it, scale it to zero and back, set its --resync), and its pods'
    logs for a failing test's diagnostics. Nothing without --convoy-controller-deployment."""
    if not spec.controller_deployment:
        return []
    controller_namespace, deployment = spec.controller_deployment.split("/", 1)
    rules = [
        {
            "apiGroups": ["apps"],
            "resources": ["deployments", "deployments/scale"],
            "resourceNames": [deployment],
            "verbs": ["get", "patch"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    ]
    role = {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "Role",
        "metadata": _metadata(spec, spec.role_name, controller_namespace),
        "rules": rules,
    }
    return [role, _binding(spec, "Role", controller_namespace)]


def witness_ports(spec: RunSpec) -> list[int]:
    return [WITNESS_PORT + worker for worker in range(max(spec.workers, 1))]


def service(spec: RunSpec) -> Obj:
    """The API server calls each worker's witness through this Service (it resolves the
    Service itself: the cluster needs no DNS for it)."""
    ports = [
        {"name": f"witness-{n}", "port": port, "targetPort": port, "protocol": "TCP"}
        for n, port in enumerate(witness_ports(spec))
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, WITNESS_SERVICE, spec.namespace),
        "spec": {"selector": dict(spec.labels), "ports": ports},
    }


def pod_args(spec: RunSpec) -> list[str]:
    """The pod's command line (conformance.incluster.pod)."""
    witness = f"{spec.namespace}/{WITNESS_SERVICE}:{WITNESS_PORT}"
    args = ["--command", spec.command, "--witness-service", witness]
    args += ["--workers", str(spec.workers)]
    if spec.controller_deployment:
        args += ["--controller-deployment", spec.controller_deployment]
    return [*args, "--", *spec.pytest_args]


def job(spec: RunSpec) -> Obj:
    container = {
        "name": CONTAINER,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["python", "-P", "-m", "conformance.incluster.pod"],
        "args": pod_args(spec),
        "ports": [{"containerPort": port} for port in witness_ports(spec)],
        "workingDir": SCRATCH,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "scratch", "mountPath": SCRATCH}],
    }
    pod = {
        "serviceAccountName": SERVICE_ACCOUNT,
        "restartPolicy": "Never",
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(spec, JOB, spec.namespace),
        "spec": {
            # One attempt: a second would be a second run, with its own report.
            "backoffLimit": 0,
            "activeDeadlineSeconds": spec.deadline,
            "template": {"metadata": {"labels": dict(spec.labels)}, "spec": pod},
        },
    }


def all_objects(spec: RunSpec) -> list[Obj]:
    """In the order they are created (the namespace first, the Job last)."""
    return [
        namespace(spec),
        service_account(spec),
        cluster_role(spec),
        cluster_role_binding(spec),
        *controller_role(spec),
        service(spec),
        job(spec),
    ]


def report_configmap(namespace_name: str, archive: bytes, exit_code: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": REPORT_CONFIGMAP, "namespace": namespace_name},
        "data": {EXIT_CODE_KEY: str(exit_code)},
        "binaryData": {ARCHIVE_KEY: base64.b64encode(archive).decode()},
    }
