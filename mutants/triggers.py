"""Mutants of the section "What starts a reconcile": TRIG-1..10."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from convoy import __main__ as entry
from convoy import controller, observer, policy, reconciler, waves
from convoy.api import Annotation, ConditionType
from convoy.durations import parse_duration
from convoy.informer import EventType, object_key
from convoy.triggers import INVENTORY_HEALTH, RESYNC
from mutants import mutant
from mutants.patching import wrap

Obj = dict[str, Any]


def _annotation(obj: Obj | None, name: str) -> str | None:
    return (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(name)


def _automatic(release: Obj) -> bool:
    try:
        return policy.SyncPolicy.of(release).automatic
    except policy.SpecError:
        return False


# -- TRIG-1, TRIG-2 ----------------------------------------------------------------------------
@mutant("create-ignored", "TRIG-1.automatic", "TRIG-1.manual")
def create_ignored() -> None:
    """Creating a Release starts no reconcile (only the initial list does)."""

    @wrap(controller.Controller, "_on_release")
    def on_release(original, self, event) -> None:
        if event.type == "ADDED" and self.informer.wait_synced(0):
            return
        original(self, event)


@mutant("create-reconciles-only-automatic", "TRIG-1.manual")
def create_reconciles_only_automatic() -> None:
    """A created manual Release is not reconciled: "it waits for /sync anyway"."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        return None if found == "created" and not _automatic(event.new) else found


@mutant("generation-ignored", "TRIG-2.automatic", "TRIG-2.manual")
def generation_ignored() -> None:
    """A change of metadata.generation starts no reconcile."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        return None if found == "generation-changed" else found


@mutant("generation-reconciles-only-automatic", "TRIG-2.manual")
def generation_reconciles_only_automatic() -> None:
    """A spec change of a manual Release starts no reconcile: "it waits for /sync anyway"."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        return None if found == "generation-changed" and not _automatic(event.new) else found


# -- TRIG-3 ------------------------------------------------------------------------------------
def _trigger_on(changed: Any) -> None:
    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        if found or event.old is None or event.type != EventType.MODIFIED:
            return found
        return "metadata-changed" if changed(event.old, event.new) else None


@mutant("any-annotation-triggers", "TRIG-3.label", "TRIG-3.other-annotation")
def any_annotation_triggers() -> None:
    """A change of any annotation or label starts a reconcile."""
    _trigger_on(
        lambda old, new: any(
            old["metadata"].get(k) != new["metadata"].get(k) for k in ("annotations", "labels")
        )
    )


@mutant("label-change-triggers", "TRIG-3.label")
def label_change_triggers() -> None:
    """A change of the labels starts a reconcile (a selector might now match)."""
    _trigger_on(lambda old, new: old["metadata"].get("labels") != new["metadata"].get("labels"))


@mutant("force-annotation-triggers", "TRIG-3.force-annotation")
def force_annotation_triggers() -> None:
    """A change of either request annotation starts a reconcile, sync-force-requested-at too."""
    force = Annotation.SYNC_FORCE_REQUESTED_AT
    _trigger_on(lambda old, new: _annotation(old, force) != _annotation(new, force))


@mutant("pin-annotation-triggers", "TRIG-3.pin-annotation")
def pin_annotation_triggers() -> None:
    """A change of the pin annotation starts a reconcile, also when written directly."""
    pin = Annotation.PIN
    _trigger_on(lambda old, new: _annotation(old, pin) != _annotation(new, pin))


# -- TRIG-4, TRIG-5, TRIG-6 --------------------------------------------------------------------
@mutant("resync-ignored", "TRIG-4.flag")
def resync_ignored() -> None:
    """The informer resync starts no reconcile."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        return None if found == "resync" else found


@mutant("resync-skips-manual-releases", "TRIG-4.flag")
def resync_skips_manual_releases() -> None:
    """The resync reconciles automatic Releases only: "a manual one waits for /sync"."""
    _resync_skips(lambda read: not read.automatic)


@mutant("resync-skips-releases-with-an-interval", "TRIG-4.flag")
def resync_skips_releases_with_an_interval() -> None:
    """The resync reconciles only Releases without an interval: "their own timer covers
    them"."""
    _resync_skips(lambda read: read.interval > 0)


