"""The mutants, one or more per rule. Each docstring says what is broken."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import tempfile
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

from convoy import (
    api,
    apply,
    backoff,
    controller,
    kubectl_plugin,
    observer,
    policy,
    reconciler,
    rollout,
    subresources,
    synctime,
)
from convoy.api import Annotation, Reason
from mutants import mutant

Obj = dict[str, Any]


def wrap(owner: Any, name: str):
    """Decorator: replace owner.name by a wrapper that receives the original first."""

    def decorate(wrapper):
        original = getattr(owner, name)

        @functools.wraps(original)
        def patched(*args, **kwargs):
            return wrapper(original, *args, **kwargs)

        setattr(owner, name, patched)
        return wrapper

    return decorate


# -- mode --------------------------------------------------------------------------------------
@mutant("unset-automatic-is-automatic", "MODE-1")
def unset_automatic_is_automatic() -> None:
    """A Release without spec.syncPolicy.automatic runs in automatic mode."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        read = original(release)
        spec = (release.get("spec") or {}).get("syncPolicy") or {}
        return read if "automatic" in spec else policy.SyncPolicy(True, read.interval, read.backoff)


@mutant("automatic-applies-only-changes", "AUTO-1")
def automatic_applies_only_changes() -> None:
    """Automatic mode skips the apply when the render equals the last successful one."""

    @wrap(reconciler.Reconciler, "_apply")
    def skip(original, self, target, status: Obj, current) -> None:
        if (status.get("lastSuccessful") or {}).get("renderRef") != current.ref:
            original(self, target, status, current)


@mutant("apply-without-force", "AUTO-2")
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


@mutant("in-sync-message-silent", "MAN-1")
def in_sync_message_silent() -> None:
    """Manual mode in sync says only "Applied", not that it is in sync and waits for /sync."""

    @wrap(reconciler, "manual_without_request")
    def quiet_message(original, status: Obj, ref: str):
        outcome = original(status, ref)
        if outcome.applied:
            return reconciler.Outcome(True, Reason.APPLIED, f"Applied render {ref}")
        return outcome


@mutant("never-applied-counts-as-in-sync", "MAN-2")
def never_applied_counts_as_in_sync() -> None:
    """Manual mode with nothing applied yet reports Applied=True instead of WaitingForSync."""

    @wrap(reconciler, "manual_without_request")
    def in_sync(original, status: Obj, ref: str):
        if not status.get("lastSuccessful"):
            return reconciler.Outcome(True, Reason.APPLIED, "nothing to apply yet")
        return original(status, ref)


@mutant("manual-dry-run-while-waiting", "MAN-3")
def manual_dry_run_while_waiting() -> None:
    """Manual mode without a pending /sync runs the pre-apply dry run while it waits."""
    original = reconciler.Reconciler._sync

    def sync(self, release: Obj, result, requests, forced: bool):
        outcome = original(self, release, result, requests, forced)
        if outcome.reason in (Reason.WAITING_FOR_SYNC,) or "waits for /sync" in outcome.message:
            target = self._targets.for_release(release)
            current = reconciler.render.render(self._core, release, scope_of=target.scope_of)
            apply.dry_run(target, list(current.objects))
        return outcome

    reconciler.Reconciler._sync = sync


# -- /sync -------------------------------------------------------------------------------------
@mutant("sync-annotation-ignored", "SYNC-2")
def sync_annotation_ignored() -> None:
    """A change of sync-requested-at does not start a reconcile."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        return None if found == "sync-requested" else found


@mutant("any-request-is-pending", "SYNC-3")
def any_request_is_pending() -> None:
    """Any sync-requested-at different from lastHandledSyncAt is pending, also an older one."""

    def pending(self) -> bool:
        if self.sync_at is None:
            return False
        handled = self.last_handled_sync
        return handled is None or synctime.truncate_to_second(self.sync_at) != (
            synctime.truncate_to_second(handled)
        )

    policy.Requests.sync_pending = property(pending)


@mutant("sub-second-comparison", "SYNC-4")
def sub_second_comparison() -> None:
    """The pending check compares with sub-second precision instead of whole seconds."""

    def pending(self) -> bool:
        handled = self.last_handled_sync
        return self.sync_at is not None and (handled is None or self.sync_at > handled)

    policy.Requests.sync_pending = property(pending)


@mutant("handled-on-failure", "SYNC-5")
def handled_on_failure() -> None:
    """lastHandledSyncAt is written when the apply fails, too."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        requests = policy.Requests.of(release)
        if result.outcome.reason.transient and requests.sync_pending:
            result.status["lastHandledSyncAt"] = reconciler.second(requests.sync_at)
        return result


