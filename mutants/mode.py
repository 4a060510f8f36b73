"""Mutants of the section "Automatic and manual mode": MODE-1, AUTO-1, AUTO-2, MAN-1..3."""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any

from kubernetes.dynamic.exceptions import NotFoundError

from convoy import (
    api,
    apply,
    controller,
    hooks,
    policy,
    reconciler,
    render,
    rollout,
    synctime,
    triggers,
)
from convoy.api import Annotation, Reason
from convoyapi.discovery import dynamic_client
from mutants import mutant
from mutants.patching import key_of, sync_policy_read_once, wrap

Obj = dict[str, Any]
log = logging.getLogger("convoy")


def _with_mode(read: policy.SyncPolicy, automatic: bool) -> policy.SyncPolicy:
    return policy.SyncPolicy(automatic, read.interval, read.backoff)


@mutant("unset-automatic-is-automatic", "MODE-1.unset")
def unset_automatic_is_automatic() -> None:
    """A Release without spec.syncPolicy.automatic runs in automatic mode."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        read = original(release)
        spec = (release.get("spec") or {}).get("syncPolicy") or {}
        return read if "automatic" in spec else _with_mode(read, True)


@mutant("automatic-defaulted-into-spec", "MODE-1.no-default")
def automatic_defaulted_into_spec() -> None:
    """The controller writes automatic: false into a spec that does not set it (defaulting
    through the main resource)."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        spec = release.get("spec") or {}
        if "automatic" not in (spec.get("syncPolicy") or {}):
            meta = release["metadata"]
            resources = dynamic_client(self._core.api_client).resources
            releases = resources.get(api_version=api.API_VERSION, kind="Release")
            releases.patch(
                namespace=meta["namespace"],
                name=meta["name"],
                body={"spec": {"syncPolicy": {"automatic": False}}},
                content_type="application/merge-patch+json",
            )
        return original(self, release)


@mutant("automatic-present-means-true", "MODE-1.false")
def automatic_present_means_true() -> None:
    """The mode is automatic whenever the automatic field is present, also as false."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        spec = (release.get("spec") or {}).get("syncPolicy") or {}
        return _with_mode(original(release), "automatic" in spec)


@mutant("automatic-compared-to-a-string", "MODE-1.true")
def automatic_compared_to_a_string() -> None:
    """automatic is compared with the string "true", so the boolean true is manual mode."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        spec = (release.get("spec") or {}).get("syncPolicy") or {}
        return _with_mode(original(release), spec.get("automatic") == "true")


@mutant("mode-read-once", "MODE-1.changed")
def mode_read_once() -> None:
    """The mode is read at a Release's first reconcile and kept in memory: changes of automatic
    are ignored until a restart."""
    sync_policy_read_once("automatic")


@mutant("automatic-applies-only-changes", "AUTO-1.unchanged")
def automatic_applies_only_changes() -> None:
    """Automatic mode skips the apply when the render equals the last successful one."""

    @wrap(reconciler.Reconciler, "_apply")
    def skip(original, self, target, status: Obj, current) -> None:
        if (status.get("lastSuccessful") or {}).get("renderRef") != current.ref:
            original(self, target, status, current)


@mutant("resync-applies-only-changes-with-an-interval", "AUTO-1.unchanged")
def resync_applies_only_changes_with_an_interval() -> None:
    """A resync's reconcile of an automatic Release that has an interval skips the apply when
    the render did not change: its periodic reconcile would apply it anyway."""
    resync_only = threading.local()

    @wrap(controller.Controller, "_process")
    def process(original, self, key: str) -> None:
        with self._why_lock:
            resync_only.now = self._why.get(key) == {triggers.RESYNC}
        try:
            original(self, key)
        finally:
            resync_only.now = False

    @wrap(reconciler.Reconciler, "_remembered_apply")
    def skip(original, self, release: Obj, target, result, current) -> None:
        unchanged = (result.status.get("lastSuccessful") or {}).get("renderRef") == current.ref
        periodic = result.policy is not None and result.policy.interval > 0
        if not (getattr(resync_only, "now", False) and unchanged and periodic):
            original(self, release, target, result, current)


