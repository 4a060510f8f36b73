"""Unit tests of the kind path: the node images it picks and the commands it issues.

No Docker and no kind here: a fake `kind` script records its argv, and the installer runs its
commands through a recording runner. The overlay it writes is rendered by the real kubectl's
kustomize, so what would reach the cluster is checked too.
"""

from __future__ import annotations

import datetime as dt
import re
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance import resources
from conformance.clusters import binaries
from conformance.clusters.base import NoCallback, callback_address
from conformance.clusters.existing import ExistingCluster
from conformance.clusters.kind import KindProvider, default_node_image, ipv4_gateway
from conformance.install import kind_commands, on_kind
from conformance.versions import KindError, kind_versions, parse_versions
from convoyapi import API_SERVICE

DIGEST = "sha256:" + "a" * 64


# -- node images -----------------------------------------------------------------------------


def test_the_versions_file_pins_three_minors_by_digest() -> None:
    versions = kind_versions()
    assert re.fullmatch(r"v\d+\.\d+\.\d+", versions.version)
    assert len(versions.images) == 3
    newest = tuple(map(int, versions.minors[0].split(".")))
    assert [tuple(map(int, m.split("."))) for m in versions.minors] == [
        newest,
        (newest[0], newest[1] - 1),
        (newest[0], newest[1] - 2),
    ]
    for minor, image in versions.images.items():
        assert re.fullmatch(rf"kindest/node:v{re.escape(minor)}\.\d+@sha256:[0-9a-f]{{64}}", image)


def test_the_default_is_the_newest_minor() -> None:
    versions = kind_versions()
    assert default_node_image() == versions.images[versions.minors[0]]
    assert versions.node_image() == default_node_image()


@pytest.mark.parametrize("asked", ["1.36", "v1.36", "1.36.99", "v1.36.4"])
def test_a_minor_picks_its_image(asked: str) -> None:
    assert kind_versions().node_image(asked) == kind_versions().images["1.36"]


def test_an_unknown_minor_says_which_there_are() -> None:
    with pytest.raises(KindError, match=r"no kind node image for Kubernetes 1\.20 .*1\.37"):
        kind_versions().node_image("1.20")


@pytest.mark.parametrize(
    ("images", "problem"),
    [
        ({"1.37": "kindest/node:v1.37.0"}, "not kindest/node"),
        ({"1.37": f"kindest/node:v1.36.4@{DIGEST}"}, "is not Kubernetes 1.37"),
        ({"1.37": f"kindest/node:v1.37.0@sha256:{'a' * 63}"}, "not kindest/node"),
        ({"1.37": f"example.com/node:v1.37.0@{DIGEST}"}, "not kindest/node"),
        ({}, "empty"),
    ],
)
def test_the_versions_file_is_checked(images: dict[str, str], problem: str) -> None:
    with pytest.raises(KindError, match=problem):
        parse_versions({"kind": {"version": "v0.33.0", "images": images}})


def test_the_kind_version_is_checked() -> None:
    with pytest.raises(KindError, match=r"kind\.version"):
        parse_versions({"kind": {"version": "0.33", "images": {"1.37": f"x@{DIGEST}"}}})


# -- the provider's cluster commands, with a fake kind ---------------------------------------

FAKE_KIND = """#!/usr/bin/env bash
echo "$*" >> "{log}"
case "$1 $2" in
  "get clusters") cat "{clusters}" 2>/dev/null || true ;;
  "create cluster")
    for arg in "$@"; do case "$arg" in --kubeconfig=*) config="${{arg#--kubeconfig=}}";; esac; done
    printf '%s' "$KUBECONFIG_TEXT" > "$config" ;;
  "export kubeconfig") printf '%s' "$KUBECONFIG_TEXT" > "$6" ;;
esac
"""
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: kind, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: kind, user: {token: x}}]
contexts: [{name: kind, context: {cluster: kind, user: kind}}]
current-context: kind
"""


@pytest.fixture
def fake_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """(kind script, argv log, file of existing clusters); runs in tmp_path (.pytest-kind/)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KUBECONFIG_TEXT", KUBECONFIG)
    log, clusters = tmp_path / "kind.log", tmp_path / "clusters"
    script = tmp_path / "kind"
    script.write_text(FAKE_KIND.format(log=log, clusters=clusters))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, log, clusters


