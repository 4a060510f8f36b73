"""An executable model of one Release under the sync policy (../shared/seed/sync-policy.txt).

Written from the document and the API reference alone (it never imports the reference
controller): a small, pure, deterministic state machine. Events change the state and say
whether they start a reconcile; `reconcile()` predicts what a conforming controller does in
that reconcile (a pre-apply dry run or not, an apply attempt or not, the Applied condition, the
handled times) and when it must reconcile the Release again. Request times come with the
events; the model never reads a clock.

What the document leaves open, the model leaves open: `Due` names every moment the next
reconcile may come at, and the caller accepts any of them.

The events are those a test can cause from outside the cluster: create, a spec edit (a new
generation), a source edit (a new render, no generation change), a /sync (forced or not, at a
chosen time) and the removal of its annotation, a pin written or removed through the /pin
subresource, a lifecycle hook batch written and turning Healthy, other annotations and labels,
applies refused or let through (the witness), a resync tick, the observer's new health data, a
controller restart.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime

#: The work queue's default rate limiter (no retryBackoff.initial): 5 ms, doubling, to 1000 s.
DEFAULT_LIMITER_START = 0.005
#: The cap of every backoff ladder without retryBackoff.max.
DEFAULT_MAX = 1000.0
#: Below 1 (or unset) the factor is 2.
DEFAULT_FACTOR = 2.0

TRANSIENT = "DeployFailed"  # the transient failure the model's refused applies cause


def second(at: datetime) -> datetime:
    """Request times are compared, and handled times written, to the second."""
    return at.replace(microsecond=0)


@dataclass(frozen=True)
class RetryBackoff:
    """spec.syncPolicy.retryBackoff, in seconds; `initial` None is the default limiter."""

    initial: float | None = None
    factor: float | None = None
    max: float | None = None

    def delay(self, retry: int) -> float:
        """The delay before retry number `retry` (1 for the first retry)."""
        if self.initial is None:
            return min(DEFAULT_LIMITER_START * 2 ** (retry - 1), DEFAULT_MAX)
        factor = DEFAULT_FACTOR if self.factor is None or self.factor < 1 else self.factor
        cap = DEFAULT_MAX if self.max is None else self.max
        return min(self.initial * factor ** (retry - 1), cap)


@dataclass(frozen=True)
class Due:
    """When the next reconcile may come, in seconds after the reconcile that decided it.

    `requeue`: a retry the requeue rules schedule (a transient failure), None when there is
    none. `periodic`: spec.syncPolicy.interval, None without one. Besides these, the informer
    resync and the events of "What starts a reconcile" may always come first.
    """

    requeue: float | None = None
    periodic: float | None = None

    def earliest(self) -> float | None:
        """The soonest scheduled moment (None: only the resync and events)."""
        scheduled = [d for d in (self.requeue, self.periodic) if d is not None]
        return min(scheduled) if scheduled else None


@dataclass(frozen=True)
class Prediction:
    """What one reconcile does, as the cluster shows it."""

    dry_run: bool
    #: an apply attempt (let through, or refused: then reason is the transient failure)
    apply: bool
    applied: str  # the Applied condition's status: "True" or "False"
    reason: str
    last_handled_sync: datetime | None
    last_handled_force: datetime | None
    due: Due


@dataclass
class ReleaseModel:
    """One Release as the sync policy sees it."""

    automatic: bool = False
    interval: float | None = None
    backoff: RetryBackoff = field(default_factory=RetryBackoff)
    render: str = "v1"
    last_successful: str | None = None
    sync_requested_at: datetime | None = None
    force_requested_at: datetime | None = None
    last_handled_sync: datetime | None = None
    last_handled_force: datetime | None = None
    pinned_to: str | None = None
    #: the lifecycle annotation holds a preApply hook batch that is not Healthy yet
    hooks_waiting: bool = False
    refusing: bool = False
    failures: int = 0
    exists: bool = False

    # -- events: each says whether it starts a reconcile -------------------------------------
    def create(self) -> bool:
        self.exists = True
        return True

    def edit_spec(
        self,
        *,
        automatic: bool | None = None,
        interval: float | None = None,
        backoff: RetryBackoff | None = None,
    ) -> bool:
        """A spec edit changes metadata.generation: a reconcile (only the given fields change).
        An edit that writes the values the spec holds changes no generation: no reconcile."""
        before = (self.automatic, self.interval, self.backoff)
        if automatic is not None:
            self.automatic = automatic
        if interval is not None:
            self.interval = interval
        if backoff is not None:
            self.backoff = backoff
        return (self.automatic, self.interval, self.backoff) != before

    def edit_source(self, render: str) -> bool:
        """A new render: no generation change, so no reconcile of its own."""
        self.render = render
        return False

    def request_sync(self, at: datetime, *, force: bool = False) -> bool:
        """POST /sync (or a direct write of the annotations). A reconcile when the
        sync-requested-at annotation changed."""
        changed = at != self.sync_requested_at
        self.sync_requested_at = at
        if force:
            self.force_requested_at = at
        return changed

    def remove_sync_request(self) -> bool:
        """sync-requested-at deleted: a change of the annotation (a reconcile), and no request
        pending any more."""
        changed = self.sync_requested_at is not None
        self.sync_requested_at = None
        return changed

    def write_pin(self, render: str | None, at: datetime) -> bool:
        """PUT (a render) or DELETE (None) of /pin: it also writes sync-requested-at, which
        counts as a /sync request in manual mode, and starts a reconcile at once."""
        self.pinned_to = render
        return self.request_sync(at)

    def write_lifecycle(self, *, waiting: bool) -> bool:
        """The lifecycle annotation written through the main resource: no generation change,
        so no reconcile of its own; the next reconcile that gets to the hooks runs its batch
        (`waiting`: one not Healthy yet, which ends that reconcile in WaitingForHooks)."""
        self.hooks_waiting = waiting
        return False

    def hook_batch_healthy(self) -> bool:
        """The batch turned Healthy: hook objects are not part of the render, so no health
        data of the inventory changed and no reconcile starts; the observer's /sync, which
        it sends for a batch a reconcile left waiting, is a `request_sync`."""
        self.hooks_waiting = False
        return False

    def edit_other_metadata(self) -> bool:
        """Another annotation, or a label: no generation change, no reconcile."""
        return False

    def refuse_applies(self, refusing: bool) -> bool:
        """The API server refuses the controller's applies (or lets them through again)."""
        self.refusing = refusing
        return False

    def resync(self) -> bool:
        return True

    def observe_health(self) -> bool:
        """The observer writes new health data to the ReleaseInventory (an object of the
        applied render turned Healthy or Degraded): a reconcile (TRIG-6). The /sync it sends
        when the applied render turns Healthy for the first time is a `request_sync`."""
        return True

    def restart(self) -> bool:
        """The controller restarts: the failure count is in memory; the first list
        reconciles every Release."""
        self.failures = 0
        return True

    # -- what a reconcile does ---------------------------------------------------------------
    @property
    def periodic(self) -> float | None:
        """With interval not set or 0, no periodic reconcile."""
        return self.interval or None

    @property
    def sync_pending(self) -> bool:
        """Manual mode: the annotation is later than lastHandledSyncAt, to the second."""
        return _later(self.sync_requested_at, self.last_handled_sync)

    @property
    def force_pending(self) -> bool:
        return _later(self.force_requested_at, self.last_handled_force)

    def reconcile(self) -> Prediction:
        """Predict one reconcile and take its effects into the state."""
        forced = self.force_pending
        if not self.automatic and not self.sync_pending:
            in_sync = self.last_successful == self.render
            prediction = self._hold("True" if in_sync else "False", _manual_reason(in_sync))
        elif self.pinned_to is not None and self.pinned_to != self.render:
            prediction = self._hold("False", "Pinned", dry_run=False)
        elif self.hooks_waiting:  # preApply hooks come after the dry run, before the apply
            prediction = self._hold("False", "WaitingForHooks", dry_run=not forced)
        elif self.refusing:
            prediction = self._transient_failure(dry_run=not forced)
        else:
            prediction = self._success(dry_run=not forced)
        if forced:
            assert self.force_requested_at is not None
            self.last_handled_force = second(self.force_requested_at)
            prediction = dataclasses.replace(prediction, last_handled_force=self.last_handled_force)
        return prediction

    def _hold(self, status: str, reason: str, *, dry_run: bool = False) -> Prediction:
        """Nothing applied; a hold resets the count; not transient: the next periodic."""
        self.failures = 0
        return self._prediction(dry_run, False, status, reason, Due(periodic=self.periodic))

    def _transient_failure(self, *, dry_run: bool) -> Prediction:
        """The apply fails: the request stays pending, the retry waits the backoff delay."""
        self.failures += 1
        due = Due(requeue=self.backoff.delay(self.failures), periodic=self.periodic)
        return self._prediction(dry_run, True, "False", TRANSIENT, due)

    def _success(self, *, dry_run: bool) -> Prediction:
        self.failures = 0
        self.last_successful = self.render
        if not self.automatic:
            assert self.sync_requested_at is not None
            self.last_handled_sync = second(self.sync_requested_at)
        return self._prediction(dry_run, True, "True", "Applied", Due(periodic=self.periodic))

    def _prediction(
        self, dry_run: bool, apply: bool, status: str, reason: str, due: Due
    ) -> Prediction:
        return Prediction(
            dry_run=dry_run,
            apply=apply,
            applied=status,
            reason=reason,
            last_handled_sync=self.last_handled_sync,
            last_handled_force=self.last_handled_force,
            due=due,
        )


def _later(requested: datetime | None, handled: datetime | None) -> bool:
    """A request is pending when its second is later than the last handled one."""
    if requested is None:
        return False
    return handled is None or second(requested) > handled


def _manual_reason(in_sync: bool) -> str:
    return "Applied" if in_sync else "WaitingForSync"
