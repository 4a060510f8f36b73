"""The model-based run: generated sequences of events against the controller under test, each
step's observations checked against the sync-policy model (conformance.model).

hypothesis' stateful testing draws the sequences: /sync requests at chosen times (the same
second as the last handled one, the next second, an earlier one, now), forced or not; new
renders; mode switches; applies the witness refuses; other annotations; controller restarts
(where the controller is this worker's own: a shared one is restarted only by BACK-5.restart's
test, which has it alone). Each step waits for a resync-free slot, causes its event on the
cluster and in the model, and then checks what the witness recorded (dry runs and applies, in
order, and the delay of each retry) and what the Release says (Applied, the handled times, the
applied render) against the model. A failure shrinks to a short sequence, reported as its steps
with the seed and the command that replays it.

No interval is generated (the periodic reconcile would add reconciles of its own), and retry
delays stay short so that a sequence runs in seconds. Profiles (--model-profile): `ci` the same
10 sequences at every run (its seed is fixed), `long` 40 new ones (a certifying run's), `kill`
the CI sequences without shrinking (a kill table against the mutants in minutes).
--model-seed=N with the same profile draws the same sequences again, shrinking included.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from conformance.install.host import ControllerUnderTest
from conformance.model import TRANSIENT, Prediction, ReleaseModel, RetryBackoff
from conformance.model_profiles import Profile
from conformance.observe.releases import App, Releases, condition, kinds, not_by_suite, parse_time
from conformance.observe.resync import ResyncClock
from conformance.observe.witness import Attempt, WitnessTimeout
from conformance.timing import Timing

#: retryBackoff values small enough for a sequence to run in seconds
BACKOFFS = {
    "1s-x2": RetryBackoff(1.0, 2.0),
    "500ms-x1": RetryBackoff(0.5, 1.0),
    "500ms-x3-max1s": RetryBackoff(0.5, 3.0, 1.0),
}
#: How long a step may take: its reconciles, two short retries, and the settle period after.
STEP_SECONDS = 12.0
#: Request times relative to the last handled one (now, when there is none).
OFFSETS = {"same-second": 0.0, "next-second": 1.0, "earlier": -5.0, "now": None}


def seconds_text(seconds: float) -> str:
    return f"{seconds * 1000:g}ms"


def backoff_spec(backoff: RetryBackoff) -> dict[str, Any]:
    assert backoff.initial is not None
    spec: dict[str, Any] = {"initial": seconds_text(backoff.initial), "factor": backoff.factor}
    return spec | ({"max": seconds_text(backoff.max)} if backoff.max is not None else {})


@dataclass
class World:
    """What the machine drives: the test's fixtures, and what it has done so far."""

    releases: Releases
    clock: ResyncClock
    timing: Timing
    #: the controller to restart between steps; None where the run draws no restarts
    restartable: ControllerUnderTest | None
    sequences: int = 0
    steps: int = 0

    def restart_controller(self) -> None:
        assert self.restartable is not None
        self.restartable.stop()
        self.restartable.start()

    def summary(self, profile: Profile) -> dict[str, Any]:
        """What the report records of the run."""
        return {
            "profile": profile.name,
            "seed": profile.seed,
            "sequences": self.sequences,
            "steps": self.steps,
            "restarts": self.restartable is not None,
            "replay": profile.replay,
        }


