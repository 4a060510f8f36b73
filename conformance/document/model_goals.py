"""The cases the model-based run aims for, and which of them a run's sequences reached.

A uniform draw of events reaches some of the document's cases only by luck in the few steps
of the CI profile: a manual request in lastHandledSyncAt's second, the one before or the one
after it; a removed request whose reconcile shows; a ladder of refusals long enough that a
retryBackoff's curve differs from a wrong one by more than the timing band; a WaitingForSync
hold between two failures; a new render under an interval in each mode; the observer's /sync
for a render turned Healthy, in each mode, and none when it turns Healthy again; its /sync for
a completed hook batch, and a forced reconcile that waits for one. Each goal names one such case
and the clause it shows. A goal is reached when the model, stepped by a sequence, shows the
case: the goals read the model's state before and after each step and its predictions, never
the cluster, so a rehearsal of a profile's sequences
(conformance.harness.model_based.rehearse) says which goals its seed reaches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from conformance.document.model import TRANSIENT, Prediction, ReleaseModel, RetryBackoff, second

#: Two retry delays a sequence tells apart: more than the timing band's late side (0.5 s) and
#: a reconcile on a loaded machine.
DISTINCT_DELAYS = 0.8

#: A manual request's second against lastHandledSyncAt's: the clause each case shows.
REQUEST_GOALS = {
    "earlier": "SYNC-3.not-later: a manual request in a second before lastHandledSyncAt's",
    "same": "SYNC-4.same-second: a manual request in lastHandledSyncAt's second",
    "next": "SYNC-4.next-second: a manual request in the second after lastHandledSyncAt's",
}
REMOVED_GOAL = "SYNC-2.removed: a removed request whose reconcile shows"
HOLD_GOAL = "BACK-4.hold-WaitingForSync: a ladder after a hold reset the failure count"
#: A new render under an interval, by the mode the periodic reconcile finds the Release in.
PERIODIC_GOALS = {
    True: "TRIG-5.interval: the periodic reconcile applies a new render (automatic mode)",
    False: "INT-1.manual: the periodic reconcile reports a new render (manual mode)",
}
#: The observer's /sync for a render turned Healthy after its apply, and none for a render that
#: turns Healthy again.
OBSERVER_GOALS = {
    "automatic": "SYNC-9.automatic: the observer's /sync for a render turned Healthy (automatic "
    "mode)",
    "manual": "SYNC-9.new-render: the observer's /sync applies a newer render (manual mode)",
    "again": "SYNC-9.new-render-once: no /sync for a render that turns Healthy again",
}
#: A preApply hook batch a reconcile waits for (WaitingForHooks) turning Healthy.
HOOK_GOALS = {
    "manual": "SYNC-9.hooks: the observer's /sync for a completed hook batch applies the render "
    "(manual mode)",
    "forced": "FORCE-5.wait: a forced reconcile that waits for a hook batch is handled, and the "
    "observer's /sync after it runs the dry run (FORCE-4.after-wait)",
}

#: The retries a ladder climbs before its curve shows, by the retryBackoff it climbs
#: (conformance.harness.model_based.BACKOFFS), and the clause it shows. The default limiter's 5 ms
#: doubling passes the band only at its fifth retry.
LADDERS = {
    "default": ("BACK-6.ladder", 5),
    "1s": ("BACK-2.unset", 2),
    "1s-x2": ("BACK-1.formula", 2),
    "1s-x1.9": ("BACK-1.formula", 2),
    "100ms-x1": ("BACK-1.formula", 2),
    "1s-x1": ("BACK-2.exactly-1", 2),
    "1s-x0.5": ("BACK-2.below-1", 2),
    "1s-x3-max1500ms": ("BACK-3.max", 2),
    "3s-x2-max1s": ("BACK-3.max-below-initial", 1),
}


def ladder_goal(backoff: str) -> str:
    clause, retries = LADDERS[backoff]
    return f"{clause}: a ladder of {retries} retries on {backoff}"


#: Every goal: a clause and its case.
GOALS = (
    *REQUEST_GOALS.values(),
    REMOVED_GOAL,
    *(ladder_goal(name) for name in LADDERS),
    HOLD_GOAL,
    *PERIODIC_GOALS.values(),
    *OBSERVER_GOALS.values(),
    *HOOK_GOALS.values(),
)


@dataclass
class Goals:
    """The goals one run's sequences reached, observed step by step on the model."""

    backoffs: dict[RetryBackoff, str]
    reached: set[str] = field(default_factory=set)
    #: the failure count a WaitingForSync hold reset (0: none since the last success)
    reset_by_hold: int = 0

    def observe_step(
        self,
        before: ReleaseModel,
        after: ReleaseModel,
        predictions: list[Prediction],
        shown: Prediction | None,
    ) -> None:
        """A step's event took the model from `before` to `after` and started `predictions`
        (none: no reconcile); the Release showed `shown` before it."""
        if predictions:
            self._request(before, after)
            self._removal(before, after, predictions[0], shown)
            self._ladder(after.backoff, predictions)

    def observe_reconcile(
        self, failures_before: int, prediction: Prediction, backoff: RetryBackoff
    ) -> None:
        """Every reconcile the model predicts, the resync ticks' included."""
        if prediction.reason == "WaitingForSync" and failures_before:
            self.reset_by_hold = failures_before
        elif prediction.reason == TRANSIENT:
            if (
                not failures_before
                and self.reset_by_hold
                and _distinct(backoff.delay(1), backoff.delay(self.reset_by_hold + 1))
            ):
                self.reached.add(HOLD_GOAL)
        elif prediction.apply:
            self.reset_by_hold = 0

    def observe_periodic(self, *, automatic: bool) -> None:
        """A new render waited for the periodic reconcile, in automatic mode or in manual."""
        self.reached.add(PERIODIC_GOALS[automatic])

    def observe_observer_sync(self, *, automatic: bool, applied_newer: bool) -> None:
        """A render turned Healthy after its apply: the observer's /sync came, in automatic
        mode, or in manual mode where it applied a newer render."""
        if automatic:
            self.reached.add(OBSERVER_GOALS["automatic"])
        elif applied_newer:
            self.reached.add(OBSERVER_GOALS["manual"])

    def observe_healthy_again(self) -> None:
        self.reached.add(OBSERVER_GOALS["again"])

    def observe_hook_batch(self, *, automatic: bool, forced: bool) -> None:
        """A reconcile waited for a hook batch, whose /sync then applied the render."""
        if forced:
            self.reached.add(HOOK_GOALS["forced"])
        if not automatic:
            self.reached.add(HOOK_GOALS["manual"])

    def count_from_zero(self) -> None:
        """A new sequence, or a new controller process: no count is kept, whatever the holds
        did."""
        self.reset_by_hold = 0

    def missed(self) -> list[str]:
        return [goal for goal in GOALS if goal not in self.reached]

    def _request(self, before: ReleaseModel, after: ReleaseModel) -> None:
        requested, handled = after.sync_requested_at, before.last_handled_sync
        forced = after.force_requested_at != before.force_requested_at
        unchanged = requested == before.sync_requested_at
        if before.automatic or forced or unchanged or requested is None or handled is None:
            return
        offset = (second(requested) - handled) // timedelta(seconds=1)
        case = "earlier" if offset < 0 else {0: "same", 1: "next"}.get(offset)
        if case is not None:
            self.reached.add(REQUEST_GOALS[case])

    def _removal(
        self,
        before: ReleaseModel,
        after: ReleaseModel,
        first: Prediction,
        shown: Prediction | None,
    ) -> None:
        """A removal whose reconcile applies, or changes what the Release shows."""
        if before.sync_requested_at is None or after.sync_requested_at is not None:
            return
        if (
            first.apply
            or shown is None
            or (shown.applied, shown.reason) != (first.applied, first.reason)
        ):
            self.reached.add(REMOVED_GOAL)

    def _ladder(self, backoff: RetryBackoff, predictions: list[Prediction]) -> None:
        name = self.backoffs.get(backoff)
        retries = sum(p.due.requeue is not None for p in predictions)
        if name in LADDERS and retries >= LADDERS[name][1]:
            self.reached.add(ladder_goal(name))


def _distinct(delay: float, other: float) -> bool:
    return abs(delay - other) > DISTINCT_DELAYS
