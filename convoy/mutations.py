"""The mutations annotation: JSON merge patches (RFC 7386) applied to rendered objects.

docs/api-reference.md ("Mutations"). Mutations run inside the render (render's `mutate` seam),
before the renderRef is computed, so a change of mutations is a new render. Pure, so unit-tested
without a cluster.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from convoy.api import Annotation, Reason
from convoy.render import RenderError

Obj = dict[str, Any]
TARGET_FIELDS = ("apiVersion", "kind", "name")


@dataclass(frozen=True)
class Mutation:
    api_version: str
    kind: str
    name: str
    patch: Obj

    def matches(self, obj: Obj) -> bool:
        return (obj["apiVersion"], obj["kind"], obj["metadata"]["name"]) == (
            self.api_version,
            self.kind,
            self.name,
        )


def parse_mutations(text: str | None) -> list[Mutation]:
    """The annotation's mutations in order; None (no annotation) is no mutation.

    Raises RenderError(UNAPPLIABLE) naming what is wrong when the text is not a JSON list of
    {"target": {"apiVersion", "kind", "name"}, "patch": {...}}.
    """
    if text is None:
        return []
    try:
        items = json.loads(text)
    except ValueError as error:
        raise _invalid(f"not JSON: {error}") from None
    if not isinstance(items, list):
        raise _invalid("expected a JSON list of {target, patch} objects")
    return [_mutation(item, index) for index, item in enumerate(items)]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: an object patch merges key by key (null deletes); anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def apply_mutations(mutations: list[Mutation], objects: list[Obj]) -> list[Obj]:
    """Each mutation, in list order, merged into every object it targets."""
    result = []
    for obj in objects:
        for mutation in mutations:
            if mutation.matches(obj):
                obj = merge_patch(obj, mutation.patch)
        result.append(obj)
    return result


def _mutation(item: Any, index: int) -> Mutation:
    where = f"item {index}"
    if not isinstance(item, dict) or set(item) != {"target", "patch"}:
        raise _invalid(f"{where}: expected exactly the keys target and patch")
    target, patch = item["target"], item["patch"]
    if not isinstance(target, dict) or set(target) != set(TARGET_FIELDS):
        raise _invalid(f"{where}: target needs exactly apiVersion, kind and name")
    if not all(isinstance(target[key], str) and target[key] for key in TARGET_FIELDS):
        raise _invalid(f"{where}: target apiVersion, kind and name must be non-empty strings")
    if not isinstance(patch, dict):
        raise _invalid(f"{where}: patch must be a JSON object (a merge patch of the object)")
    return Mutation(target["apiVersion"], target["kind"], target["name"], patch)


def _invalid(problem: str) -> RenderError:
    return RenderError(Reason.UNAPPLIABLE, f"annotation {Annotation.MUTATIONS}: {problem}")
