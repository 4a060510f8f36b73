"""Benign variants shaped like the controllers vendors write (controller-runtime's, Flux's):
how many status writes a reconcile makes, in what order, what else it writes. The document says
nothing of these, so each must pass the whole suite, and each joins the combined variant
(leader election not yet: see its registration)."""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from kubernetes import dynamic

import convoy.__main__ as convoy_main
from convoy import controller, reconciler, synctime
from convoy.api import Reason
from convoy.clock import RealClock
from mutants import variant
from mutants.patching import wrap

Obj = dict[str, Any]
RECONCILING = "Reconciling"
FINALIZER = "variant.example.com/cleanup"


@variant("status-in-two-patches")
def status_in_two_patches() -> None:
    """Each reconcile writes its status in two merge patches, in the same reconcile: the
    conditions first, then the rest (renderRef, lastSuccessful, lastHandled*At, ...)."""

    @wrap(controller.Controller, "_write_status")
    def write_status(original, self, release: Obj, status: Obj) -> None:
        conditions_first = {**(release.get("status") or {}), "conditions": status["conditions"]}
        original(self, release, conditions_first)
        original(self, {**release, "status": conditions_first}, status)


@variant("reconciling-condition")
def reconciling_condition() -> None:
    """kstatus' Reconciling condition, as Flux's controllers write it: True when a reconcile
    starts (a status write of its own), removed by the write of the reconcile's outcome."""

    @wrap(controller, "read_fresh")
    def read_fresh(original, resource: dynamic.Resource, key: str) -> Obj | None:
        release = original(resource, key)
        if release is None:
            return None
        conditions = [c for c in conditions_of(release) if c["type"] != RECONCILING]
        conditions.append(
            {
                "type": RECONCILING,
                "status": "True",
                "reason": "Progressing",
                "message": "reconciliation in progress",
                "lastTransitionTime": synctime.format_sync_time(RealClock().wall()),
                "observedGeneration": release["metadata"].get("generation", 0),
            }
        )
        return patched(resource.status, release, {"status": {"conditions": conditions}})

    @wrap(controller.Controller, "_write_status")
    def write_status(original, self, release: Obj, status: Obj) -> None:
        kept = [c for c in status.get("conditions") or [] if c["type"] != RECONCILING]
        original(self, release, {**status, "conditions": kept})


@variant("status-at-every-reconcile")
def status_at_every_reconcile() -> None:
    """Every reconcile writes its status, also when nothing in it changed (the API server
    stores nothing then, but the write is made: admission sees it), as controllers that
    update status unconditionally do."""

    @wrap(controller.Controller, "_write_status")
    def write_status(original, self, release: Obj, status: Obj) -> None:
        original(self, {**release, "status": None}, status)  # never "unchanged"


@variant("finalizer")
def finalizer() -> None:
    """A finalizer on every Release, added at its first reconcile (a metadata write that
    changes no generation) and removed when the Release is deleted, as controllers that clean
    up after their objects do."""

    @wrap(controller, "read_fresh")
    def read_fresh(original, resource: dynamic.Resource, key: str) -> Obj | None:
        release = original(resource, key)
        if release is None:
            return None
        finalizers = release["metadata"].get("finalizers") or []
        if release["metadata"].get("deletionTimestamp"):
            kept = [f for f in finalizers if f != FINALIZER]
            patched(resource, release, {"metadata": {"finalizers": kept}})
            return None  # gone as far as this controller is concerned
        if FINALIZER in finalizers:
            return release
        return patched(resource, release, {"metadata": {"finalizers": [*finalizers, FINALIZER]}})


#: The conditions that summarise the others, as Flux's controllers keep them (first in the list).
READY, STALLED = "Ready", "Stalled"
#: Applied reasons no retry fixes: kstatus' Stalled.
STALLED_REASONS = frozenset({Reason.UNSUPPORTED, Reason.UNAPPLIABLE, Reason.INVALID_SPEC})
LAST_APPLIED = "variant.example.com/last-applied-render"