def _resync_skips(skipped: Callable[[policy.SyncPolicy], bool]) -> None:
    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        if found != "resync":
            return found
        try:
            return None if skipped(policy.SyncPolicy.of(event.new)) else found
        except policy.SpecError:
            return found


@mutant("resync-skips-releases-backing-off", "TRIG-4.flag")
def resync_skips_releases_backing_off() -> None:
    """The resync leaves a Release alone while a backoff retry is scheduled for it: "the
    resync must not undercut the backoff"."""

    @wrap(controller.Controller, "enqueue")
    def enqueue(original, self, key: str, why: str) -> None:
        if why == RESYNC and self.queue.num_requeues(key):
            return
        original(self, key, why)


@mutant("resync-flag-ignored", "TRIG-4.flag")
def resync_flag_ignored() -> None:
    """--resync is parsed but not passed on: the informer always resyncs every 2 minutes."""

    @wrap(controller.Controller, "__init__")
    def init(original, self, api_client, *, resync: float, **kwargs) -> None:
        original(self, api_client, resync=120.0, **kwargs)


@mutant("default-resync-1m", "TRIG-4.default", phase="shipped")
def default_resync_1m() -> None:
    """Without --resync the resync period is 1 minute instead of 2."""

    @wrap(entry, "parse_args")
    def parse_args(original, argv=None):
        args = original(argv)
        given = argv if argv is not None else sys.argv[1:]
        if not any(arg.startswith("--resync") for arg in given):
            args.resync = parse_duration("1m")
        return args


@mutant("requeue-after-dropped", "TRIG-5.interval", "INT-1.period")
def requeue_after_dropped() -> None:
    """A scheduled requeue (the interval) never fires."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        if result.outcome.reason.transient:
            return original(self, key, result)
        self.queue.forget(key)
        return "periodic requeue dropped"


@mutant("inventory-ignored", "TRIG-6.new-health")
def inventory_ignored() -> None:
    """New health data in the ReleaseInventory starts no reconcile."""
    controller.inventory_trigger = lambda event: None


@mutant("inventory-drift-is-news", "TRIG-6.not-drift-or-times")
def inventory_drift_is_news() -> None:
    """A drift check written to the inventory (its time and drift list, its health data
    unchanged) also starts a reconcile, as if it were new health data."""

    @wrap(controller.Controller, "_on_inventory")
    def on_inventory(original, self, event) -> None:
        original(self, event)
        if event.type != EventType.MODIFIED or event.old is None:
            return
        old, new = event.old.get("status") or {}, event.new.get("status") or {}
        if old.get("driftCheckedAt") != new.get("driftCheckedAt"):
            self.enqueue(object_key(event.new), "inventory-drift")


@mutant("inventory-entries-ignored", "TRIG-6.new-entries")
def inventory_entries_ignored() -> None:
    """Only the inventory's renderRef and render health count as new health data, not the
    health of each object."""

    def trigger(event) -> str | None:
        if event.type != EventType.MODIFIED or event.old is None:
            return None
        old, new = event.old.get("status") or {}, event.new.get("status") or {}
        changed = any(old.get(f) != new.get(f) for f in ("renderRef", "health"))
        return INVENTORY_HEALTH if changed else None

    controller.inventory_trigger = trigger


# -- TRIG-7 ------------------------------------------------------------------------------------
@mutant(
    "lower-waves-ignored",
    "TRIG-7.Healthy",
    "TRIG-7.Applied",
    "TRIG-7.every-higher-wave",
    "TRIG-7.to-True",
)
def lower_waves_ignored() -> None:
    """A lower wave's condition change starts no reconcile of the higher waves."""
    controller.wave_trigger = lambda event: False


def _wave_trigger_on(kind: ConditionType) -> None:
    def trigger(event) -> bool:
        if event.type != EventType.MODIFIED or event.old is None:
            return False
        return waves.condition_status(event.old, kind) != waves.condition_status(event.new, kind)

    controller.wave_trigger = trigger


