"""The commands of installing the reference controller on kind, each built as its argv by a
small function (docker build, kind load, kubectl apply, rollout and APIService waits, logs,
uninstall, diagnostics), and the names they use: tests check the commands without Docker, and
conformance.install.on_kind runs them."""

from __future__ import annotations

import datetime as dt
import secrets
from pathlib import Path

from convoyapi import API_SERVICE

#: The reference controller's image is built from a checkout: its Dockerfile installs the project.
REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile"

NAMESPACE = "convoy-system"
DEPLOYMENT = "convoy-controller"
CONTAINER = "controller"
SERVICE = "convoy-subresources"
SERVING_SECRET = "convoy-subresources-serving-cert"
#: The image name in the controller's deployment.yaml; the installer gives it a unique tag.
IMAGE_NAME = "convoy-controller"
CONTROLLER_SELECTOR = "app.kubernetes.io/name=convoy,app.kubernetes.io/component=controller"
FIELD_MANAGER = "convoy-conformance-installer"
ROLLOUT_TIMEOUT = 300
APISERVICE_TIMEOUT = 180

#: The Dockerfile's build argument for its base image.
CONTROLLER_BASE_ARG = "CONVOY_CONTROLLER_BASE"


def image_tag(now: dt.datetime | None = None, token: str | None = None) -> str:
    """A tag no earlier build has: UTC time and random hex (conformance-20260101t120000-1a2b)."""
    moment = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dt%H%M%S")
    return f"conformance-{moment}-{token or secrets.token_hex(3)}"


def docker_build_argv(
    image: str, context: Path = REPO_ROOT, dockerfile: Path = DOCKERFILE
) -> list[str]:
    """`--build-arg CONVOY_CONTROLLER_BASE` without a value passes the variable of that name
    when the environment has it (conformance.kindhost's base), else the Dockerfile's default."""
    return [
        "docker",
        "build",
        "--build-arg",
        CONTROLLER_BASE_ARG,
        "--file",
        str(dockerfile),
        "--tag",
        image,
        str(context),
    ]


def kind_load_argv(kind: str, cluster: str, image: str) -> list[str]:
    return [kind, "load", "docker-image", "--name", cluster, image]


def kind_export_kubeconfig_argv(kind: str, cluster: str, kubeconfig: Path) -> list[str]:
    return [kind, "export", "kubeconfig", "--name", cluster, "--kubeconfig", str(kubeconfig)]


def kind_export_logs_argv(kind: str, cluster: str, directory: Path) -> list[str]:
    return [kind, "export", "logs", "--name", cluster, str(directory)]


def kubectl_argv(kubectl: str, kubeconfig: Path, *args: str) -> list[str]:
    return [kubectl, f"--kubeconfig={kubeconfig}", *args]


def apply_argv(
    kubectl: str,
    kubeconfig: Path,
    *,
    kustomization: Path | None = None,
    file: Path | None = None,
    dry_run: bool = False,
) -> list[str]:
    """Server-side apply of a kustomization (-k) or a file (-f), forcing conflicts."""
    if (kustomization is None) == (file is None):
        raise ValueError("give exactly one of kustomization and file")
    source = ["-k", str(kustomization)] if kustomization else ["-f", str(file)]
    return kubectl_argv(
        kubectl,
        kubeconfig,
        "apply",
        "--server-side",
        "--force-conflicts",
        f"--field-manager={FIELD_MANAGER}",
        *(["--dry-run=server"] if dry_run else []),
        *source,
    )


def rollout_status_argv(
    kubectl: str, kubeconfig: Path, timeout: int = ROLLOUT_TIMEOUT
) -> list[str]:
    return kubectl_argv(
        kubectl,
        kubeconfig,
        "rollout",
        "status",
        f"deployment/{DEPLOYMENT}",
        f"--namespace={NAMESPACE}",
        f"--timeout={timeout}s",
    )


def wait_apiservice_argv(
    kubectl: str, kubeconfig: Path, timeout: int = APISERVICE_TIMEOUT
) -> list[str]:
    return kubectl_argv(
        kubectl,
        kubeconfig,
        "wait",
        "--for=condition=Available",
        f"apiservice/{API_SERVICE}",
        f"--timeout={timeout}s",
    )


