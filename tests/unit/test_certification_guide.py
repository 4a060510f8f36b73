"""docs/certification.md read as a vendor reads it: what it tells them to run (every option of
every kit command one the kit takes, every Python snippet runs), and the rights it says their
controller needs, checked against the kit. Where a command needs a cluster, the kind-host
tests run it: the "By hand" block as written (tests/kindhost/test_the_guide_by_hand.py), the
action's steps (tests/kindhost/test_vendor_on_kind.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from conformance import resources
from conformance.cli import in_cluster_parser
from conformance.install.deployment import APPLY_VERBS, RENDERED
from tests.helpers import GUIDE, guide_commands, shell_blocks


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
    assert not [c for c in guide_commands() if c.startswith("make") and "binaries" in c], (
        guide_commands()
    )


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


#: Every option a command of the kit accepts: its own (`<command> --help`), and pytest's with
#: the kit's plugin loaded, which `run` and `certify` pass on.
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def kit_guide_commands() -> list[tuple[str, list[str]]]:
    """(subcommand, the options the guide gives it) for each line that runs the kit."""
    found = []
    for line in guide_commands():
        match = re.search(r"bin/convoy-conformance (\S+)(.*)", line)
        if match:
            options = [token.split("=")[0] for token in OPTION.findall(match[2])]
            found.append((match[1], options))
    return found


def help_text(*argv: str, cwd: Path) -> str:
    run = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=cwd)
    return run.stdout


def test_every_option_the_guide_gives_the_kit_is_one_it_takes(tmp_path: Path) -> None:
    """A renamed or dropped option fails here, not in a vendor's pipeline."""
    kit = str(Path(sys.executable).parent / "convoy-conformance")
    pytest_options = set(
        OPTION.findall(help_text(sys.executable, "-m", "pytest", "--help", cwd=tmp_path))
    )
    in_cluster = set(OPTION.findall(in_cluster_parser().format_help()))
    used = kit_guide_commands()
    assert {command for command, _ in used} >= {"certify", "verify-report", "suite-image"}
    for command, options in used:
        own = set(OPTION.findall(help_text(kit, command, "--help", cwd=tmp_path)))
        unknown = set(options) - own - pytest_options - in_cluster
        assert not unknown, f"the guide runs `convoy-conformance {command}` with {sorted(unknown)}"


def test_the_guides_python_snippets_run() -> None:
    """What the guide has the venv's Python print (the node image kind must create) prints."""
    snippets = re.findall(r"python -c '([^']+)'", GUIDE.read_text())
    assert snippets
    for snippet in snippets:
        run = subprocess.run([sys.executable, "-P", "-c", snippet], capture_output=True, text=True)
        assert run.returncode == 0 and run.stdout.strip(), (snippet, run.stderr)
