"""Test modules have unique basenames: pytest imports them by basename (rootdir mode)."""

from __future__ import annotations

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