def issued(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_a_new_cluster_is_created_with_the_default_node_image(fake_kind) -> None:
    kind, log, _ = fake_kind
    provider = KindProvider("convoy", image=None, kind_bin=str(kind), kubectl_bin="/bin/true")
    provider.start()
    kubeconfig = Path(".pytest-kind/convoy/kubeconfig").resolve()
    assert provider.kubeconfig.resolve() == kubeconfig
    create = [line for line in issued(log) if line.startswith("create cluster")]
    assert create == [
        f"create cluster --name=convoy --kubeconfig={provider.kubeconfig} "
        f"--image={default_node_image()}"
    ]


def test_an_explicit_image_or_version_wins(fake_kind) -> None:
    kind, _, _ = fake_kind
    explicit = f"kindest/node:v1.35.8@{DIGEST}"
    provider = KindProvider("c", image=explicit, kind_bin=str(kind), kubectl_bin="/bin/true")
    assert provider.image == explicit
    by_version = KindProvider(
        "c", image=None, kind_bin=str(kind), kubectl_bin="/bin/true", kube_version="1.35"
    )
    assert by_version.image == kind_versions().images["1.35"]


def test_a_cluster_made_elsewhere_is_reused_with_its_kubeconfig(fake_kind) -> None:
    """helm/kind-action made the cluster: kind exports its kubeconfig, nothing is created."""
    kind, log, clusters = fake_kind
    clusters.write_text("convoy\n")
    provider = KindProvider("convoy", image=None, kind_bin=str(kind), kubectl_bin="/bin/true")
    provider.start()
    lines = issued(log)
    assert f"export kubeconfig --name convoy --kubeconfig {provider.kubeconfig}" in lines
    assert not [line for line in lines if line.startswith("create")]
    assert "current-context: kind" in provider.kubeconfig.read_text()


def test_stop_deletes_unless_kept(fake_kind) -> None:
    kind, log, _ = fake_kind
    KindProvider("a", image=None, kind_bin=str(kind), kubectl_bin="/bin/true", keep=True).stop()
    assert not [line for line in issued(log) if line.startswith("delete")]
    KindProvider("a", image=None, kind_bin=str(kind), kubectl_bin="/bin/true").stop()
    assert [line for line in issued(log) if line.startswith("delete")] == [
        "delete cluster --name=a --kubeconfig=.pytest-kind/a/kubeconfig"
    ]


def test_kind_missing_from_path_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(KindError, match="kind is not on PATH"):
        KindProvider("a", image=None)


# -- the address the witness serves on -------------------------------------------------------

#: `docker network inspect kind -f '{{json .IPAM.Config}}'` as Docker 28 and 29 print it: kind's
#: IPv6 ULA subnet first, without a gateway (29 prints an empty one).
DOCKER_28 = (
    '[{"Subnet":"fc00:f853:ccd:e793::/64"},{"Subnet":"172.18.0.0/16","Gateway":"172.18.0.1"}]'
)
DOCKER_29 = (
    '[{"Subnet":"fc00:f853:ccd:e793::/64","Gateway":""},'
    '{"Subnet":"172.19.0.0/16","Gateway":"172.19.0.1"}]'
)


@pytest.mark.parametrize(
    ("config", "gateway"),
    [
        (DOCKER_28, "172.18.0.1"),
        (DOCKER_29, "172.19.0.1"),
        ('[{"Subnet":"172.20.0.0/16"}]', "172.20.0.1"),
        ('[{"Subnet":"fc00::/64","Gateway":"fc00::1"}]', None),
        ("", None),
        ("invalid IP", None),
    ],
    ids=["docker-28", "docker-29", "no-gateway", "ipv6-only", "empty", "garbage"],
)
def test_the_host_is_the_ipv4_gateway_of_the_kind_network(config: str, gateway: str) -> None:
    assert ipv4_gateway(config) == gateway


def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    (tmp_path / "bin").mkdir()
    docker = tmp_path / "bin" / "docker"
    docker.write_text(f"#!/bin/sh\n{script}\n")
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")


def test_the_kind_provider_calls_back_on_the_gateway_docker_reports(
    fake_kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_docker(tmp_path, monkeypatch, f"echo '{DOCKER_29}'")
    provider = KindProvider("c", image=None, kind_bin=str(fake_kind[0]), kubectl_bin="/bin/true")
    assert callback_address(provider).host == "172.19.0.1"
    given = KindProvider(
        "c", image=None, kind_bin=str(fake_kind[0]), kubectl_bin="/bin/true", callback_host="h"
    )
    assert callback_address(given).host == "h"


def test_a_cluster_the_suite_made_without_a_callback_is_an_error_never_a_skip(
    fake_kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_docker(tmp_path, monkeypatch, "echo 'Error: No such network: kind' >&2; exit 1")
    provider = KindProvider("c", image=None, kind_bin=str(fake_kind[0]), kubectl_bin="/bin/true")
    with pytest.raises(NoCallback, match="--callback-host"):
        callback_address(provider)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    assert callback_address(ExistingCluster(kubeconfig)) is None


# -- the installer's commands ----------------------------------------------------------------


class Recorder:
    """A runner that records argv, answers 0, and fails the commands it is told to."""

    def __init__(self, fail: str | None = None) -> None:
        self.argvs: list[list[str]] = []
        self.fail = fail
        self.overlays: list[dict[str, Any]] = []

    def __call__(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        self.argvs.append(argv)
        if "-k" in argv:
            directory = Path(argv[argv.index("-k") + 1])
            self.overlays.append(yaml.safe_load((directory / "kustomization.yaml").read_text()))
        failed = self.fail is not None and self.fail in " ".join(argv)
        return subprocess.CompletedProcess(
            argv, 1 if failed else 0, "out\n", "boom" if failed else ""
        )


def installer(runner: Recorder, tmp_path: Path) -> on_kind.Installer:
    return on_kind.Installer(
        kubectl="kubectl",
        kubeconfig=Path("/k/config"),
        kind="kind",
        cluster="convoy",
        diagnostics_dir=tmp_path / "diagnostics",
        runner=runner,
    )


def test_image_tags_are_unique_and_valid() -> None:
    now = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert kind_commands.image_tag(now, "abc123") == "conformance-20260102t030405-abc123"
    tags = {kind_commands.image_tag() for _ in range(50)}
    assert len(tags) == 50
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,127}", t) for t in tags)


def test_a_failed_rollout_collects_diagnostics_and_says_where(tmp_path: Path) -> None:
    runner = Recorder(fail="rollout")
    with pytest.raises(on_kind.InstallError) as raised:
        installer(runner, tmp_path).install(image="convoy-controller:t")
    message = str(raised.value)
    assert "the rollout of deployment/convoy-controller failed (exit 1)" in message
    assert f"diagnostics: {tmp_path / 'diagnostics'}" in message
    assert [
        "kind",
        "export",
        "logs",
        "--name",
        "convoy",
        str(tmp_path / "diagnostics/kind-logs"),
    ] in (runner.argvs)
    written = sorted(p.name for p in (tmp_path / "diagnostics").iterdir())
    assert written == [
        "apiservices.yaml",
        "controller-previous.log",
        "controller.log",
        "crds.txt",
        "describe-controller.txt",
        "events.txt",
        "nodes.txt",
        "pods.txt",
    ]
    assert (
        "--selector=app.kubernetes.io/name=convoy"
        in (tmp_path / "diagnostics/controller.log").read_text()
    )
    # nothing after the failed step: no APIService wait
    assert not [a for a in runner.argvs if "wait" in a and "--for=condition=Available" in a]


def test_diagnostics_keep_going_when_a_command_cannot_run(tmp_path: Path) -> None:
    def runner(argv: list[str]) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError(argv[0])

    target = installer(Recorder(), tmp_path)
    target.runner = runner
    where = target.collect_diagnostics(tmp_path / "d")
    assert "could not run" in (where / "events.txt").read_text()


def test_uninstall_deletes_the_apiservice_first_and_keeps_the_crds() -> None:
    argvs = kind_commands.uninstall_argvs("kubectl", Path("/k"))
    assert argvs[0][-1] == f"apiservice/{API_SERVICE}"
    flat = " ".join(" ".join(a) for a in argvs)
    assert "customresourcedefinition" not in flat and "crd" not in flat.split()
    assert argvs[-1][-1] == "namespace/convoy-system"


def test_the_in_cluster_controller_restarts_by_scaling(tmp_path: Path) -> None:
    runner = Recorder()
    controller = on_kind.ReferenceDeployment(installer(runner, tmp_path), resync=30)
    controller.start()
    first = len(runner.argvs)
    assert runner.argvs[0][:2] == ["docker", "build"]
    controller.restart()
    after = [argv[2:4] for argv in runner.argvs[first:]]
    assert after == [
        ["scale", "deployment/convoy-controller"],
        ["wait", "--for=delete"],
        ["scale", "deployment/convoy-controller"],
        ["rollout", "status"],
        ["wait", "--for=condition=Available"],
    ]
    assert (
        runner.argvs[first][-1] == "--replicas=0" and runner.argvs[first + 2][-1] == "--replicas=1"
    )
    assert not [a for a in runner.argvs[first:] if a[0] == "docker"], "a restart builds nothing"


def test_the_in_cluster_controller_counts_its_start_from_before_the_pod_runs(
    tmp_path: Path,
) -> None:
    """The restarted pod's initial list reconciles before it is ready: BACK-5's resync clock
    must find that reconcile after `started_at`."""
    scaled_up: list[float] = []

    class Timed(Recorder):
        def __call__(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
            if argv[-1] == "--replicas=1":
                scaled_up.append(time.monotonic())
            return super().__call__(argv)

    controller = on_kind.ReferenceDeployment(installer(Timed(), tmp_path), resync=30)
    controller.start()
    controller.restart()
    assert controller.started_at <= scaled_up[-1]


def test_controller_args_replace_only_the_resync() -> None:
    base = on_kind.deployment_args()
    assert not any(arg.startswith("--resync") for arg in base)  # shipped: the default
    assert on_kind.controller_args(base) == base
    assert on_kind.controller_args(base, resync="5s") == ["--resync=5s", *base]
    with_flag = ["--resync=2m", *base]
    assert on_kind.controller_args(with_flag, resync="5s") == ["--resync=5s", *base]


# -- the overlay, rendered by kustomize ------------------------------------------------------


@pytest.fixture(scope="module")
def kustomize() -> Any:
    kubectl = binaries.resolve().kubectl

    def render(directory: Path) -> list[dict[str, Any]]:
        out = subprocess.run(
            [str(kubectl), "kustomize", str(directory)], capture_output=True, text=True, check=True
        ).stdout
        return [doc for doc in yaml.safe_load_all(out) if doc]

    return render


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind]
    return found


def test_the_overlay_sets_image_certificate_cabundle_and_args(kustomize, tmp_path: Path) -> None:
    import base64

    cert = on_kind.serving_certificate()
    overlay = on_kind.write_overlay(
        tmp_path / "overlay",
        image="convoy-controller:conformance-x",
        cert=cert,
        args=["--resync=5s", "--health-port=8081", "--metrics-port=8080"],
        mutant="force_lasts_two",
    )
    objects = kustomize(overlay)
    base = kustomize(resources.MANIFESTS)
    assert len(objects) == len(base) + 1  # + the Secret
    container = by_kind(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "convoy-controller:conformance-x"
    assert container["args"][0] == "--resync=5s"
    assert container["command"] == ["python", "-m", "mutants"]
    assert container["env"] == [{"name": "CONVOY_MUTANT", "value": "force_lasts_two"}]
    api = by_kind(objects, "APIService")
    assert base64.b64decode(api["spec"]["caBundle"]) == cert.ca_pem
    secret = by_kind(objects, "Secret")
    assert secret["metadata"] == {
        "name": "convoy-subresources-serving-cert",
        "namespace": "convoy-system",
        "labels": {"app.kubernetes.io/name": "convoy", "app.kubernetes.io/component": "controller"},
    }
    assert base64.b64decode(secret["data"]["tls.crt"]) == cert.cert_pem
    assert (overlay / "serving-cert.yaml").stat().st_mode & 0o077 == 0


def test_the_base_alone_has_no_cabundle_and_the_placeholder_image(kustomize) -> None:
    objects = kustomize(resources.MANIFESTS)
    assert "caBundle" not in by_kind(objects, "APIService")["spec"]
    container = by_kind(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "convoy-controller:dev"
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}
    assert names == {
        "releases.convoy.kumodo.io",
        "clusters.convoy.kumodo.io",
        "releaseinventories.convoy.kumodo.io",
    }
