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


#: ELF's e_machine for the architectures Docker names (the base image's .Architecture).
ELF_MACHINES = {"amd64": 62, "arm64": 183, "ppc64le": 21, "s390x": 22, "riscv64": 243}


class ImageError(RuntimeError):
    """The suite's image cannot be built as asked; the message says why."""


def kubectl_architecture(kubectl: Path) -> str | None:
    """The Docker architecture of a Linux kubectl binary; None for anything else (a macOS
    Mach-O binary, a script, an unknown machine)."""
    header = kubectl.read_bytes()[:20]
    if header[:4] != b"\x7fELF" or len(header) < 20:
        return None
    machine = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
    return next((arch for arch, number in ELF_MACHINES.items() if number == machine), None)


def image_architecture(image: str) -> str:
    argv = ["docker", "image", "inspect", "--format", "{{.Architecture}}", image]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def check_kubectl(kubectl: Path, architecture: str) -> None:
    """The kubectl copied into the image must run there: a Linux binary of the base image's
    architecture (not the host's kubectl from a Mac or an ARM laptop for an amd64 cluster)."""
    found = kubectl_architecture(kubectl)
    if found != architecture:
        raise ImageError(
            f"--kubectl {kubectl} is {f'a Linux {found} binary' if found else 'no Linux binary'}"
            f"; the image is linux/{architecture}: pass a kubectl built for linux/{architecture}"
        )


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
    check_kubectl(kubectl, image_architecture(base))
    with tempfile.TemporaryDirectory(prefix="convoy-suite-image-") as directory:
        context = Path(directory)
        shutil.copy(DOCKERFILE, context / "Dockerfile")
        shutil.copy(kubectl, context / "kubectl")
        subprocess.run(build_argv(tag, base, context), check=True)
    return tag