@mutant("failed-request-forgotten", "SYNC-6")
def failed_request_forgotten() -> None:
    """A request whose apply failed is remembered (in memory) as done and not tried again."""
    failed: set[tuple[str, str]] = set()

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        meta = release["metadata"]
        stamp = (meta.get("annotations") or {}).get(Annotation.SYNC_REQUESTED_AT, "")
        key = (f"{meta['namespace']}/{meta['name']}", stamp)
        if key in failed:
            patched = {
                **release,
                "status": {**(release.get("status") or {}), "lastHandledSyncAt": stamp},
            }
            return original(self, patched)
        result = original(self, release)
        if result.outcome.reason.transient:
            failed.add(key)
        return result


@mutant("automatic-uses-last-handled", "SYNC-7")
def automatic_uses_last_handled() -> None:
    """Automatic mode applies only when sync-requested-at is later than lastHandledSyncAt."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        if result.policy.automatic and requests.sync_at and not requests.sync_pending:
            return reconciler.Outcome(True, Reason.APPLIED, "already handled")
        return original(self, release, result, requests, forced)


# -- force -------------------------------------------------------------------------------------
@mutant("force-runs-dry-run", "FORCE-2")
def force_runs_dry_run() -> None:
    """A forced reconcile still runs the pre-apply dry run."""

    @wrap(reconciler.Reconciler, "_sync")
    def sync(original, self, release: Obj, result, requests, forced: bool):
        return original(self, release, result, requests, False)


@mutant("force-lasts-two-reconciles", "FORCE-4")
def force_lasts_two_reconciles() -> None:
    """A forced request skips the dry run in two reconciles, not one."""
    seen: dict[str, int] = {}

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        requests = policy.Requests.of(release)
        result = original(self, release)
        if requests.force_pending:
            key = json.dumps([release["metadata"]["uid"], str(requests.force_at)])
            seen[key] = seen.get(key, 0) + 1
            if seen[key] < 2:
                result.status["lastHandledForceSyncAt"] = (release.get("status") or {}).get(
                    "lastHandledForceSyncAt"
                )
                if result.status["lastHandledForceSyncAt"] is None:
                    del result.status["lastHandledForceSyncAt"]
        return result


@mutant("force-handled-only-on-success", "FORCE-5")
def force_handled_only_on_success() -> None:
    """lastHandledForceSyncAt is written only when the forced reconcile succeeds."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        result = original(self, release)
        if not result.outcome.applied:
            previous = (release.get("status") or {}).get("lastHandledForceSyncAt")
            result.status.pop("lastHandledForceSyncAt", None)
            if previous:
                result.status["lastHandledForceSyncAt"] = previous
        return result


# -- triggers ----------------------------------------------------------------------------------
@mutant("create-ignored", "TRIG-1")
def create_ignored() -> None:
    """Creating a Release starts no reconcile (only the initial list does)."""

    @wrap(controller.Controller, "_on_release")
    def on_release(original, self, event) -> None:
        if event.type == "ADDED" and self.informer.wait_synced(0):
            return
        original(self, event)


@mutant("generation-ignored", "TRIG-2")
def generation_ignored() -> None:
    """A change of metadata.generation starts no reconcile."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        return None if found == "generation-changed" else found


@mutant("any-annotation-triggers", "TRIG-3")
def any_annotation_triggers() -> None:
    """A change of any annotation or label starts a reconcile."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        if found or event.old is None:
            return found
        old, new = event.old["metadata"], event.new["metadata"]
        changed = any(old.get(k) != new.get(k) for k in ("annotations", "labels"))
        return "metadata-changed" if changed else None


@mutant("resync-ignored", "TRIG-4")
def resync_ignored() -> None:
    """The informer resync starts no reconcile."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        return None if found == "resync" else found


@mutant("requeue-after-dropped", "TRIG-5", "INT-1")
def requeue_after_dropped() -> None:
    """A scheduled requeue (the interval) never fires."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        if result.outcome.reason.transient:
            return original(self, key, result)
        self.queue.forget(key)
        return "periodic requeue dropped"


