"""`--convoy-install=PATH`: a vendor's controller installed from its own manifests.

The suite applies the file or directory (a kustomization when the directory has one) with
server-side apply, waits until each Deployment it holds has rolled out, and then tests the
controller like one already running. It installs nothing else. When the manifests hold one
Deployment, that is the controller the restart rule scales to zero and back
(conformance.install.deployment).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

ROLLOUT_TIMEOUT = "300s"


class InstallError(RuntimeError):
    """The vendor's manifests could not be applied or did not come up; says which step."""


def kubectl() -> str:
    """kubectl from PATH, else the one the local provider built."""
    from conformance.clusters import binaries

    return shutil.which("kubectl") or str(binaries.resolve().kubectl)


def source_flag(path: Path) -> list[str]:
    if not path.exists():
        raise InstallError(f"--convoy-install={path}: no such file or directory")
    if path.is_dir() and (path / "kustomization.yaml").exists():
        return ["-k", str(path)]
    return ["-R", "-f", str(path)] if path.is_dir() else ["-f", str(path)]


def _run(argv: list[str], step: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise InstallError(f"{step} failed ({' '.join(argv)}):\n{done.stderr.strip()}")
    return done.stdout


@dataclass
class Installed:
    #: what was applied, as Kind/name
    objects: list[str]
    #: the Deployments among them, as namespace/name
    deployments: list[str]


def install(path: Path, kubeconfig: Path) -> Installed:
    """Apply the manifests and wait for their Deployments; return what was applied."""
    base = [kubectl(), f"--kubeconfig={kubeconfig}"]
    rendered = _run(
        [*base, "apply", "--dry-run=client", "-o", "yaml", *source_flag(path)],
        "reading the manifests",
    )
    _run(
        [*base, "apply", "--server-side", "--force-conflicts", *source_flag(path)],
        "applying the manifests",
    )
    objects = [doc for doc in yaml.safe_load_all(rendered) if doc]
    items = [item for doc in objects for item in doc.get("items", [doc])]
    deployments = [
        f"{item['metadata'].get('namespace', 'default')}/{item['metadata']['name']}"
        for item in items
        if item.get("kind") == "Deployment"
    ]
    for deployment in deployments:
        namespace, name = deployment.split("/")
        _run(
            [
                *base,
                "rollout",
                "status",
                f"deployment/{name}",
                f"--namespace={namespace}",
                f"--timeout={ROLLOUT_TIMEOUT}",
            ],
            f"waiting for Deployment {deployment}",
        )
    return Installed([f"{i.get('kind')}/{i['metadata']['name']}" for i in items], deployments)
