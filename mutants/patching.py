"""How a mutant changes the reference controller: wrap one of its functions at run time."""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable
from typing import Any

from convoy import policy
from convoy.api import Reason

#: The originals a mutant leaves in place on purpose when it replaces a name one caller reads:
#: (module, name) -> why (tests/unit/test_mutant_seams.py checks every other alias).
KEPT_ORIGINALS = {
    ("convoy.observer", "read_fresh"): "the variants shape the reconcile's read of a Release "
    "(controller.read_fresh); the observer's reads are its own",
    ("convoy.waves", "higher_waves"): "the mutants change the Releases a change of status "
    "enqueues (controller.higher_waves); the observer's wave /syncs (waves.next_wave) are "
    "another rule's",
}


#: The failures that come before a render is made: its source, its values or its Cluster not
#: ready (the mutants of the requeue rules and of forced syncs break rules for these).
NOT_READY = (Reason.SOURCE_NOT_READY, Reason.VALUES_NOT_READY, Reason.CLUSTER_NOT_READY)


def wrap(owner: Any, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: replace owner.name by a wrapper that receives the original first."""

    def decorate(wrapper: Callable[..., Any]) -> Callable[..., Any]:
        original = getattr(owner, name)

        @functools.wraps(original)
        def patched(*args: Any, **kwargs: Any) -> Any:
            return wrapper(original, *args, **kwargs)

        setattr(owner, name, patched)
        return wrapper

    return decorate


def key_of(release: dict[str, Any]) -> str:
    meta = release["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def sync_policy_read_once(field: str) -> None:
    """spec.syncPolicy's `field` is read at a Release's first reconcile and kept in memory:
    later changes of it are ignored until a restart."""
    first: dict[str, Any] = {}
    lock = threading.Lock()

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: dict[str, Any]):
        read = original(release)
        with lock:
            kept = first.setdefault(release["metadata"]["uid"], getattr(read, field))
        return dataclasses.replace(read, **{field: kept})