def scale_argv(kubectl: str, kubeconfig: Path, replicas: int) -> list[str]:
    return kubectl_argv(
        kubectl,
        kubeconfig,
        "scale",
        f"deployment/{DEPLOYMENT}",
        f"--namespace={NAMESPACE}",
        f"--replicas={replicas}",
    )


def wait_pods_deleted_argv(kubectl: str, kubeconfig: Path, timeout: int = 120) -> list[str]:
    return kubectl_argv(
        kubectl,
        kubeconfig,
        "wait",
        "--for=delete",
        "pod",
        f"--selector={CONTROLLER_SELECTOR}",
        f"--namespace={NAMESPACE}",
        f"--timeout={timeout}s",
    )


def logs_argv(kubectl: str, kubeconfig: Path, *, previous: bool = False) -> list[str]:
    return kubectl_argv(
        kubectl,
        kubeconfig,
        "logs",
        f"deployment/{DEPLOYMENT}",
        f"--namespace={NAMESPACE}",
        "--all-containers",
        "--timestamps",
        *(["--previous"] if previous else []),
    )


def uninstall_argvs(kubectl: str, kubeconfig: Path) -> list[list[str]]:
    """Delete what the controller's manifests create, except the CRDs (and so users' data).

    The APIService goes first: an APIService whose server is gone makes discovery fail for
    every client until it is deleted.
    """
    delete = ("delete", "--ignore-not-found", "--wait=false")
    return [
        kubectl_argv(kubectl, kubeconfig, *delete, f"apiservice/{API_SERVICE}"),
        kubectl_argv(
            kubectl,
            kubeconfig,
            *delete,
            "clusterrolebinding/convoy-controller",
            "clusterrolebinding/convoy-controller-targets",
            "clusterrolebinding/convoy-controller:system:auth-delegator",
            "clusterrole/convoy-controller",
            "clusterrole/convoy-controller-targets",
            "clusterrole/convoy-controller-targets-default",
        ),
        kubectl_argv(
            kubectl,
            kubeconfig,
            *delete,
            "--namespace=kube-system",
            "rolebinding/convoy-controller:extension-apiserver-authentication-reader",
        ),
        kubectl_argv(kubectl, kubeconfig, *delete, f"namespace/{NAMESPACE}"),
    ]


def diagnostics_commands(
    kubectl: str,
    kubeconfig: Path,
    *,
    kind: str | None,
    cluster: str | None,
    directory: Path,
    namespace: str = NAMESPACE,
    selector: str = CONTROLLER_SELECTOR,
) -> list[tuple[str | None, list[str]]]:
    """(file name or None, argv) of everything worth reading after a failure.

    None: the command writes its own output (kind export logs writes a directory).
    """
    k = lambda *args: kubectl_argv(kubectl, kubeconfig, *args)  # noqa: E731
    commands: list[tuple[str | None, list[str]]] = []
    if kind and cluster:
        commands.append((None, kind_export_logs_argv(kind, cluster, directory / "kind-logs")))
    commands += [
        (
            "controller.log",
            k(
                "logs",
                f"--namespace={namespace}",
                f"--selector={selector}",
                "--all-containers",
                "--timestamps",
                "--prefix",
                "--tail=-1",
            ),
        ),
        (
            "controller-previous.log",
            k(
                "logs",
                f"--namespace={namespace}",
                f"--selector={selector}",
                "--all-containers",
                "--timestamps",
                "--prefix",
                "--previous",
                "--tail=-1",
            ),
        ),
        (
            "events.txt",
            k("get", "events", "--all-namespaces", "--sort-by=.lastTimestamp", "-o", "wide"),
        ),
        ("pods.txt", k("get", "pods", "--all-namespaces", "-o", "wide")),
        (
            "describe-controller.txt",
            k(
                "describe",
                "deployments,replicasets,pods,services,endpointslices",
                f"--namespace={namespace}",
            ),
        ),
        ("apiservices.yaml", k("get", "apiservices", "-o", "yaml")),
        ("crds.txt", k("get", "customresourcedefinitions", "-o", "wide")),
        ("nodes.txt", k("describe", "nodes")),
    ]
    return commands
