"""This machine's kernel settings, as a kind cluster's life could change them.

kubelet sets vm.overcommit_memory, kernel.panic and kernel.panic_on_oops, systemd as PID 1 sets
fs.file-max and fs.nr_open, and a privileged node's /proc/sys is this machine's: the node's
entrypoint (conformance/kindhost/files/convoy-entrypoint) binds a file over each.
"""

from __future__ import annotations

from pathlib import Path

#: Counters and per-read values, not settings.
VOLATILE = {
    "fs/dentry-state", "fs/file-nr", "fs/inode-nr", "fs/inode-state", "fs/aio-nr",
    "kernel/ns_last_pid", "kernel/pty/nr", "kernel/random/uuid", "kernel/random/entropy_avail",
    "kernel/random/boot_id",
}  # fmt: skip
VOLATILE_PREFIXES = ("fs/quota/",)


def kernel_settings() -> dict[str, str]:
    """Every readable setting under /proc/sys."""
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
