"""docs/certification.md's "By hand" commands, taken from the guide and run as written on the
kind-host tests' cluster against the vendor's controller, whose names are the guide's example
(a changed command is a changed test). The few that cannot run here say why; the certifying run
itself gets this engine's options and one test (both phases of the whole suite take about an
hour: `make certify-vendor` runs them)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.install import kind_commands
from tests.helpers import guide_commands
from tests.kindhost import vendor_manifests
from tests.kindhost.conftest import VENDOR_IMAGE, Vendor

pytestmark = pytest.mark.kindhost

NOT_RUN = {
    "git clone": "this checkout is the suite release under test",
    "git checkout": "this checkout is the suite release under test",
    "kind create cluster": "a cluster on the kind host's engine needs its kind config "
    "(--kind-config): the kind-host tests' cluster, made with it, stands for this one",
}
SELECTED = "test_automatic_true_applies_on_creation"
MANIFESTS = "path/to/your/manifests"
#: what verify-report may say of a run of one selected test: it did not certify, the clauses
#: it left out, and what the long phase, which selects none of it, never saw (the cluster)
SELECTION_ONLY = re.compile(
    r"certifying is not true: "
    r"|: rules\[[A-Z]+-\d+\]"
    r"|: phases\[\*\]\.\w+: .*; long: (None|\[\])\)$"
    r"|: environment\.kubernetesVersion \(none\)"
)


def as_run_here(argv: list[str], vendor: Vendor) -> list[str]:
    """The guide's command with this machine's paths: the cluster's kubectl, the vendor's
    manifests, this venv's kit; certify with the engine's options and the selection."""
    argv = [str(vendor.manifests) if arg == MANIFESTS else arg for arg in argv]
    if argv[0] == "kubectl":
        return [*vendor.kubectl_argv, *argv[1:]]
    if argv[0] == ".venv/bin/convoy-conformance":
        kit = [str(Path(sys.executable).parent / "convoy-conformance"), *argv[1:]]
        extra = [*vendor.kind_options, "-k", SELECTED] if argv[1] == "certify" else []
        return [*kit, *extra]
    return argv


def test_the_guides_by_hand_commands_run_against_a_vendors_controller(
    vendor: Vendor, tmp_path: Path
) -> None:
    commands = guide_commands("By hand")
    assert any(vendor.install.deployment in command for command in commands), (
        "the guide's example Deployment is no longer the vendor's"
    )
    vendor.load(VENDOR_IMAGE)  # "your way": kind has no registry to pull it from
    verdicts: list[str] = []
    try:
        for command in commands:
            why = next((why for start, why in NOT_RUN.items() if command.startswith(start)), "")
            if why:
                print(f"not run: {command}\n  because {why}")
                continue
            argv = as_run_here(shlex.split(command), vendor)
            cwd = kind_commands.REPO_ROOT if argv[0] == "make" else tmp_path
            print("$", shlex.join(argv), flush=True)
            ran = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
            said = [line for line in ran.stdout.splitlines() if not line.startswith("not ")]
            print("\n".join(said)[-6000:], ran.stderr[-2000:])
            if {"certify", "verify-report"} & set(argv):
                verdicts.append(judged_for_the_selection_only(ran, certify="certify" in argv))
                continue
            assert ran.returncode == 0, f"`{command}` failed (its output is above)"
            # the guide: "install your controller, your way, then wait until it is ready"
            if "apply" in argv:
                vendor_manifests.wait_ready(vendor.kubectl_argv, vendor.install)
    finally:
        vendor.kubectl("delete", "--wait", "--ignore-not-found", "-k", str(vendor.manifests))
    assert len(verdicts) == 2, "the guide's block no longer certifies and verifies"


def judged_for_the_selection_only(ran: subprocess.CompletedProcess[str], *, certify: bool) -> str:
    """One selected test certifies nothing: certify (which ends with verify-report) and
    verify-report must say so, and for that reason only (the clauses it left out), not for
    the report's seal, files, phases or implementation; certify's phases must have passed."""
    ended = re.findall(r"certify: phase (\w+) ended with code (\d+)", ran.stdout)
    # the long phase selects no test of the selection: pytest's "no tests ran"
    assert not certify or ended == [("shipped", "0"), ("long", "5")], ended
    problems = [line for line in ran.stdout.splitlines() if line.startswith("not ")]
    print(f"{len(problems)} reasons not to certify, the first: {problems[:2]}")
    assert ran.returncode == 1 and problems, ran.stdout[-3000:]
    assert [p for p in problems if not SELECTION_ONLY.search(p)] == [], ran.stdout[-3000:]
    return problems[0]
