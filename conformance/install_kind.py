"""Install the reference controller on a kind cluster, the way users and CI run it.

Steps (`Installer.install`): build the image from the repository's Dockerfile with a unique tag,
`kind load docker-image` it into the nodes, write a kustomize overlay of the controller's
manifests (conformance.resources) that sets that image, adds a freshly generated serving
certificate (Secret) and patches its CA into the APIService's caBundle, then apply it with
server-side apply (the Namespace first, a server-side dry run of everything, then for real),
wait for the Deployment's rollout and for the APIService to be Available. When a step fails, the
diagnostics (kind's logs, the controller's logs, events, the objects) go into a directory next
to the report, and the error says where.

Every command is built by a small function that returns its argv, so tests check the commands
without Docker; `Installer` runs them through an injectable runner.

Also a command line, for CI steps and by hand:

    python -m conformance.install_kind install --cluster-name NAME [--resync 2m]
    python -m conformance.install_kind diagnostics --cluster-name NAME --out DIR
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import logging
import os
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
import yaml

from conformance import resources
from conformance.clusters import pki
from conformance.clusters.kubeconfig import api_client
from conformance.controllers import check_not_refused
from conformance.deployed import describe_deployment
from convoyapi import API_SERVICE

log = logging.getLogger(__name__)

#: The reference controller's image is built from a checkout: its Dockerfile installs the project.
REPO_ROOT = Path(__file__).resolve().parent.parent
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
MUTANT_VARIABLE = "CONVOY_MUTANT"
#: On the Deployment: the suite run that installed it (xdist workers of one run install once).
RUN_ANNOTATION = "convoy.kumodo.io/conformance-run"

ROLLOUT_TIMEOUT = 300
APISERVICE_TIMEOUT = 180
#: The serving certificate lives as long as a kept kind cluster reasonably does; a new install
#: makes a new one.
CERT_VALIDITY = dt.timedelta(days=365)


class InstallError(RuntimeError):
    """A step of the install failed; the message names it and where the diagnostics are."""


# -- the commands ------------------------------------------------------------------------------


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


# -- versions of the args --------------------------------------------------------------------


def deployment_manifest(directory: Path = resources.CONTROLLER) -> dict[str, Any]:
    return yaml.safe_load((directory / "deployment.yaml").read_text())


def deployment_args(directory: Path = resources.CONTROLLER) -> list[str]:
    """The controller container's args in the Deployment manifest."""
    containers = deployment_manifest(directory)["spec"]["template"]["spec"]["containers"]
    container = next(c for c in containers if c["name"] == CONTAINER)
    return list(container.get("args") or [])


def image_entrypoint(dockerfile: Path = DOCKERFILE) -> list[str]:
    """The exec-form ENTRYPOINT of the Dockerfile (the container's command)."""
    entrypoint: list[str] | None = None
    for line in dockerfile.read_text().splitlines():
        words = line.strip().split(None, 1)
        if len(words) == 2 and words[0].upper() == "ENTRYPOINT":
            entrypoint = json.loads(words[1])
    if entrypoint is None:
        raise ValueError(f"{dockerfile} has no ENTRYPOINT in exec form")
    return entrypoint


def controller_args(base: Sequence[str], *, resync: str | None = None) -> list[str]:
    """The Deployment's args with --resync replaced (the suite's fast runs use short periods)."""
    if resync is None:
        return list(base)
    args = [a for a in base if not a.startswith("--resync=")]
    return [f"--resync={resync}", *args]


# -- the serving certificate -----------------------------------------------------------------


@dataclass(frozen=True)
class ServingCertificate:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def service_dns_names(service: str = SERVICE, namespace: str = NAMESPACE) -> tuple[str, ...]:
    """What the aggregator may dial: it checks ServerName <service>.<namespace>.svc."""
    return (
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
    )


def serving_certificate(
    service: str = SERVICE, namespace: str = NAMESPACE, validity: dt.timedelta = CERT_VALIDITY
) -> ServingCertificate:
    """A new CA and a serving certificate it signs for the Service's DNS names (EC P-256)."""
    ca = pki.new_ca(f"{service}-ca", validity)
    names = service_dns_names(service, namespace)
    leaf = pki.issue(ca, names[0], dns_names=names, server=True, validity=validity)
    return ServingCertificate(ca_pem=ca.cert_pem, cert_pem=leaf.cert_pem, key_pem=leaf.key_pem)


