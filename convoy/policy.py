"""Reading a Release: its sync policy, failure policy, pin and /sync requests, with clear errors
for bad input."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from convoy import synctime
from convoy.api import Annotation, Reason
from convoy.backoff import RetryBackoff
from convoy.durations import parse_duration

Obj = dict[str, Any]


class SpecError(Exception):
    """The Release cannot be read as written; not transient (the user must change it)."""

    reason = Reason.INVALID_SPEC


@dataclass(frozen=True)
class SyncPolicy:
    automatic: bool
    interval: float
    backoff: RetryBackoff | None

    @classmethod
    def of(cls, release: Obj) -> SyncPolicy:
        """spec.syncPolicy; `automatic` unset means false, that is manual mode."""
        spec = (release.get("spec") or {}).get("syncPolicy") or {}
        try:
            interval = parse_duration(spec["interval"]) if spec.get("interval") else 0.0
            backoff = RetryBackoff.from_spec(spec.get("retryBackoff"))
        except ValueError as error:
            raise SpecError(f"spec.syncPolicy: {error}") from None
        return cls(automatic=spec.get("automatic") is True, interval=interval, backoff=backoff)


@dataclass(frozen=True)
class FailurePolicy:
    """spec.failurePolicy: how long a rollout may take, and whether a failed one rolls back."""

    health_timeout: float
    rollback: bool

    @classmethod
    def of(cls, release: Obj) -> FailurePolicy | None:
        spec = (release.get("spec") or {}).get("failurePolicy")
        if spec is None:
            return None
        try:
            timeout = parse_duration(spec.get("healthTimeout") or "")
        except ValueError as error:
            raise SpecError(f"spec.failurePolicy.healthTimeout: {error}") from None
        return cls(health_timeout=timeout, rollback=spec.get("action") == "Rollback")


def pin_of(release: Obj) -> str | None:
    """The pinned renderRef, as written (an invalid one never equals a renderRef, so it holds)."""
    return (release["metadata"].get("annotations") or {}).get(Annotation.PIN)


@dataclass(frozen=True)
class Requests:
    """The /sync requests written on the Release and what status says was handled."""

    sync_at: datetime | None
    force_at: datetime | None
    last_handled_sync: datetime | None
    last_handled_force: datetime | None
    #: why a request annotation that does not parse was ignored (the Applied message says so)
    ignored: tuple[str, ...] = ()

    @classmethod
    def of(cls, release: Obj) -> Requests:
        """A request annotation that does not parse is ignored: it makes no request pending,
        and blocks nothing else (docs/api-reference.md, "Annotations")."""
        annotations = release["metadata"].get("annotations") or {}
        status = release.get("status") or {}
        ignored: list[str] = []
        return cls(
            sync_at=_annotation_time(annotations, Annotation.SYNC_REQUESTED_AT, ignored),
            force_at=_annotation_time(annotations, Annotation.SYNC_FORCE_REQUESTED_AT, ignored),
            last_handled_sync=_status_time(status, "lastHandledSyncAt"),
            last_handled_force=_status_time(status, "lastHandledForceSyncAt"),
            ignored=tuple(ignored),
        )

    @property
    def sync_pending(self) -> bool:
        """Manual mode: the annotation is later than lastHandledSyncAt, to the second."""
        return synctime.is_pending(self.sync_at, self.last_handled_sync)

    @property
    def force_pending(self) -> bool:
        return synctime.is_pending(self.force_at, self.last_handled_force)


def _annotation_time(annotations: dict[str, str], name: str, ignored: list[str]) -> datetime | None:
    text = annotations.get(name)
    if text is None:
        return None
    try:
        return synctime.parse_sync_time(text)
    except ValueError as error:
        ignored.append(f"annotation {name} ignored: {error}")
        return None


def _status_time(status: Obj, field: str) -> datetime | None:
    """A handled request's time as status records it. Any value the API server stores there
    parses; one that does not (a status written by hand) counts as no request handled, and
    never stops the reconcile."""
    text = status.get(field)
    try:
        return synctime.parse_status_time(text) if text else None
    except ValueError:
        return None
