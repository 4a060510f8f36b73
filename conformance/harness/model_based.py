"""The model-based run: generated sequences of events against the controller under test, each
step's observations checked against the sync-policy model (conformance.document.model).

hypothesis' stateful testing draws the sequences: Releases with each retryBackoff boundary
(BACKOFFS), at creation and by spec edits; /sync requests at chosen times (now, in the past,
in the future, the same second as the last handled one or the last request, the next, an
earlier one), forced or not, with applies refused; ladders climbed on a chosen retryBackoff as
deep as its curve needs to show; a refused apply's retry cut short by a crash, or by a
withdrawn request and then a new refusal; removed requests; new renders; mode switches; other
annotations; controller restarts (where the controller is this worker's own: a shared one is
restarted only by BACK-5.restart's test, which has it alone). Some rules aim at cases a
uniform draw reaches only by luck in a short sequence (conformance.document.model_goals); the report
says which of those cases a run's sequences reached.
Each step waits for a resync-free slot as long as its retries need, causes its event on the
cluster and in the model, and then checks what the witness recorded (dry runs and applies, in
order, and the delay of each retry) and what the Release says (Applied, the handled times, the
applied render: at the step's end, and for each reconcile a retry follows, before that retry)
against the model; the resync ticks between steps are checked too, and that
they come at the controller's period. A failure shrinks to a short sequence, reported as its
steps with the seed and the command that replays it.

A new render waits under an interval in a step of its own: the interval set (a spec edit), the
render changed, the periodic reconcile that takes it checked (never sooner than its period) and
the interval taken off again (unset or 0), after which a second new render sees no reconcile for
a period; elsewhere no interval is drawn, so that every other step's reconciles are its own.
A new render whose Widget turns Healthy after its apply has a step of its own too: the
observer's /sync for it (SYNC-9), a request in manual mode that applies the newest render, and
its news (TRIG-6), which in automatic mode may share the /sync's reconcile or start one more (the
witness' attempts say which). A step drawn after it turns the render Degraded and Healthy again:
two news reconciles and no /sync.
Retry delays stay short so that a sequence runs in seconds. Profiles (--model-profile, per shard of
the test): `ci` the same sequences at every run (its seed is fixed, and reaches every goal),
`long` new ones (a certifying run's), `kill` the CI sequences without shrinking (a kill table
against the mutants). --model-seed=N with the same profile draws the same sequences again,
shrinking included. A rehearsal (`rehearse`) draws a profile's sequences on the model alone.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from conformance.document.model import TRANSIENT, Prediction, ReleaseModel, RetryBackoff, second
from conformance.document.model_goals import LADDERS, Goals
from conformance.document.model_profiles import Profile
from conformance.install.base import ControllerUnderTest
from conformance.observe import subresources, widgets
from conformance.observe.releases import (
    App,
    Obj,
    Releases,
    applied_is,
    condition,
    kinds,
    not_by_suite,
    parse_time,
)
from conformance.observe.resync import ResyncClock
from conformance.observe.witness import Attempt, WitnessTimeout
from conformance.timing import HOOK_BATCH_TIMEOUT, OBSERVER_PERIOD, Timing, parse_seconds
from convoyapi import LIFECYCLE, SYNC_REQUESTED_AT

#: retryBackoff values whose ladders a mutant's differs from by more than the timing band
#: (an early retry by its early side, 0.1 s; a late one by its late side, 0.5 s and the
#: reconcile time), in seconds a sequence can wait: each default and each boundary of BACK-1..3
#: and BACK-6. The default limiter's few milliseconds are inside the band: BACK-6 is checked
#: for its order of retries only.
BACKOFFS = {
    "default": RetryBackoff(),
    "1s": RetryBackoff(1.0),
    "1s-x2": RetryBackoff(1.0, 2.0),
    "1s-x1": RetryBackoff(1.0, 1.0),
    "1s-x0.5": RetryBackoff(1.0, 0.5),
    "1s-x1.9": RetryBackoff(1.0, 1.9),
    "100ms-x1": RetryBackoff(0.1, 1.0),
    "1s-x3-max1500ms": RetryBackoff(1.0, 3.0, 1.5),
    "3s-x2-max1s": RetryBackoff(3.0, 2.0, 1.0),
}
#: The name each drawn retryBackoff goes by, for the goals.
BACKOFF_NAMES = {backoff: name for name, backoff in BACKOFFS.items()}
#: The longest run of refused applies a step draws: a third retry shows a ladder's curve. The
#: default limiter's retries come milliseconds apart: its ladder shows past the timing band
#: from its fifth retry on (BACK-6), so a step climbs it deeper.
MOST_REFUSALS = 3
MOST_DEFAULT_LIMITER_REFUSALS = 6
#: How long a step without retries may take on a loaded machine: its reconciles and checks,
#: and the settle periods it waits for (at most this many, each the run's `settle`). A step's
#: resync-free slot adds its retries and restart.
STEP_WORK = 4.0
STEP_SETTLES = 2


def step_seconds(settle: float) -> float:
    return STEP_WORK + STEP_SETTLES * settle


#: A step at the default settle period: what a rehearsal's clock takes each step to last.
STEP_SECONDS = step_seconds(Timing().settle)
RESTART_SECONDS = 8.0
#: Each retry's allowance beyond its delay: the controller's reconcile and the band's late side.
RETRY_SECONDS = 1.0
#: The interval a new render waits under (INT-1, TRIG-5): long enough that a reconcile the render
#: change started (none may) shows well before the periodic one is due on a loaded machine. Its
#: band here is wide (the example tests measure periods); the step is about what each reconcile
#: does.
PERIODIC_INTERVAL = "3500ms"
#: How that interval is taken off again (INT-3), as spec.syncPolicy.interval is written (None:
#: removed).
INTERVAL_OFF: dict[str, str | None] = {"unset": None, "0s": "0s", "0": "0"}
#: Request times: (what they are relative to, seconds from its second). "handled" is
#: lastHandledSyncAt, "requested" the last request's time (both: now when there is none, so
#: that a forced request in automatic mode, say, is in the past or the future too).
REQUEST_TIMES = {
    "now": ("now", 0.0),
    "3s-ago": ("now", -3.0),
    "in-3s": ("now", 3.0),
    "handled-same-second": ("handled", 0.0),
    "handled-next-second": ("handled", 1.0),
    "before-handled": ("handled", -5.0),
    "requested-same-second": ("requested", 0.0),
    "after-requested": ("requested", 1.0),
    "before-requested": ("requested", -5.0),
}
#: The request times around lastHandledSyncAt's second.
NEAR_HANDLED = ("handled-same-second", "handled-next-second", "before-handled")


def periodic_slot(period: float, step: float) -> float:
    """What a step under an interval needs beyond a step's own: the periodic reconcile, the
    interval's removal and its reconcile, the one the interval may have scheduled before, and
    the quiet period after it."""
    return step + 3 * (period + RETRY_SECONDS)


def seconds_text(seconds: float) -> str:
    return f"{seconds * 1000:g}ms"


def backoff_spec(backoff: RetryBackoff) -> dict[str, Any]:
    """spec.syncPolicy.retryBackoff as written, without the fields left unset."""
    spec: dict[str, Any] = {}
    if backoff.initial is not None:
        spec["initial"] = seconds_text(backoff.initial)
    if backoff.factor is not None:
        # As the API server stores it: a whole 2.0 comes back as 2, and writing 2.0 over it
        # again would change metadata.generation, a spec change the model does not expect.
        spec["factor"] = int(backoff.factor) if backoff.factor.is_integer() else backoff.factor
    if backoff.max is not None:
        spec["max"] = seconds_text(backoff.max)
    return spec


@dataclass(kw_only=True)
class Run:
    """Sequences run on the model: how many, their steps, and the goals they reached."""

    sequences: int = 0
    steps: int = 0
    #: the first failure of a step, as it was raised (a replay of its sequence may go otherwise)
    first_failure: BaseException | None = None
    goals: Goals = field(default_factory=lambda: Goals(BACKOFF_NAMES))

    @property
    def restarts(self) -> bool:
        """Whether the sequences draw controller restarts."""
        raise NotImplementedError

    def sequence(self, name: str, model: ReleaseModel) -> Sequence:
        """A new sequence of one Release named `name` (its failure count starts at 0)."""
        raise NotImplementedError

    def now(self) -> datetime:
        """The time a request is drawn relative to."""
        return datetime.now(UTC)

    def summary(self, profile: Profile) -> dict[str, Any]:
        """What the report records of the run."""
        return {
            "profile": profile.name,
            "seed": profile.seed,
            "shard": profile.shard,
            "sequences": self.sequences,
            "steps": self.steps,
            "restarts": self.restarts,
            "goalsReached": sorted(self.goals.reached),
            "goalsMissed": self.goals.missed(),
            "replay": profile.replay,
        }


@dataclass
class Rehearsal(Run):
    """A profile's sequences on the model alone, no cluster: what its seed draws and which
    goals the draws reach. Nothing a sequence draws reads the cluster, so a run on the
    reference controller draws the same; resync ticks between steps, which a rehearsal has
    none of, change no draw."""

    restarts: bool = True
    #: the rehearsal's clock: each reading comes a step later than the one before, as no
    #: step on a cluster takes less
    clock: datetime = datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        self.clock += timedelta(seconds=STEP_SECONDS)
        return self.clock

    def sequence(self, name: str, model: ReleaseModel) -> Sequence:
        self.goals.count_from_zero()
        return Sequence(self, model)


@dataclass
class World(Run):
    """What the machine drives: the test's fixtures, and what it has done so far."""

    releases: Releases
    clock: ResyncClock
    timing: Timing
    #: the controller to restart between steps; None where the run draws no restarts
    restartable: ControllerUnderTest | None

    @property
    def restarts(self) -> bool:
        return self.restartable is not None

    def sequence(self, name: str, model: ReleaseModel) -> Driver:
        self.goals.count_from_zero()
        return Driver(self, model, app=App(self.releases, name))

    def restart_controller(self) -> None:
        assert self.restartable is not None
        self.restartable.restart()

    def crash_controller(self) -> None:
        """SIGKILL, then a new process: nothing of the old one's memory survives."""
        assert self.restartable is not None
        self.restartable.crash()