@mutant("apply-stops-after-the-first-object", "AUTO-1.whole-render")
def apply_stops_after_the_first_object() -> None:
    """The apply loop returns after the first object that is neither a Namespace nor a CRD (a
    misplaced return): the rest of the render is never applied."""
    original = apply._apply_one
    done = threading.local()

    def apply_one(target, obj: Obj) -> None:
        if getattr(done, "first", False):
            return
        original(target, obj)
        done.first = obj["kind"] not in ("Namespace", "CustomResourceDefinition")

    @wrap(apply, "apply")
    def apply_all(original_apply, target, objects):
        done.first = False
        return original_apply(target, objects)

    apply._apply_one = apply_one


@mutant("apply-without-force", "AUTO-2.changed")
def apply_without_force() -> None:
    """Server-side apply without forcing conflicts: drift made by another manager stays."""

    def unforced(resource, obj: Obj, dry_run: str | None = None) -> None:
        metadata = obj["metadata"]
        resource.server_side_apply(
            body=obj,
            name=metadata["name"],
            namespace=metadata.get("namespace"),
            field_manager=api.FIELD_MANAGER,
            force_conflicts=False,
            dry_run=dry_run,
        )

    apply._server_side_apply = unforced


@mutant("deleted-objects-stay-deleted", "AUTO-2.deleted")
def deleted_objects_stay_deleted() -> None:
    """An object the Release applied before and that is gone from the target is taken as
    deleted on purpose: the applies leave it out from then on (remembered in memory)."""
    deleted: set[tuple[str, str, str]] = set()
    lock, reconciling = threading.Lock(), threading.local()

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        reconciling.key = key_of(release)
        return original(self, release)

    @wrap(reconciler.Reconciler, "_apply")
    def apply_present(original, self, target, status: Obj, current) -> None:
        key = reconciling.key
        before = {(r["kind"], r["name"]) for r in status.get("appliedObjects") or []}

        def wanted(obj: Obj) -> bool:
            meta = obj["metadata"]
            identity = (key, obj["kind"], meta["name"])
            with lock:
                if identity in deleted:
                    return False
            if (obj["kind"], meta["name"]) not in before:
                return True
            try:
                resource = target.resource(obj["apiVersion"], obj["kind"])
                resource.get(name=meta["name"], namespace=meta.get("namespace"))
            except NotFoundError:
                with lock:
                    deleted.add(identity)
                return False
            return True

        kept = tuple(obj for obj in current.objects if wanted(obj))
        original(self, target, status, dataclasses.replace(current, objects=kept))


# -- manual mode -------------------------------------------------------------------------------


class _Reason(str):
    """A reason outside the document's list, for mutants that report one."""

    @property
    def value(self) -> str:
        return str(self)

    transient = False


@mutant("in-sync-reason-InSync", "MAN-1.in-sync")
def in_sync_reason_in_sync() -> None:
    """Manual mode in sync says Applied=True with reason InSync instead of Applied."""

    @wrap(reconciler, "manual_without_request")
    def in_sync(original, status: Obj, ref: str):
        outcome = original(status, ref)
        if outcome.applied:
            return reconciler.Outcome(True, _Reason("InSync"), outcome.message)
        return outcome


@mutant("in-sync-message-silent", "MAN-1.message")
def in_sync_message_silent() -> None:
    """Manual mode in sync says only "Applied", not that it is in sync and waits for /sync."""

    @wrap(reconciler, "manual_without_request")
    def quiet_message(original, status: Obj, ref: str):
        outcome = original(status, ref)
        if outcome.applied:
            return reconciler.Outcome(True, Reason.APPLIED, f"Applied render {ref}")
        return outcome


@mutant("waiting-until-the-next-apply", "MAN-1.render-back")
def waiting_until_the_next_apply() -> None:
    """Once a manual Release waits for /sync it keeps waiting until the next apply, also when
    its render changes back to the applied one (a flag kept in memory)."""
    waiting: set[str] = set()

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        outcome = original(self, release, result, requests, forced)
        key = key_of(release)
        if outcome.reason is Reason.WAITING_FOR_SYNC:
            waiting.add(key)
        elif outcome.applied and "waits for /sync" in outcome.message and key in waiting:
            return reconciler.Outcome(False, Reason.WAITING_FOR_SYNC, "still waiting for /sync")
        elif outcome.applied:
            waiting.discard(key)
        return outcome


