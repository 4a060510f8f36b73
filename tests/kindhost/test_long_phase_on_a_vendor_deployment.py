"""The long phase's mechanics on a vendor's Deployment, on a real cluster (issue 28, defect 1):
a long-phase pytest whose xdist workers share the vendor's controller, each worker running every
probe (`--dist each`, tests/kindhost/probes/long_phase.py). One worker restarts the Deployment
with --resync in the controller's container, never the sidecar's; every worker's resync clock
counts from that restart; and afterwards the Deployment's args and replicas are as found,
although a probe failed. The long resync is short here: the mechanics, not the ladders, are
under test (the whole long phase is `make certify-vendor`'s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.install import kind_commands
from tests.kindhost.conftest import CLUSTER, Vendor
from tests.kindhost.probes import long_phase

pytestmark = pytest.mark.kindhost

PROBES = Path(long_phase.__file__)
WORKERS = 3
#: the controller's resync before and after the restart: the probes' resync clocks need a tick
#: they can wait for, no more
RESYNC = "60s"


def deployment_as_found(vendor: Vendor) -> tuple[int, dict[str, list[str]]]:
    """The Deployment's replicas and each container's args."""
    namespace, name = vendor.install.deployment.split("/")
    argv = [*vendor.kubectl_argv, "get", "deployment", name, "-n", namespace, "-o", "json"]
    found = json.loads(subprocess.run(argv, capture_output=True, check=True).stdout)
    containers = found["spec"]["template"]["spec"]["containers"]
    return found["spec"]["replicas"], {c["name"]: c.get("args", []) for c in containers}


def outcomes(stdout: str, test: str) -> list[str]:
    """What `-rA` says of each run of `test` (one per worker). A summary line is the outcome, the
    test's ID and, when the terminal is wide enough (COLUMNS), " - " and the failure's message."""
    lines = (line.split() for line in stdout.splitlines())
    return [words[0] for words in lines if len(words) > 1 and words[1].endswith(f"::{test}")]


def test_every_worker_counts_from_the_long_phases_restart_and_the_deployment_is_restored(
    installed: Vendor,
) -> None:
    before = deployment_as_found(installed)
    env = {
        **os.environ,
        long_phase.NOT_BEFORE: str(time.monotonic()),
        long_phase.FAIL: "1",
        long_phase.CONTAINER: installed.install.container,
    }
    argv = [
        sys.executable, "-P", "-m", "pytest", str(PROBES), "-p", "no:cacheprovider", "-rA",
        "--cluster=kind", f"--cluster-name={CLUSTER}", "--keep-cluster", *installed.kind_options,
        "--convoy-install=none", f"--convoy-controller-deployment={installed.install.deployment}",
        *installed.container_option, "--certify-phase=long",
        "--timing", f"controller_resync={RESYNC}", "--timing", f"long_resync={RESYNC}",
        "-n", str(WORKERS), "--dist", "each",
    ]  # fmt: skip
    ran = subprocess.run(argv, cwd=kind_commands.REPO_ROOT, capture_output=True, text=True, env=env)
    print(ran.stdout[-6000:], ran.stderr[-3000:])
    probe = "test_this_workers_resync_clock_counts_from_the_long_phases_restart"
    assert outcomes(ran.stdout, probe) == ["PASSED"] * WORKERS, "a worker's probe did not pass"
    failing = "test_a_failure_in_the_long_phase"
    assert outcomes(ran.stdout, failing) == ["FAILED"] * WORKERS, "the failing probe ran otherwise"
    assert deployment_as_found(installed) == before, "the Deployment was not restored as found"
