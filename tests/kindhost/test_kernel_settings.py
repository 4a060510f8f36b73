"""A kind cluster on the kind host's engine changes none of this machine's kernel settings.

kubelet sets vm.overcommit_memory, kernel.panic and kernel.panic_on_oops, systemd as PID 1 sets
fs.file-max and fs.nr_open, and a privileged node's /proc/sys is this machine's: the node's
entrypoint (conformance/kindhost/files/convoy-entrypoint) binds a file over each. This reads
every setting under /proc/sys before, during and after a cluster's life.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conformance.kindhost.engine import Engine
from tests.kindhost.conftest import own_kind_cluster

pytestmark = pytest.mark.kindhost

#: Counters and per-read values, not settings.
VOLATILE = {
    "fs/dentry-state", "fs/file-nr", "fs/inode-nr", "fs/inode-state", "fs/aio-nr",
    "kernel/ns_last_pid", "kernel/pty/nr", "kernel/random/uuid", "kernel/random/entropy_avail",
    "kernel/random/boot_id",
}  # fmt: skip
VOLATILE_PREFIXES = ("fs/quota/",)


def kernel_settings() -> dict[str, str]:
    root = Path("/proc/sys")
    found = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if not path.is_file() or name in VOLATILE or name.startswith(VOLATILE_PREFIXES):
            continue
        try:
            found[name] = path.read_text()
        except OSError:  # write-only, or not readable here
            continue
    return found


def changed(before: dict[str, str], now: dict[str, str]) -> dict[str, tuple[str, str]]:
    return {
        name: (before.get(name, "-"), now.get(name, "-"))
        for name in before.keys() | now.keys()
        if before.get(name) != now.get(name)
    }


def test_a_kind_clusters_life_changes_no_kernel_setting_of_this_machine(
    engine: Engine, pytestconfig: pytest.Config
) -> None:
    before = kernel_settings()
    print(f"{len(before)} kernel settings read")
    cluster = own_kind_cluster(pytestconfig, "convoy-kernel-check")
    try:
        cluster.start()
        subprocess.run(
            [str(cluster.kubectl_path), f"--kubeconfig={cluster.kubeconfig}", "wait",
             "--for=condition=Ready", "node", "--all", "--timeout=180s"],
            check=True,
        )  # fmt: skip
        during = changed(before, kernel_settings())
    finally:
        cluster.stop()
    after = changed(before, kernel_settings())
    assert during == {}, "changed while the cluster ran (setting: (before, during))"
    assert after == {}, "changed after the cluster was deleted (setting: (before, after))"