# -- the overlay -----------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def serving_secret(cert: ServingCertificate) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": SERVING_SECRET,
            "namespace": NAMESPACE,
            "labels": {
                "app.kubernetes.io/name": "convoy",
                "app.kubernetes.io/component": "controller",
            },
        },
        "data": {
            "tls.crt": _b64(cert.cert_pem),
            "tls.key": _b64(cert.key_pem),
            "ca.crt": _b64(cert.ca_pem),
        },
    }


def _patch(group: str, kind: str, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
    version = "v1"
    target = {"group": group, "version": version, "kind": kind, "name": name}
    return {"target": target, "patch": yaml.safe_dump(ops, sort_keys=False)}


def overlay(
    base: Path,
    directory: Path,
    *,
    image: str | None,
    cert: ServingCertificate,
    args: Sequence[str] | None = None,
    mutant: str | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """The kustomization of the overlay (written by `write_overlay`)."""
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # kustomize refuses absolute paths for a base; a relative one may leave the overlay.
        "resources": [os.path.relpath(base, directory), "serving-cert.yaml"],
        "patches": [
            _patch(
                "apiregistration.k8s.io",
                "APIService",
                API_SERVICE,
                [{"op": "add", "path": "/spec/caBundle", "value": _b64(cert.ca_pem)}],
            )
        ],
    }
    if image:
        name, _, tag = image.rpartition(":")
        kustomization["images"] = [{"name": IMAGE_NAME, "newName": name, "newTag": tag}]
    container = "/spec/template/spec/containers/0"
    ops: list[dict[str, Any]] = []
    if args is not None:
        ops.append({"op": "replace", "path": f"{container}/args", "value": list(args)})
    if mutant:
        ops.append(
            {"op": "add", "path": f"{container}/command", "value": ["python", "-m", "mutants"]}
        )
        ops.append(
            {
                "op": "add",
                "path": f"{container}/env",
                "value": [{"name": MUTANT_VARIABLE, "value": mutant}],
            }
        )
    if run_id:
        ops.append(
            {"op": "add", "path": "/metadata/annotations", "value": {RUN_ANNOTATION: run_id}}
        )
    if ops:
        kustomization["patches"].append(_patch("apps", "Deployment", DEPLOYMENT, ops))
    return kustomization


def write_overlay(
    directory: Path,
    *,
    base: Path = resources.MANIFESTS,
    image: str | None,
    cert: ServingCertificate | None = None,
    args: Sequence[str] | None = None,
    mutant: str | None = None,
    run_id: str | None = None,
) -> Path:
    """Write the overlay (kustomization.yaml and the Secret) into `directory`; return it."""
    directory.mkdir(parents=True, exist_ok=True)
    cert = cert or serving_certificate()
    (directory / "serving-cert.yaml").write_text(
        yaml.safe_dump(serving_secret(cert), sort_keys=False)
    )
    (directory / "serving-cert.yaml").chmod(0o600)
    content = overlay(
        base, directory, image=image, cert=cert, args=args, mutant=mutant, run_id=run_id
    )
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(content, sort_keys=False))
    return directory