@dataclass
class Sequence:
    """One generated sequence on the model: its steps, the refusals the witness is still to
    make, what the Release shows, and the goals it reaches. Alone, it is a rehearsal: the
    events happen in the model only. A Driver causes them on a cluster too."""

    run: Run
    model: ReleaseModel
    #: applies the witness is still to refuse
    refusals: int = 0
    steps: list[str] = field(default_factory=list)
    #: what the last predicted reconcile left the Release showing
    shown: Prediction | None = None
    #: whether the step under way restarts the controller
    restarting: bool = False
    #: the Widget of the applied render that turned Healthy at a step of its own, while the
    #: render holds it and the controller that saw it is still running
    healthy_widget: str | None = None

    @property
    def history(self) -> str:
        return " -> ".join(self.steps)

    def step(
        self,
        what: str,
        event: Callable[[ReleaseModel], bool],
        act: Callable[[Driver], object],
        *,
        refused: int = 0,
        restart: bool = False,
    ) -> None:
        """Cause `event` in the model (and `act` on the cluster), then check the outcome; the
        step's first `refused` applies are refused."""
        since = self._begin(what, refused, restart=restart)
        self._act(act)
        before, shown = copy.copy(self.model), self.shown
        predictions = self._predict() if event(self.model) else []
        self.run.goals.observe_step(before, self.model, predictions, shown)
        self._finish(predictions, since)

    def interrupted_retries(self, what: str, interruption: str, refused: int) -> None:
        """A pending request's apply is refused, and before its first retry comes the
        controller is killed (and started again) or the request is withdrawn. Then the retry
        the refusal scheduled is gone, or finds nothing to apply; the remaining refusals
        climb a new ladder."""
        since = self._begin(what, refused, restart=True)
        # Pending in manual mode whatever was handled, a future second included.
        now = self.run.now()
        at = max(now, request_time(self.model, "handled", 1.0, now))
        assert self.model.request_sync(at), "the request changes the annotation"
        first = self._predict_one()
        assert first.reason == TRANSIENT, "the step is drawn only where the request is pending"
        self._interrupt(interruption, at, first)
        if interruption == "crash":
            self.restart_model()
            self._finish([first, *self._predict()], since, chained_from=1)
        else:
            self.model.remove_sync_request()
            self._finish([first, self._predict_one()], since, chained_from=2)

    def periodic_render(self, written: str, content: str, off: str) -> None:
        """The interval `written` set (a spec edit: a reconcile), a new render `content` under
        it (no reconcile of its own), which the next periodic reconcile applies in automatic
        mode and reports in manual mode; then the interval taken off (`off`, INTERVAL_OFF): the
        reconcile it had scheduled may still come, once, and after it a second new render
        waits, as no periodic reconcile comes for it."""
        period = parse_seconds(written)
        since = self._begin(
            f"render({content}) every {written}, then interval {off}",
            0,
            restart=False,
            extra=periodic_slot(period, self._step_seconds()),
        )
        predictions = self._edit_interval(period, written)
        predictions += self._periodic(content, period)
        removal = self._edit_interval(0.0, INTERVAL_OFF[off])
        predictions += removal + self._scheduled_before_the_removal(period, removal)
        self._no_periodic_reconcile(f"{content}-after", period)
        self.run.goals.observe_periodic(automatic=self.model.automatic)
        self._finish(predictions, since)

    def _edit_interval(self, period: float, written: str | None) -> list[Prediction]:
        """spec.syncPolicy.interval written (`period` seconds; None removes it): a spec edit."""
        return self._predict() if self.model.edit_spec(interval=period) else []

    def _periodic(self, content: str, period: float) -> list[Prediction]:
        """A new render under an interval of `period`: the periodic reconcile takes it."""
        self.model.edit_source(content)
        return self._predict()

    def _scheduled_before_the_removal(
        self, period: float, removal: list[Prediction]
    ) -> list[Prediction]:
        """The periodic reconcile scheduled before the interval was taken off (`removal` its
        reconcile), if it comes (a rehearsal: it does not; nothing the model predicts
        differs)."""
        return []

    def _no_periodic_reconcile(self, content: str, period: float) -> None:
        """A new render once the interval is off: no reconcile of its own, none periodic."""
        self.model.edit_source(content)

    def render_turning_healthy(self, content: str, newer: str | None) -> None:
        """A render `content` with a Widget that is not Healthy yet, applied at a /sync (a
        pending one in manual mode); a newer render `newer` with the same Widget written
        meanwhile (None: none). The Widget then turns Healthy: the observer writes the news (a
        reconcile, TRIG-6) and sends a /sync (SYNC-9), a request like any other in manual mode:
        it applies the newest render."""
        # Of this sequence's own: one a deleted Release of the namespace left would be
        # Healthy already at the apply.
        widget = f"worker-{self.run.sequences}-{content}"
        meanwhile = f", render({newer}) meanwhile" if newer else ""
        since = self._begin(
            f"render({content}) turning Healthy{meanwhile}",
            0,
            restart=False,
            extra=self._health_seconds(),
        )
        predictions = self._apply_unhealthy(content, widget)
        if newer is not None:
            self._render_meanwhile(newer, widget)
        predictions += self._turns_healthy(widget)
        self.healthy_widget = widget
        self.run.goals.observe_observer_sync(
            automatic=self.model.automatic, applied_newer=self.model.last_successful == newer
        )
        self._finish(predictions, since)

    def healthy_again(self) -> None:
        """The applied render, Healthy since the observer's /sync, turns Degraded and Healthy
        again: its news starts a reconcile each time (TRIG-6), and the observer sends no /sync,
        as the render is no new one (SYNC-9)."""
        widget = self.healthy_widget
        assert widget is not None, "drawn only after a render turned Healthy"
        since = self._begin(
            f"{widget} Degraded, then Healthy again",
            0,
            restart=False,
            extra=self._health_seconds() + self._observer_quiet(),
        )
        sent = self._last_sync()
        predictions = self._health_news(widget, "Degraded")
        predictions += self._health_news(widget, "Healthy")
        self._no_sync_since(sent)
        self.run.goals.observe_healthy_again()
        self._finish(predictions, since)

    def hook_batch(self, force: bool) -> None:
        """A preApply hook batch whose Widget is not Healthy yet, written in the lifecycle
        annotation (through the main resource: no reconcile of its own), and a request, forced
        or not, that the next reconcile takes in either mode: it runs the dry run unless
        forced, then waits for the batch (WaitingForHooks, a hold: a manual request stays
        pending, a forced one is handled). The Widget turns Healthy: the observer sends a
        /sync for that wait (SYNC-9), and its reconcile applies the render."""
        hook = f"hook-{self.run.sequences}-{len(self.steps)}"
        forced = " (forced)" if force else ""
        since = self._begin(
            f"hook batch {hook}{forced}", 0, restart=False, extra=self._health_seconds()
        )
        predictions = self._hooks_wait(hook, force=force)
        forced_wait = not predictions[0].dry_run
        predictions += self._hook_batch_healthy(hook)
        self.run.goals.observe_hook_batch(automatic=self.model.automatic, forced=forced_wait)
        self._finish(predictions, since)

    def _hooks_wait(self, hook: str, *, force: bool) -> list[Prediction]:
        """The batch written, and a pending request: its reconcile waits for the batch."""
        self.model.write_lifecycle(waiting=True)
        at = self._pending_request_time()
        assert self.model.request_sync(at, force=force), "a later request changes the annotation"
        predictions = self._predict()
        assert predictions[-1].reason == "WaitingForHooks", "a pending request runs the hooks"
        return predictions

    def _hook_batch_healthy(self, hook: str) -> list[Prediction]:
        """The batch turned Healthy: the observer's /sync (in a rehearsal, sent at once)."""
        return self._hook_batch_sync(self.run.now())

    def _hook_batch_sync(self, at: datetime) -> list[Prediction]:
        """The reconcile of the observer's /sync at `at` for the completed batch."""
        self.model.hook_batch_healthy()
        return self._predict() if self.model.request_sync(at) else []

    def _pending_request_time(self) -> datetime:
        """A request time that is pending in either mode: later than the last request's
        second, and than the handled one."""
        now = self.run.now()
        return max(
            now,
            request_time(self.model, "handled", 1.0, now),
            request_time(self.model, "requested", 1.0, now),
        )

    def _apply_unhealthy(self, content: str, widget: str) -> list[Prediction]:
        """The render with its Widget, and a request that applies it in either mode."""
        at = self._pending_request_time()
        self.model.edit_source(content)
        assert self.model.request_sync(at), "a later request changes the annotation"
        predictions = self._predict()
        assert predictions[-1].apply, "a pending request with applies let through applies"
        return predictions

    def _render_meanwhile(self, content: str, widget: str) -> None:
        """A newer render, the same Widget in it: no reconcile of its own."""
        self.model.edit_source(content)

    def _turns_healthy(self, widget: str) -> list[Prediction]:
        """The Widget turned Healthy: the observer's news and its /sync (in a rehearsal, sent
        at once)."""
        return self._observer_reports(self.run.now())

    def _observer_reports(self, sync_at: datetime) -> list[Prediction]:
        """The reconciles of the observer's news (TRIG-6) and of its /sync at `sync_at`."""
        news = self._predict() if self.model.observe_health() else []
        return news + (self._predict() if self.model.request_sync(sync_at) else [])

    def _health_news(self, widget: str, health: str) -> list[Prediction]:
        """The Widget turned `health`: the observer's news starts a reconcile."""
        return self._predict() if self.model.observe_health() else []

    def _step_seconds(self) -> float:
        """How long a step may take (a rehearsal: at the default settle period)."""
        return STEP_SECONDS

    def _health_seconds(self) -> float:
        """What a step about the observer needs beyond a step's own and its quiet period: one
        observation of the Widget turned Healthy and the reconciles its news and its /sync
        start, or two observations (Degraded, then Healthy again) and the reconcile each news
        starts."""
        return OBSERVER_PERIOD + self._step_seconds()

    def _last_sync(self) -> str | None:
        """sync-requested-at as the Release has it (a rehearsal: none)."""
        return None

    def _observer_quiet(self) -> float:
        """The quiet period in which no /sync may come (a rehearsal watches none)."""
        return 0.0

    def _no_sync_since(self, sent: str | None) -> None:
        """No /sync came after the one at `sent` (a rehearsal: nothing to watch)."""

    def restart_model(self) -> bool:
        """The controller restarted: the model's failure count, and the goals', start at 0;
        what its observer saw turn Healthy is not the new process' to know."""
        self.run.goals.count_from_zero()
        self.healthy_widget = None
        return self.model.restart()

    def close(self) -> None:
        """The sequence is over."""

    def _begin(self, what: str, refused: int, *, restart: bool, extra: float = 0.0) -> float:
        """A step begins (`extra`: seconds it needs beyond a step's own reconciles)."""
        self.steps.append(what)
        self.run.steps += 1
        self.refusals = refused
        self.restarting = restart
        return 0.0

    def _act(self, act: Callable[[Driver], object]) -> None:
        """A rehearsal causes nothing on a cluster."""

    def _interrupt(self, interruption: str, at: datetime, first: Prediction) -> None:
        """A rehearsal causes nothing on a cluster."""

    def _finish(self, predictions: list[Prediction], since: float, chained_from: int = 0) -> None:
        self.refusals = 0

    def _predict(self) -> list[Prediction]:
        """The reconcile the event starts, and the retries its failures schedule."""
        predictions = [self._predict_one()]
        while predictions[-1].due.requeue is not None:
            predictions.append(self._predict_one())
        return predictions

    def _predict_one(self) -> Prediction:
        failures = self.model.failures
        self.model.refuse_applies(self.refusals > 0)
        prediction = self.model.reconcile()
        if prediction.reason == TRANSIENT:
            self.refusals -= 1
        self.run.goals.observe_reconcile(failures, prediction, self.model.backoff)
        self.shown = prediction
        return prediction


