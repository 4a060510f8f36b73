"""Where a report comes from: the suite's version, its source, and a digest of its own files.

The digest covers what decides what a run checks and how strictly: the conformance tests, the
rule catalog and the timing maximums. verify-report recomputes it from the kit it runs from, so
a report made by an edited suite (a test loosened, a clause dropped) does not pass for this one.
"""

from __future__ import annotations

import hashlib
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from conformance.versions import default_versions, kind_versions

#: The conformance package (this module is in its certification/).
PACKAGE = Path(__file__).resolve().parents[1]
#: Besides the tests under suite/: the files whose content is part of the suite's verdict.
VERDICT_FILES = (
    "document/catalog.py",
    "timing.py",
    "document/model.py",
    "harness/model_based.py",
)


def suite_version() -> str:
    try:
        return metadata.version("convoy-conformance")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def suite_files() -> list[Path]:
    return sorted([*(PACKAGE / "suite").glob("test_*.py"), *(PACKAGE / n for n in VERDICT_FILES)])


def suite_digest() -> str:
    digest = hashlib.sha256()
    for path in suite_files():
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return f"sha256:{digest.hexdigest()}"


def checkout() -> dict[str, Any]:
    """The git commit of the suite's checkout and whether its tree differs from it; nothing
    when the suite is not run from a checkout (an installed kit)."""
    root = PACKAGE.parent
    if not (root / ".git").exists():
        return {}

    def git(*args: str) -> str:
        argv = ["git", "-C", str(root), *args]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()

    try:
        return {
            "gitCommit": git("rev-parse", "HEAD"),
            "gitDirty": bool(git("status", "--porcelain")),
        }
    except (OSError, subprocess.CalledProcessError):
        return {}


def provenance() -> dict[str, Any]:
    return {"suiteVersion": suite_version(), "suiteDigest": suite_digest(), **checkout()}


def supported_minors() -> list[str]:
    """The Kubernetes minors this kit runs against: kind's node images and the local provider's."""
    local = minor_of(default_versions()["kubernetes"])
    return sorted({*kind_versions().minors, local}, key=lambda m: tuple(map(int, m.split("."))))


def minor_of(version: str) -> str:
    """ "v1.36.3" or "v1.36.3+k3s1" -> "1.36"."""
    return ".".join(version.lstrip("v").split(".")[:2])
