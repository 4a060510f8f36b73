"""The images the kind host builds, from Debian's packages and Go modules only.

The kind node image (`node_image`) follows kind's own base image (its files come from the kind
module at `kind.version`) with these differences: Debian bookworm, Kubernetes built from its Go
module, the control plane's images built here (`FROM scratch` and the binary; kube-proxy on the
node's base, which has iptables) and preloaded into the node's containerd, no kindnetd and no
CoreDNS (a static bridge CNI for the one node), and conformance.kindhost's entrypoint wrapper.
The controller's base image (`controller_base`) is Debian's Python with the project's
dependencies as wheels, so that the Dockerfile's `pip install .` runs without a network.

Each image's tag carries a digest of everything it is built from: a tag present in the engine
is a cache hit, so a warm run builds nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from conformance.clusters import binaries
from conformance.kindhost.engine import Engine, EngineError, run
from conformance.versions import kind_versions
from conformance.versions import read as read_versions

log = logging.getLogger("conformance")

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Bump when the recipe below changes in a way the versions do not show.
RECIPE = 1
NODE_PACKAGES = [
    "systemd",
    "systemd-sysv",
    "dbus",
    "conntrack",
    "iptables",
    "nftables",
    "iproute2",
    "ethtool",
    "util-linux",
    "mount",
    "kmod",
    "libseccomp2",
    "pigz",
    "e2fsprogs",
    "bash",
    "ca-certificates",
    "procps",
    "jq",
    "runc",
    "containernetworking-plugins",
]
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap", "ptp")
NODE_COMMANDS = ("kubelet", "kubeadm", "kube-scheduler", "kube-proxy")
CONTAINERD_MODULE = "github.com/containerd/containerd/v2"
CONTAINERD_COMMANDS = ("containerd", "containerd-shim-runc-v2", "ctr")
CONTAINERD_TAGS = ("no_btrfs", "no_devmapper", "no_zfs", "no_aufs")
KIND_MODULE = "sigs.k8s.io/kind"
#: The sandbox image kind's containerd configuration names.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
CONTROLLER_PACKAGES = ("python3", "python3-venv", "ca-certificates")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Versions:
    kubernetes: str
    etcd: str
    kind: str
    containerd: str
    debian: str

    def digest(self, *extra: bytes) -> str:
        hashed = hashlib.sha256(json.dumps({**asdict(self), "recipe": RECIPE}).encode())
        for part in extra:
            hashed.update(part)
        return hashed.hexdigest()[:12]


def versions() -> Versions:
    document = read_versions()
    return Versions(
        kubernetes=document["local"]["kubernetes"],
        etcd=document["local"]["etcd"],
        kind=kind_versions().version,
        containerd=document["kindhost"]["containerd"],
        debian=document["kindhost"]["debian"],
    )


def files_dir() -> Path:
    return Path(str(resources.files("conformance.kindhost").joinpath("files")))


def files_digest() -> bytes:
    return b"".join(path.read_bytes() for path in sorted(files_dir().iterdir()))


def node_image_name(found: Versions) -> str:
    return f"convoy/kind-node:v{found.kubernetes}-{found.digest(files_digest())}"


def dependencies() -> list[str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return [*project["build-system"]["requires"], *project["project"]["dependencies"]]


def controller_base_name(found: Versions) -> str:
    digest = found.digest(json.dumps(dependencies()).encode())
    return f"convoy/controller-base:{found.debian}-{digest}"


#: The node's etcd: the pinned image, and no fsync, as the local provider's. A test cluster loses
#: nothing that matters in a crash, while fsyncs on a shared host's disk stalled etcd up to 0.8 s
#: ("apply request took too long"), and every reconcile with it: retries and periodic
#: reconciles came late, past the timing tests' bands. kind's kubeadm config is v1beta4.
ETCD_PATCH = """kind: ClusterConfiguration
etcd:
  local:
    imageTag: "{tag}"
    extraArgs:
    - name: unsafe-no-fsync
      value: "true"
