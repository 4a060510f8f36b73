"""`--convoy-install=PATH`: how the suite applies a vendor's manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.install import vendor


def test_a_kustomization_directory_is_applied_with_k(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\n")
    assert vendor.source_flag(tmp_path) == ["-k", str(tmp_path)]


def test_a_plain_directory_is_applied_recursively_and_a_file_as_is(tmp_path: Path) -> None:
    manifest = tmp_path / "controller.yaml"
    manifest.write_text("kind: List\n")
    assert vendor.source_flag(tmp_path) == ["-R", "-f", str(tmp_path)]
    assert vendor.source_flag(manifest) == ["-f", str(manifest)]


def test_a_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(vendor.InstallError, match="no such file or directory"):
        vendor.source_flag(tmp_path / "missing")