@mutant("wave-trigger-on-healthy-only", "TRIG-7.Applied")
def wave_trigger_on_healthy_only() -> None:
    """Only a change of the lower wave's Healthy status reconciles the higher waves."""
    _wave_trigger_on(ConditionType.HEALTHY)


@mutant("wave-trigger-on-applied-only", "TRIG-7.Healthy")
def wave_trigger_on_applied_only() -> None:
    """Only a change of the lower wave's Applied status reconciles the higher waves."""
    _wave_trigger_on(ConditionType.APPLIED)


def _wave_trigger_when(changed: Callable[[Obj, Obj], bool]) -> None:
    def trigger(event) -> bool:
        return (
            event.type == EventType.MODIFIED
            and event.old is not None
            and changed(event.old, event.new)
        )

    controller.wave_trigger = trigger


@mutant("wave-trigger-only-when-a-lower-wave-unsettles", "TRIG-7.to-True")
def wave_trigger_only_when_a_lower_wave_unsettles() -> None:
    """Only a lower wave that stops being Applied and Healthy reconciles the higher waves
    (a wave that settles is left to the observer's /sync)."""
    _wave_trigger_when(lambda old, new: waves.settled(old) and not waves.settled(new))


@mutant("wave-trigger-only-when-a-lower-wave-settles-or-unsettles", "TRIG-7.unsettled")
def wave_trigger_only_when_a_lower_wave_settles_or_unsettles() -> None:
    """Only a lower wave that becomes, or stops being, Applied and Healthy reconciles the
    higher waves: what they wait for, compared where the statuses should be."""
    _wave_trigger_when(lambda old, new: waves.settled(old) != waves.settled(new))


@mutant("wave-trigger-skips-a-first-status", "TRIG-7.first-status")
def wave_trigger_skips_a_first_status() -> None:
    """A status that appears where there was none is no change: a new lower-wave Release
    reconciles no higher wave."""

    def changed(old: Obj, new: Obj) -> bool:
        pairs = zip(waves.statuses(old), waves.statuses(new), strict=True)
        return any(before is not None and before != after for before, after in pairs)

    _wave_trigger_when(changed)


