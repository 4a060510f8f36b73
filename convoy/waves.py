"""Cluster waves: which Releases a Release waits for, and whom a change in a wave concerns.

docs/api-reference.md ("Cluster wave"). Pure functions over Release objects (as the informer
cache holds them), so they are unit-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from convoy.api import ConditionType

Obj = dict[str, Any]
#: (namespace, Cluster name or "" for the implicit local cluster of the namespace)
ClusterKey = tuple[str, str]


def cluster_of(release: Obj) -> ClusterKey:
    ref = (release.get("spec") or {}).get("clusterRef") or {}
    return release["metadata"]["namespace"], ref.get("name") or ""


def wave_of(release: Obj) -> int:
    return int((release.get("spec") or {}).get("wave") or 0)


def condition_status(release: Obj, kind: ConditionType) -> str | None:
    conditions = (release.get("status") or {}).get("conditions") or []
    return next((c.get("status") for c in conditions if c.get("type") == kind), None)


def settled(release: Obj) -> bool:
    """Applied=True and Healthy=True: what a higher wave waits for."""
    return all(condition_status(release, kind) == "True" for kind in ConditionType)


def statuses(release: Obj) -> tuple[str | None, ...]:
    """The statuses of Applied and Healthy: a change of these is what concerns higher waves."""
    return tuple(condition_status(release, kind) for kind in ConditionType)


def same_cluster(release: Obj, others: Iterable[Obj]) -> list[Obj]:
    """The other Releases on the Cluster of `release` (same namespace and clusterRef name)."""
    cluster, uid = cluster_of(release), release["metadata"].get("uid")
    return [
        other
        for other in others
        if cluster_of(other) == cluster and other["metadata"].get("uid") != uid
    ]


def blocking(release: Obj, others: Iterable[Obj]) -> list[Obj]:
    """Releases of a lower wave on the same Cluster that are not Applied and Healthy."""
    wave = wave_of(release)
    return sorted(
        (o for o in same_cluster(release, others) if wave_of(o) < wave and not settled(o)),
        key=lambda o: (wave_of(o), o["metadata"]["name"]),
    )


def higher_waves(release: Obj, others: Iterable[Obj]) -> list[Obj]:
    """Releases of a higher wave on the same Cluster."""
    wave = wave_of(release)
    return [o for o in same_cluster(release, others) if wave_of(o) > wave]


def next_wave(release: Obj, others: Iterable[Obj]) -> list[Obj]:
    """The Releases of the lowest wave above that of `release`, on the same Cluster."""
    higher = higher_waves(release, others)
    if not higher:
        return []
    lowest = min(wave_of(o) for o in higher)
    return [o for o in higher if wave_of(o) == lowest]


def wave_completed(old: Obj, new: Obj, others: Iterable[Obj]) -> bool:
    """Did this change of `new` complete its wave: `new` became settled, and every other
    Release of its wave on the same Cluster is settled too?"""
    if settled(old) or not settled(new):
        return False
    wave = wave_of(new)
    return all(settled(o) for o in same_cluster(new, others) if wave_of(o) == wave)