"""


def kind_config(found: Versions) -> dict:
    """The kind cluster on this node image: one node, made to work on such a host."""
    return {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        # no kindnetd here: the node image's static bridge (files/10-convoy.conflist)
        "networking": {"ipFamily": "ipv4", "disableDefaultCNI": True},
        # lowering oom_score_adj needs CAP_SYS_RESOURCE, which the node does not have
        "containerdConfigPatches": [
            '[plugins."io.containerd.grpc.v1.cri"]\n  restrict_oom_score_adj = true'
        ],
        "kubeadmConfigPatches": [
            "kind: KubeletConfiguration\nfailCgroupV1: false\n",
            # kind's own list is [preflight] (a patch replaces it); CoreDNS is not built here
            # and nothing the suite runs resolves names in the cluster
            "kind: InitConfiguration\nskipPhases: [preflight, addon/coredns]\n",
            ETCD_PATCH.format(tag=found.etcd),
        ],
    }


# -- building blocks --------------------------------------------------------------------------
def debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (never named in the repository)."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        for line in sources.read_text().splitlines():
            if line.startswith("URIs:"):
                return line.split()[1]
    for line in Path("/etc/apt/sources.list").read_text().splitlines():
        if line.startswith("deb ") and "security" not in line:
            return line.split()[1]
    raise EngineError("no Debian mirror in /etc/apt/sources.list*")


def debootstrap(root: Path, suite: str, packages: list[str]) -> None:
    started = time.monotonic()
    run(
        [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(packages)}",
            suite,
            str(root),
            debian_mirror(),
        ],
        f"debootstrap {suite}",
    )
    shutil.rmtree(root / "var/cache/apt/archives", ignore_errors=True)
    shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
    log.info("kindhost: debootstrap %s: %.0f s", suite, time.monotonic() - started)


def chroot(root: Path, script: str) -> None:
    run(["chroot", str(root), "/bin/sh", "-euc", script], "configuring the image in chroot")


def cached_build(name: str, commands: tuple[str, ...], build) -> Path:
    directory = binaries.cache_root() / name
    binaries.ensure_built(directory, commands, build)
    return directory


def node_binaries(found: Versions) -> dict[str, Path]:
    kube = cached_build(
        f"kubernetes-v{found.kubernetes}-node",
        NODE_COMMANDS,
        lambda out: binaries.build_kubernetes(found.kubernetes, out, NODE_COMMANDS),
    )
    containerd = cached_build(
        f"containerd-v{found.containerd}",
        CONTAINERD_COMMANDS,
        lambda out: binaries.build_module_commands(
            CONTAINERD_MODULE,
            f"v{found.containerd}",
            [f"{CONTAINERD_MODULE}/cmd/{name}" for name in CONTAINERD_COMMANDS],
            out,
            CONTAINERD_TAGS,
        ),
    )
    local = binaries.resolve(found.kubernetes, found.etcd)
    paths = {name: kube / name for name in NODE_COMMANDS}
    paths |= {name: containerd / name for name in CONTAINERD_COMMANDS}
    paths |= {
        "kube-apiserver": local.kube_apiserver,
        "kube-controller-manager": local.kube_controller_manager,
        "kubectl": local.kubectl,
        "etcd": local.etcd,
    }
    return paths


def kind_binary(found: Versions) -> Path:
    directory = cached_build(
        f"kind-{found.kind}",
        ("kind",),
        lambda out: binaries.build_module_commands(KIND_MODULE, found.kind, [KIND_MODULE], out),
    )
    return directory / "kind"


def build_pause(out: Path, kubernetes: str) -> Path:
    """Kubernetes' pause container, from the C source in its module."""
    source = binaries.module_source("k8s.io/kubernetes", f"v{kubernetes}")
    target = out / "pause"
    run(
        [
            "gcc",
            "-Os",
            "-static",
            "-DVERSION=convoy",
            "-o",
            str(target),
            str(source / "build/pause/linux/pause.c"),
        ],
        "compiling pause",
    )
    return target


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="convoy-kindhost-", dir=binaries.cache_root()) as tmp:
        yield Path(tmp)


def has_image(engine: Engine, name: str) -> bool:
    return engine.succeeds("image", "inspect", name)


def change_args(changes: list[str]) -> list[str]:
    """`--change` options of docker import and commit (Dockerfile instructions)."""
    return [arg for change in changes for arg in ("--change", change)]


def import_rootfs(engine: Engine, root: Path, name: str, changes: list[str]) -> None:
    """`docker import` of a directory tree (the engine builds no image from a registry's)."""
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    argv = engine.docker_argv("import", *change_args(changes))
    imported = subprocess.run(
        [*argv, "-", name], stdin=tar.stdout, capture_output=True, text=True, check=False
    )
    tar.wait()
    if imported.returncode != 0 or tar.returncode != 0:
        raise EngineError(f"importing {name}: {imported.stderr.strip()}")


