"""The files the kit reads at run time, found with importlib.resources so that an installed wheel
has them as a checkout does: the CRDs, the test-only CRDs and the reference controller's
kustomize base (manifests/).

kubectl and kustomize read directories, so the kit must be installed as files (pip's default),
not run from a zip archive.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def _directory(name: str) -> Path:
    found = resources.files(__name__).joinpath(name)
    if not isinstance(found, Path) or not found.is_dir():
        raise RuntimeError(
            f"{__name__}/{name} is not a directory ({found!r}): install convoy-conformance "
            "as files (pip install), not as a zip archive"
        )
    return found


#: kubectl apply --server-side -k MANIFESTS installs the reference controller (and its CRDs).
MANIFESTS = _directory("manifests")
CRDS = MANIFESTS / "crds"
CONTROLLER = MANIFESTS / "controller"
#: Test-only CRDs (and the reference controller's rights on them); not part of convoy.
TESTING = MANIFESTS / "testing"
