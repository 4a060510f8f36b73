"""Test modules have unique basenames: pytest imports them by basename (rootdir mode)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_test_module_basenames_are_unique() -> None:
    modules = [*ROOT.glob("tests/**/test_*.py"), *ROOT.glob("conformance/suite/test_*.py")]
    repeated = [name for name, n in Counter(m.name for m in modules).items() if n > 1]
    assert repeated == [], f"rename one of each: {repeated}"
