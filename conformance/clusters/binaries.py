"""Find or build the real binaries: etcd, kube-apiserver, kube-controller-manager, kubectl.

Order: $KUBEBUILDER_ASSETS (envtest's convention), then a cache under ~/.cache keyed by version,
then a build from Go modules with the machine's Go. Building k8s.io/kubernetes as a dependency
needs a wrapper module that replaces each staging module (required at v0.0.0) with its
published v0.<minor>.<patch>; etcd's server module likewise carries relative replaces.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from conformance.versions import default_versions

log = logging.getLogger(__name__)

KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kubectl")
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
ETCD_SIBLINGS = ("api/v3", "client/pkg/v3", "client/v3", "pkg/v3")


class BinariesError(RuntimeError):
    """The binaries could not be found or built; the message says what to do."""


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kubectl: Path
    kubernetes_version: str


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "convoy-conformance"


def resolve(kubernetes_version: str | None = None, etcd_version: str | None = None) -> Binaries:
    """Binaries for the requested versions, building what is missing (minutes, once)."""
    defaults = default_versions()
    kube = (kubernetes_version or defaults["kubernetes"]).lstrip("v")
    etcd = (etcd_version or defaults["etcd"]).lstrip("v")
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    kube_dir = cache_root() / f"kubernetes-v{kube}"
    etcd_dir = cache_root() / f"etcd-v{etcd}"
    found = _from_assets(Path(assets)) if assets else {}
    if not all(name in found for name in KUBE_COMMANDS):
        ensure_built(kube_dir, KUBE_COMMANDS, lambda out: build_kubernetes(kube, out))
    if "etcd" not in found:
        ensure_built(etcd_dir, ("etcd",), lambda out: build_etcd(etcd, out))

    def pick(name: str, directory: Path) -> Path:
        return found.get(name) or directory / name

    return Binaries(
        etcd=pick("etcd", etcd_dir),
        kube_apiserver=pick("kube-apiserver", kube_dir),
        kube_controller_manager=pick("kube-controller-manager", kube_dir),
        kubectl=pick("kubectl", kube_dir),
        kubernetes_version=f"v{kube}",
    )


def _from_assets(directory: Path) -> dict[str, Path]:
    """What an envtest assets directory offers (it usually lacks kube-controller-manager)."""
    names = ("etcd", *KUBE_COMMANDS)
    return {name: directory / name for name in names if (directory / name).is_file()}


def ensure_built(directory: Path, names: tuple[str, ...], build) -> None:
    """Build into a temporary sibling and rename, so a cache directory is always complete."""
    if all((directory / name).is_file() for name in names):
        return
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=directory.name + ".", dir=directory.parent))
    try:
        build(staging)
        shutil.rmtree(directory, ignore_errors=True)
        staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _go(args: list[str], workdir: Path) -> None:
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
    env.setdefault("GOTOOLCHAIN", "local")
    started = time.monotonic()
    proc = subprocess.run(["go", *args], cwd=workdir, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise BinariesError(f"`go {' '.join(args)}` failed in {workdir}:\n{tail}")
    log.info("go %s: %.0f s", args[0], time.monotonic() - started)


def _module_download(module: str, version: str, workdir: Path) -> dict[str, str]:
    """`go mod download -json` of module@version, through the module proxy."""
    env = {**os.environ, "GOTOOLCHAIN": os.environ.get("GOTOOLCHAIN", "local")}
    proc = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise BinariesError(f"cannot download {module}@{version}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def _module_file(module: str, version: str, workdir: Path) -> str:
    """The go.mod of module@version."""
    found = _module_download(module, version, workdir).get("GoMod")
    if not found:
        raise BinariesError(f"no go.mod for {module}@{version}")
    return Path(found).read_text()


def module_source(module: str, version: str) -> Path:
    """The source tree of module@version in the module cache (files besides the Go code:
    kind's node image files, Kubernetes' pause container)."""
    with tempfile.TemporaryDirectory(prefix="go-download-") as tmp:
        return Path(_module_download(module, version, Path(tmp))["Dir"])


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """Staging modules that k8s.io/kubernetes requires at v0.0.0 (each needs a replace)."""
    required = set(re.findall(r"^\s+(k8s\.io/[\w.-]+) v0\.0\.0\b", kubernetes_go_mod, re.M))
    replaced = re.findall(r"^\s+(k8s\.io/[\w.-]+) => \./staging/", kubernetes_go_mod, re.M)
    return [module for module in replaced if module in required]


def go_directive(go_mod: str) -> str:
    """The `go` line of a module file: the wrapper must ask for at least the same."""
    match = re.search(r"^go (\S+)", go_mod, re.M)
    return match.group(1) if match else "1.24"


def wrapper_go_mod(name: str, requirement: str, go: str, replaces: dict[str, str]) -> str:
    lines = [f"module {name}", "", f"go {go}", "", f"require {requirement}", "", "replace ("]
    lines += [f"\t{module} => {module} {version}" for module, version in replaces.items()]
    return "\n".join([*lines, ")", ""])


def _write_wrapper(workdir: Path, go_mod: str, packages: list[str]) -> None:
    (workdir / "go.mod").write_text(go_mod)
    imports = "\n".join(f'\t_ "{package}"' for package in packages)
    (workdir / "tools.go").write_text(
        f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"
    )


def build_kubernetes(version: str, out: Path, commands: tuple[str, ...] = KUBE_COMMANDS) -> None:
    """Build Kubernetes' `commands` (by default the local provider's) at `version` into `out`."""
    minor, patch = version.split(".")[1:3]
    with tempfile.TemporaryDirectory(prefix="kube-build-") as tmp:
        workdir = Path(tmp)
        kube_mod = _module_file("k8s.io/kubernetes", f"v{version}", workdir)
        replaces = {m: f"v0.{minor}.{patch}" for m in staging_modules(kube_mod)}
        go_mod = wrapper_go_mod(
            "kube-build", f"k8s.io/kubernetes v{version}", go_directive(kube_mod), replaces
        )
        packages = [f"k8s.io/kubernetes/cmd/{name}" for name in commands]
        _write_wrapper(workdir, go_mod, packages)
        _go(["mod", "tidy"], workdir)
        ldflags = " ".join(
            f"-X k8s.io/component-base/version.{key}={value}"
            for key, value in {
                "gitVersion": f"v{version}",
                "gitMajor": "1",
                "gitMinor": minor,
                "gitTreeState": "clean",
            }.items()
        )
        _go(
            ["build", "-trimpath", "-ldflags", f"-s -w {ldflags}", "-o", f"{out}/", *packages],
            workdir,
        )


def build_etcd(version: str, out: Path) -> None:
    """Build etcd's server at `version` into `out`/etcd."""
    with tempfile.TemporaryDirectory(prefix="etcd-build-") as tmp:
        workdir = Path(tmp)
        etcd_mod = _module_file(ETCD_MODULE, f"v{version}", workdir)
        replaces = {f"go.etcd.io/etcd/{sibling}": f"v{version}" for sibling in ETCD_SIBLINGS}
        go_mod = wrapper_go_mod(
            "etcd-build", f"{ETCD_MODULE} v{version}", go_directive(etcd_mod), replaces
        )
        _write_wrapper(workdir, go_mod, [ETCD_MODULE])
        _go(["mod", "tidy"], workdir)
        _go(
            ["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "etcd"), ETCD_MODULE],
            workdir,
        )


def build_module_commands(
    module: str, version: str, packages: list[str], out: Path, tags: tuple[str, ...] = ()
) -> None:
    """Build `packages` of a module that needs no replaces (containerd, kind) into `out`."""
    with tempfile.TemporaryDirectory(prefix="go-build-") as tmp:
        workdir = Path(tmp)
        go = go_directive(_module_file(module, version, workdir))
        _write_wrapper(workdir, wrapper_go_mod("wrapper", f"{module} {version}", go, {}), packages)
        _go(["mod", "tidy"], workdir)
        flags = ["-tags", " ".join(tags)] if tags else []
        _go(
            ["build", "-trimpath", *flags, "-ldflags", "-s -w", "-o", f"{out}/", *packages], workdir
        )
