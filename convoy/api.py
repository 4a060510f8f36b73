"""The convoy API as the reference controller sees it: names, annotations, condition reasons.

docs/api-reference.md is the prose; this module is the single source for the strings.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum

import convoyapi
from convoyapi import API_VERSION, CLUSTERS, GROUP, INVENTORIES, RELEASES, VERSION

__all__ = ["API_VERSION", "CLUSTERS", "GROUP", "INVENTORIES", "RELEASES", "VERSION"]

FIELD_MANAGER = "convoy"


class Annotation(StrEnum):
    """Release annotations: kept in metadata so that writing them changes no generation."""

    SYNC_REQUESTED_AT = convoyapi.SYNC_REQUESTED_AT
    SYNC_FORCE_REQUESTED_AT = convoyapi.SYNC_FORCE_REQUESTED_AT
    PIN = convoyapi.PIN
    MUTATIONS = convoyapi.MUTATIONS
    LIFECYCLE = convoyapi.LIFECYCLE


#: Label that apply stamps on every rendered object: "<namespace>.<name>" of its Release.
RELEASE_LABEL = f"{GROUP}/release"


class ConditionType(StrEnum):
    APPLIED = "Applied"
    HEALTHY = "Healthy"


class Reason(StrEnum):
    """Reasons of the Applied condition."""

    APPLIED = "Applied"
    WAITING_FOR_SYNC = "WaitingForSync"
    SOURCE_NOT_READY = "SourceNotReady"
    VALUES_NOT_READY = "ValuesNotReady"
    CLUSTER_NOT_READY = "ClusterNotReady"
    DEPLOY_FAILED = "DeployFailed"
    PRUNE_FAILED = "PruneFailed"
    UNSUPPORTED = "Unsupported"
    UNAPPLIABLE = "Unappliable"
    PINNED = "Pinned"
    HOOK_FAILED = "HookFailed"
    WAITING_FOR_WAVE = "WaitingForWave"
    WAITING_FOR_HOOKS = "WaitingForHooks"
    WAITING_FOR_HEALTH = "WaitingForHealth"
    INVALID_SPEC = "InvalidSpec"

    @property
    def transient(self) -> bool:
        """Transient failures are retried with backoff; the rest wait for the periodic reconcile."""
        return self in TRANSIENT


TRANSIENT = frozenset(
    {
        Reason.SOURCE_NOT_READY,
        Reason.VALUES_NOT_READY,
        Reason.CLUSTER_NOT_READY,
        Reason.DEPLOY_FAILED,
        Reason.PRUNE_FAILED,
    }
)

#: Holds (pinned, or waiting) reset the failure count like a success does.
HOLDS = frozenset(
    {
        Reason.PINNED,
        Reason.WAITING_FOR_SYNC,
        Reason.WAITING_FOR_WAVE,
        Reason.WAITING_FOR_HOOKS,
        Reason.WAITING_FOR_HEALTH,
    }
)


_LABEL_VALUE_MAX = 63


def release_key(namespace: str, name: str) -> str:
    """The RELEASE_LABEL value: "<namespace>.<name>", hashed to fit a label's 63 characters."""
    key = f"{namespace}.{name}"
    if len(key) <= _LABEL_VALUE_MAX:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return f"{key[: _LABEL_VALUE_MAX - 11].rstrip('.-_')}-{digest}"