def docker_build(engine: Engine, context: Path, dockerfile: str, name: str) -> None:
    (context / "Dockerfile").write_text(dockerfile)
    engine.docker("build", "--quiet", "--tag", name, str(context), what=f"building {name}")


# -- the node image ---------------------------------------------------------------------------
def node_image(engine: Engine, found: Versions | None = None) -> str:
    """The node image's name, built unless the engine has it."""
    found = found or versions()
    name = node_image_name(found)
    if has_image(engine, name):
        return name
    started = time.monotonic()
    with workdir() as work:
        paths = node_binaries(found)
        base = f"convoy/kind-node-base:{name.split(':')[1]}"
        root = work / "rootfs"
        debootstrap(root, found.debian, NODE_PACKAGES)
        lay_out_node(root, found, paths)
        import_rootfs(engine, root, f"{base}-rootfs", node_image_changes())
        shutil.rmtree(root)
        # systemd stops on SIGRTMIN+3; this dockerd takes no STOPSIGNAL in import or commit
        (work / "base").mkdir()
        docker_build(engine, work / "base", f"FROM {base}-rootfs\nSTOPSIGNAL SIGRTMIN+3\n", base)
        images = component_images(engine, work, found, paths, base)
        preload(engine, base, images, work, name)
        engine.docker(
            "image", "rm", base, f"{base}-rootfs", *images, what="removing the build's images"
        )
    log.info("kindhost: node image %s built in %.0f s", name, time.monotonic() - started)
    return name


def node_image_changes() -> list[str]:
    return [
        'ENTRYPOINT ["/usr/local/bin/convoy-entrypoint", "/usr/local/bin/entrypoint", '
        '"/sbin/init"]',
        "CMD []",
        "ENV container=docker",
    ]


def lay_out_node(root: Path, found: Versions, paths: dict[str, Path]) -> None:
    """kind's base image files and steps (images/base/Dockerfile of the kind module), the
    binaries, and this package's files."""
    kind_files = binaries.module_source(KIND_MODULE, found.kind) / "images/base/files"
    shutil.copytree(kind_files / "usr/local/bin", root / "usr/local/bin", dirs_exist_ok=True)
    shutil.copytree(kind_files / "kind", root / "kind", dirs_exist_ok=True)
    shutil.copytree(kind_files / "etc", root / "etc", dirs_exist_ok=True)
    for path in [*(root / "kind/bin").iterdir(), *(root / "usr/local/bin").iterdir()]:
        path.chmod(0o755)
    for name in CONTAINERD_COMMANDS:
        shutil.copy2(paths[name], root / "usr/local/bin" / name)
    for name in ("kubelet", "kubeadm", "kubectl"):
        shutil.copy2(paths[name], root / "usr/bin" / name)
    (root / "opt/cni/bin").mkdir(parents=True)
    for plugin in CNI_PLUGINS:
        (root / "opt/cni/bin" / plugin).symlink_to(f"/usr/lib/cni/{plugin}")
    (root / "etc/cni/net.d").mkdir(parents=True)
    shutil.copy2(files_dir() / "10-convoy.conflist", root / "etc/cni/net.d")
    shutil.copy2(files_dir() / "convoy-entrypoint", root / "usr/local/bin")
    (root / "kind/version").write_text(f"v{found.kubernetes}\n")
    (root / "etc/kubernetes/manifests").mkdir(parents=True)
    write_cri_base_spec(root, paths["ctr"])
    chroot(
        root,
        "find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service "
        "-delete; "
        "rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* "
        "/lib/systemd/system/local-fs.target.wants/* "
        "/lib/systemd/system/sockets.target.wants/*udev* "
        "/lib/systemd/system/sockets.target.wants/*initctl* "
        "/lib/systemd/system/basic.target.wants/*; "
        "echo ReadKMsg=no >> /etc/systemd/journald.conf; "
        "ln -sf /usr/lib/systemd/systemd /sbin/init; "
        "systemctl enable kubelet.service containerd.service undo-mount-hacks.service; "
        # systemd-sysctl would apply Debian's and kind's sysctl.d, machine-wide ones included
        "systemctl mask systemd-binfmt.service systemd-sysctl.service",
    )


