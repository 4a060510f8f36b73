"""Every mutant and variant changes the reference controller where it really calls through, in
seconds and without a cluster.

A mutant replaces names of the reference controller at run time. If it replaces a function that
another module bound by `from convoy.x import f`, that module keeps calling the original and
the mutant silently does nothing there; if it assigns a name that does not exist, it adds an
attribute nobody reads. Both would be noticed only by the hour-long kill run (a mutant that
survives, or worse, one killed by something else). Here each is applied in turn, its changes
read from the modules and classes of convoy/, checked, and undone.
"""

from __future__ import annotations

import dis
import importlib
import inspect
import pkgutil
import types
from collections.abc import Iterator
from typing import Any

import pytest

import convoy
from mutants import Mutant, load
from mutants.patching import KEPT_ORIGINALS

#: (module or class, attribute name) -> value
Snapshot = dict[tuple[Any, str], Any]


def owners() -> Iterator[Any]:
    """The reference controller's modules and the classes they define."""
    for info in pkgutil.iter_modules(convoy.__path__):
        module = importlib.import_module(f"convoy.{info.name}")
        yield module
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                yield value


def snapshot() -> Snapshot:
    return {(owner, name): value for owner in owners() for name, value in vars(owner).items()}


def restore(before: Snapshot, after: Snapshot) -> None:
    for (owner, name), value in before.items():
        if after.get((owner, name), value) is not value:
            setattr(owner, name, value)
    for owner, name in after.keys() - before.keys():
        delattr(owner, name)


def is_code(value: Any) -> bool:
    """What a call goes through: a function, a class, a property (not a constant or a set)."""
    return isinstance(value, types.FunctionType | property | staticmethod | classmethod) or (
        inspect.isclass(value)
    )


def globals_read(code: types.CodeType) -> Iterator[tuple[str, str | None]]:
    """(global name, attribute read on it right away or None) for each global a function's code
    (and the code nested in it) reads: ("f", None) for f(), ("triggers", "f") for triggers.f()."""
    instructions = list(dis.get_instructions(code))
    for at, instruction in enumerate(instructions):
        if instruction.opname == "LOAD_GLOBAL":
            following = instructions[at + 1] if at + 1 < len(instructions) else None
            reads_attribute = following is not None and following.opname in ATTRIBUTE_READS
            yield instruction.argval, following.argval if following and reads_attribute else None
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from globals_read(const)


ATTRIBUTE_READS = {"LOAD_ATTR", "LOAD_METHOD"}


def functions_of(module: types.ModuleType) -> Iterator[types.FunctionType]:
    for value in vars(module).values():
        if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
            yield value
        elif inspect.isclass(value) and value.__module__ == module.__name__:
            for member in vars(value).values():
                function = getattr(member, "fget", None) or getattr(member, "__func__", member)
                if isinstance(function, types.FunctionType):
                    yield function


def called_through(owner: Any, name: str) -> bool:
    """Whether the reference controller calls `owner.name`: a class's attribute always may be
    (through its instances); a module's global when that module's own code reads the name, or
    another module's code reads `<module>.name`."""
    if not isinstance(owner, types.ModuleType):
        return True
    short = owner.__name__.rpartition(".")[2]
    for module in (o for o in owners() if isinstance(o, types.ModuleType)):
        for function in functions_of(module):
            for read, attribute in globals_read(function.__code__):
                if (module is owner and read == name) or (read == short and attribute == name):
                    return True
    return False


def where(owner: Any, name: str) -> str:
    return f"{getattr(owner, '__qualname__', owner.__name__)}.{name}"


PRISTINE = snapshot()
MUTANTS = sorted(load().values(), key=lambda entry: entry.name)


@pytest.fixture
def applied(request: pytest.FixtureRequest) -> Iterator[dict[tuple[Any, str], tuple[Any, Any]]]:
    """The mutant's changes: (owner, name) -> (before, after); undone afterwards."""
    entry: Mutant = request.param
    before = snapshot()
    entry.apply()
    after = snapshot()
    try:
        yield {
            key: (before.get(key), after.get(key))
            for key in before.keys() | after.keys()
            if before.get(key) is not after.get(key)
        }
    finally:
        restore(before, after)


@pytest.mark.parametrize("applied", MUTANTS, ids=[m.name for m in MUTANTS], indirect=True)
def test_a_mutant_replaces_existing_names_and_every_alias_of_what_it_replaces(
    applied: dict[tuple[Any, str], tuple[Any, Any]],
) -> None:
    assert applied, "it changes nothing in the reference controller"
    added = [where(owner, name) for (owner, name), (old, _) in applied.items() if old is None]
    assert added == [], f"it assigns names the reference controller does not have: {added}"
    replaced = {id(old): where(owner, name) for (owner, name), (old, _) in applied.items()}
    missed = sorted(
        f"{where(owner, name)} (still the original of {replaced[id(value)]})"
        for (owner, name), value in snapshot().items()
        if id(value) in replaced and is_code(value) and (owner, name) not in applied
        and called_through(owner, name) and (owner.__name__, name) not in KEPT_ORIGINALS
    )  # fmt: skip
    assert missed == [], f"the reference controller calls the original through: {missed}"


def test_applying_and_undoing_every_mutant_leaves_the_reference_controller_as_it_was() -> None:
    """What the test above relies on: each mutant is checked on the reference controller."""
    for entry in MUTANTS:
        before = snapshot()
        entry.apply()
        restore(before, snapshot())
    changed = [
        where(owner, name)
        for key, value in snapshot().items()
        if PRISTINE.get(key) is not value
        for owner, name in [key]
    ]
    assert changed == []