@mutant("holds-checked-before-the-mode", "MAN-1.not-held", "MAN-2.not-held")
def holds_checked_before_the_mode() -> None:
    """The holds (a pin, a lower wave) are checked before the mode: a manual Release with no
    /sync pending reports Pinned or WaitingForWave instead of in sync or WaitingForSync."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        outcome = original(self, release, result, requests, forced)
        manual = result.policy is not None and not result.policy.automatic
        if manual and not requests.sync_pending:
            ref = result.status["renderRef"]
            return self._hold(release, result.status, ref, forced) or outcome
        return outcome


@mutant("never-applied-counts-as-in-sync", "MAN-2.never-applied")
def never_applied_counts_as_in_sync() -> None:
    """Manual mode with nothing applied yet reports Applied=True instead of WaitingForSync."""

    @wrap(reconciler, "manual_without_request")
    def in_sync(original, status: Obj, ref: str):
        if not status.get("lastSuccessful"):
            return reconciler.Outcome(True, Reason.APPLIED, "nothing to apply yet")
        return original(status, ref)


@mutant("compared-with-the-last-render", "MAN-2.different")
def compared_with_the_last_render() -> None:
    """Manual mode compares the render with the last one it saw (status.renderRef as read)
    instead of lastSuccessful.renderRef: a new render waits once, then counts as in sync."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        seen = (release.get("status") or {}).get("renderRef")
        outcome = original(self, release, result, requests, forced)
        if outcome.reason is Reason.WAITING_FOR_SYNC and seen == result.status.get("renderRef"):
            return reconciler.Outcome(True, Reason.APPLIED, "in sync; apply waits for /sync")
        return outcome


@mutant("render-ref-without-the-mutations", "MAN-2.different")
def render_ref_without_the_mutations() -> None:
    """The renderRef is the digest of the render before its mutations: a change of the
    mutations alone leaves it, and a manual Release says it is in sync."""

    @wrap(render, "render")
    def rendered(original, core, release: Obj, scope_of, *, mutate=None):
        mutated = original(core, release, scope_of, mutate=mutate)
        plain = original(core, release, scope_of)
        return render.Render(mutated.objects, plain.ref)


@mutant("success-recorded-before-the-prune", "MAN-2.after-failed-prune")
def success_recorded_before_the_prune() -> None:
    """lastSuccessful names the render once its apply succeeded, before the prune, which may
    still fail: a manual Release whose sync failed in the prune then reports in sync."""

    @wrap(reconciler.Reconciler, "_apply")
    def apply_render(original, self, target, status: Obj, current) -> None:
        try:
            original(self, target, status, current)
        except apply.ApplyError as error:
            if error.reason is Reason.PRUNE_FAILED:
                status["lastSuccessful"] = {
                    "renderRef": current.ref,
                    "appliedAt": synctime.format_sync_time(self._clock.wall()),
                }
            raise


@mutant("manual-repairs-drift-in-sync", "MAN-3.in-sync")
def manual_repairs_drift_in_sync() -> None:
    """Manual mode in sync applies the render again to repair drift, without a /sync."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        outcome = original(self, release, result, requests, forced)
        if outcome.applied and "waits for /sync" in outcome.message:
            target = self._targets.for_release(release)
            current = reconciler.render_release(self._core, release, target)
            apply.apply(target, list(current.objects))
        return outcome


@mutant("manual-dry-run-while-waiting", "MAN-3.different", "MAN-3.never-applied", "MAN-3.in-sync")
def manual_dry_run_while_waiting() -> None:
    """Manual mode without a pending /sync runs the pre-apply dry run while it waits."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        outcome = original(self, release, result, requests, forced)
        if outcome.reason is Reason.WAITING_FOR_SYNC or "waits for /sync" in outcome.message:
            target = self._targets.for_release(release)
            current = reconciler.render_release(self._core, release, target)
            apply.dry_run(target, list(current.objects))
        return outcome


