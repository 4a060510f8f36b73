"""docs/certification.md read as a vendor reads it: what it tells them to run, and the rights
it says their controller needs, checked against the kit."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from conformance import resources
from conformance.install.deployment import APPLY_VERBS, RENDERED

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "certification.md"


def shell_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", GUIDE.read_text(), re.S)


def commands() -> list[str]:
    """The guide's shell commands, continuation lines joined."""
    joined = "\n".join(shell_blocks()).replace("\\\n", " ")
    return [line.split("#", 1)[0].strip() for line in joined.splitlines() if line.strip()]


def test_every_report_the_guide_verifies_as_certifying_comes_from_certify() -> None:
    """A `run` report can never certify: a block that ends in verify-report without
    --results-only must have run `certify`."""
    for block in shell_blocks():
        lines = " ".join(block.replace("\\\n", " ").split())
        if "verify-report" in lines and "--results-only" not in lines:
            assert "convoy-conformance certify" in lines, block


def test_the_guide_sets_up_no_go_build_for_a_kind_or_existing_cluster() -> None:
    """make binaries builds the local provider's Kubernetes with Go: a vendor on kind needs
    the venv alone."""
    assert not [c for c in commands() if c.startswith("make") and "binaries" in c], commands()


def test_the_guide_names_every_right_the_suites_renders_need() -> None:
    text = " ".join(GUIDE.read_text().split())
    for verb in APPLY_VERBS:
        assert f"`{verb}`" in text, verb
    for group, resource in RENDERED:
        assert (f"{resource}.{group}" if group else "ConfigMaps") in text, resource
    testing = yaml.safe_load((Path(str(resources.TESTING)) / "rbac-targets.yaml").read_text())
    for rule in testing["rules"]:
        for resource in rule["resources"]:
            assert f"{resource}.{rule['apiGroups'][0]}" in text, resource