@dataclass
class Driver(Sequence):
    """One Release on the cluster and its model, moved together step by step."""

    app: App = field(kw_only=True)
    #: the witness' time at the end of the last step
    checked_until: float = 0.0
    #: the event and the end of the last reconcile the step waited for (`_await_reconcile`)
    awaited: tuple[float, float] = (0.0, 0.0)
    #: the first trace and the end of the step's periodic reconcile
    periodic: tuple[float, float] = (0.0, 0.0)
    #: the write of the step's interval and the end of the reconcile it started
    interval_edit: tuple[float, float] = (0.0, 0.0)
    #: when the reconcile a hook batch's wait scheduled at its deadline may come (from, to),
    #: though the batch completed before: the reference's, which the document leaves open
    hook_deadlines: list[tuple[float, float]] = field(default_factory=list)
    #: a hook deadline's window ended since the last check: one more reconcile may have come
    hook_deadline_passed: bool = False

    @property
    def world(self) -> World:
        assert isinstance(self.run, World)
        return self.run

    def close(self) -> None:
        """The next sequence starts with a Release of its own, alone in the namespace."""
        print(f"sequence {self.app.name}: {self.history}")
        self.world.releases.resource.delete(name=self.app.name, namespace=self.app.namespace)

    def _slot(self, retries: int = 0, *, restart: bool = False) -> float:
        """The resync-free seconds a step needs: its reconciles, `retries` retries (the
        model's failure count is 0 between steps) and a restart."""
        delays = sum(self.model.backoff.delay(n) for n in range(1, retries + 1))
        return self._step_seconds() + RESTART_SECONDS * restart + delays + RETRY_SECONDS * retries

    def _step_seconds(self) -> float:
        """At the run's settle period: a longer one (a slow cluster's) makes each step longer."""
        return step_seconds(self.world.timing.settle)

    def _act(self, act: Callable[[Driver], object]) -> None:
        act(self)

    def _interrupt(self, interruption: str, at: datetime, first: Prediction) -> None:
        requested = self.world.releases.recorder.mark()
        self.app.request_sync(at=at)
        self.app.wait_for(lambda r: reason(r) == TRANSIENT, "the refused apply's DeployFailed")
        if interruption == "crash":
            self.world.crash_controller()
        else:
            withdrawn = self.world.releases.recorder.mark()
            latency = withdrawn - requested  # the refused reconcile's
            self.app.annotate({SYNC_REQUESTED_AT: None})
            # A named quiet period: the retry the refusal scheduled comes and, a reconcile
            # time later, has applied nothing (the step's attempts say so at its end). A step
            # that began sooner would write a request that retry could still read (a reconcile
            # "retried" before its own delay).
            delay = first.due.requeue or 0.0
            self.app.quiet(delay + self.world.timing.slack(delay, latency), since=withdrawn)

    def _begin(self, what: str, refused: int, *, restart: bool, extra: float = 0.0) -> float:
        """Wait for a resync-free slot as long as the step needs; return the witness' time
        it starts at."""
        slot = self._slot(refused, restart=restart) + extra
        self.world.clock.quiet_slot(slot)
        # the waits took some of the slot: find another
        while self._waited_for_a_hook_deadline(slot) or self._account_for_resyncs():
            self.world.clock.quiet_slot(slot)
        late = self.world.clock.overdue()
        assert late is None, (
            f"{self.history}: no resync tick for {late:.1f} s past the controller's resync "
            f"period ({self.world.clock.period:g} s)"
        )
        super()._begin(what, refused, restart=restart)
        if refused:  # armed in the slot: a resync tick before it must find applies let through
            self.app.deny_applies(times=refused)
        return self.world.releases.recorder.mark()

    def _finish(self, predictions: list[Prediction], since: float, chained_from: int = 0) -> None:
        """Check the step's attempts, its retries' delays (those of predictions from
        `chained_from` on: a ladder the interruption did not cut) and the Release."""
        recorder, expected = self.world.releases.recorder, kinds_of(predictions)
        timing = self.world.timing
        if expected:
            # a restarted controller's first reconcile may wait for its leadership
            first = timing.takeover if self.restarting else timing.reconcile
            try:
                recorder.wait_for(
                    count=len(expected),
                    since=since,
                    timeout=first + sum(retry_delays(predictions)),
                    name=self.app.object_name,
                    where=not_by_suite,
                )
            except WitnessTimeout as missing:  # the steps first, as every finding reads
                raise AssertionError(f"{self.history}: expected {expected}; {missing}") from None
        self.app.settle()
        attempts = self.app.attempts(since=since)
        assert kinds(attempts) == expected, (
            f"{self.history}: attempts {kinds(attempts)}; the controller's writes since the "
            f"step began: {self._writes_since(since)}"
        )
        cut = len(kinds_of(predictions[:chained_from]))
        self._check_retries(attempts[cut:], predictions[chained_from:], since)
        self._check_each_outcome(attempts[cut:], predictions[chained_from:])
        self._check_status(predictions[-1] if predictions else None)
        # A refusal no apply used (a request that was not pending) ends with its step.
        recorder.allow_all()
        super()._finish(predictions, since)
        self.checked_until = recorder.mark()

    def _writes_since(self, since: float) -> str:
        """The controller's writes in the namespace since `since`, as a failure shows them."""
        writes = self.world.releases.recorder.attempts(
            since=since, subresource=None, where=not_by_suite
        )
        return timeline(writes, since)

    def _edit_interval(self, period: float, written: str | None) -> list[Prediction]:
        recorder = self.world.releases.recorder
        edited = recorder.mark()
        if not period:
            self._removed_in_time(edited)
        generation = self.app.patch({"spec": {"syncPolicy": {"interval": written}}})["metadata"][
            "generation"
        ]
        predictions = super()._edit_interval(period, written)
        self._await_reconcile(
            edited,
            predictions,
            lambda release: observed_generation(release) == generation,
            f"status.observedGeneration {generation}",
        )
        return predictions

    def _periodic(self, content: str, period: float) -> list[Prediction]:
        """The periodic reconcile takes the new render one period after the interval's edit:
        not sooner than a period after the edit was written (no event starts a reconcile of a
        new render), nor later than a period after the edit's reconcile ended, by the band of a
        period with that reconcile's own time and a stall (as one gap of a series)."""
        timing, recorder = self.world.timing, self.world.releases.recorder
        edited, edit_end = self.interval_edit = self.awaited
        changed = recorder.mark()
        reports = self.app.new_render(content, settled=True)  # the edit's reconcile has ended
        predictions = super()._periodic(content, period)
        self._await_reconcile(
            changed,
            predictions,
            reports,
            f"reconcile that renders {content}",
            timeout=period + timing.reconcile,
        )
        first = self.app.traces(since=changed)[0].at
        soonest = edited + period - timing.lead(period)
        latest = edit_end + period + timing.slack(period, edit_end - edited) + timing.stall
        came = f"the periodic reconcile came {first - edited:.3f} s after the interval was set"
        due = f"due from {soonest - edited:.3f} to {latest - edited:.3f} s"
        print(f"{self.app.name}: {came} ({due})")
        early = " (a new render starts no reconcile of its own)" if first < soonest else ""
        assert soonest <= first <= latest, (
            f"{self.history}: {came}, {first - changed:.3f} s after the render changed; it was "
            f"{due}{early}"
        )
        self.periodic = (first, self.awaited[1])
        return predictions

    def _scheduled_before_the_removal(
        self, period: float, removal: list[Prediction]
    ) -> list[Prediction]:
        """A named quiet period: the periodic reconcile scheduled before the interval was
        taken off may come once more (INT-3 allows that one), a period after the last one; wait
        until it would have come and take it in if it did: by a write after the removal's
        reconcile, or by attempts beyond that reconcile's (its writes may run on from the
        removal's, which then seems to end later)."""
        recorder = self.world.releases.recorder
        removed, removal_end = self.awaited
        traced = recorder.quiet(
            self._leftover_due_by(period) - recorder.mark(),
            since=removal_end + 1e-6,
            subresource=None,
            where=self.app.is_trace,
        )
        ran_on = len(self.app.attempts(since=removed)) > len(kinds_of(removal))
        if not traced and not ran_on:
            return []
        predictions = [self._predict_one()]
        self._await_reconcile(
            removed, removal + predictions, lambda _: True, "reconcile scheduled before the removal"
        )
        print(f"{self.app.name}: the reconcile scheduled before the removal came")
        return predictions

    def _leftover_due_by(self, period: float) -> float:
        """When the periodic reconcile scheduled before the removal comes at the latest: a
        period after the step's periodic one ended, by the band of a period with a reconcile's
        own time (the interval's reconcile's, or the periodic one's as traced) and a stall."""
        timing, end = self.world.timing, self.periodic[1]
        return end + period + timing.slack(period, self._own_time()) + timing.stall

    def _own_time(self) -> float:
        """A reconcile's own time in the step: the interval's reconcile's (from its edit), or
        the periodic one's as traced, whichever is longer."""
        (edited, edit_end), (first, end) = self.interval_edit, self.periodic
        return max(edit_end - edited, end - first)

    def _removed_in_time(self, removed: float) -> None:
        """The periodic reconciles the step expects are one: a second comes a period after the
        first one started at the soonest, so the interval must be off before that. The first
        started no sooner than a period after the interval was set, nor sooner before its first
        trace than the interval's own reconcile did."""
        period, timing = self.model.interval or 0.0, self.world.timing
        edited, _ = self.interval_edit
        untraced = self.app.traces(since=edited)[0].at - edited
        first, _ = self.periodic
        started = max(edited + period - timing.lead(period), first - untraced)
        if removed > started + period - timing.lead(period):
            raise RuntimeError(
                f"{self.history}: the interval was taken off {removed - first:.2f} s after the "
                "periodic reconcile's first write, when a second one may have come: the machine "
                "is too loaded for this step"
            )

    def _no_periodic_reconcile(self, content: str, period: float) -> None:
        timing, recorder = self.world.timing, self.world.releases.recorder
        changed = recorder.mark()
        reports = self.app.new_render(content, settled=True)  # the last reconcile has ended
        super()._no_periodic_reconcile(content, period)
        # A named quiet period: a periodic reconcile, were there one still, would come a period
        # after the last reconcile, which ended before this.
        quiet = period + timing.slack(period, self._own_time())
        seen = recorder.quiet(quiet, since=changed, subresource=None, where=self.app.is_trace)
        assert not seen and not reports(self.app.get()), (
            f"{self.history}: a reconcile {(seen[0].at if seen else recorder.mark()) - changed:.3f}"
            f" s after the render changed, with the interval off: with no interval there is no "
            f"periodic reconcile, and nothing else started one ({quiet:.3f} s watched)"
        )

    def _apply_unhealthy(self, content: str, widget: str) -> list[Prediction]:
        """Wait until the reconcile that applies the render has ended and reports it not
        Healthy: the Widget turning Healthy before its own assessment would need no /sync."""
        started = self.world.releases.recorder.mark()
        self.app.set_content(content, extra=[widgets.widget(widget)])
        predictions = super()._apply_unhealthy(content, widget)
        self.app.request_sync(at=self.model.sync_requested_at)
        self._await_reconcile(
            started,
            predictions,
            lambda release: reason(release, "Healthy") == "Progressing",
            f"reconcile that applies {content} with Widget {widget} not yet Healthy",
        )
        return predictions

    def _render_meanwhile(self, content: str, widget: str) -> None:
        self.app.set_content(content, extra=[widgets.widget(widget)])
        super()._render_meanwhile(content, widget)

    def _turns_healthy(self, widget: str) -> list[Prediction]:
        """The observer's /sync comes, at the time it writes; its reconcile and the news' may
        be one in automatic mode (the second event came while the first waited in the queue),
        where each applies: the attempts say which. Not where the news' reconcile had begun
        to apply before the /sync was written: that one started a reconcile of its own,
        however late it comes."""
        turned = self.world.releases.recorder.mark()
        sent = self._observer_sync_for(
            widget, f"/sync from the observer for the render turned Healthy (Widget {widget})"
        )
        news_and_sync = self._observer_reports(sent)
        if self.model.automatic and not self._applied_before_the_sync(turned, sent):
            sync = news_and_sync[1:]
            self._await_reconcile(turned, sync, lambda _: True, "reconcile of the observer's /sync")
            self.app.settle()
            if len(self.app.attempts(since=turned)) < len(kinds_of(news_and_sync)):
                return sync
        what = "reconciles of the observer's news and of its /sync"
        self._await_reconcile(turned, news_and_sync, lambda _: True, what)
        return news_and_sync

    def _observer_sync_for(self, widget: str, what: str) -> datetime:
        """Turn `widget` Healthy; the time of the /sync the observer then sends."""
        previous = sync_requested_at(self.app.get())
        widgets.set_health(self.app, widget, "Healthy")
        try:
            sent = self.app.wait_for(
                lambda release: sync_requested_at(release) not in (None, previous),
                what,
                self.world.timing.reconcile + OBSERVER_PERIOD,
            )
        except AssertionError as missing:  # the steps first
            raise AssertionError(f"{self.history}: {missing}") from None
        return parse_time(str(sync_requested_at(sent)))

    def _hooks_wait(self, hook: str, *, force: bool) -> list[Prediction]:
        """Wait until the reconcile of the request has ended waiting for the batch, and keep
        when the reconcile its deadline may bring could come: HOOK_BATCH_TIMEOUT after the
        batch's first apply, by the band of a delay. Then wait until the controller settles:
        no other reconcile may find the batch done before the observer says so."""
        recorder, timing = self.world.releases.recorder, self.world.timing
        started = recorder.mark()
        self.app.annotate({LIFECYCLE: json.dumps(widgets.pre_apply_hook(hook))})
        predictions = super()._hooks_wait(hook, force=force)
        self.app.request_sync(at=self.model.sync_requested_at, force=force)
        self._await_reconcile(
            started, predictions, lambda _: True, f"reconcile that waits for hook batch {hook}"
        )
        applied = recorder.attempts(since=started, kind="Widget", name=hook, where=not_by_suite)
        assert applied, f"{self.history}: hook batch {hook} waited for, but never applied"
        due = applied[0].at + HOOK_BATCH_TIMEOUT
        late = timing.slack(HOOK_BATCH_TIMEOUT, self.awaited[1] - started) + timing.settle
        self.hook_deadlines.append((due - timing.lead(HOOK_BATCH_TIMEOUT), due + late))
        self.app.settle()
        # A wait that writes no render (a forced one) shows its outcome in status only.
        self._check_status(predictions[-1])
        return predictions

    def _hook_batch_healthy(self, hook: str) -> list[Prediction]:
        turned = self.world.releases.recorder.mark()
        sent = self._observer_sync_for(hook, f"/sync from the observer for hook batch {hook}")
        predictions = self._hook_batch_sync(sent)
        self._await_reconcile(
            turned, predictions, lambda _: True, f"reconcile of the /sync for hook batch {hook}"
        )
        return predictions

    def _waited_for_a_hook_deadline(self, slot: float) -> bool:
        """A named quiet period: the reconcile a hook batch's wait scheduled at its deadline
        may still come, once. A step whose slot would hold it waits until it would have come
        (and has ended, if it came); the resyncs' accounting then takes it in. True when it
        waited."""
        recorder = self.world.releases.recorder
        now = recorder.mark()
        due = [window for window in self.hook_deadlines if window[0] < now + slot]
        if not due:
            return False
        self.hook_deadlines = [window for window in self.hook_deadlines if window not in due]
        opens, until = min(start for start, _ in due), max(end for _, end in due)
        came = recorder.quiet(until - now, since=opens, subresource=None, where=self.app.is_trace)
        if came:
            self.app.settle()
        print(
            f"{self.app.name}: waited {recorder.mark() - now:.1f} s for the reconcile a hook "
            f"batch's deadline may bring: {'it came' if came else 'none came'}"
        )
        self.hook_deadline_passed = True
        return True

    def _applied_before_the_sync(self, turned: float, sent: datetime) -> bool:
        """Did a reconcile write the render (a dry run or an apply) before the observer's
        /sync was written, both after the Widget `turned` Healthy? The /sync's write is the
        first write of the Release since then that carries its time (`sent`; the controller
        reads the annotation changed, so the witness has both by now). Not merely its first
        write: a controller may write its Release at every reconcile (a label, a finalizer)."""
        written = [
            attempt
            for attempt in self.world.releases.recorder.attempts(
                since=turned, kind="Release", name=self.app.name, where=not_by_suite
            )
            if carries_sync(attempt, sent)
        ]
        attempts = self.app.attempts(since=turned)
        return bool(written and attempts) and attempts[0].at < written[0].at

    def _health_news(self, widget: str, health: str) -> list[Prediction]:
        started = self.world.releases.recorder.mark()
        widgets.set_health(self.app, widget, health)
        predictions = super()._health_news(widget, health)
        self._await_reconcile(
            started,
            predictions,
            lambda release: reason(release, "Healthy") == health,
            f"reconcile of the observer's news: Widget {widget} {health}",
            self.world.timing.reconcile + OBSERVER_PERIOD,
        )
        return predictions

    def _last_sync(self) -> str | None:
        return sync_requested_at(self.app.get())

    def _observer_quiet(self) -> float:
        """A few of the observer's periods, or the run's quiet period if longer."""
        return self.world.timing.quiet_for(OBSERVER_PERIOD)

    def _no_sync_since(self, sent: str | None) -> None:
        """A named quiet period: the observer, which found the render Healthy again, sends no
        /sync for it, nor did it while the render turned (the annotation is still `sent`)."""
        quiet = self._observer_quiet()
        try:
            self.app.holds_for(
                lambda release: sync_requested_at(release) == sent,
                "no /sync from the observer for a render that turned Healthy again",
                quiet,
            )
        except AssertionError as sync:  # the steps first
            raise AssertionError(f"{self.history}: {sync}") from None

    def _await_reconcile(
        self,
        started: float,
        predictions: list[Prediction],
        shows: Callable[[Obj], object],
        what: str,
        timeout: float | None = None,
    ) -> None:
        """Wait until the reconcile that an event at `started` began (its `predictions`, no
        retries among them) has shown its outcome: its attempts, `shows` and the predicted
        Applied condition; keep when it ended (`awaited`)."""
        limit = self.world.timing.reconcile if timeout is None else timeout
        last = predictions[-1]
        try:
            if count := len(kinds_of(predictions)):
                self.app.wait_attempts(count, since=started, dry_run=None, timeout=limit)
            self.app.wait_for(
                lambda release: shows(release) and applied_is(release, last.applied, last.reason),
                f"{what} with Applied={last.applied} {last.reason}",
                limit,
            )
        except (AssertionError, WitnessTimeout) as missing:  # the steps first
            raise AssertionError(f"{self.history}: {missing}") from None
        self.awaited = (started, self.app.reconcile_end(started))

    def _account_for_resyncs(self) -> bool:
        """Between two steps only resync ticks reconcile the Release (every retry ends within
        its step), and the reconcile a hook batch's deadline may bring: each is the model's
        resync, checked too, once its reconcile has come (a resync burst on a shared controller
        can outlast the clock's settle period). True when it had to wait for one."""
        if not self.checked_until:
            return False
        ticks = [tick for tick in self.world.clock.ticks() if tick > self.checked_until]
        between = self.app.attempts(since=self.checked_until)
        predictions = self._resyncs(len(ticks))
        if self.hook_deadline_passed and len(between) > len(kinds_of(predictions)):
            predictions += self._resyncs(1, "(hook batch deadline)")
        elif between and not ticks:  # a tick the sentinel has not shown yet
            predictions = self._resyncs(1)
        self.hook_deadline_passed = False
        expected = kinds_of(predictions)
        waited = len(between) < len(expected)
        if waited:
            with contextlib.suppress(WitnessTimeout):  # then the assertion says what came
                self.app.wait_attempts(len(expected), since=self.checked_until, dry_run=None)
            between = self.app.attempts(since=self.checked_until)
        assert kinds(between) == expected, f"{self.history}: attempts {kinds(between)}"
        if predictions and not waited:  # the burst has settled: its status is written
            self._check_status(predictions[-1])
        self.checked_until = max([self.checked_until, *ticks, *(a.at for a in between)]) + 1e-6
        return waited

    def _resyncs(self, count: int, what: str = "(resync)") -> list[Prediction]:
        """`count` reconciles between two steps, each the model's resync."""
        predictions: list[Prediction] = []
        for _ in range(count):
            self.steps.append(what)
            self.model.resync()
            predictions += self._predict()
        return predictions

    def _check_retries(
        self, attempts: list[Attempt], predictions: list[Prediction], since: float
    ) -> None:
        """Each retry comes its backoff delay after the refused apply, in the band the timing
        tests accept: never sooner, and later by no more than the controller's own reconcile
        time (measured on the step's first reconcile) and the jitter allowance."""
        timing, spans = self.world.timing, reconcile_spans(attempts, predictions)
        delays = retry_delays(predictions)
        latency = 0.0
        if delays and len(spans) > 1:
            (_, failed), (retry, _) = spans[0], spans[1]
            latency = self.app.reconcile_end_after(failed.at, retry.at, delays[0]) - since
        for (_, failed), (retry, _), delay in zip(spans, spans[1:], delays, strict=False):
            gap = retry.at - failed.at
            assert timing.fits(gap, delay, latency), (
                f"{self.history}: a retry {gap:.3f} s after a failure; the backoff is "
                f"{delay:g} s, accepted {timing.band_text(delay, latency)} (reconcile time "
                f"{latency:.3f} s)"
            )

    def _check_each_outcome(self, attempts: list[Attempt], predictions: list[Prediction]) -> None:
        """Each reconcile a retry follows reported its own outcome before that retry began:
        between its last attempt and the retry's first, the Release's status held the predicted
        Applied condition and handled times, as written by then or by a write in between (an
        outcome in several patches, a condition written when the retry starts). An outcome
        wrong for one reconcile and put right by the next is caught here, not only where no
        second reconcile comes in time."""
        writes = self.app.status_writes()
        spans = reconcile_spans(attempts, predictions)
        attempting = [p for p in predictions if expected_kinds(p)]  # a span each
        for n, (prediction, (_, last), (retry, _)) in enumerate(
            zip(attempting, spans, spans[1:], strict=False), 1
        ):
            before = [w.status for w in writes if w.at <= last.at][-1:]
            between = [w.status for w in writes if last.at < w.at < retry.at]
            shown = [reported(status) for status in before + between if status is not None]
            expected = reported_by(prediction)
            assert expected in shown, (
                f"{self.history}: reconcile {n} of the step did not report its outcome before "
                f"its retry: expected {expected}; its status from its last attempt to the "
                f"retry's first: {shown}"
            )

    def _check_status(self, last: Prediction | None) -> None:
        release, history = self.app.get(), self.history
        status = release.get("status") or {}
        if last is not None:
            applied = condition(release) or {}
            found = (applied.get("status"), applied.get("reason"))
            assert found == (last.applied, last.reason), f"{history}: Applied is {found}"
        for name, expected in (
            ("lastHandledSyncAt", self.model.last_handled_sync),
            ("lastHandledForceSyncAt", self.model.last_handled_force),
        ):
            written = parse_time(status[name]) if status.get(name) else None
            assert written == expected, f"{history}: {name} {written}, the model says {expected}"
        live = (self.app.live_object() or {}).get("data", {}).get("content")
        assert live == self.model.last_successful, f"{history}: {live} applied"


