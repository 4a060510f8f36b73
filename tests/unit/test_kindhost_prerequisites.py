"""What the kind host's engine asks of this machine before it starts anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conformance.kindhost.engine import EngineError, check_prerequisites

COMMANDS = ("dockerd", "runc", "nsenter", "ip", "docker", "debootstrap")


@pytest.mark.skipif(os.geteuid() != 0, reason="the engine asks for root before any command")
@pytest.mark.parametrize("absent", COMMANDS)
def test_a_missing_command_is_named_with_what_installs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, absent: str
) -> None:
    for name in COMMANDS:
        if name != absent:
            (tmp_path / name).write_text("#!/bin/sh\n")
            (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EngineError, match=f"missing {absent}: `make kindhost-packages`"):
        check_prerequisites()
