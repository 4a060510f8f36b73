"""`--cluster=auto|kind|local|existing`: which provider to use, and why."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

PROVIDERS = ("auto", "kind", "local", "existing")
_PROBE_TIMEOUT = 120


@dataclass(frozen=True)
class Choice:
    provider: str
    reason: str


def docker_can_run_privileged(image: str | None) -> tuple[bool, str]:
    """Start the node image kind would start, privileged, and see whether it runs."""
    if not shutil.which("docker"):
        return False, "docker is not on PATH"
    if not image:
        return False, "no kind node image to probe with (pass --kind-image)"
    argv = ["docker", "run", "--rm", "--privileged", "--entrypoint", "true", image]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return False, f"`{' '.join(argv)}` did not finish in {_PROBE_TIMEOUT} s"
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return False, f"Docker cannot start a privileged container ({detail})"
    return True, "Docker starts privileged containers"


def choose(requested: str, *, kubeconfig: str | None, kind_image: str | None) -> Choice:
    """Resolve `auto`: kind where it can run, else the local control plane."""
    if requested == "existing" and not kubeconfig:
        raise ValueError("--cluster=existing needs --kubeconfig=PATH")
    if requested != "auto":
        return Choice(requested, "requested with --cluster")
    if not shutil.which("kind"):
        return Choice("local", "kind is not on PATH")
    usable, why = docker_can_run_privileged(kind_image)
    return Choice("kind" if usable else "local", why)
