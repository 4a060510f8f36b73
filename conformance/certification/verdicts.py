"""Skips that are verdicts of the report, raised as types and recognised as types.

A test that only a certifying run's phase can check raises `certifying_only`; one whose rule
the suite cannot check against this implementation (it cannot restart the controller, say)
raises `not_supported`. The plugin records which one in the test's report (a property, which
travels from xdist workers too); the report reads that, never the words of the reason. Any
other skip is a plain skip.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NoReturn

import pytest

from conformance.document.catalog import CERTIFYING_ONLY

#: The user property of a test's report that names its verdict skip.
PROPERTY = "convoy_verdict"


class Verdict(StrEnum):
    NOT_IN_PROFILE = "not-in-profile"
    NOT_SUPPORTED = "not-supported"


# pytest.skip.Exception is pytest's public name of its Skipped, an attribute set on the skip
# function, which the checker cannot see.
class VerdictSkip(pytest.skip.Exception):  # type: ignore[name-defined]
    """A skip the report reads as a verdict. Reported at the test's own location (as a skip
    mark's is), not at the line here that raises it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, _use_item_location=True)


class CertifyingOnly(VerdictSkip):
    """Only a certifying run's phase can check this: no verdict about the controller."""


class NotSupported(VerdictSkip):
    """The suite cannot check this rule against this implementation."""


def certifying_only(reason: str) -> NoReturn:
    raise CertifyingOnly(f"{CERTIFYING_ONLY}: {reason}")


def not_supported(reason: str) -> NoReturn:
    raise NotSupported(f"not supported: {reason}")


def verdict_of(exception: BaseException | None) -> Verdict | None:
    """The verdict a test's skip stands for, None for any other outcome."""
    if isinstance(exception, CertifyingOnly):
        return Verdict.NOT_IN_PROFILE
    if isinstance(exception, NotSupported):
        return Verdict.NOT_SUPPORTED
    return None