@dataclass
class Driver:
    """One Release on the cluster and its model, moved together step by step."""

    world: World
    app: App
    model: ReleaseModel
    #: applies the witness is still to refuse
    refusals: int = 0
    steps: list[str] = field(default_factory=list)
    #: the witness' time at the end of the last step
    checked_until: float = 0.0

    def step(
        self, what: str, event: Callable[[ReleaseModel], bool], act: Callable[[], object]
    ) -> None:
        """Cause `event` on the cluster (`act`) and in the model, then check the outcome."""
        self.world.clock.quiet_slot(STEP_SECONDS)
        while self._account_for_resyncs():  # the wait took some of the slot: find another
            self.world.clock.quiet_slot(STEP_SECONDS)
        self.steps.append(what)
        self.world.steps += 1
        recorder = self.world.releases.recorder
        since = recorder.mark()
        act()
        predictions = self._predict() if event(self.model) else []
        expected = [kind for p in predictions for kind in expected_kinds(p)]
        if expected:
            recorder.wait_for(
                count=len(expected),
                since=since,
                timeout=self.world.timing.reconcile + sum(retry_delays(predictions)),
                name=self.app.object_name,
                where=not_by_suite,
            )
        self.app.settle()
        attempts = self.app.attempts(since=since)
        history = " -> ".join(self.steps)
        assert kinds(attempts) == expected, f"{history}: attempts {kinds(attempts)}"
        self._check_retries(attempts, predictions, history, since)
        self._check_status(predictions[-1] if predictions else None, history)
        # A refusal no apply used (a request that was not pending) ends with its step.
        recorder.allow_all()
        self.refusals = 0
        self.checked_until = recorder.mark()

    def _account_for_resyncs(self) -> bool:
        """Between two steps only resync ticks reconcile the Release (every retry ends within
        its step): each is the model's resync, checked too, once its reconcile has come (a
        resync burst on a shared controller can outlast the clock's settle period). True when
        it had to wait for one."""
        if not self.checked_until:
            return False
        ticks = [tick for tick in self.world.clock.ticks() if tick > self.checked_until]
        between = self.app.attempts(since=self.checked_until)
        expected: list[str] = []
        for _ in range(max(len(ticks), 1) if between else len(ticks)):
            self.steps.append("(resync)")
            self.model.resync()
            expected += [kind for p in self._predict() for kind in expected_kinds(p)]
        waited = len(between) < len(expected)
        if waited:
            with contextlib.suppress(WitnessTimeout):  # then the assertion says what came
                self.app.wait_attempts(len(expected), since=self.checked_until, dry_run=None)
            between = self.app.attempts(since=self.checked_until)
        history = " -> ".join(self.steps)
        assert kinds(between) == expected, f"{history}: attempts {kinds(between)}"
        self.checked_until = max([self.checked_until, *ticks, *(a.at for a in between)]) + 1e-6
        return waited

    def _predict(self) -> list[Prediction]:
        """The reconcile the event starts, and the retries its failures schedule."""
        predictions: list[Prediction] = []
        while True:
            self.model.refuse_applies(self.refusals > 0)
            predictions.append(self.model.reconcile())
            if predictions[-1].reason == TRANSIENT:
                self.refusals -= 1
            if predictions[-1].due.requeue is None:
                return predictions

    def _check_retries(
        self, attempts: list[Attempt], predictions: list[Prediction], history: str, since: float
    ) -> None:
        """Each retry comes its backoff delay after the refused apply, in the band the timing
        tests accept: never sooner, and later by no more than the controller's own reconcile
        time (measured on the step's first reconcile) and the jitter allowance."""
        timing, spans = self.world.timing, reconcile_spans(attempts, predictions)
        delays = retry_delays(predictions)
        latency = self.app.reconcile_time(since) if delays and len(spans) > 1 else 0.0
        for (_, failed), (retry, _), delay in zip(spans, spans[1:], delays, strict=False):
            gap = retry.at - failed.at
            assert timing.fits(gap, delay, latency), (
                f"{history}: a retry {gap:.3f} s after a failure; the backoff is {delay:g} s, "
                f"accepted {timing.band_text(delay, latency)} (reconcile time {latency:.3f} s)"
            )

    def _check_status(self, last: Prediction | None, history: str) -> None:
        release = self.app.get()
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
    world: World

    def __init__(self) -> None:
        super().__init__()
        self.driver: Driver | None = None

    @initialize(automatic=st.booleans(), backoff=st.sampled_from(sorted(BACKOFFS)))
    def create(self, automatic: bool, backoff: str) -> None:
        world = self.world
        world.sequences += 1
        policy = {"automatic": automatic, "retryBackoff": backoff_spec(BACKOFFS[backoff])}
        model = ReleaseModel(automatic=automatic, backoff=BACKOFFS[backoff])
        app = App(world.releases, f"web-{world.sequences}")
        self.driver = Driver(world, app, model)
        self.driver.step(
            f"create({'automatic' if automatic else 'manual'}, {backoff})",
            lambda m: m.create(),
            lambda: world.releases.app(app.name, sync_policy=policy),
        )

    def teardown(self) -> None:
        """The next sequence starts with a Release of its own, alone in the namespace."""
        if self.driver is not None:
            print(f"sequence {self.driver.app.name}: {' -> '.join(self.driver.steps)}")
            self.world.releases.resource.delete(
                name=self.driver.app.name, namespace=self.driver.app.namespace
            )

    @rule(offset=st.sampled_from(sorted(OFFSETS)), force=st.booleans())
    def sync(self, offset: str, force: bool) -> None:
        driver = self.driver
        assert driver is not None
        at = request_time(driver.model, OFFSETS[offset])
        driver.step(
            f"sync({offset}{', force' if force else ''})",
            lambda m: m.request_sync(at, force=force),
            lambda: driver.app.request_sync(at=at, force=force),
        )

    @rule()
    def new_render(self) -> None:
        driver = self.driver
        assert driver is not None
        content = f"v{len(driver.steps) + 1}"
        driver.step(
            f"render({content})",
            lambda m: m.edit_source(content),
            lambda: driver.app.set_content(content),
        )

    @rule()
    def switch_mode(self) -> None:
        driver = self.driver
        assert driver is not None
        automatic = not driver.model.automatic
        driver.step(
            f"mode({'automatic' if automatic else 'manual'})",
            lambda m: m.edit_spec(automatic=automatic),
            lambda: driver.app.patch({"spec": {"syncPolicy": {"automatic": automatic}}}),
        )

    @rule(times=st.integers(1, 2))
    def refuse_applies(self, times: int) -> None:
        """The next `times` applies are refused; a sync asks for one at once."""
        driver = self.driver
        assert driver is not None
        at = request_time(driver.model, None)

        def refuse_and_sync() -> None:
            # Armed in the step's slot: a resync tick before it must find applies let through.
            driver.refusals = times
            recorder = driver.world.releases.recorder
            recorder.deny(times=times, name=driver.app.object_name, dry_run=False)
            driver.app.request_sync(at=at)

        driver.step(f"refuse({times}) and sync", lambda m: m.request_sync(at), refuse_and_sync)

    @rule()
    def other_annotation(self) -> None:
        driver = self.driver
        assert driver is not None
        note = {"example.com/note": str(len(driver.steps))}
        driver.step(
            "annotate(example.com/note)",
            lambda m: m.edit_other_metadata(),
            lambda: driver.app.annotate(note),
        )

    @precondition(lambda machine: machine.world.restartable is not None)
    @rule()
    def restart(self) -> None:
        driver = self.driver
        assert driver is not None
        driver.step("restart", lambda m: m.restart(), driver.world.restart_controller)