# -- running ---------------------------------------------------------------------------------

Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def run_command(argv: list[str]) -> subprocess.CompletedProcess[str]:
    log.info("$ %s", shlex.join(argv))
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@dataclass
class Installer:
    """Installs the reference controller on a kind cluster (or, without `kind`, applies only)."""

    kubectl: str
    kubeconfig: Path
    kind: str | None = None
    cluster: str | None = None
    #: where the diagnostics of a failed step go (next to the report)
    diagnostics_dir: Path = Path("reports/diagnostics")
    runner: Runner = run_command
    rollout_timeout: int = ROLLOUT_TIMEOUT
    apiservice_timeout: int = APISERVICE_TIMEOUT
    issued: list[list[str]] = field(default_factory=list)

    def run(self, argv: list[str], what: str) -> str:
        self.issued.append(argv)
        proc = self.runner(argv)
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout or "").strip()
            raise InstallError(
                f"{what} failed (exit {proc.returncode}): `{shlex.join(argv)}`\n{detail}"
            )
        return proc.stdout or ""

    # steps, each usable alone
    def build_image(self, image: str) -> None:
        if not DOCKERFILE.is_file():
            raise InstallError(
                f"building the reference controller's image needs a checkout of "
                f"convoy-conformance (no {DOCKERFILE}); from an installed kit, certify your own "
                "controller with --convoy-install=MANIFESTS"
            )
        self.run(docker_build_argv(image), f"building the controller image {image}")

    def load_image(self, image: str) -> None:
        if not (self.kind and self.cluster):
            raise InstallError("loading an image needs kind and a cluster name")
        self.run(kind_load_argv(self.kind, self.cluster, image), f"loading {image} into kind")

    def apply(self, overlay_dir: Path) -> None:
        """The Namespace first (a dry run of objects in a missing namespace fails), a server-side
        dry run of everything, then the real apply."""
        namespace = resources.CONTROLLER / "namespace.yaml"
        k, kc = self.kubectl, self.kubeconfig
        self.run(apply_argv(k, kc, file=namespace), "applying the namespace")
        self.run(
            apply_argv(k, kc, kustomization=overlay_dir, dry_run=True), "the server-side dry run"
        )
        self.run(apply_argv(k, kc, kustomization=overlay_dir), "applying the manifests")

    def wait_ready(self) -> None:
        self.run(
            rollout_status_argv(self.kubectl, self.kubeconfig, self.rollout_timeout),
            f"the rollout of deployment/{DEPLOYMENT}",
        )
        self.run(
            wait_apiservice_argv(self.kubectl, self.kubeconfig, self.apiservice_timeout),
            f"waiting for APIService {API_SERVICE} to be Available",
        )

    def install(
        self,
        *,
        image: str | None = None,
        resync: str | None = None,
        mutant: str | None = None,
        run_id: str | None = None,
        workdir: Path | None = None,
    ) -> str:
        """Build, load, apply, wait; on failure collect diagnostics and raise. Returns the image."""
        image = image or f"{IMAGE_NAME}:{image_tag()}"
        args = controller_args(deployment_args(), resync=resync)
        with tempfile.TemporaryDirectory(prefix="convoy-overlay-", dir=workdir) as tmp:
            try:
                self.build_image(image)
                self.load_image(image)
                overlay_dir = write_overlay(
                    Path(tmp), image=image, args=args, mutant=mutant, run_id=run_id
                )
                self.apply(overlay_dir)
                self.wait_ready()
            except InstallError as error:
                where = self.collect_diagnostics()
                raise InstallError(f"{error}\ndiagnostics: {where}") from None
        return image

    def uninstall(self) -> None:
        for argv in uninstall_argvs(self.kubectl, self.kubeconfig):
            self.run(argv, "uninstalling the controller")

    def collect_diagnostics(
        self,
        directory: Path | None = None,
        *,
        namespace: str = NAMESPACE,
        selector: str = CONTROLLER_SELECTOR,
    ) -> Path:
        """Run every diagnostics command, keeping going past failures; return the directory."""
        directory = directory or self.diagnostics_dir
        directory.mkdir(parents=True, exist_ok=True)
        commands = diagnostics_commands(
            self.kubectl,
            self.kubeconfig,
            kind=self.kind,
            cluster=self.cluster,
            directory=directory,
            namespace=namespace,
            selector=selector,
        )
        for name, argv in commands:
            self.issued.append(argv)
            try:
                proc = self.runner(argv)
                text = f"$ {shlex.join(argv)}\n(exit {proc.returncode})\n{proc.stdout}{proc.stderr}"
            except OSError as error:
                text = f"$ {shlex.join(argv)}\ncould not run: {error}\n"
            if name:
                (directory / name).write_text(text)
        log.info("diagnostics written to %s", directory)
        return directory