@mutant("status-writes-enqueue", "TRIG-8")
def status_writes_enqueue() -> None:
    """Every update of a Release starts a reconcile, status writes included."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        return original(event) or ("status-or-metadata" if event.type == "MODIFIED" else None)


# -- requeue and interval ----------------------------------------------------------------------
@mutant("transient-not-retried", "REQ-1")
def transient_not_retried() -> None:
    """Transient failures are not retried with backoff: they wait like holds."""
    Reason.transient = property(lambda self: False)


@mutant("everything-retried", "REQ-2")
def everything_retried() -> None:
    """Non-transient reasons (Unappliable, Unsupported, waiting) are retried with backoff."""
    Reason.transient = property(lambda self: self is not Reason.APPLIED)


@mutant("interval-doubled", "INT-1")
def interval_doubled() -> None:
    """The periodic reconcile comes at twice spec.syncPolicy.interval."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        read = original(release)
        return policy.SyncPolicy(read.automatic, 2 * read.interval, read.backoff)


@mutant("default-interval", "INT-3")
def default_interval() -> None:
    """Without an interval, the Release is reconciled every 3 seconds anyway."""

    @wrap(policy.SyncPolicy, "of")
    def of(original, release: Obj):
        read = original(release)
        return read if read.interval else policy.SyncPolicy(read.automatic, 3.0, read.backoff)


# -- retryBackoff ------------------------------------------------------------------------------
@mutant("backoff-exponent-off-by-one", "BACK-1")
def backoff_exponent_off_by_one() -> None:
    """The delay before retry n is initial x factor^n instead of factor^(n-1)."""

    @wrap(backoff.RetryBackoff, "delay")
    def delay(original, self, retry: int) -> float:
        return original(self, retry + 1)


@mutant("factor-below-one-kept", "BACK-2")
def factor_below_one_kept() -> None:
    """A factor below 1 is used as is instead of 2."""
    backoff.RetryBackoff.effective_factor = property(
        lambda self: 2.0 if self.factor is None else self.factor
    )


@mutant("max-ignored", "BACK-3")
def max_ignored() -> None:
    """retryBackoff.max does not cap the delay."""
    backoff.RetryBackoff.effective_max = property(lambda self: 1000.0)


@mutant("default-cap-600", "BACK-3", long_only=True)
def default_cap_600() -> None:
    """Without retryBackoff.max the cap is 600 seconds instead of 1000."""
    backoff.RetryBackoff.effective_max = property(
        lambda self: 600.0 if self.max is None else self.max
    )


