"""The controller image, checked without a Docker engine.

Statically: the base is pinned by digest, the user is numeric and not root (and is the user the
Deployment runs as), the entry point is `python -m convoy`. Then the image's install step is
replayed on this machine: the build context that .dockerignore lets through is copied, every
COPY source must be in it, and `pip install --no-cache-dir .` of that context (without the
dependencies: the venv has them) gives a package whose `python -m convoy --help` runs.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import yaml

from conformance import resources
from conformance.install import kind_commands, on_kind

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_the_base_is_python_slim_pinned_by_digest_unless_a_build_argument_names_another() -> None:
    [base] = [args for word, args in instructions() if word == "FROM"]
    assert base == f"${{{kind_commands.CONTROLLER_BASE_ARG}}}"
    [default] = [args for word, args in instructions() if word == "ARG"]
    name, _, image = default.partition("=")
    assert name == kind_commands.CONTROLLER_BASE_ARG
    assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", image), image


def test_the_user_is_numeric_non_root_and_the_deployments() -> None:
    [user] = [args for word, args in instructions() if word == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0 and (not gid or int(gid) != 0)
    deployment = yaml.safe_load((resources.CONTROLLER / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsUser"] == int(uid) and pod["runAsNonRoot"] is True


def test_the_entry_point_is_the_host_processes() -> None:
    assert on_kind.image_entrypoint() == ["python", "-m", "convoy"]
    assert any(w == "RUN" and "pip install --no-cache-dir" in a for w, a in instructions())


def test_nothing_is_written_outside_tmp_at_run_time() -> None:
    """The last WORKDIR (the process's working directory) and HOME are under /tmp."""
    workdirs = [args for word, args in instructions() if word == "WORKDIR"]
    assert workdirs[-1] == "/tmp"
    env = " ".join(args for word, args in instructions() if word == "ENV")
    assert "HOME=/tmp" in env and "PYTHONDONTWRITEBYTECODE=1" in env


def ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last matching pattern wins; `!` re-includes."""
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        body = body.strip("/")
        regex = (
            re.escape(body)
            .replace(r"\*\*/", "(.*/)?")
            .replace(r"\*\*", ".*")
            .replace(r"\*", "[^/]*")
            .replace(r"\?", "[^/]")
        )
        if re.fullmatch(f"{regex}(/.*)?", path):
            result = not negate
    return result


def build_context(destination: Path) -> list[str]:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copied = []
    for path in sorted(REPO.rglob("*")):
        relative = path.relative_to(REPO).as_posix()
        if path.is_file() and not ignored(relative, patterns):
            target = destination / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            copied.append(relative)
    return copied


def test_the_build_context_is_small_and_sufficient(tmp_path: Path) -> None:
    copied = build_context(tmp_path / "context")
    assert not [p for p in copied if p.startswith((".venv/", ".git/", "reports/", "tests/"))]
    assert not [p for p in copied if "__pycache__" in p]
    for word, args in instructions():
        if word == "COPY":
            *sources, _ = args.split()
            for source in sources:
                assert (tmp_path / "context" / source).exists(), f"COPY {source}: not in context"
