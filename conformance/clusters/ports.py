"""Ports for the processes the suite starts (etcd, kube-apiserver, controllers), reserved so
that no two starts race for one.

Binding port 0, closing the socket and handing the number to a child races twice: another of
the suite's processes may be handed the same number before the child binds it, and any process
on the machine may take it as the ephemeral source port of an outgoing connection. So ports come
from below the kernel's ephemeral range (which it never hands out on its own), and each one is
reserved with an exclusive lock on a file of its own, held by the process that reserved it
until it releases it or exits: two pytest processes (xdist workers, kill-run jobs, other runs)
never hold the same port.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import threading
from pathlib import Path
from typing import IO

LOOPBACK = "127.0.0.1"
#: How many ports below the ephemeral range the suite draws from.
SPAN = 12000
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_held: dict[int, IO[str]] = {}
_lock = threading.Lock()


class NoFreePort(RuntimeError):
    """Every port of the suite's range is reserved or in use."""


def candidates() -> range:
    """The ports below the kernel's ephemeral range (32768 when it cannot be read)."""
    try:
        low = int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return range(max(1024, low - SPAN), max(low, 1024 + SPAN))


def reservations() -> Path:
    directory = Path(tempfile.gettempdir()) / f"convoy-conformance-ports-{os.getuid()}"
    directory.mkdir(exist_ok=True)
    return directory


def reserve_port() -> int:
    """A port nothing listens on, reserved for this process until `release_port` or its exit."""
    directory, ports = reservations(), candidates()
    for port in random.sample(ports, len(ports)):
        handle = (directory / f"{port}.lock").open("w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()  # another process of the suite holds it
            continue
        if _bindable(port):
            with _lock:
                _held[port] = handle
            return port
        handle.close()  # something else listens there
    raise NoFreePort(f"no free port in {ports.start}..{ports.stop - 1}")


def release_port(port: int) -> None:
    with _lock:
        handle = _held.pop(port, None)
    if handle is not None:
        handle.close()  # closing the file drops its lock


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True
