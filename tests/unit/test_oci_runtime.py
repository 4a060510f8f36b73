"""The kind host's OCI runtime wrapper cuts capabilities to this machine's bounding set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.kindhost import oci_runtime

EVERY = [f"CAP_{name}" for name in oci_runtime.NAMES]


def config(capabilities: list[str]) -> dict:
    kinds = ("bounding", "effective", "permitted", "inheritable", "ambient")
    return {"process": {"args": ["sh"], "capabilities": dict.fromkeys(kinds, capabilities)}}


def test_the_bounding_set_is_read_from_the_process_status() -> None:
    status = Path("/proc/self/status").read_text()
    mask = int(
        next(line for line in status.splitlines() if line.startswith("CapBnd:")).split()[1], 16
    )
    assert oci_runtime.bounding_set() == {name for bit, name in enumerate(EVERY) if mask >> bit & 1}


@pytest.mark.parametrize("process_file", [False, True], ids=["bundle config", "exec process"])
def test_capabilities_outside_the_bounding_set_are_removed_and_the_rest_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, process_file: bool
) -> None:
    allowed = set(EVERY) - {"CAP_SYS_RESOURCE"}
    monkeypatch.setattr(oci_runtime, "bounding_set", lambda: allowed)
    document = config(EVERY)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document["process"] if process_file else document))
    oci_runtime.cut(str(path), process_file=process_file)
    written = json.loads(path.read_text())
    capabilities = (written if process_file else written["process"])["capabilities"]
    assert all(names == [c for c in EVERY if c in allowed] for names in capabilities.values())


def test_a_config_without_capabilities_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"process": {"args": ["sh"]}}')
    oci_runtime.cut(str(path), process_file=False)
    assert path.read_text() == '{"process": {"args": ["sh"]}}'
