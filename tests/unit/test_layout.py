"""Test modules have unique basenames: pytest imports them by basename (rootdir mode)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_test_module_basenames_are_unique() -> None:
    modules = [*ROOT.glob("tests/**/test_*.py"), *ROOT.glob("conformance/suite/test_*.py")]
    repeated = [name for name, n in Counter(m.name for m in modules).items() if n > 1]
    assert repeated == [], f"rename one of each: {repeated}"


#: The only sleep in the suite: the pause between two looks of conformance.polling.
SLEEPS_ALLOWED = {"conformance/polling.py"}


def test_the_suite_waits_by_polling_with_a_deadline() -> None:
    sleeping = {
        str(module.relative_to(ROOT))
        for module in ROOT.glob("conformance/**/*.py")
        if "time.sleep(" in module.read_text()
    }
    unexplained = sorted(sleeping - SLEEPS_ALLOWED)
    assert not unexplained, f"wait with conformance.polling.poll_until instead: {unexplained}"


def test_the_suite_never_imports_the_reference_controller() -> None:
    """What the suite judges a vendor's controller by must not depend on the reference one:
    the names both use are convoyapi's."""
    importing = {
        str(module.relative_to(ROOT))
        for module in ROOT.glob("conformance/**/*.py")
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(name == "convoy" or name.startswith("convoy.") for name in imported(node))
    }
    assert importing == set(), f"import convoyapi instead of convoy in: {sorted(importing)}"


def imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""] if node.level == 0 else []
    return [alias.name for alias in node.names]


def importers(package: str, of: str) -> set[str]:
    """The modules of conformance/<package>/ that import anything of conformance.<of>."""
    return {
        str(module.relative_to(ROOT))
        for module in ROOT.glob(f"conformance/{package}/*.py")
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(name.startswith(f"conformance.{of}") for name in imported(node))
    }


def test_what_observes_a_controller_and_what_installs_one_stay_apart() -> None:
    """An observer reads a controller from outside whoever installed it, and an installer
    judges nothing: the fixtures bring the two together."""
    assert importers("observe", of="install") == set()
    assert importers("install", of="observe") == set()
