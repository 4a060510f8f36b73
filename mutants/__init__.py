"""Broken controllers, and benign variants, of the reference controller.

A mutant is the reference controller with one clause of the document broken, written as the bug
a real author would make; a variant is one with a difference the document allows (fewer
workers, slower reconciles, other messages), which must pass the whole suite. Each is a small,
named change applied when the controller process starts (`python -m mutants`, selected by the
CONVOY_MUTANT environment variable that only the suite's kill run sets): it wraps or replaces
one function of the reference controller at run time; the reference sources are never edited,
and `python -m convoy` never loads this package. Each mutant names the clauses whose
conformance tests must fail.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: The modules that register them, one per section of the document, and the variants.
MODULES = (
    "mode",
    "sync",
    "force",
    "triggers",
    "requeue",
    "backoff",
    "plugin",
    "variants",
    "shapes",
    "habits",
)


@dataclass(frozen=True)
class Mutant:
    name: str
    #: the clauses whose tests must fail; empty for a benign variant, which must pass them all
    clauses: tuple[str, ...]
    description: str
    apply: Callable[[], None]
    #: "controller": the controller process runs it; "plugin": `kubectl convoy` does
    kind: str = "controller"
    #: the phase of a certifying run that alone can kill it: "shipped" (the controller without
    #: flags) or "long" (a resync above a 40-minute ladder); None when a development run can
    phase: str | None = None
    #: for a benign variant: whether the combined variant includes it (the reason when not is
    #: in its registration)
    joins_combined: bool = True

    @property
    def benign(self) -> bool:
        return not self.clauses

    @property
    def combined(self) -> bool:
        return self.name == COMBINED


REGISTRY: dict[str, Mutant] = {}
#: The benign variant with every other benign difference at once: the one CI runs the whole
#: suite against (a controller with all of them is the harder test of false failures); each
#: variant alone runs in `make mutants`.
COMBINED = "combined"


def mutant(
    name: str, *clauses: str, kind: str = "controller", phase: str | None = None
) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register the decorated function as the change that makes mutant `name`."""

    def register(change: Callable[[], None]) -> Callable[[], None]:
        if not clauses:
            raise ValueError(f"mutant {name} names no clause")
        _register(Mutant(name, clauses, _describe(change), change, kind, phase))
        return change

    return register


def generated(name: str, description: str, change: Callable[[], None], *clauses: str) -> None:
    """Register a mutant made by a loop over a list the document gives (one per reason)."""
    _register(Mutant(name, clauses, description, change))


def variant(
    name: str, *, joins_combined: bool = True
) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register the decorated function as benign variant `name`."""

    def register(change: Callable[[], None]) -> Callable[[], None]:
        _register(Mutant(name, (), _describe(change), change, joins_combined=joins_combined))
        return change

    return register


def _describe(change: Callable[[], None]) -> str:
    return " ".join((change.__doc__ or "").split())


def _register(entry: Mutant) -> None:
    if entry.name in REGISTRY:
        raise ValueError(f"two mutants named {entry.name}")
    REGISTRY[entry.name] = entry


def load() -> dict[str, Mutant]:
    """All mutants and variants (importing the modules that define them registers them)."""
    for module in MODULES:
        importlib.import_module(f"mutants.{module}")
    return REGISTRY


#: What a kill run recorded of each mutant (benchmarks/kill_run_time.py --record): its run's
#: seconds and the test that killed it (conformance.kill_run.KillRecord).
KILL_RECORD = Path(__file__).with_name("kill_record.json")


def parts_of_combined() -> list[Mutant]:
    """The variants the combined one is made of: every other benign variant, so that a new
    benign difference joins it by being registered (unless registered with
    joins_combined=False, beside the reason why)."""
    return [
        entry
        for entry in load().values()
        if entry.benign and not entry.combined and entry.joins_combined
    ]