@mutant("hold-keeps-count", "BACK-4")
def hold_keeps_count() -> None:
    """A success or a hold does not reset the failure count."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        forget = self.queue.forget
        self.queue.forget = lambda item: None
        try:
            return original(self, key, result)
        finally:
            self.queue.forget = forget


@mutant("count-survives-restart", "BACK-5")
def count_survives_restart() -> None:
    """Failure counts are saved to a file and restored when the controller restarts."""

    def state_file(api_client) -> Path:
        # One file per API server: runs against other clusters never read each other's counts.
        server = hashlib.sha256(api_client.configuration.host.encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"convoy-mutant-counts-{os.getuid()}-{server}.json"

    def read(state: Path) -> dict[str, int]:
        try:
            return json.loads(state.read_text())
        except (OSError, ValueError):
            return {}

    @wrap(controller.Controller, "__init__")
    def init(original, self, api_client, *args, **kwargs) -> None:
        original(self, api_client, *args, **kwargs)
        self.mutant_state = state_file(api_client)
        for key, count in read(self.mutant_state).items():
            for _ in range(count):
                self.queue._failures.record(key)

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        decided = original(self, key, result)
        counts = read(self.mutant_state) | {key: self.queue.num_requeues(key)}
        # Written aside and renamed: a controller stopped mid-write leaves the old file whole.
        written = self.mutant_state.with_suffix(f".{threading.get_ident()}.tmp")
        written.write_text(json.dumps(counts))
        written.replace(self.mutant_state)
        return decided


@mutant("default-limiter-starts-at-50ms", "BACK-6")
def default_limiter_starts_at_50ms() -> None:
    """The default rate limiter starts at 50 milliseconds instead of 5."""
    original = backoff.default_delay
    controller_queue_init = controller.WorkQueue.__init__

    def init(self, clock=None, limiter=backoff.default_limiter) -> None:
        controller_queue_init(self, clock, lambda retry: min(10 * original(retry - 1), 1000.0))

    controller.WorkQueue.__init__ = init


# -- the subresource API, the observer, waves, rollouts (part 2) -------------------------------
@mutant("sync-writes-an-old-time", "SYNC-1")
def sync_writes_an_old_time() -> None:
    """POST releases/<name>/sync writes a time an hour old instead of the current time."""

    @wrap(subresources.SubresourceAPI, "_annotations")
    def annotations(original, self, request, subresource):
        written = original(self, request, subresource)
        if subresource is subresources.Subresource.SYNC:
            old = synctime.format_sync_time(self._clock.wall() - timedelta(hours=1), precise=True)
            written = {key: old for key in written}
        return written


@mutant("pin-write-is-no-request", "SYNC-8")
def pin_write_is_no_request() -> None:
    """A write to /pin stores the pin without setting sync-requested-at."""

    @wrap(subresources.SubresourceAPI, "_annotations")
    def annotations(original, self, request, subresource):
        written = original(self, request, subresource)
        if subresource is subresources.Subresource.PIN:
            written.pop(Annotation.SYNC_REQUESTED_AT)
        return written


@mutant("mutations-write-is-no-request", "TRIG-10", "SYNC-8")
def mutations_write_is_no_request() -> None:
    """Writes to /mutations and /lifecycle store their data without setting sync-requested-at."""

    @wrap(subresources.SubresourceAPI, "_annotations")
    def annotations(original, self, request, subresource):
        written = original(self, request, subresource)
        if subresource in (subresources.Subresource.MUTATIONS, subresources.Subresource.LIFECYCLE):
            written.pop(Annotation.SYNC_REQUESTED_AT)
        return written


@mutant("force-annotation-not-written", "FORCE-1")
def force_annotation_not_written() -> None:
    """POST .../sync?force=true writes only sync-requested-at, not sync-force-requested-at."""

    @wrap(subresources.SubresourceAPI, "_annotations")
    def annotations(original, self, request, subresource):
        written = original(self, request, subresource)
        written.pop(Annotation.SYNC_FORCE_REQUESTED_AT, None)
        return written


@mutant("observer-never-syncs", "SYNC-9")
def observer_never_syncs() -> None:
    """The observer never sends a /sync (waves, new healthy render, hook batches)."""
    observer.Observer._request_sync = lambda self, release, why: None


@mutant("force-keeps-the-rollout", "FORCE-3")
def force_keeps_the_rollout() -> None:
    """A forced sync does not start a new rollout; a Failed or RolledBack one stays."""

    @wrap(rollout.Rollouts, "start_if_new")
    def start_if_new(original, self, key: str, status: Obj, ref: str, forced: bool) -> bool:
        return original(self, key, status, ref, False)


@mutant("inventory-ignored", "TRIG-6")
def inventory_ignored() -> None:
    """New health data in the ReleaseInventory starts no reconcile."""
    controller.inventory_trigger = lambda event: None


@mutant("lower-waves-ignored", "TRIG-7")
def lower_waves_ignored() -> None:
    """A lower wave's condition change starts no reconcile of the higher waves."""
    controller.wave_trigger = lambda event: False


@mutant("mutations-annotation-triggers", "TRIG-9")
def mutations_annotation_triggers() -> None:
    """A change of the mutations or lifecycle annotation through the main resource reconciles."""

    @wrap(controller, "release_trigger")
    def trigger(original, event):
        found = original(event)
        if found or event.old is None:
            return found
        watched = (Annotation.MUTATIONS, Annotation.LIFECYCLE)
        old = event.old["metadata"].get("annotations") or {}
        new = event.new["metadata"].get("annotations") or {}
        return "hooks-changed" if any(old.get(a) != new.get(a) for a in watched) else None


@mutant("drift-checked-every-3s", "INT-2")
def drift_checked_every_3s() -> None:
    """The observer checks drift every 3 seconds, whatever the Release's interval."""
    observer._interval = lambda release: 3.0


# -- kubectl convoy (a plugin process: the runner puts a mutated kubectl-convoy on PATH) -------
@mutant("plugin-sync-does-nothing", "SYNC-10", kind="plugin")
def plugin_sync_does_nothing() -> None:
    """`kubectl convoy release sync` reports success without sending the POST."""

    @wrap(kubectl_plugin, "send")
    def send(original, api_client, namespace: str, name: str, action):
        if action.subresource is subresources.Subresource.SYNC:
            return {"metadata": {"annotations": {}}}
        return original(api_client, namespace, name, action)


@mutant("plugin-ignores-force", "FORCE-6", kind="plugin")
def plugin_ignores_force() -> None:
    """`kubectl convoy release sync NAME --force` sends the POST without force."""

    @wrap(kubectl_plugin, "sync")
    def sync(original, args):
        return dataclasses.replace(original(args), force=False)
