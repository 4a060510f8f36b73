"""Install the reference controller on a kind cluster, the way users and CI run it.

Steps (`Installer.install`): build the image from the repository's Dockerfile with a unique tag,
`kind load docker-image` it into the nodes, write a kustomize overlay of the controller's
manifests (conformance.resources) that sets that image, adds a freshly generated serving
certificate (Secret) and patches its CA into the APIService's caBundle, then apply it with
server-side apply (the Namespace first, a server-side dry run of everything, then for real),
wait for the Deployment's rollout and for the APIService to be Available. When a step fails, the
diagnostics (kind's logs, the controller's logs, events, the objects) go into a directory next
to the report, and the error says where.

Every command is built by a small function that returns its argv (kind_commands), so tests
check the commands without Docker; `Installer` runs them through an injectable runner. The
command line for CI steps and by hand is kind_cli.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import os
import shlex
import subprocess
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
from conformance.clusters.kind import KindProvider
from conformance.clusters.kubeconfig import api_client
from conformance.install.base import SharedController
from conformance.install.deployment import describe_deployment
from conformance.install.host import check_not_refused
from conformance.install.kind_commands import (
    APISERVICE_TIMEOUT,
    CONTAINER,
    CONTROLLER_SELECTOR,
    DEPLOYMENT,
    DOCKERFILE,
    IMAGE_NAME,
    NAMESPACE,
    ROLLOUT_TIMEOUT,
    SERVICE,
    SERVING_SECRET,
    apply_argv,
    diagnostics_commands,
    docker_build_argv,
    image_tag,
    kind_load_argv,
    kubectl_argv,
    logs_argv,
    rollout_status_argv,
    scale_argv,
    uninstall_argvs,
    wait_apiservice_argv,
    wait_pods_deleted_argv,
)
from convoyapi import API_SERVICE

log = logging.getLogger(__name__)

MUTANT_VARIABLE = "CONVOY_MUTANT"
#: On the Deployment: the suite run that installed it (xdist workers of one run install once).
RUN_ANNOTATION = "convoy.kumodo.io/conformance-run"

#: The serving certificate lives as long as a kept kind cluster reasonably does; a new install
#: makes a new one.
CERT_VALIDITY = dt.timedelta(days=365)


class InstallError(RuntimeError):
    """A step of the install failed; the message names it and where the diagnostics are."""


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


def installer_for(cluster: KindProvider, diagnostics_dir: Path | None = None) -> Installer:
    """What installs the reference controller on a cluster of the kind provider (and collects
    its diagnostics)."""
    return Installer(
        kubectl=str(cluster.kubectl_path),
        kubeconfig=cluster.kubeconfig,
        kind=str(cluster.kind_path),
        cluster=cluster.kind.name,
        diagnostics_dir=diagnostics_dir or Path("reports/diagnostics"),
    )


@dataclass
class ReferenceDeployment(SharedController):
    """The reference controller as a Deployment: what the suite's `controller` fixture uses on
    kind, a ControllerUnderTest (conformance.install.base) shared by the run's workers."""

    installer: Installer
    resync: float | None = None
    mutant: str | None = None
    #: the suite run: under pytest-xdist the first worker installs, the others find it installed
    run_id: str | None = None
    image: str | None = None
    started: bool = False

    #: time.monotonic() of the last start: a restart starts the resync period anew
    started_at: float = 0.0

    def start(self) -> ReferenceDeployment:
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