def _conditions(release: Obj) -> list[tuple[Any, ...]]:
    conditions = (release.get("status") or {}).get("conditions") or []
    return [(c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in conditions]


@mutant("wave-trigger-on-any-condition-change", "TRIG-7.not-reason-or-message")
def wave_trigger_on_any_condition_change() -> None:
    """A change of a lower wave's conditions, reasons and messages included, reconciles the
    higher waves."""
    _wave_trigger_when(lambda old, new: _conditions(old) != _conditions(new))


@mutant("a-deleted-lower-wave-reconciles-the-higher-waves", "TRIG-7.not-deletion")
def a_deleted_lower_wave_reconciles_the_higher_waves() -> None:
    """A delete counts as a change of status (the lower wave's conditions went away): the
    higher waves are reconciled at once instead of at their next reconcile."""
    changed = controller.wave_trigger
    controller.wave_trigger = lambda event: event.type == EventType.DELETED or changed(event)


@mutant("a-deleted-settled-lower-wave-reconciles-the-higher-waves", "TRIG-7.not-deletion")
def a_deleted_settled_lower_wave_reconciles_the_higher_waves() -> None:
    """Deleting a lower-wave Release that was Applied and Healthy counts as its wave
    unsettling: the higher waves are reconciled at once (an unsettled one's deletion is no
    change, the author reasoned: the higher waves were waiting for it anyway)."""
    changed = controller.wave_trigger

    def trigger(event) -> bool:
        return (event.type == EventType.DELETED and waves.settled(event.new)) or changed(event)

    controller.wave_trigger = trigger


@mutant("a-deletion-completes-the-lower-wave", "TRIG-7.not-deletion")
def a_deletion_completes_the_lower_wave() -> None:
    """The observer takes a deletion that leaves the rest of a wave all Applied and Healthy
    for the wave completing, and sends the next wave its /syncs."""

    @wrap(observer.Observer, "on_release")
    def on_release(original, self, event) -> None:
        original(self, event)
        if event.type != EventType.DELETED:
            return
        deleted, others = event.new, self._same_cluster(event.new)
        wave = [
            o
            for o in waves.same_cluster(deleted, others)
            if waves.wave_of(o) == waves.wave_of(deleted)
        ]
        if wave and all(waves.settled(o) for o in wave):
            for release in waves.next_wave(deleted, others):
                self._request_sync(release, "wave completed by a deletion")


@mutant("only-the-next-wave-reconciled", "TRIG-7.every-higher-wave")
def only_the_next_wave_reconciled() -> None:
    """A lower wave's change reconciles the next wave only, not the waves above it."""
    controller.higher_waves = waves.next_wave


@mutant("every-other-wave-reconciled", "TRIG-7.not-lower-wave", "TRIG-7.not-same-wave")
def every_other_wave_reconciled() -> None:
    """A change of any wave reconciles every other wave of the Cluster, lower ones too."""
    controller.higher_waves = waves.same_cluster


@mutant("same-wave-reconciled", "TRIG-7.not-same-wave")
def same_wave_reconciled() -> None:
    """A change reconciles the Releases of its own wave besides the higher ones: "lower"
    compared as "not higher" (>= for >)."""

    def same_or_higher(release: Obj, others) -> list[Obj]:
        wave = waves.wave_of(release)
        return [o for o in waves.same_cluster(release, others) if waves.wave_of(o) >= wave]

    controller.higher_waves = same_or_higher


@mutant("wave-ignores-the-cluster-ref", "TRIG-7.not-other-cluster")
def wave_ignores_the_cluster_ref() -> None:
    """Releases of one namespace count as one Cluster whatever their clusterRef."""
    _cluster_of(lambda release: (release["metadata"]["namespace"], ""))


@mutant("wave-ignores-the-namespace", "TRIG-7.not-other-namespace")
def wave_ignores_the_namespace() -> None:
    """Releases that name the same Cluster (or none) count as on one Cluster across
    namespaces."""
    _cluster_of(
        lambda release: (
            "",
            ((release.get("spec") or {}).get("clusterRef") or {}).get("name") or "",
        )
    )


def _cluster_of(key: Callable[[Obj], tuple[str, str]]) -> None:
    """Which Cluster a Release is on, wherever the controller asks: the waves' own functions,
    and the Release cache's index by Cluster (bound when the controller starts)."""
    waves.cluster_of = key
    controller.cluster_of = key


# -- TRIG-8 ------------------------------------------------------------------------------------
@mutant("status-writes-enqueue", "TRIG-8.own-writes", "TRIG-8.any-writer")
def status_writes_enqueue() -> None:
    """Every update of a Release starts a reconcile, status writes included."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        return original(event) or ("status-or-metadata" if event.type == "MODIFIED" else None)


@mutant("foreign-status-writes-repaired", "TRIG-8.any-writer")
def foreign_status_writes_repaired() -> None:
    """A status write that is not the controller's own (not what it wrote last) starts a
    reconcile, to repair the status."""
    written: dict[str, Obj] = {}
    lock = threading.Lock()

    @wrap(controller.Controller, "_write_status")
    def write_status(original, self, release: Obj, status: Obj) -> None:
        with lock:
            written[object_key(release)] = status
        original(self, release, status)

    @wrap(controller.Controller, "_on_release")
    def on_release(original, self, event) -> None:
        original(self, event)
        if event.type != EventType.MODIFIED or event.old is None:
            return
        key, new = object_key(event.new), event.new.get("status") or {}
        with lock:
            own = written.get(key)
        if new != (event.old.get("status") or {}) and own is not None and new != own:
            conditions = {c["type"] for c in new.get("conditions") or []}
            if conditions - {c["type"] for c in own.get("conditions") or []}:
                self.enqueue(key, "status-repair")


# -- TRIG-9, TRIG-10 ---------------------------------------------------------------------------
@mutant("mutations-annotation-triggers", "TRIG-9.mutations", "TRIG-9.lifecycle")
def mutations_annotation_triggers() -> None:
    """A change of the mutations or lifecycle annotation through the main resource reconciles."""
    watched = (Annotation.MUTATIONS, Annotation.LIFECYCLE)
    _trigger_on(lambda old, new: any(_annotation(old, a) != _annotation(new, a) for a in watched))


@mutant("lifecycle-annotation-triggers", "TRIG-9.lifecycle")
def lifecycle_annotation_triggers() -> None:
    """A change of the lifecycle annotation through the main resource reconciles."""
    hooks = Annotation.LIFECYCLE
    _trigger_on(lambda old, new: _annotation(old, hooks) != _annotation(new, hooks))


@mutant("mutations-read-at-a-request-only", "TRIG-9.mutations")
def mutations_read_at_a_request_only() -> None:
    """The mutations are cached per Release and read again only at a /sync request: a change
    written through the main resource is not used by the periodic reconcile."""
    cached: dict[str, tuple[str | None, str | None]] = {}
    lock = threading.Lock()

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        key = object_key(release)
        requested = _annotation(release, Annotation.SYNC_REQUESTED_AT)
        current = _annotation(release, Annotation.MUTATIONS)
        with lock:
            stamp, mutations = cached.get(key, (requested, current))
            if stamp != requested:
                stamp, mutations = requested, current
            cached[key] = (stamp, mutations)
        annotations = dict(release["metadata"].get("annotations") or {})
        if mutations is None:
            annotations.pop(Annotation.MUTATIONS, None)
        else:
            annotations[Annotation.MUTATIONS] = mutations
        metadata = {**release["metadata"], "annotations": annotations}
        return original(self, {**release, "metadata": metadata})


@mutant("stale-observed-generation-triggers", "TRIG-8.any-writer")
def stale_observed_generation_triggers() -> None:
    """Besides a change of the generation, any update of a Release whose
    status.observedGeneration differs from metadata.generation starts a reconcile: the author
    took "the spec is not observed yet" for the generation predicate, so a status write by
    another writer that drops or lowers observedGeneration reconciles the Release."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        if found or event.type != EventType.MODIFIED or event.old is None:
            return found
        new = event.new
        observed = (new.get("status") or {}).get("observedGeneration")
        return "generation-not-observed" if observed != new["metadata"].get("generation") else None


@mutant("sync-waits-out-the-backoff", "SYNC-2.during-backoff")
def sync_waits_out_the_backoff() -> None:
    """A change of sync-requested-at that comes while a transient failure's backoff retry is
    scheduled does not start a reconcile at once: it is folded into the scheduled retry ("an
    event must not undercut the backoff")."""
    _events_wait_out_the_backoff("sync-requested")


@mutant("spec-change-waits-out-the-backoff", "TRIG-2.during-backoff")
def spec_change_waits_out_the_backoff() -> None:
    """A spec change (a new generation) that comes while a transient failure's backoff retry
    is scheduled is folded into the scheduled retry, as if the new spec could wait for it."""
    _events_wait_out_the_backoff("generation-changed")


def _events_wait_out_the_backoff(trigger: str) -> None:
    """Events of `trigger` that come while a backoff retry is scheduled wait for the retry."""
    retry_at: dict[str, float] = {}
    lock = threading.Lock()

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        decided = original(self, key, result)
        with lock:
            if result.outcome.reason.transient:
                read = result.policy
                limiter = read.backoff.delay if read and read.backoff else self.queue._limiter
                retry_at[key] = self._clock.now() + limiter(self.queue.num_requeues(key))
            else:
                retry_at.pop(key, None)
        return decided

    @wrap(controller.Controller, "enqueue")
    def enqueue(original, self, key: str, why: str) -> None:
        if why == trigger:
            with lock:
                due = retry_at.get(key)
            wait = due - self._clock.now() if due is not None else 0.0
            if wait > 0:
                with self._why_lock:
                    self._why[key].add(why)
                self.queue.add_after(key, wait)
                return
        original(self, key, why)
