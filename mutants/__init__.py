"""Broken controllers: the reference controller with one rule of the document broken.

Each mutant is a small, named change applied when the controller process starts
(`python -m mutants`, selected by the CONVOY_MUTANT environment variable that only the suite's
mutant runner sets). The change wraps or replaces one function of the reference controller
at run time; the reference sources are never edited, and `python -m convoy` never loads this
package. Each mutant names the rules whose conformance tests must fail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    rules: tuple[str, ...]
    description: str
    apply: Callable[[], None]
    #: "controller": the controller process runs it; "plugin": `kubectl convoy` does
    kind: str = "controller"
    #: only the long tests (`-m long`, a resync above 1000 s; about 40 minutes) can kill it
    long_only: bool = False


REGISTRY: dict[str, Mutant] = {}


def mutant(
    name: str, *rules: str, kind: str = "controller", long_only: bool = False
) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register the decorated function as the change that makes mutant `name`."""

    def register(change: Callable[[], None]) -> Callable[[], None]:
        description = " ".join((change.__doc__ or "").split())
        REGISTRY[name] = Mutant(name, rules, description, change, kind, long_only)
        return change

    return register


def load() -> dict[str, Mutant]:
    """All mutants (importing the module that defines them registers them)."""
    from mutants import catalog  # noqa: F401

    return REGISTRY