class SequenceFailed(AssertionError):
    """A step's observations disagreed with the model: the message names the steps."""


def run_sequences(world: World, profile: Profile) -> None:
    """Draw the profile's sequences from its seed and run each against the cluster; raise
    SequenceFailed with the (shrunk) sequence that failed, its seed and how to replay it."""
    SyncPolicyMachine.world = world
    try:
        run_state_machine_as_test(
            seed(profile.seed)(SyncPolicyMachine),
            settings=settings(
                max_examples=profile.size.sequences,
                stateful_step_count=profile.size.steps,
                phases=list(Phase) if profile.size.shrink else [Phase.explicit, Phase.generate],
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    except FlakyFailure as replayed_otherwise:
        found = without_a_shrunk_replay(replayed_otherwise)
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


def without_a_shrunk_replay(flaky: FlakyFailure) -> str:
    """A sequence failed, and replaying it for shrinking did not fail the same way: time is
    real, so what a step sees can hang on when a resync tick came. The first failure is the
    finding; hypothesis' own message says how the replay differed."""
    failures = [e for e in flaky.exceptions if isinstance(e, AssertionError)]
    first = failures[0] if failures else flaky.exceptions[0]
    return (
        f"{first}\n(not shrunk: its replay went otherwise, since what a step sees depends on "
        f"real time; hypothesis said: {flaky})"
    )


def request_time(model: ReleaseModel, offset: float | None) -> datetime:
    """A request `offset` seconds from the last handled second (+0.4 s); now without one."""
    base = model.last_handled_sync
    if offset is None or base is None:
        return datetime.now(UTC)
    return base + timedelta(seconds=offset + 0.4)
