"""The suite's image carries a kubectl that runs in it: `suite-image` refuses a kubectl built
for another system or architecture (a Mac's, an ARM laptop's) before it builds anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.incluster import image

#: The first 20 bytes of binaries as their systems write them.
MACH_O_ARM64 = bytes.fromhex("cffaedfe0c000001000000000200000011000000")


def elf(machine: int) -> bytes:
    """A 64-bit little-endian ELF executable's header up to e_machine."""
    return (
        b"\x7fELF\x02\x01\x01"
        + bytes(9)
        + (2).to_bytes(2, "little")
        + machine.to_bytes(2, "little")
    )


@pytest.mark.parametrize(
    ("header", "found"),
    [
        (elf(62), "amd64"),
        (elf(183), "arm64"),
        (MACH_O_ARM64, None),
        (b"#!/bin/sh\nexec kubectl\n", None),
    ],
    ids=["linux-amd64", "linux-arm64", "darwin-arm64", "a-script"],
)
def test_a_kubectls_architecture_is_read_from_its_header(
    tmp_path: Path, header: bytes, found: str | None
) -> None:
    kubectl = tmp_path / "kubectl"
    kubectl.write_bytes(header + bytes(64))
    assert image.kubectl_architecture(kubectl) == found


def test_a_kubectl_for_another_system_or_architecture_is_refused(tmp_path: Path) -> None:
    kubectl = tmp_path / "kubectl"
    kubectl.write_bytes(MACH_O_ARM64 + bytes(64))
    with pytest.raises(image.ImageError, match="is no Linux binary; the image is linux/amd64"):
        image.check_kubectl(kubectl, "amd64")
    kubectl.write_bytes(elf(183) + bytes(64))
    with pytest.raises(image.ImageError, match="is a Linux arm64 binary; the image is linux/amd64"):
        image.check_kubectl(kubectl, "amd64")
    kubectl.write_bytes(elf(62) + bytes(64))
    image.check_kubectl(kubectl, "amd64")


def test_this_machines_kubectl_is_read_as_its_architecture() -> None:
    """The kubectl the local provider built here, a real Linux binary."""
    from conformance.clusters import binaries

    kubectl = binaries.resolve().kubectl
    assert image.kubectl_architecture(kubectl) in ("amd64", "arm64")