@mutant("first-render-validated", "MAN-3.never-applied")
def first_render_validated() -> None:
    """A manual Release that was never applied dry-runs its render at each reconcile, to report
    problems before the first /sync."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        outcome = original(self, release, result, requests, forced)
        if outcome.reason is Reason.WAITING_FOR_SYNC and not result.status.get("lastSuccessful"):
            target = self._targets.for_release(release)
            current = reconciler.render_release(self._core, release, target)
            apply.dry_run(target, list(current.objects))
        return outcome


@mutant("manual-mode-rolls-back", "MAN-3.no-rollback")
def manual_mode_rolls_back() -> None:
    """A rollout whose healthTimeout passed is rolled back in manual mode too, with no /sync:
    the rollout's bookkeeping comes before the mode check, and applies."""

    @wrap(reconciler.Reconciler, "_check_rollout")
    def check_rollout(original, self, release: Obj, target, result, failure) -> None:
        read = result.policy
        if read is not None:
            result.policy = _with_mode(read, True)
        try:
            original(self, release, target, result, failure)
        finally:
            result.policy = read


@mutant("in-sync-with-any-remembered-render", "MAN-2.different")
def in_sync_with_any_remembered_render() -> None:
    """Manual mode asks the controller's memory of applied renders whether the current render
    was applied, besides lastSuccessful.renderRef: a render changed back to one applied earlier
    (A, then B by a /sync, then A again) reports in sync instead of WaitingForSync."""
    reconciling = threading.local()

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        key = key_of(release)
        reconciling.applied = lambda ref: self._renders.get(key, ref) is not None
        try:
            return original(self, release, result, requests, forced)
        finally:
            reconciling.applied = None

    @wrap(reconciler, "manual_without_request")
    def manual(original, status: Obj, ref: str):
        outcome = original(status, ref)
        applied = getattr(reconciling, "applied", None)
        if outcome.reason is Reason.WAITING_FOR_SYNC and applied is not None and applied(ref):
            return reconciler.Outcome(
                True,
                Reason.APPLIED,
                f"Release is in sync with render {ref}; apply waits for /sync",
            )
        return outcome


class _SpecEdit(policy.Requests):
    """The requests of a reconcile that takes a spec edit for a /sync."""

    @property
    def sync_pending(self) -> bool:
        return True


@mutant("halted-render-not-reapplied", "AUTO-1.unchanged")
def halted_render_not_reapplied() -> None:
    """Automatic mode leaves the render of a Failed (Halt) rollout as applied ("the objects stay
    as applied"): while the current render is that rollout's, its reconciles skip the dry run,
    the hooks and the apply, and report Applied."""

    @wrap(reconciler.Reconciler, "_apply_with_hooks")
    def apply_with_hooks(original, self, release: Obj, result, target, current, forced, *rest):
        found = result.status.get("rollout") or {}
        automatic = result.policy is not None and result.policy.automatic
        halted = (
            found.get("phase") == rollout.Phase.FAILED and found.get("renderRef") == current.ref
        )
        if automatic and halted and not forced:
            result.notes.append("halted: left as applied")
            return None
        return original(self, release, result, target, current, forced, *rest)


@mutant("manual-runs-pre-apply-hooks-while-waiting", "MAN-3.no-hooks")
def manual_runs_pre_apply_hooks_while_waiting() -> None:
    """A manual Release whose render waits for /sync (WaitingForSync) already runs its preApply
    hook batches, so that the /sync does not wait for them: hook objects are applied to the
    target without a request. The outcome stays WaitingForSync."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        outcome = original(self, release, result, requests, forced)
        if outcome.reason is not Reason.WAITING_FOR_SYNC:
            return outcome
        key = key_of(release)
        lifecycle = hooks.Lifecycle.parse(reconciler._annotation(release, Annotation.LIFECYCLE))
        if not lifecycle.pre_apply:
            return outcome
        try:
            target = self._targets.for_release(release)
            namespace = reconciler._target_namespace(release)
            self._hooks.run(key, hooks.PRE_APPLY, lifecycle.pre_apply, target, namespace)
        except Exception as error:  # a warm-up: the /sync's own run reports what fails
            log.debug("preApply warm-up of %s: %s", key, error)
        finally:
            self._hooks.forget(key)  # the /sync's run starts its own 60 s
        return outcome