@variant("ready-and-stalled-summary")
def ready_and_stalled_summary() -> None:
    """Besides Applied and Healthy, a Ready condition that sums them up (True when both are)
    and Stalled=True while the Applied reason is one no retry fixes, kept first in the list,
    as Flux's controllers (conditions.SetSummary) and kstatus-aware ones write them."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        found = {c["type"]: c for c in result.status.get("conditions") or []}
        applied = found.get("Applied")
        if applied is None:
            return result
        before = {c["type"]: c for c in conditions_of(release)}
        now = synctime.format_sync_time(self._clock.wall())
        summary = {READY: ready_of(applied, found.get("Healthy"))}
        if applied["status"] == "False" and applied["reason"] in STALLED_REASONS:
            summary[STALLED] = ("True", applied["reason"], applied["message"])
        made = [
            summary_condition(kind, *said, before.get(kind), now) for kind, said in summary.items()
        ]
        rest = [c for kind, c in sorted(found.items()) if kind not in (READY, STALLED)]
        result.status["conditions"] = [*made, *rest]
        return result


@variant("last-applied-render-annotation")
def last_applied_render_annotation() -> None:
    """After the status write of a reconcile that applied a new render, an annotation of the
    controller's own on the Release names that render (a metadata write: no generation, no
    sync-requested-at), as controllers that record on the object what they deployed do."""

    @wrap(controller.Controller, "_write_status")
    def write_status(original, self, release: Obj, status: Obj) -> None:
        original(self, release, status)
        ref = (status.get("lastSuccessful") or {}).get("renderRef")
        if ref and (release["metadata"].get("annotations") or {}).get(LAST_APPLIED) != ref:
            patched(self._releases, release, {"metadata": {"annotations": {LAST_APPLIED: ref}}})


def ready_of(applied: Obj, healthy: Obj | None) -> tuple[str, str, str]:
    """Ready's status, reason and message: Applied's while it is not True, then Healthy's."""
    if applied["status"] != "True":
        return "False", applied["reason"], applied["message"]
    if healthy is None or healthy["status"] != "True":
        said = healthy or {"status": "Unknown", "reason": "NotAssessed", "message": "no health"}
        return said["status"], said["reason"], said["message"]
    return "True", "Succeeded", applied["message"]


def summary_condition(
    kind: str, status: str, reason: str, message: str, before: Obj | None, now: str
) -> Obj:
    kept = before is not None and before["status"] == status
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": before["lastTransitionTime"] if kept and before else now,
    }


@variant("leader-election")
def leader_election() -> None:
    """Elected on a Lease before it reconciles, as a controller-runtime manager with leader
    election on (`--leader-elect`; the Lease is not released on exit, its default): the
    caches and their resync start with the process, the reconciles only once elected, and a
    restarted or crashed controller's successor waits for the old holder's Lease to expire,
    15 s from when it first sees it, before its first reconcile."""

    @wrap(convoy_main, "parse_args")
    def parse_args(original, argv: list[str] | None = None) -> argparse.Namespace:
        args = original(argv)
        args.leader_elect = True
        # where the reference's manifests let it hold a Lease
        args.leader_election_namespace = args.leader_election_namespace or "convoy-system"
        return args


def conditions_of(release: Obj) -> list[Obj]:
    return list((release.get("status") or {}).get("conditions") or [])


def patched(resource: dynamic.Resource, release: Obj, body: Obj) -> Obj | None:
    """`body` merge-patched onto the Release; None if it is gone meanwhile."""
    meta = release["metadata"]
    with contextlib.suppress(dynamic.exceptions.NotFoundError):
        return resource.patch(
            namespace=meta["namespace"],
            name=meta["name"],
            body=body,
            content_type="application/merge-patch+json",
        ).to_dict()
    return None