def observed_generation(release: Obj) -> object:
    return (release.get("status") or {}).get("observedGeneration")


def reason(release: dict[str, Any], kind: str = "Applied") -> str | None:
    return (condition(release, kind) or {}).get("reason")


def sync_requested_at(release: Obj) -> str | None:
    return subresources.annotations_of(release).get(SYNC_REQUESTED_AT)


def carries_sync(write: Attempt, at: datetime) -> bool:
    """Whether a write of a Release sets its sync-requested-at to the instant `at`."""
    written = write.annotations.get(SYNC_REQUESTED_AT)
    try:
        return written is not None and parse_time(written) == at
    except ValueError:  # not a time: not the observer's /sync
        return False


def reported(status: dict[str, Any]) -> str:
    """What a status says of a reconcile's outcome: Applied and the handled times."""
    applied = condition({"status": status}) or {}
    handled = (status.get(name) for name in ("lastHandledSyncAt", "lastHandledForceSyncAt"))
    sync, force = (parse_time(text) if text else None for text in handled)
    return outcome_text(applied.get("status"), applied.get("reason"), sync, force)


def reported_by(prediction: Prediction) -> str:
    return outcome_text(
        prediction.applied,
        prediction.reason,
        prediction.last_handled_sync,
        prediction.last_handled_force,
    )


