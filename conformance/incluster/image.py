"""The suite's image for in-cluster runs: the reference controller's image (the whole kit is
installed there) plus kubectl, built with Docker from a small context of its own."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from conformance.install import kind_commands

DOCKERFILE = Path(__file__).with_name("Dockerfile")
BASE_ARG = "CONVOY_SUITE_BASE"


def build_argv(tag: str, base: str, context: Path) -> list[str]:
    return ["docker", "build", "--build-arg", f"{BASE_ARG}={base}", "--tag", tag, str(context)]


def build(tag: str, kubectl: Path, base: str | None = None) -> str:
    """Build the suite image `tag` on `base` (default: the reference controller's image, built
    first as `tag`-base); return `tag`."""
    if base is None:
        if not kind_commands.DOCKERFILE.is_file():
            raise FileNotFoundError(
                f"no {kind_commands.DOCKERFILE} to build the reference controller's image from "
                "(an installed kit): build it in a checkout and pass it as the base"
            )
        base = f"{tag}-base"
        subprocess.run(kind_commands.docker_build_argv(base), check=True)
    with tempfile.TemporaryDirectory(prefix="convoy-suite-image-") as directory:
        context = Path(directory)
        shutil.copy(DOCKERFILE, context / "Dockerfile")
        shutil.copy(kubectl, context / "kubectl")
        subprocess.run(build_argv(tag, base, context), check=True)
    return tag
