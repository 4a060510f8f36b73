"""Provider choice, binary resolution and naming: the parts of providers that need no cluster."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.clusters import binaries
from conformance.clusters.select import choose
from conformance.harness.namespaces import namespace_name

KUBERNETES_GO_MOD = """
module k8s.io/kubernetes

go 1.26.0

require (
\tgithub.com/spf13/cobra v1.10.0
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/sample-cli-plugin => ./staging/src/k8s.io/sample-cli-plugin
)
"""


def test_only_required_staging_modules_are_replaced() -> None:
    assert binaries.staging_modules(KUBERNETES_GO_MOD) == ["k8s.io/api", "k8s.io/client-go"]
    assert binaries.go_directive(KUBERNETES_GO_MOD) == "1.26.0"


def test_the_wrapper_module_pins_each_staging_module_to_its_release() -> None:
    text = binaries.wrapper_go_mod(
        "kube-build", "k8s.io/kubernetes v1.36.3", "1.26.0", {"k8s.io/api": "v0.36.3"}
    )
    assert "require k8s.io/kubernetes v1.36.3" in text
    assert "\tk8s.io/api => k8s.io/api v0.36.3" in text
    assert "go 1.26.0" in text


def executable(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


@pytest.fixture
def tools_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH that holds only what a test puts there."""
    monkeypatch.setenv("PATH", str(tmp_path))
    return tmp_path


def test_auto_without_kind_on_path_is_local(tools_dir: Path) -> None:
    choice = choose("auto", kubeconfig=None, kind_image=None)
    assert (choice.provider, choice.reason) == ("local", "kind is not on PATH")


def test_auto_is_local_when_docker_cannot_run_privileged(tools_dir: Path) -> None:
    executable(tools_dir, "kind", "exit 0")
    executable(tools_dir, "docker", "echo 'privileged mode is not permitted' >&2; exit 125")
    choice = choose("auto", kubeconfig=None, kind_image="kindest/node:v1.36.1")
    assert choice.provider == "local"
    assert "privileged mode is not permitted" in choice.reason


def test_auto_is_kind_when_docker_runs_the_node_image_privileged(tools_dir: Path) -> None:
    executable(tools_dir, "kind", "exit 0")
    executable(tools_dir, "docker", f'echo "$@" > {tools_dir}/docker-args')
    choice = choose("auto", kubeconfig=None, kind_image="kindest/node:v1.36.1")
    assert choice.provider == "kind"
    args = (tools_dir / "docker-args").read_text().split()
    assert args == ["run", "--rm", "--privileged", "--entrypoint", "true", "kindest/node:v1.36.1"]


def test_an_explicit_provider_is_taken_as_is(tools_dir: Path) -> None:
    assert choose("local", kubeconfig=None, kind_image=None).provider == "local"
    with pytest.raises(ValueError, match="--kubeconfig"):
        choose("existing", kubeconfig=None, kind_image=None)


def test_envtest_assets_are_preferred_and_completed_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """setup-envtest ships etcd, kube-apiserver and kubectl, but no kube-controller-manager."""
    assets, cache = tmp_path / "assets", tmp_path / "cache"
    assets.mkdir()
    for name in ("etcd", "kube-apiserver", "kubectl"):
        executable(assets, name, "exit 0")
    cached = cache / "convoy-conformance" / "kubernetes-v1.36.3"
    cached.mkdir(parents=True)
    for name in binaries.KUBE_COMMANDS:
        executable(cached, name, "exit 0")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    found = binaries.resolve("1.36.3", "3.6.16")
    assert found.kube_apiserver == assets / "kube-apiserver"
    assert found.etcd == assets / "etcd"
    assert found.kube_controller_manager == cached / "kube-controller-manager"


@pytest.mark.parametrize("test_name", ["test_x", "test_Some_Very[param-1]" * 4, "test_" + "a" * 80])
def test_namespace_names_are_valid_dns_labels(test_name: str) -> None:
    name = namespace_name(test_name)
    assert len(name) <= 63
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name)
