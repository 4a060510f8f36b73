"""Lifecycle hooks: batches of objects applied before (preApply) and after (postApply) a render.

docs/api-reference.md ("Lifecycle hooks"). A reconcile runs the batches of a phase in order;
each must be Healthy before the next starts. A batch that is not Healthy yet ends the reconcile
in WaitingForHooks and is remembered here, so that the observer can send a /sync the moment it
becomes Healthy, and so that its 60 s start from its first apply, not from each re-apply.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any

from convoy import apply, health
from convoy.api import Annotation, Reason
from convoy.clock import Clock
from convoy.health import Health
from convoy.render import RenderError, describe
from convoy.targets import Target

Obj = dict[str, Any]
Batch = tuple[Obj, ...]

#: Seconds a batch may take from its first apply to Healthy before it is HookFailed.
HOOK_TIMEOUT = 60.0
PRE_APPLY, POST_APPLY = "preApply", "postApply"


class HookFailed(Exception):
    """A batch became Degraded or timed out; not transient (the next apply runs it again)."""

    reason = Reason.HOOK_FAILED


@dataclass(frozen=True)
class Lifecycle:
    pre_apply: tuple[Batch, ...] = ()
    post_apply: tuple[Batch, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> Lifecycle:
        """The annotation's batches; raises RenderError(UNAPPLIABLE) naming what is wrong."""
        if text is None:
            return cls()
        try:
            document = json.loads(text)
        except ValueError as error:
            raise _invalid(f"not JSON: {error}") from None
        if not isinstance(document, dict) or not set(document) <= {PRE_APPLY, POST_APPLY}:
            raise _invalid(f"expected a JSON object with only {PRE_APPLY} and {POST_APPLY}")
        return cls(
            _batches(document.get(PRE_APPLY, []), PRE_APPLY),
            _batches(document.get(POST_APPLY, []), POST_APPLY),
        )


@dataclass
class Waiting:
    """The batch a Release waits for: which one, its objects, since when."""

    phase: str
    index: int
    digest: str
    refs: list[Obj]
    started: float
    #: the observer has sent the /sync for this batch becoming Healthy
    notified: bool = False

    def same_batch(self, phase: str, index: int, digest: str) -> bool:
        return (self.phase, self.index, self.digest) == (phase, index, digest)


@dataclass(frozen=True)
class BatchWait:
    """Why a reconcile stops at a batch, and when its timeout falls."""

    message: str
    remaining: float


class Hooks:
    """Runs hook batches and remembers the one each Release waits for (thread-safe)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._waiting: dict[str, Waiting] = {}

    def run(
        self, key: str, phase: str, batches: tuple[Batch, ...], target: Target, namespace: str
    ) -> BatchWait | None:
        """Apply each batch in turn; None when all are Healthy. Raises HookFailed."""
        for index, batch in enumerate(batches):
            wait = self._run_batch(key, phase, index, batch, target, namespace)
            if wait:
                return wait
        return None

    def waiting(self, key: str) -> Waiting | None:
        with self._lock:
            return self._waiting.get(key)

    def notified(self, key: str, waiting: Waiting) -> None:
        with self._lock:
            if self._waiting.get(key) is waiting:
                waiting.notified = True

    def forget(self, key: str) -> None:
        with self._lock:
            self._waiting.pop(key, None)

    def _run_batch(
        self, key: str, phase: str, index: int, batch: Batch, target: Target, namespace: str
    ) -> BatchWait | None:
        objects = [_placed(obj, target, namespace) for obj in batch]
        digest = _digest(objects)
        refs = apply.apply(target, objects)
        assessed = [(ref, health.assess(target, ref)) for ref in refs]
        where = f"{phase} batch {index + 1}"
        degraded = [
            f"{describe(ref)}: {found.message}"
            for ref, found in assessed
            if found.health == Health.DEGRADED
        ]
        if degraded:
            self.forget(key)  # the next apply runs the batch again, with a fresh timeout
            raise HookFailed(f"{where}: {'; '.join(degraded)}")
        pending = [describe(ref) for ref, found in assessed if found.health != Health.HEALTHY]
        if not pending:
            self._completed(key, phase, index, digest)
            return None
        elapsed = self._clock.now() - self._started(key, phase, index, digest, refs)
        if elapsed >= HOOK_TIMEOUT:
            self.forget(key)
            raise HookFailed(
                f"{where}: not Healthy {HOOK_TIMEOUT:g} s after its first apply: "
                f"{', '.join(pending)}"
            )
        return BatchWait(f"{where} not Healthy yet: {', '.join(pending)}", HOOK_TIMEOUT - elapsed)

    def _completed(self, key: str, phase: str, index: int, digest: str) -> None:
        with self._lock:
            current = self._waiting.get(key)
            if current is not None and current.same_batch(phase, index, digest):
                del self._waiting[key]

    def _started(self, key: str, phase: str, index: int, digest: str, refs: list[Obj]) -> float:
        """When this batch was first applied: now, unless the Release already waits for it."""
        with self._lock:
            current = self._waiting.get(key)
            if current is None or not current.same_batch(phase, index, digest):
                current = Waiting(phase, index, digest, refs, self._clock.now())
                self._waiting[key] = current
            return current.started


def _placed(obj: Obj, target: Target, namespace: str) -> Obj:
    """A copy with the target namespace when a namespaced object names none."""
    placed = copy.deepcopy(obj)
    metadata = placed["metadata"]
    if target.scope_of(placed["apiVersion"], placed["kind"]) is False:
        metadata.pop("namespace", None)
    else:
        metadata.setdefault("namespace", namespace)
    return placed


def _digest(objects: list[Obj]) -> str:
    return hashlib.sha256(json.dumps(objects, sort_keys=True).encode()).hexdigest()


def _batches(value: Any, phase: str) -> tuple[Batch, ...]:
    if not isinstance(value, list):
        raise _invalid(f"{phase} must be a list of batches")
    return tuple(_batch(batch, f"{phase} batch {n}") for n, batch in enumerate(value, 1))


def _batch(value: Any, where: str) -> Batch:
    if not isinstance(value, list) or not value:
        raise _invalid(f"{where} must be a non-empty list of manifests")
    for obj in value:
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        names = (obj.get("apiVersion"), obj.get("kind")) if isinstance(obj, dict) else ()
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not names or not all(isinstance(v, str) and v for v in (*names, name)):
            raise _invalid(f"{where}: each manifest needs apiVersion, kind and metadata.name")
    return tuple(value)


def _invalid(problem: str) -> RenderError:
    return RenderError(Reason.UNAPPLIABLE, f"annotation {Annotation.LIFECYCLE}: {problem}")
