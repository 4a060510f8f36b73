"""Helpers shared by the project's own tests."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from conformance.kube import read_or_none
from conformance.observe.releases import App, parse_time, same_second
from conformance.polling import poll_until

#: The guide vendors follow; its shell blocks are commands the tests check or run.
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "certification.md"

#: The status fields that record a handled /sync and a handled forced one.
HANDLED, FORCE_HANDLED = "lastHandledSyncAt", "lastHandledForceSyncAt"


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll `check` until it holds; return the seconds it took, or fail naming `what`."""
    started = time.monotonic()
    poll_until(
        check,
        timeout=timeout,
        step=0.05,
        failure=lambda: pytest.fail.Exception(f"timed out after {timeout:g} s waiting for {what}"),
    )
    return time.monotonic() - started


def pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def namespace_deleted(core: client.CoreV1Api, name: str) -> bool:
    """Deleted, or on its way: the namespace controller finishes the rest."""
    found = read_or_none(lambda: core.read_namespace(name))
    return found is None or found.metadata.deletion_timestamp is not None


def wait_handled(app: App, field: str, request: datetime) -> None:
    """Wait until status.<field> records `request`, to the second."""
    app.wait_for(
        lambda r: (
            bool((r.get("status") or {}).get(field))
            and same_second(parse_time(r["status"][field]), request)
        ),
        f"the request of {request:%H:%M:%S} handled ({field})",
    )


ACTION = Path(__file__).resolve().parents[1] / "action.yml"


@dataclass(frozen=True)
class StepRun:
    process: subprocess.CompletedProcess[str]
    #: what the step wrote to GITHUB_OUTPUT, as it wrote it
    written: str

    @property
    def outputs(self) -> dict[str, str]:
        lines = self.written.splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)


def run_action_step(step: str, work: Path, tools: list[Path], env: dict[str, str]) -> StepRun:
    """Run the composite action's step (by id or name) as the runner would: its script with
    bash -e, a GITHUB_OUTPUT file, `tools` first on PATH and the step's own `env`."""
    steps = yaml.safe_load(ACTION.read_text())["runs"]["steps"]
    script = next(s for s in steps if step in (s.get("id"), s.get("name")))["run"]
    output = work / f"github-output-{len(list(work.glob('github-output-*')))}"
    output.touch()
    path = os.pathsep.join([*map(str, tools), os.environ["PATH"]])
    environment = {**os.environ, "PATH": path, "GITHUB_OUTPUT": str(output), **env}
    process = subprocess.run(
        ["bash", "-e", "-c", script],
        env=environment,
        cwd=ACTION.parent,
        capture_output=True,
        text=True,
    )
    return StepRun(process, output.read_text())


def shell_blocks(section: str = "") -> list[str]:
    """The guide's ```sh blocks, all of them or those under a heading that names `section`."""
    blocks: list[str] = []
    heading, fenced, block = "", False, None
    for line in GUIDE.read_text().splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
            if fenced:
                block = [] if line.strip() == "```sh" else None
            elif block is not None and section in heading:
                blocks.append("".join(block))
        elif fenced:
            if block is not None:
                block.append(line)
        elif line.startswith("#"):
            heading = line
    return blocks


def guide_commands(section: str = "") -> list[str]:
    """The guide's shell commands, continuation lines joined, comments dropped."""
    joined = "\n".join(shell_blocks(section)).replace("\\\n", " ")
    return [
        line.split("#", 1)[0].strip() for line in joined.splitlines() if line.split("#")[0].strip()
    ]
