"""`kubectl convoy` run for real: kubectl finds kubectl-convoy on PATH and it sends the requests.

SYNC-10 (`kubectl convoy release sync NAME` performs the POST) and FORCE-6 (`--force` performs
the forced POST), against the local control plane, and the exit codes scripts rely on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.clusters import binaries
from conformance.clusters.base import Cluster
from conformance.clusters.ports import reserve_port
from convoy.api import Annotation
from convoy.kubectl_plugin import EXIT_API_ERROR, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE
from tests.subresources.support import annotations

Obj = dict[str, Any]
#: The venv's bin holds the console script kubectl-convoy (pip install -e).
VENV_BIN = Path(sys.executable).parent
RENDER_REF = "sha256:" + "cd" * 32


@pytest.fixture(scope="module")
def kubectl() -> Path:
    return binaries.resolve().kubectl


@pytest.fixture
def kubeconfig_in_namespace(cluster: Cluster, namespace: str, tmp_path: Path) -> Path:
    """The admin kubeconfig with the test's namespace as the context's namespace."""
    document = yaml.safe_load(cluster.kubeconfig.read_text())
    for context in document["contexts"]:
        context["context"]["namespace"] = namespace
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture
def run(kubectl: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`kubectl convoy ARGS...` with kubectl-convoy on PATH, as a user's shell would run it."""
    if not (VENV_BIN / "kubectl-convoy").exists():
        pytest.fail(f"no kubectl-convoy in {VENV_BIN}: run pip install -e '.[dev]'")

    def convoy(*args: str, kubeconfig: Path, stdin: str | None = None):
        env = {
            **os.environ,
            "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
            "KUBECONFIG": str(kubeconfig),
        }
        argv = [str(kubectl), "convoy", *args]
        done = subprocess.run(
            argv, env=env, input=stdin, capture_output=True, text=True, timeout=120
        )
        print(f"$ kubectl convoy {' '.join(args)} -> {done.returncode}\n{done.stdout}{done.stderr}")
        return done

    return convoy


def test_sync_force_sends_the_forced_post(
    run: Callable[..., subprocess.CompletedProcess[str]],
    kubeconfig_in_namespace: Path,
    release: str,
    read_release: Callable[[str], Obj],
) -> None:
    """FORCE-6, with the namespace of the context of $KUBECONFIG, as kubectl resolves it."""
    done = run("release", "sync", release, "--force", kubeconfig=kubeconfig_in_namespace)
    assert done.returncode == EXIT_OK, done.stderr
    written = annotations(read_release(release))
    at = written[Annotation.SYNC_REQUESTED_AT]
    assert written[Annotation.SYNC_FORCE_REQUESTED_AT] == at
    assert done.stdout == f"release.convoy.kumodo.io/{release} forced sync requested at {at}\n"


def test_sync_sends_the_post(
    run: Callable[..., subprocess.CompletedProcess[str]],
    cluster: Cluster,
    namespace: str,
    release: str,
    read_release: Callable[[str], Obj],
) -> None:
    """SYNC-10, with --kubeconfig and -n: sync-requested-at only, nothing forced."""
    args = ("release", "sync", release, "-n", namespace, "--kubeconfig", str(cluster.kubeconfig))
    done = run(*args, kubeconfig=Path("/nonexistent"))
    assert done.returncode == EXIT_OK, done.stderr
    written = annotations(read_release(release))
    assert Annotation.SYNC_FORCE_REQUESTED_AT not in written
    assert written[Annotation.SYNC_REQUESTED_AT] in done.stdout


def test_pin_mutations_and_lifecycle_write_their_annotations(
    run: Callable[..., subprocess.CompletedProcess[str]],
    kubeconfig_in_namespace: Path,
    release: str,
    read_release: Callable[[str], Obj],
    tmp_path: Path,
) -> None:
    def convoy(*args: str, stdin: str | None = None) -> dict[str, str]:
        done = run("release", *args, kubeconfig=kubeconfig_in_namespace, stdin=stdin)
        assert done.returncode == EXIT_OK, done.stderr
        return annotations(read_release(release))

    assert convoy("pin", release, RENDER_REF)[Annotation.PIN] == RENDER_REF
    assert Annotation.PIN not in convoy("unpin", release)
    mutations = (
        "- target: {apiVersion: v1, kind: ConfigMap, name: content}\n  patch: {data: {a: b}}\n"
    )
    written = convoy("mutations", release, "--file", "-", stdin=mutations)
    assert yaml.safe_load(written[Annotation.MUTATIONS]) == yaml.safe_load(mutations)
    lifecycle = tmp_path / "lifecycle.json"
    lifecycle.write_text('{"postApply": []}')
    assert convoy("lifecycle", release, "-f", str(lifecycle))[Annotation.LIFECYCLE] == (
        '{"postApply":[]}'
    )
    assert Annotation.LIFECYCLE not in convoy("lifecycle", release, "--clear")


def test_an_unknown_release_exits_1_with_the_api_error(
    run: Callable[..., subprocess.CompletedProcess[str]],
    kubeconfig_in_namespace: Path,
    release: str,
) -> None:
    done = run("release", "sync", "missing", kubeconfig=kubeconfig_in_namespace)
    assert done.returncode == EXIT_API_ERROR
    assert done.stderr == (
        'Error from server (NotFound): releases.convoy.kumodo.io "missing" not found\n'
    )


def test_an_invalid_body_exits_1_saying_what_is_wrong(
    run: Callable[..., subprocess.CompletedProcess[str]],
    kubeconfig_in_namespace: Path,
    release: str,
) -> None:
    done = run("release", "pin", release, "sha256:short", kubeconfig=kubeconfig_in_namespace)
    assert done.returncode == EXIT_API_ERROR
    assert "Error from server (BadRequest)" in done.stderr
    assert "64 lowercase hex digits" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("release", "sync"),
        ("release", "frobnicate", "app"),
        ("release", "mutations", "app"),
        ("release", "mutations", "app", "--file", "x.json", "--clear"),
        ("release", "lifecycle", "app", "--file", "/nonexistent.json"),
    ],
)
def test_bad_usage_exits_2(
    run: Callable[..., subprocess.CompletedProcess[str]], cluster: Cluster, args: tuple[str, ...]
) -> None:
    done = run(*args, kubeconfig=cluster.kubeconfig)
    assert done.returncode == EXIT_USAGE
    assert done.stderr


def test_an_unreachable_cluster_exits_3(
    run: Callable[..., subprocess.CompletedProcess[str]], cluster: Cluster, tmp_path: Path
) -> None:
    document = yaml.safe_load(cluster.kubeconfig.read_text())
    document["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{reserve_port()}"
    closed = tmp_path / "closed.kubeconfig"
    closed.write_text(yaml.safe_dump(document))
    done = run("release", "sync", "app", kubeconfig=closed)
    assert done.returncode == EXIT_UNREACHABLE
    assert "cannot reach" in done.stderr
    missing = run("release", "sync", "app", kubeconfig=tmp_path / "missing")
    assert missing.returncode == EXIT_UNREACHABLE


def test_help_documents_the_exit_codes(
    run: Callable[..., subprocess.CompletedProcess[str]], cluster: Cluster
) -> None:
    done = run("release", "sync", "--help", kubeconfig=cluster.kubeconfig)
    assert done.returncode == EXIT_OK
    for code in (EXIT_OK, EXIT_API_ERROR, EXIT_USAGE, EXIT_UNREACHABLE):
        assert f"\n  {code}  " in done.stdout