@dataclass
class InClusterController:
    """The reference controller as a Deployment: what the suite's `controller` fixture uses on
    kind. Same methods as conformance.controllers.HostController (start, stop, restart, check,
    logs), so the tests that restart the controller work on kind too."""

    installer: Installer
    resync: float | None = None
    mutant: str | None = None
    #: the suite run: under pytest-xdist the first worker installs, the others find it installed
    run_id: str | None = None
    image: str | None = None
    started: bool = False

    #: time.monotonic() of the last start: a restart starts the resync period anew
    started_at: float = 0.0

    def start(self) -> InClusterController:
        # Before the pod starts: its initial list reconciles before it reports ready, and the
        # resync clock looks for that reconcile after this time.
        self.started_at = time.monotonic()
        if self.image is None:
            lock = Path(tempfile.gettempdir()) / f"convoy-install-{self.installer.cluster}.lock"
            with filelock.FileLock(str(lock)):
                if self.run_id and self.installed_by() == self.run_id:
                    self.installer.wait_ready()
                    self.image = "(installed by another worker of this run)"
                else:
                    resync = None if self.resync is None else f"{self.resync:g}s"
                    self.image = self.installer.install(
                        resync=resync, mutant=self.mutant, run_id=self.run_id
                    )
        else:
            k, kc = self.installer.kubectl, self.installer.kubeconfig
            self.installer.run(scale_argv(k, kc, 1), "scaling the controller up")
            self.installer.wait_ready()
        self.started = True
        return self

    def installed_by(self) -> str:
        """The run annotation of the live Deployment ("" when there is none)."""
        key = RUN_ANNOTATION.replace(".", "\\.")
        proc = self.installer.runner(
            kubectl_argv(
                self.installer.kubectl,
                self.installer.kubeconfig,
                "get",
                f"deployment/{DEPLOYMENT}",
                f"--namespace={NAMESPACE}",
                "--ignore-not-found",
                "-o",
                f"jsonpath={{.metadata.annotations.{key}}}",
            )
        )
        return (proc.stdout or "").strip() if proc.returncode == 0 else ""

    def stop(self) -> None:
        """Scale to zero and wait until the pod is gone (what a restart test needs)."""
        if not self.started:
            return
        k, kc = self.installer.kubectl, self.installer.kubeconfig
        self.installer.run(scale_argv(k, kc, 0), "scaling the controller down")
        self.installer.run(wait_pods_deleted_argv(k, kc), "waiting for the controller pod to go")
        self.started = False

    def restart(self) -> None:
        self.stop()
        self.start()

    def check(self) -> None:
        """Raise when the Deployment has no available replica while it should run, or when its
        log shows the API server refusing it anything (its roles lack a grant)."""
        if not self.started:
            return
        k, kc = self.installer.kubectl, self.installer.kubeconfig
        proc = self.installer.runner(
            kubectl_argv(
                k,
                kc,
                "get",
                f"deployment/{DEPLOYMENT}",
                f"--namespace={NAMESPACE}",
                "-o",
                "jsonpath={.status.availableReplicas}",
            )
        )
        if proc.returncode != 0 or (proc.stdout or "0").strip() in ("", "0"):
            raise InstallError(
                f"deployment/{DEPLOYMENT} has no available replica:\n{self.logs()[-4000:]}"
            )
        check_not_refused(self.logs())

    def logs(self) -> str:
        proc = self.installer.runner(logs_argv(self.installer.kubectl, self.installer.kubeconfig))
        return (proc.stdout or "") + (proc.stderr or "")

    def describe(self) -> dict[str, Any]:
        kubeconfig = self.installer.kubeconfig
        with api_client(kubeconfig, kubeconfig.parent) as api:
            return {"installedBy": "the suite", **describe_deployment(api, NAMESPACE, DEPLOYMENT)}


# -- command line ------------------------------------------------------------------------------


def _installer(args: argparse.Namespace, kubeconfig_dir: Path) -> Installer:
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else kubeconfig_dir / "kubeconfig"
    if not args.kubeconfig:
        proc = run_command(kind_export_kubeconfig_argv(args.kind, args.cluster_name, kubeconfig))
        if proc.returncode != 0:
            raise InstallError(f"kind export kubeconfig failed: {proc.stderr.strip()}")
    return Installer(
        kubectl=args.kubectl,
        kubeconfig=kubeconfig,
        kind=args.kind,
        cluster=args.cluster_name,
        diagnostics_dir=Path(args.out),
    )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(
        prog="python -m conformance.install_kind",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("install", "build, load, apply and wait for the reference controller"),
        ("diagnostics", "collect kind's logs, the controller's logs and events"),
        ("uninstall", "delete the controller's objects (not the CRDs)"),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--cluster-name", default="pytest-kind", help="the kind cluster")
        sub.add_argument("--kind", default="kind", help="the kind binary")
        sub.add_argument("--kubectl", default="kubectl", help="the kubectl binary")
        sub.add_argument("--kubeconfig", help="default: exported from kind for --cluster-name")
        sub.add_argument("--out", default="reports/diagnostics", help="diagnostics directory")
        if name == "install":
            sub.add_argument(
                "--resync", default=None, help="the controller's --resync (default: the manifest's)"
            )
            sub.add_argument("--image", default=None, help="image name:tag (default: a unique tag)")
        if name == "diagnostics":
            sub.add_argument("--namespace", default=NAMESPACE, help="the controller's namespace")
            sub.add_argument(
                "--selector", default=CONTROLLER_SELECTOR, help="the controller pods' labels"
            )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="convoy-kubeconfig-") as tmp:
        try:
            installer = _installer(args, Path(tmp))
            if args.command == "install":
                image = installer.install(image=args.image, resync=args.resync)
                print(f"installed the reference controller ({image})")
            elif args.command == "uninstall":
                installer.uninstall()
            else:
                where = installer.collect_diagnostics(
                    namespace=args.namespace, selector=args.selector
                )
                print(f"diagnostics in {where}")
        except InstallError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
