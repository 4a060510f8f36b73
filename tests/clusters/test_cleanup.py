"""The session fixtures clean up after failing and interrupted runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from kubernetes import client

from conformance.clusters.base import Cluster
from conformance.clusters.ports import reservations
from conformance.clusters.processes import unblock_stop_signals
from conformance.harness.namespaces import KEPT_LABEL, RUN_LABEL, delete_namespace, sweep_namespaces
from tests.helpers import namespace_deleted, pid_running, wait_until

FAILING_TEST = """
    from pathlib import Path

    def test_fails_while_holding_a_namespace(namespace):
        Path("namespace.txt").write_text(namespace)
        assert False, "this test fails on purpose"
"""

#: How long an interrupted run may take to stop its control plane: each part has a 10 s grace
#: period to stop in, which a loaded machine can use up.
EXIT_TIMEOUT = 120

BLOCKING_TEST = """
    import json, time
    from pathlib import Path

    def test_blocks_until_interrupted(cluster, k8s):
        pids = [process.pid for process in cluster.processes]
        Path("pids.part").write_text(json.dumps(pids))
        Path("pids.part").rename("pids.json")  # whole when it appears
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.1)
"""


def inner_run(
    directory: Path, source: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    (directory / "test_inner.py").write_text(textwrap.dedent(source))
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "test_inner.py", "-p", "no:cacheprovider", *args],
        cwd=directory,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=unblock_stop_signals,  # a run started from a shell, whatever this worker did
    )


def test_a_failing_test_still_has_its_namespace_deleted(
    tmp_path: Path, cluster: Cluster, k8s: client.ApiClient
) -> None:
    run = inner_run(
        tmp_path, FAILING_TEST, "--cluster=existing", f"--kubeconfig={cluster.kubeconfig}"
    )
    output, _ = run.communicate(timeout=120)
    assert run.returncode == 1, output
    assert "1 failed" in output
    name = (tmp_path / "namespace.txt").read_text()
    core = client.CoreV1Api(k8s)
    wait_until(lambda: namespace_deleted(core, name), 30, f"namespace {name} to be deleted")


RELEASES_THEN_A_LOOK = """
    from pathlib import Path

    from conformance.kube import dynamic_api
    from convoyapi import API_VERSION

    def test_creates_a_release(releases):
        releases.app("web")
        Path("namespace.txt").write_text(releases.namespace)

    def test_looks_at_its_namespace_next(k8s):
        release = dynamic_api(k8s).resources.get(api_version=API_VERSION, kind="Release")
        namespace = Path("namespace.txt").read_text()
        Path("left.txt").write_text(str(len(release.get(namespace=namespace).items)))
"""


@pytest.mark.parametrize(("policy", "left"), [("never", 0), ("always", 1)])
def test_a_tests_releases_are_gone_when_the_next_test_starts(
    tmp_path: Path, policy: str, left: int
) -> None:
    """The namespace controller takes seconds to delete a namespace's Releases; until then each
    resync of the controller would reconcile them beside the next test's. So a test's end
    deletes them itself, unless --keep-namespaces keeps them for a person to look at."""
    run = inner_run(
        tmp_path, RELEASES_THEN_A_LOOK, "--cluster=local", f"--keep-namespaces={policy}"
    )
    output, _ = run.communicate(timeout=EXIT_TIMEOUT)
    assert run.returncode == 0, output
    assert int((tmp_path / "left.txt").read_text()) == left


KEPT_AND_PASSING = (
    """
    from pathlib import Path

    def test_passes_holding_a_namespace(namespace):
        Path("passed.txt").write_text(namespace)
"""
    + FAILING_TEST
)


@pytest.mark.parametrize("policy", ["on-failure", "always"])
def test_keep_namespaces_leaves_what_it_says_and_tells_how_to_look(
    tmp_path: Path, cluster: Cluster, k8s: client.ApiClient, policy: str
) -> None:
    """--keep-namespaces on an existing cluster: the failed test's namespace (and with
    `always`, the passed one's) stays, labelled so that the session's sweep leaves it too,
    with the kubectl commands and the witness record written beside the report."""
    run = inner_run(
        tmp_path,
        KEPT_AND_PASSING,
        "--cluster=existing",
        f"--kubeconfig={cluster.kubeconfig}",
        f"--keep-namespaces={policy}",
        "--report-dir=out",
    )
    output, _ = run.communicate(timeout=120)
    core = client.CoreV1Api(k8s)
    failed, passed = ((tmp_path / f).read_text() for f in ("namespace.txt", "passed.txt"))
    try:
        assert run.returncode == 1, output
        kept = core.read_namespace(failed)
        assert kept.metadata.labels[KEPT_LABEL] == "true"
        assert f"namespace {failed} kept (--keep-namespaces)" in output
        readme = (tmp_path / "out" / "kept" / failed / "README.txt").read_text()
        assert f"--namespace {failed} get releases" in readme
        assert (tmp_path / "out" / "kept" / failed / "witness.txt").exists()
        if policy == "always":
            assert KEPT_LABEL in core.read_namespace(passed).metadata.labels
        else:
            wait_until(lambda: namespace_deleted(core, passed), 30, f"{passed} to be deleted")
    finally:
        for name in (failed, passed):
            delete_namespace(core, name)


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_an_interrupted_run_leaves_no_control_plane_process_nor_temporary_files(
    tmp_path: Path, how: signal.Signals
) -> None:
    """What the run keeps on disk is in pytest's base temp directory (pytest removes old ones):
    none of it, API client credentials included, in the system temp directory."""
    system_temp = tmp_path / "system-temp"
    system_temp.mkdir()
    run = inner_run(
        tmp_path,
        BLOCKING_TEST,
        "--cluster=local",
        "-s",
        f"--basetemp={tmp_path / 'base'}",
        env={**os.environ, "TMPDIR": str(system_temp)},
    )
    pids_file = tmp_path / "pids.json"
    try:
        wait_until(pids_file.exists, 120, "the inner run's control plane")
        pids = json.loads(pids_file.read_text())
        assert pids and all(map(pid_running, pids))
        run.send_signal(how)
        signalled = time.monotonic()
        run.communicate(timeout=EXIT_TIMEOUT)
        print(f"the run exited {time.monotonic() - signalled:.2f} s after {how.name}")
        took = wait_until(
            lambda: not any(map(pid_running, pids)), 30, "the control plane processes to exit"
        )
        print(f"all {len(pids)} children gone {took:.2f} s after the run ended ({how.name})")
        # the port reservations are the machine's, not the run's (conformance.clusters.ports)
        left = [p.name for p in system_temp.iterdir() if p.name != reservations().name]
        assert left == [], f"left in the system temp directory after {how.name}"
    finally:
        run.kill()
        run.wait()


def test_sweep_removes_what_a_crashed_run_left(
    tmp_path: Path, cluster: Cluster, k8s: client.ApiClient
) -> None:
    """A namespace labelled with a run ID is swept when that run's session ends."""
    core = client.CoreV1Api(k8s)
    core.create_namespace(
        {"metadata": {"name": "left-by-a-crash", "labels": {RUN_LABEL: "crashed-run"}}}
    )
    sweep_namespaces(cluster, "crashed-run")
    assert namespace_deleted(core, "left-by-a-crash")