def outcome_text(
    status: object, reason: object, sync: datetime | None, force: datetime | None
) -> str:
    def at(time: datetime | None) -> str:
        return f"{time:%H:%M:%S}" if time else "unset"

    return (
        f"Applied {status}/{reason}, lastHandledSyncAt {at(sync)}, "
        f"lastHandledForceSyncAt {at(force)}"
    )


def timeline(attempts: list[Attempt], since: float) -> str:
    """The controller's writes, each at its seconds after `since`, with what a status write
    stored that tells a reconcile's outcome or a health finding: a failure's evidence."""
    return "; ".join(
        f"+{attempt.at - since:.3f} {attempt.what()}"
        + (f" ({what_it_stored(attempt)})" if attempt.status is not None else "")
        for attempt in attempts
    )


def what_it_stored(write: Attempt) -> str:
    """A Release status write's Applied and Healthy conditions, an inventory's render and
    health."""
    status = write.status or {}
    if write.kind.kind == "ReleaseInventory":
        return f"renderRef {str(status.get('renderRef'))[-12:]}, health {status.get('health')}"
    release = {"status": status}
    return f"Applied {reason(release)}, Healthy {reason(release, 'Healthy')}"


def kinds_of(predictions: list[Prediction]) -> list[str]:
    """The attempts the predicted reconciles make, in order."""
    return [kind for p in predictions for kind in expected_kinds(p)]


