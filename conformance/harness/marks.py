"""Marking conformance tests with the catalog clauses they check."""

from __future__ import annotations

from typing import Any

import pytest
from _pytest.mark import ParameterSet


def case(value: Any, name: str, *clauses: str) -> ParameterSet:
    """One parameter of a test, named `name`, that checks `clauses` (besides the test's own)."""
    return pytest.param(value, id=name, marks=pytest.mark.clause(*clauses))
