"""The project's layout rules that are not imports (pyproject.toml's import-linter contracts,
run by `make lint`, keep those): unique test basenames, waits by polling, the suite's test files
(no package, so no contract sees them) never importing the reference controller."""

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
    """conformance/suite/ is test files, not a package, so the import contracts do not see it:
    what the suite judges a vendor's controller by must not depend on the reference one (the
    names both use are convoyapi's)."""
    importing = {
        str(module.relative_to(ROOT))
        for module in ROOT.glob("conformance/suite/*.py")
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(name == "convoy" or name.startswith("convoy.") for name in imported(node))
    }
    assert importing == set(), f"import convoyapi instead of convoy in: {sorted(importing)}"


def imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""] if node.level == 0 else []
    return [alias.name for alias in node.names]