def expected_kinds(prediction: Prediction) -> list[str]:
    return ["dry-run"] * prediction.dry_run + ["apply"] * prediction.apply


def retry_delays(predictions: list[Prediction]) -> list[float]:
    return [p.due.requeue for p in predictions if p.due.requeue is not None]


def reconcile_spans(
    attempts: list[Attempt], predictions: list[Prediction]
) -> list[tuple[Attempt, Attempt]]:
    """The first and last attempt of each predicted reconcile that makes any."""
    spans, index = [], 0
    for prediction in predictions:
        count = len(expected_kinds(prediction))
        if count:
            spans.append((attempts[index], attempts[index + count - 1]))
        index += count
    return spans


class SyncPolicyMachine(RuleBasedStateMachine):
    world: Run

    def __init__(self) -> None:
        super().__init__()
        self.driver: Sequence | None = None

    @property
    def on(self) -> Sequence:
        assert self.driver is not None, "create runs first"
        return self.driver

    @initialize(automatic=st.booleans(), backoff=st.sampled_from(sorted(BACKOFFS)))
    def create(self, automatic: bool, backoff: str) -> None:
        world = self.world
        world.sequences += 1
        policy: dict[str, Any] = {"automatic": automatic}
        if spec := backoff_spec(BACKOFFS[backoff]):
            policy["retryBackoff"] = spec
        model = ReleaseModel(automatic=automatic, backoff=BACKOFFS[backoff])
        self.driver = world.sequence(f"web-{world.sequences}", model)
        self.driver.step(
            f"create({'automatic' if automatic else 'manual'}, {backoff})",
            lambda m: m.create(),
            lambda d: d.world.releases.app(d.app.name, sync_policy=policy),
        )

    def teardown(self) -> None:
        # hypothesis tears down in a `finally`: a step's failure is the exception under way
        if self.world.first_failure is None:
            self.world.first_failure = sys.exc_info()[1]
        if self.driver is not None:
            self.driver.close()

    @rule(when=st.sampled_from(list(REQUEST_TIMES)), force=st.booleans(), data=st.data())
    def sync(self, when: str, force: bool, data: st.DataObject) -> None:
        """A /sync at a chosen time, forced or not; its first applies refused, as many as the
        Release's retryBackoff climbs in a step."""
        self._request(when, force=force, refused=draw_refusals(data, self.on.model.backoff))

    @precondition(lambda machine: not machine.on.model.automatic)
    @rule(when=st.sampled_from(NEAR_HANDLED), data=st.data())
    def sync_near_the_handled_second(self, when: str, data: st.DataObject) -> None:
        """Manual mode: a /sync in lastHandledSyncAt's second, the one after or an earlier
        one (SYNC-3, SYNC-4), after a request handled now where none was. A rule of its own,
        so that short sequences draw it often."""
        if self.on.model.last_handled_sync is None:
            self._request("now", force=False, refused=0)
        self._request(when, force=False, refused=draw_refusals(data, self.on.model.backoff))

    @rule(backoff=st.sampled_from(sorted(LADDERS)), force=st.booleans())
    def climb_a_ladder(self, backoff: str, force: bool) -> None:
        """A request on a chosen retryBackoff (changed first where the Release has another)
        whose applies are refused as many times as that ladder's curve needs to show. A rule
        of its own, so that short sequences climb each boundary's ladder."""
        if self.on.model.backoff != BACKOFFS[backoff]:
            self.change_backoff(backoff)
        self._request("now", force=force, refused=LADDERS[backoff][1])

    def _request(self, when: str, *, force: bool, refused: int) -> None:
        driver = self.on
        at = request_time(driver.model, *REQUEST_TIMES[when], self.world.now())
        driver.step(
            f"sync({when}{', force' if force else ''}{f'; {refused} refused' if refused else ''})",
            lambda m: m.request_sync(at, force=force),
            lambda d: d.app.request_sync(at=at, force=force),
            refused=refused,
        )

    @precondition(lambda machine: machine.on.model.sync_requested_at is not None)
    @rule()
    def withdraw(self) -> None:
        """sync-requested-at removed: a change of the annotation, so a reconcile (SYNC-2)."""
        self.on.step(
            "withdraw",
            lambda m: m.remove_sync_request(),
            lambda d: d.app.annotate({SYNC_REQUESTED_AT: None}),
        )

    @precondition(lambda machine: machine.world.restarts and retry_is_far(machine))
    @rule(refused=st.integers(2, MOST_REFUSALS))
    def crash_between_retries(self, refused: int) -> None:
        """The controller killed between a refused apply and its retry: a new process with a
        failure count of 0 (where the run restarts its own controller)."""
        self.on.interrupted_retries(f"sync; {refused} refused, crash", "crash", refused)

    @precondition(lambda machine: not machine.on.model.automatic and retry_is_far(machine))
    @rule()
    def withdraw_before_retry(self) -> None:
        """Manual mode: a new render's request withdrawn between a refused apply and its
        retry, which then finds nothing pending (a WaitingForSync hold: the failure count is 0
        again). Then a new request refused once: its retry waits the first delay, not the
        second (BACK-4)."""
        self.new_render()
        self.on.interrupted_retries("sync; 1 refused, withdrawn", "withdraw", 1)
        self._request("now", force=False, refused=1)

    @rule()
    def new_render(self) -> None:
        content = f"v{len(self.on.steps) + 1}"
        self.on.healthy_widget = None  # the render holds no Widget
        self.on.step(
            f"render({content})",
            lambda m: m.edit_source(content),
            lambda d: d.app.set_content(content),
        )

    @rule(off=st.sampled_from(sorted(INTERVAL_OFF)))
    def render_on_an_interval(self, off: str) -> None:
        """A new render under an interval: the periodic reconcile applies it in automatic mode
        and reports it in manual mode (INT-1, TRIG-5); with the interval off again (`off`),
        none comes for the next one (INT-3)."""
        content = f"v{len(self.on.steps) + 1}"
        self.on.healthy_widget = None  # the renders hold no Widget
        self.on.periodic_render(PERIODIC_INTERVAL, content, off)

    @rule(newer=st.booleans())
    def render_turning_healthy(self, newer: bool) -> None:
        """A new render whose Widget turns Healthy after its apply: the observer's /sync
        (SYNC-9), a request like any other in manual mode, applies the newest render (`newer`:
        one written meanwhile)."""
        content = f"v{len(self.on.steps) + 1}"
        self.on.render_turning_healthy(content, f"{content}-newer" if newer else None)

    @rule(force=st.booleans())
    def hook_batch(self, force: bool) -> None:
        self.on.hook_batch(force)

    @precondition(lambda machine: machine.on.healthy_widget is not None)
    @rule()
    def healthy_again(self) -> None:
        """That render turns Degraded and Healthy again: no /sync (SYNC-9)."""
        self.on.healthy_again()

    @rule()
    def switch_mode(self) -> None:
        automatic = not self.on.model.automatic
        self.on.step(
            f"mode({'automatic' if automatic else 'manual'})",
            lambda m: m.edit_spec(automatic=automatic),
            lambda d: d.app.patch({"spec": {"syncPolicy": {"automatic": automatic}}}),
        )

    @rule(backoff=st.sampled_from(sorted(BACKOFFS)))
    def change_backoff(self, backoff: str) -> None:
        """A new retryBackoff (a spec edit: a reconcile), so that a sequence climbs several."""
        # A merge patch keeps the fields it does not name: those left unset are removed.
        spec = {"initial": None, "factor": None, "max": None} | backoff_spec(BACKOFFS[backoff])
        self.on.step(
            f"backoff({backoff})",
            lambda m: m.edit_spec(backoff=BACKOFFS[backoff]),
            lambda d: d.app.patch({"spec": {"syncPolicy": {"retryBackoff": spec}}}),
        )

    @rule()
    def other_annotation(self) -> None:
        note = {"example.com/note": str(len(self.on.steps))}
        self.on.step(
            "annotate(example.com/note)",
            lambda m: m.edit_other_metadata(),
            lambda d: d.app.annotate(note),
        )

    @precondition(lambda machine: machine.world.restarts)
    @rule()
    def restart(self) -> None:
        self.on.step(
            "restart",
            lambda _: self.on.restart_model(),
            lambda d: d.world.restart_controller(),
            restart=True,
        )


