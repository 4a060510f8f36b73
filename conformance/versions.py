"""The versions the kit pins, read from conformance/versions.yaml and checked: the local
provider's Kubernetes and etcd, kind's release and its node images (one per Kubernetes minor,
pinned by digest), the kind host's packages. A module of its own so that what only reads them
(a report's provenance) loads no cluster provider.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml


def read() -> dict[str, Any]:
    text = resources.files("conformance").joinpath("versions.yaml").read_text()
    return yaml.safe_load(text)


def default_versions() -> dict[str, str]:
    """The local provider's default Kubernetes and etcd versions."""
    return read()["local"]


#: kindest/node:v1.37.0@sha256:<64 hex>: a tag for people, a digest for the machine.
NODE_IMAGE = re.compile(r"^kindest/node:v(?P<version>\d+\.\d+\.\d+)@sha256:[0-9a-f]{64}$")
MINOR = re.compile(r"^\d+\.\d+$")


class KindError(RuntimeError):
    """kind cannot be used here; the message says what is missing."""


@dataclass(frozen=True)
class KindVersions:
    """The `kind:` section of conformance/versions.yaml."""

    #: the kind release, e.g. v0.33.0 (the node images below are built for it)
    version: str
    #: Kubernetes minor ("1.37") -> node image pinned by digest
    images: dict[str, str]

    @property
    def minors(self) -> list[str]:
        """Newest first."""
        return sorted(self.images, key=lambda m: tuple(map(int, m.split("."))), reverse=True)

    def node_image(self, minor: str | None = None) -> str:
        """The node image for a Kubernetes minor ("1.36" or "v1.36.4"); default: the newest."""
        if minor is None:
            return self.images[self.minors[0]]
        wanted = ".".join(minor.lstrip("v").split(".")[:2])
        if wanted not in self.images:
            raise KindError(
                f"no kind node image for Kubernetes {minor} in conformance/versions.yaml "
                f"(kind {self.version} has {', '.join(self.minors)}); pass --kind-image"
            )
        return self.images[wanted]


def parse_versions(document: dict) -> KindVersions:
    """Check and read the `kind:` section; every image must be pinned by digest."""
    section = document.get("kind") or {}
    version, images = section.get("version"), section.get("images") or {}
    if not isinstance(version, str) or not re.fullmatch(r"v\d+\.\d+\.\d+", version):
        raise KindError(f"kind.version must look like v0.33.0, not {version!r}")
    if not images:
        raise KindError("kind.images is empty")
    for minor, image in images.items():
        match = NODE_IMAGE.match(str(image))
        if not MINOR.match(str(minor)) or not match:
            raise KindError(
                f"kind.images[{minor!r}]: {image!r} is not kindest/node:vX.Y.Z@sha256:..."
            )
        if not match["version"].startswith(f"{minor}."):
            raise KindError(f"kind.images[{minor!r}]: {image!r} is not Kubernetes {minor}")
    return KindVersions(version, {str(k): str(v) for k, v in images.items()})


def kind_versions() -> KindVersions:
    """The kind release and node images the provider and the GitHub workflow use."""
    return parse_versions(read())
