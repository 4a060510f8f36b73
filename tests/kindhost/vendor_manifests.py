"""A vendor's own manifests for "its" controller (the reference image under another name), shaped
the way vendors ship theirs rather than the way the suite installs the reference:

- its own namespace, Deployment, ServiceAccount, Service and names (nothing named convoy-*);
- two replicas elected on a Lease (`--leader-elect`), rolled out one by one, as
  controller-runtime's managers run: a restarted controller reconciles only once its Lease is
  free or has expired;
- a sidecar listed before the controller's container (which controller-runtime's scaffold
  calls `manager`): the long phase must set --resync on the controller, never on the sidecar;
- least-privilege rights for what the suite's renders hold, in a ClusterRole of its own that
  does not carry the reference's aggregation label (the suite's aggregated targets role does
  not reach it);
- its own serving certificate for its Service, and the APIService's caBundle to match.

They are the kit's shipped manifests with a vendor's edits, written out as one file and a
kustomization, so that `kubectl apply --server-side -k DIR` installs them as the guide says.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conformance import resources
from conformance.install import kind_commands, on_kind
from conformance.install.deployment import APPLY_VERBS, RENDERED
from convoyapi import API_SERVICE

NAMESPACE = "acme-system"
DEPLOYMENT = "acme-convoy"
#: the controller's container (controller-runtime's scaffold name); the sidecar comes first
CONTAINER = "manager"
SIDECAR = "log-shipper"
SIDECAR_PROGRAM = """\
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    time.sleep(3600)
"""
SERVICE = "acme-convoy-api"
REPLICAS = 2
SERVING_SECRET = "acme-convoy-serving"
LABELS = {"app.kubernetes.io/name": DEPLOYMENT}
#: the reference's own names, each to its vendor name (longest first: one contains another)
RENAMED = {
    kind_commands.SERVING_SECRET: SERVING_SECRET,
    kind_commands.SERVICE: SERVICE,
    kind_commands.NAMESPACE: NAMESPACE,
    kind_commands.DEPLOYMENT: DEPLOYMENT,
}
#: the reference's aggregated targets role, which a least-privilege vendor does not ship
AGGREGATED_TARGETS = ("convoy-controller-targets", "convoy-controller-targets-default")


@dataclass(frozen=True)
class VendorInstall:
    manifests: Path
    #: NAMESPACE/NAME, as --convoy-controller-deployment takes it
    deployment: str = f"{NAMESPACE}/{DEPLOYMENT}"
    container: str = CONTAINER


def write(directory: Path, *, image: str, kubectl: Path) -> VendorInstall:
    """Write the vendor's manifests into `directory` (a kustomization of one file)."""
    directory.mkdir(parents=True, exist_ok=True)
    shipped = subprocess.run(
        [str(kubectl), "kustomize", str(resources.MANIFESTS)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    documents = vendor_documents(list(yaml.safe_load_all(shipped)), image=image)
    (directory / "acme-convoy.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["acme-convoy.yaml"],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return VendorInstall(directory)


def apply(kubectl: Sequence[str], install: VendorInstall) -> None:
    """Install them as the guide says (server-side apply), and wait until they are ready."""
    subprocess.run([*kubectl, "apply", "--server-side", "-k", str(install.manifests)], check=True)
    wait_ready(kubectl, install)


def wait_ready(kubectl: Sequence[str], install: VendorInstall) -> None:
    """Until the controller has rolled out and its subresource API is Available."""

    def run(*args: str) -> None:
        subprocess.run([*kubectl, *args], check=True)

    namespace, name = install.deployment.split("/")
    run("rollout", "status", f"deployment/{name}", f"--namespace={namespace}", "--timeout=300s")
    run("wait", "--for=condition=Available", "--timeout=180s", f"apiservice/{API_SERVICE}")


def vendor_documents(shipped: list[dict[str, Any]], *, image: str) -> list[dict[str, Any]]:
    kept = [doc for doc in shipped if not is_aggregated_targets(doc)]
    documents = [doc if is_crd(doc) else rename(doc) for doc in kept]
    cert = on_kind.serving_certificate(SERVICE, NAMESPACE)
    for document in documents:
        if document["kind"] == "Deployment":
            make_vendor_deployment(document, image)
        elif document["kind"] == "Service":
            document["spec"]["selector"] = dict(LABELS)
        elif document["kind"] == "APIService":
            document["spec"]["caBundle"] = base64.b64encode(cert.ca_pem).decode()
    secret = on_kind.serving_secret(cert)
    secret["metadata"].update(name=SERVING_SECRET, namespace=NAMESPACE, labels=dict(LABELS))
    return [*documents, secret, *render_rights()]


def is_crd(document: dict[str, Any]) -> bool:
    return document["kind"] == "CustomResourceDefinition"


def is_aggregated_targets(document: dict[str, Any]) -> bool:
    name = document["metadata"]["name"]
    if document["kind"] == "ClusterRole":
        return name in AGGREGATED_TARGETS
    return document["kind"] == "ClusterRoleBinding" and document["roleRef"]["name"] in (
        AGGREGATED_TARGETS
    )


def rename(document: dict[str, Any]) -> dict[str, Any]:
    """The reference's names and namespace to the vendor's, wherever they appear (a ClusterRole's
    name starts with the Deployment's; a binding's subject names its ServiceAccount)."""
    text = yaml.safe_dump(document, sort_keys=False)
    for reference, vendor in RENAMED.items():
        text = text.replace(reference, vendor)
    return yaml.safe_load(text)  # type: ignore[no-any-return]


def make_vendor_deployment(deployment: dict[str, Any], image: str) -> None:
    spec = deployment["spec"]
    spec.update(replicas=REPLICAS, strategy={"type": "RollingUpdate"})
    spec["selector"] = {"matchLabels": dict(LABELS)}
    spec["template"]["metadata"]["labels"] = dict(LABELS)
    pod = spec["template"]["spec"]
    (controller,) = pod["containers"]
    controller.update(name=CONTAINER, image=image)
    controller["args"] = [
        *controller["args"],
        "--leader-elect",
        f"--leader-election-id={DEPLOYMENT}",
    ]
    sidecar = {
        "name": SIDECAR,
        "image": image,
        # Exits on SIGTERM (a process with PID 1 ignores it unless it handles it, and each
        # stop of the Deployment would wait out the grace period).
        "command": ["python", "-c", SIDECAR_PROGRAM],
        "securityContext": dict(controller["securityContext"]),
        "resources": {"requests": {"cpu": "5m", "memory": "16Mi"}},
    }
    pod["containers"] = [sidecar, controller]


def render_rights() -> list[dict[str, Any]]:
    """The vendor's ClusterRole for what the suite renders, bound to its ServiceAccount."""
    name = f"{DEPLOYMENT}-render-targets"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "rules": [
            {"apiGroups": [group], "resources": [resource], "verbs": list(APPLY_VERBS)}
            for group, resource in RENDERED
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": DEPLOYMENT, "namespace": NAMESPACE}],
    }
    return [role, binding]