class SequenceFailed(AssertionError):
    """A step's observations disagreed with the model: the message names the steps."""


def run_sequences(world: Run, profile: Profile) -> None:
    """Draw the profile's sequences from its seed and run each against the cluster; raise
    SequenceFailed with the (shrunk) sequence that failed, its seed and how to replay it."""
    SyncPolicyMachine.world = world
    try:
        run_state_machine_as_test(
            seed(profile.shard_seed)(SyncPolicyMachine),
            settings=settings(
                max_examples=profile.size.sequences,
                stateful_step_count=profile.size.steps,
                phases=list(Phase) if profile.size.shrink else [Phase.explicit, Phase.generate],
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    except Flaky as replayed_otherwise:
        found = without_a_shrunk_replay(world.first_failure, replayed_otherwise)
        raise SequenceFailed(f"{found}\n{_replay(profile)}") from replayed_otherwise
    except Exception as failed:  # an assertion, or what a step waited for never came
        raise SequenceFailed(f"{described(failed)}\n{_replay(profile)}") from failed


def described(failed: Exception) -> str:
    """A failure as the report shows it: an assertion's message (it names the steps), another
    exception with its type; each of several distinct failures hypothesis found, numbered."""
    if isinstance(failed, ExceptionGroup):
        return f"{failed.message}\n" + "\n".join(
            f"{number}. {described(each)}" for number, each in enumerate(failed.exceptions, 1)
        )
    return str(failed) if isinstance(failed, AssertionError) else repr(failed)


def _replay(profile: Profile) -> str:
    return f"profile {profile.name}, seed {profile.seed}; replay: {profile.replay}"


def without_a_shrunk_replay(first: BaseException | None, flaky: Flaky) -> str:
    """A sequence failed, and its replay (to shrink or report it) did not fail the same way,
    or drew other steps: time is real, so what a step sees can hang on when a resync tick
    came. The first failure is the finding; hypothesis' own message says how the replay
    differed."""
    found = described(first) if isinstance(first, Exception) else str(flaky)
    return (
        f"{found}\n(not shrunk: its replay went otherwise, since what a step sees depends on "
        f"real time; hypothesis said: {flaky})"
    )


def request_time(model: ReleaseModel, base: str, offset: float, now: datetime) -> datetime:
    """A request `offset` seconds from the second of `base` (+0.4 s: sub-second parts differ
    from the base's), from now where the base has no time; "now" and its offsets exactly."""
    if base == "now":
        return now + timedelta(seconds=offset)
    since = model.last_handled_sync if base == "handled" else model.sync_requested_at
    return second(since or now) + timedelta(seconds=offset + 0.4)


def rehearse(profile: Profile, *, restarts: bool = True) -> Rehearsal:
    """The profile's sequences on the model alone: what they draw and which goals they reach
    (`restarts`: drawn where the run restarts its own controller, as on the local cluster)."""
    rehearsal = Rehearsal(restarts=restarts)
    run_sequences(rehearsal, profile)
    return rehearsal


def draw_refusals(data: st.DataObject, backoff: RetryBackoff) -> int:
    most = MOST_DEFAULT_LIMITER_REFUSALS if backoff.initial is None else MOST_REFUSALS
    return data.draw(st.integers(0, most), label="refused")


def retry_is_far(machine: SyncPolicyMachine) -> bool:
    """A first retry a second away at least: time to interrupt it."""
    return machine.on.model.backoff.delay(1) >= 1.0