def write_cri_base_spec(root: Path, ctr: Path) -> None:
    """containerd's default OCI spec with kind's createContainer hook and no rlimits."""
    spec = json.loads(run([str(ctr), "oci", "spec"], "ctr oci spec"))
    hooks = spec.setdefault("hooks", {}).setdefault("createContainer", [])
    hooks.append({"path": "/kind/bin/mount-product-files.sh"})
    spec["process"].pop("rlimits", None)
    (root / "etc/containerd/cri-base.json").write_text(json.dumps(spec, indent=2))


def component_images(
    engine: Engine, work: Path, found: Versions, paths: dict[str, Path], base: str
) -> list[str]:
    """The images kubeadm's static pods and DaemonSets name, and the sandbox image."""
    kube = f"v{found.kubernetes}"
    wanted = {
        f"registry.k8s.io/kube-apiserver:{kube}": ("scratch", "kube-apiserver"),
        f"registry.k8s.io/kube-controller-manager:{kube}": ("scratch", "kube-controller-manager"),
        f"registry.k8s.io/kube-scheduler:{kube}": ("scratch", "kube-scheduler"),
        f"registry.k8s.io/kube-proxy:{kube}": (base, "kube-proxy"),  # runs iptables
        f"registry.k8s.io/etcd:{found.etcd}": ("scratch", "etcd"),
    }
    for image, (from_image, command) in wanted.items():
        context = work / command
        context.mkdir()
        shutil.copy2(paths[command], context / command)
        docker_build(
            engine,
            context,
            f"FROM {from_image}\nCOPY {command} /usr/local/bin/{command}\n"
            f'ENTRYPOINT ["/usr/local/bin/{command}"]\n',
            image,
        )
    context = work / "pause"
    context.mkdir()
    build_pause(context, found.kubernetes)
    docker_build(
        engine,
        context,
        'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n',
        PAUSE_IMAGE,
    )
    return [*wanted, PAUSE_IMAGE]


def preload(engine: Engine, base: str, images: list[str], work: Path, name: str) -> None:
    """Import `images` into the node's containerd, as kind's node image builder does: run the
    base image, start containerd in it, import, commit."""
    archive = work / "images.tar"
    engine.docker("save", "--output", str(archive), *images, what="saving the images")
    stage = f"convoy-preload-{name.split(':')[1]}"
    engine.docker(
        "run",
        "--detach",
        "--privileged",
        "--name",
        stage,
        "--entrypoint",
        "sleep",
        base,
        "infinity",
        what="starting the preload container",
    )
    try:
        engine.docker("cp", str(archive), f"{stage}:/images.tar", what="copying the images")
        engine.docker(
            "exec",
            stage,
            "sh",
            "-euc",
            "containerd >/var/log/preload.log 2>&1 & "
            "until ctr version >/dev/null 2>&1; do sleep 0.2; done; "
            "ctr --namespace=k8s.io images import --snapshotter=overlayfs /images.tar; "
            "rm /images.tar; kill $!; wait $! || true",
            what="importing the images into the node's containerd",
        )
        engine.docker("stop", "--time=5", stage, what="stopping the preload container")
        engine.docker(
            "commit",
            *change_args(node_image_changes()),
            stage,
            name,
            what="committing the node image",
        )
    finally:
        engine.succeeds("rm", "--force", stage)  # whether or not the run got as far as a container


# -- the controller's base image --------------------------------------------------------------
def controller_base(engine: Engine, found: Versions | None = None) -> str:
    """Debian's Python 3.11 in a venv on PATH, with the project's dependencies as wheels that
    pip takes without an index (PIP_NO_INDEX, PIP_FIND_LINKS in the image's environment)."""
    found = found or versions()
    name = controller_base_name(found)
    if has_image(engine, name):
        return name
    with workdir() as work:
        root = work / "rootfs"
        debootstrap(root, found.debian, list(CONTROLLER_PACKAGES))
        chroot(root, "python3 -m venv /opt/venv")
        wheels = root / "opt/convoy-wheels"
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--wheel-dir",
                str(wheels),
                *dependencies(),
            ],
            "building the dependencies' wheels",
        )
        import_rootfs(
            engine,
            root,
            name,
            [
                f"ENV PATH=/opt/venv/bin:{SYSTEM_PATH}",
                "ENV PIP_NO_INDEX=1",
                "ENV PIP_FIND_LINKS=/opt/convoy-wheels",
            ],
        )
    return name
