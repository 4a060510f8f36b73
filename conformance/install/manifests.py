"""Applying the kit's manifests (CRDs, test-only CRDs; conformance.resources) with server-side
apply."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from conformance.kube import dynamic_api
from conformance.polling import poll_until

FIELD_MANAGER = "convoy-conformance"
ESTABLISH_TIMEOUT = 30.0


def load(directory: Path) -> list[dict[str, Any]]:
    """The objects of the files a kustomization lists (resources only: no patches here)."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    return load_files(directory, kustomization["resources"])


def load_files(directory: Path, names: Iterable[str]) -> list[dict[str, Any]]:
    """The objects of these YAML files of `directory`, in order."""
    objects: list[dict[str, Any]] = []
    for name in names:
        objects += [doc for doc in yaml.safe_load_all((directory / name).read_text()) if doc]
    return objects


def apply(api: client.ApiClient, objects: list[dict[str, Any]]) -> None:
    """Server-side apply each object, then wait until every CRD among them is Established."""
    resources = dynamic_api(api).resources
    for obj in objects:
        resource = resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        resource.server_side_apply(
            body=obj,
            name=obj["metadata"]["name"],
            namespace=obj["metadata"].get("namespace"),
            field_manager=FIELD_MANAGER,
            force_conflicts=True,
        )
    crds = [o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"]
    wait_established(api, crds)


def wait_established(api: client.ApiClient, names: list[str]) -> None:
    extensions = client.ApiextensionsV1Api(api)

    def waiting() -> list[str]:
        return [n for n in names if not _established(extensions.read_custom_resource_definition(n))]

    poll_until(
        lambda: not waiting(),
        timeout=ESTABLISH_TIMEOUT,
        step=0.1,
        failure=lambda: TimeoutError(
            f"CRDs not Established after {ESTABLISH_TIMEOUT:.0f} s: {', '.join(waiting())}"
        ),
    )


def _established(crd: Any) -> bool:
    conditions = (crd.status and crd.status.conditions) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)
