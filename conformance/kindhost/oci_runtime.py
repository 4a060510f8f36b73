#!/usr/bin/env python3
"""An OCI runtime for the kind host's engine: runc, with every container's capabilities cut to
this machine's bounding set.

`docker run --privileged` asks for every capability; where the bounding set lacks one (here
CAP_SYS_RESOURCE), runc fails with "unable to apply caps: operation not permitted". Before
runc creates a container (`create`/`run`: the bundle's config.json) or starts a process in one
(`exec --process FILE`), this removes the capabilities that no process here can hold. Standard
library only: dockerd's shim runs it with the system's Python.
"""

import json
import os
import sys

RUNC = "/usr/sbin/runc"
#: Capability numbers (linux/capability.h) to OCI names.
NAMES = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
]


def bounding_set() -> set[str]:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("CapBnd:"))
    mask = int(line.split()[1], 16)
    return {f"CAP_{name}" for bit, name in enumerate(NAMES) if mask >> bit & 1}


def cut(path: str, *, process_file: bool) -> None:
    with open(path) as file:
        document = json.load(file)
    process = document if process_file else document.get("process") or {}
    capabilities = process.get("capabilities")
    if not capabilities:
        return
    allowed = bounding_set()
    for kind, names in capabilities.items():
        capabilities[kind] = [name for name in names if name in allowed]
    with open(path, "w") as file:
        json.dump(document, file)


def main(args: list[str]) -> None:
    for index, arg in enumerate(args[:-1]):
        if arg in ("--bundle", "-b"):
            cut(os.path.join(args[index + 1], "config.json"), process_file=False)
        elif arg in ("--process", "-p") and "exec" in args:
            cut(args[index + 1], process_file=True)
    for arg in args:
        if arg.startswith("--bundle="):
            cut(os.path.join(arg.split("=", 1)[1], "config.json"), process_file=False)
    os.execv(RUNC, [RUNC, *args])


if __name__ == "__main__":
    main(sys.argv[1:])
