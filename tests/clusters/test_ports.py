"""Ports for the suite's processes: reserved, so that control planes started at once never race
for one (etcd once exited with "bind: address already in use" when eight workers started)."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from conformance.clusters import binaries, ports
from conformance.clusters.local import LocalControlPlane

RESERVE_AND_PRINT = """
import json, sys
from conformance.clusters.ports import reserve_port
print(json.dumps([reserve_port() for _ in range(int(sys.argv[1]))]), flush=True)
sys.stdin.read()  # hold them until told to go
"""


def test_processes_reserving_at_once_never_share_a_port_and_stay_below_the_ephemeral_range():
    count, each = 8, 25
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", RESERVE_AND_PRINT, str(each)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    try:
        reserved = [json.loads(holder.stdout.readline()) for holder in holders]
    finally:
        for holder in holders:
            holder.communicate("", timeout=30)
    everything = [port for batch in reserved for port in batch]
    assert len(everything) == count * each == len(set(everything))
    low = ports.candidates().stop
    assert all(port < low for port in everything), f"ports from the ephemeral range {low}.."


def test_a_reserved_port_is_free_again_once_released() -> None:
    port = ports.reserve_port()
    held = ports._held[port]
    ports.release_port(port)
    assert held.closed and port not in ports._held


def test_many_control_planes_started_at_once_all_come_up() -> None:
    found = binaries.resolve()
    planes = [LocalControlPlane(found) for _ in range(6)]
    with ThreadPoolExecutor(len(planes)) as pool:
        started = list(pool.map(lambda plane: plane.start(), planes))
    try:
        used = [port for plane in started for port in plane.ports]
        assert len(used) == len(set(used)) == 4 * len(planes)
    finally:
        for plane in started:
            plane.stop()


def test_a_port_taken_by_another_process_makes_the_start_begin_again_with_new_ones(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Something that is not the suite's listens on the first port handed out: etcd cannot
    bind it, and the start says so and begins again."""
    squatter = socket.socket()
    squatter.bind((ports.LOOPBACK, 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    handed = iter([taken])
    original = ports.reserve_port
    monkeypatch.setattr(
        "conformance.clusters.local.reserve_port", lambda: next(handed, None) or original()
    )
    plane = LocalControlPlane(binaries.resolve())
    try:
        with caplog.at_level(logging.WARNING):
            plane.start()
        assert taken not in plane.ports
        assert "starting again with new ports" in caplog.text
    finally:
        plane.stop()
        squatter.close()
