"""Requeue rules: transient failures are retried with backoff; the other reasons wait.

Every Release here has retryBackoff {initial: 1s, factor: 2} and no interval unless a test says
so, so a backoff retry comes 1 s, 2 s, 4 s, ... after each failure, and nothing else reconciles
it: the tests make no event that starts a reconcile (creating a ConfigMap, a Cluster or a
Secret, writing a source, changing the witness's deny rules start none), and each measurement
sits in a slot free of the controller's resync ticks (`resync_clock.quiet_slot`).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest

from conformance.certification import measurements
from conformance.harness import marks
from conformance.kube import read_or_none
from conformance.observe import widgets
from conformance.observe.releases import (
    NO_RENDER,
    POLL,
    SUITE_MANAGER,
    App,
    Obj,
    Releases,
    Revealed,
    condition,
    condition_status,
    content_object,
    invalid_object,
    not_by_suite,
    parse_time,
    present_condition,
    rfc3339,
    same_second,
)
from conformance.observe.resync import ResyncClock
from conformance.observe.witness import Attempt, WitnessTimeout, witness_deletes
from conformance.polling import quiet_period
from conformance.timing import Timing, gaps_between
from convoyapi import API_VERSION, LIFECYCLE, PIN, SYNC_REQUESTED_AT

NAME = "web"


@dataclass(frozen=True)
class Backoff:
    """retryBackoff as the document states it: retry n waits initial x factor^(n-1)."""

    initial: float
    factor: float

    @property
    def spec(self) -> Obj:
        return {"initial": f"{self.initial:g}s", "factor": self.factor}

    def delay(self, retry: int) -> float:
        return self.initial * self.factor ** (retry - 1)

    def due(self, retry: int) -> float:
        """When `retry` is due after the first failure, on the ladder (no reconcile time)."""
        return sum(self.delay(n) for n in range(1, retry + 1))

    def next_retry(self, elapsed: float) -> int:
        """The first retry due more than `elapsed` s after the first failure."""
        retry = 1
        while self.due(retry) <= elapsed:
            retry += 1
        return retry


BACKOFF = Backoff(initial=1.0, factor=2)
AUTOMATIC = {"automatic": True, "retryBackoff": BACKOFF.spec}
MANUAL = {"retryBackoff": BACKOFF.spec}
#: Failures before the fix: the first and two retries. The witness sees each one where the
#: failure is a refused write; elsewhere they leave no trace, and the cause stays as long as
#: two retries take. Either way the recovery is retry 3, whose delay (4 s) tells a ladder
#: that grows from one that stays at its first delay.
FAILURES_BEFORE_FIX = 3


# -- helpers ---------------------------------------------------------------------------------


def create_release(
    app: App, sync_policy: Obj, annotations: dict[str, str] | None = None, **spec: Any
) -> None:
    """Create the Release of `app` as it is: unlike `Releases.app`, leave its source alone."""
    body = {
        "apiVersion": API_VERSION,
        "kind": "Release",
        "metadata": {"name": app.name, "annotations": annotations or {}},
        "spec": {"source": {"name": app.source_name}, "syncPolicy": sync_policy, **spec},
    }
    app.releases.resource.create(body=body, namespace=app.namespace)


def status_writes(app: App, since: float | None = None) -> list[Attempt]:
    """The controller's writes of the Release's status (the suite's own carry SUITE_MANAGER)."""
    return app.releases.recorder.attempts(
        since=since, kind="Release", name=app.name, subresource="status", where=not_by_suite
    )


def failure_end(app: App, reason: str, since: float, *, calm: float | None = None) -> float:
    """Wait for Applied=False with `reason`; return when the reconcile that failed ended, as
    the witness saw it (a reconcile may write its status in several patches, or a condition
    when it starts: its last trace ends it)."""
    app.wait_applied("False", reason)
    return app.reconcile_end(since, calm=calm)


def ticks_note(resync_clock: ResyncClock, start: float, end: float) -> str:
    """For failure messages: resync ticks that fell into [start, end] despite the slot."""
    inside = [tick - start for tick in resync_clock.ticks() if start <= tick <= end]
    if not inside:
        return ""
    return f"; NOTE: resync tick(s) at {', '.join(f'+{t:.2f} s' for t in inside)} fell inside"


def retries_after(elapsed: float, timing: Timing, latency: float) -> list[int]:
    """The retries that may come `elapsed` s after the first failure or later: the first one
    due after it, and the one before where its slack (a reconcile time per retry) reaches past
    it: that one may have met the cause or not."""
    retry = BACKOFF.next_retry(elapsed)
    before = retry - 1
    if (
        before
        and BACKOFF.due(before) + timing.slack(BACKOFF.delay(before), latency * before) > elapsed
    ):
        return [before, retry]
    return [retry]


def seconds(values: list[float]) -> str:
    return ", ".join(f"{value:.2f}" for value in values)


# -- REQ-1: the transient reasons --------------------------------------------------------------


class Transient:
    """One transient failure: how to cause it and how to remove the cause without an event."""

    reason: ClassVar[str]
    #: whether the witness sees each failed attempt (a refused write)
    traced: ClassVar[bool] = False
    sync_policy: ClassVar[Obj] = AUTOMATIC
    #: the Applied condition once the retry has removed the failure
    settled: ClassVar[tuple[str, str]] = ("True", "Applied")
    #: manual mode with a /sync pending at the Release's creation (see `requested`): the time
    requested: datetime | None = None

    def with_request(self) -> Transient:
        """This case in manual mode with a /sync pending when the Release is created: the
        render cannot be made, the request stays pending (SYNC-6), and the backoff retry that
        renders applies it, with no new request."""
        twin = copy.copy(self)
        twin.requested = datetime.now(UTC)  # set again at the creation
        return twin

    def policy(self) -> Obj:
        return MANUAL if self.requested else self.sync_policy

    def annotations(self) -> dict[str, str]:
        if not self.requested:
            return {}
        self.requested = datetime.now(UTC)
        return {SYNC_REQUESTED_AT: rfc3339(self.requested)}

    def prepare(self, releases: Releases) -> App:
        """What must happen before the measurement starts."""
        return App(releases, NAME)

    def fail(self, app: App) -> None:
        raise NotImplementedError

    def fix(self, app: App) -> None:
        raise NotImplementedError

    def failures(self, app: App) -> list[Attempt]:
        """The failed attempts the witness saw; empty where a failure leaves no trace."""
        return []

    def wait_failures(self, app: App, timeout: float) -> list[Attempt]:
        raise NotImplementedError

    def recovery(self, app: App, since: float, timeout: float) -> Attempt:
        """The first successful attempt since `since`: here the apply of the rendered object."""

        def allowed(attempt: Attempt) -> bool:
            return not attempt.denied and not_by_suite(attempt)

        return app.releases.recorder.wait_for(
            since=since, name=app.object_name, dry_run=False, where=allowed, timeout=timeout
        )[0]

    def check(self, app: App) -> None:
        assert app.rendered_object()["data"] == {"content": "v1"}
        if self.requested:
            handled = app.settled_status().get("lastHandledSyncAt")
            assert handled and same_second(parse_time(handled), self.requested), (
                f"SYNC-6.render-failure: lastHandledSyncAt {handled}, not the pending request "
                f"of {self.requested:%H:%M:%S}"
            )

    def span(self, timing: Timing) -> float:
        """Seconds from the start of the measurement to the latest recovery the test accepts."""
        before_fix = sum(BACKOFF.delay(n) for n in range(1, FAILURES_BEFORE_FIX))
        delay = BACKOFF.delay(FAILURES_BEFORE_FIX)
        reconciles = timing.room(FAILURES_BEFORE_FIX + 1)  # the failures' and the recovery's
        return timing.slack(0) + before_fix + delay + timing.slack(delay) + reconciles

    @property
    def clause(self) -> str:
        return "SYNC-6.render-failure" if self.requested else f"REQ-1.{self.reason}"

    def __repr__(self) -> str:
        return f"{self.reason}-request-pending" if self.requested else self.reason


class SourceNotReady(Transient):
    """The source ConfigMap does not exist yet; the fix creates it."""

    reason = "SourceNotReady"

    def fail(self, app: App) -> None:
        create_release(app, self.policy(), self.annotations())

    def fix(self, app: App) -> None:
        app.set_content("v1")


class ManualSourceNotReady(SourceNotReady):
    """SourceNotReady of a manual Release with no /sync pending: a failed render is retried
    all the same, and the retry renders and reports (WaitingForSync), applying nothing."""

    sync_policy = MANUAL
    settled = ("False", "WaitingForSync")

    def recovery(self, app: App, since: float, timeout: float) -> Attempt:
        """The status write of the retry that reported: the last one once it shows (nothing
        else reconciles the Release in the slot)."""
        try:
            app.wait_applied(*self.settled, timeout=timeout)
        except AssertionError as error:
            raise WitnessTimeout(str(error)) from error
        return status_writes(app, since)[-1]

    def check(self, app: App) -> None:
        assert app.live_object() is None, "a manual Release was applied without a /sync"

    @property
    def clause(self) -> str:
        return "REQ-1.manual"

    def __repr__(self) -> str:
        return f"{self.reason}-manual"


class ValuesNotReady(Transient):
    """spec.values names a ConfigMap that does not exist yet; the fix creates it."""

    reason = "ValuesNotReady"

    def values(self, app: App) -> str:
        return f"{app.name}-values"

    def fail(self, app: App) -> None:
        app.set_content("${greeting}")
        values = {"configMapRef": {"name": self.values(app)}}
        create_release(app, self.policy(), self.annotations(), values=values)

    def fix(self, app: App) -> None:
        body = {"metadata": {"name": self.values(app)}, "data": {"greeting": "v1"}}
        app.releases.core.create_namespaced_config_map(app.namespace, body)


class ClusterNotReady(Transient):
    """spec.clusterRef names a Cluster that does not exist yet; the fix creates it with an
    empty spec, which is the controller's own cluster."""

    reason = "ClusterNotReady"
    cluster = "target"

    def fail(self, app: App) -> None:
        app.set_content("v1")
        create_release(app, self.policy(), self.annotations(), clusterRef={"name": self.cluster})

    def fix(self, app: App) -> None:
        app.releases.cluster(self.cluster)


class ClusterKubeconfigNotReady(ClusterNotReady):
    """The Cluster is there, but not its kubeconfig: the Secret is missing, lacks the key,
    holds no kubeconfig, or one whose API server cannot be reached (each a ClusterNotReady in
    the API reference). The fix drops spec.kubeconfigSecretRef, which makes the Cluster the
    controller's own cluster."""

    secret = "target-kubeconfig"

    def __init__(self, form: str, secret_data: dict[str, str] | None) -> None:
        self.form, self.secret_data = form, secret_data

    def fail(self, app: App) -> None:
        app.releases.cluster(self.cluster, {"kubeconfigSecretRef": {"name": self.secret}})
        if self.secret_data is not None:
            body = {"metadata": {"name": self.secret}, "stringData": self.secret_data}
            app.releases.core.create_namespaced_secret(app.namespace, body)
        super().fail(app)

    def fix(self, app: App) -> None:
        app.releases.patch_cluster(self.cluster, {"kubeconfigSecretRef": None})

    def __repr__(self) -> str:
        return f"{super().__repr__()}-{self.form}"


#: A kubeconfig whose API server cannot be reached: nothing listens on port 1 of the loopback,
#: wherever the controller runs, so the connection is refused at once.
UNREACHABLE_KUBECONFIG = json.dumps(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "gone",
                "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True},
            }
        ],
        "users": [{"name": "suite", "user": {"token": "unused"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "suite"}}],
        "current-context": "gone",
    }
)


class DeployFailed(Transient):
    """The witness refuses the applies of the rendered object; the fix lifts the refusal."""

    reason = "DeployFailed"
    traced = True

    def fail(self, app: App) -> None:
        app.deny_applies()
        app.set_content("v1")
        create_release(app, self.sync_policy)

    def fix(self, app: App) -> None:
        app.releases.recorder.allow_all()

    def failures(self, app: App) -> list[Attempt]:
        return [attempt for attempt in app.attempts(dry_run=False) if attempt.denied]

    def wait_failures(self, app: App, timeout: float) -> list[Attempt]:
        def denied(attempt: Attempt) -> bool:
            return attempt.denied and not_by_suite(attempt)

        return app.releases.recorder.wait_for(
            count=FAILURES_BEFORE_FIX,
            name=app.object_name,
            dry_run=False,
            where=denied,
            timeout=timeout,
        )


class PruneFailed(Transient):
    """The render drops an applied object whose delete the witness refuses; the fix lifts it.

    The object opts in to the witness's DELETE interception, so the prune's deletes are seen,
    and refused, like applies.
    """

    reason = "PruneFailed"
    traced = True

    def pruned(self, app: App) -> str:
        return f"{app.name}-pruned"

    def prepare(self, releases: Releases) -> App:
        app = App(releases, NAME)
        app.set_content("v1", extra=[witness_deletes(content_object(self.pruned(app), "old"))])
        create_release(app, self.sync_policy)
        app.wait_applied("True", "Applied")
        assert self.live_pruned(app) is not None, "the object to prune was not applied"
        return app

    def fail(self, app: App) -> None:
        app.releases.recorder.deny(
            operation="DELETE", name=self.pruned(app), message="prune refused for the test"
        )
        app.set_content("v1")  # the render no longer has the object: the next apply prunes it
        app.request_sync()  # starts the reconcile that prunes

    def fix(self, app: App) -> None:
        app.releases.recorder.allow_all()

    def failures(self, app: App) -> list[Attempt]:
        deletes = app.releases.recorder.attempts(operation="DELETE", name=self.pruned(app))
        return [attempt for attempt in deletes if attempt.denied]

    def wait_failures(self, app: App, timeout: float) -> list[Attempt]:
        return app.releases.recorder.wait_for(
            count=FAILURES_BEFORE_FIX,
            operation="DELETE",
            name=self.pruned(app),
            where=lambda attempt: attempt.denied,
            timeout=timeout,
        )

    def recovery(self, app: App, since: float, timeout: float) -> Attempt:
        return app.releases.recorder.wait_for(
            since=since,
            operation="DELETE",
            name=self.pruned(app),
            where=lambda attempt: not attempt.denied,
            timeout=timeout,
        )[0]

    def check(self, app: App) -> None:
        super().check(app)
        assert self.live_pruned(app) is None, "the pruned object is still there"

    def live_pruned(self, app: App) -> Any:
        core = app.releases.core
        return read_or_none(
            lambda: core.read_namespaced_config_map(self.pruned(app), app.namespace)
        )


KUBECONFIG_NOT_READY = [
    ClusterKubeconfigNotReady("kubeconfig-Secret-missing", None),
    ClusterKubeconfigNotReady("kubeconfig-key-missing", {"config": "apiVersion: v1"}),
    ClusterKubeconfigNotReady("kubeconfig-invalid", {"kubeconfig": "not a kubeconfig"}),
    ClusterKubeconfigNotReady("api-server-unreachable", {"kubeconfig": UNREACHABLE_KUBECONFIG}),
]

TRANSIENT = [
    SourceNotReady(),
    ValuesNotReady(),
    ClusterNotReady(),
    *KUBECONFIG_NOT_READY,
    DeployFailed(),
    PruneFailed(),
    ManualSourceNotReady(),
    # manual mode, a /sync pending, and the render cannot be made
    SourceNotReady().with_request(),
    ValuesNotReady().with_request(),
    ClusterNotReady().with_request(),
    *(form.with_request() for form in KUBECONFIG_NOT_READY),
]


@pytest.mark.parametrize("case", [marks.case(c, repr(c), c.clause) for c in TRANSIENT])
def test_a_transient_failure_is_retried_with_backoff(
    case: Transient, releases: Releases, timing: Timing, resync_clock: ResyncClock
) -> None:
    """After the failure shows in status, the cause goes away without any event that starts a
    reconcile; the Release is then applied (a manual one without a request reports) within
    the backoff delay due at that point (plus slack). No interval is set and no resync tick
    falls in the measurement, so only a backoff retry can explain it. The cause stays through
    two retries: where the witness sees the failed attempts (DeployFailed, PruneFailed), their
    gaps must grow, each allowed the controller's own time measured in it, as is the
    recovery's; elsewhere the recovery must wait for the third delay."""
    app = case.prepare(releases)
    span = case.span(timing)
    resync_clock.quiet_slot(span)
    start = releases.recorder.mark()
    case.fail(app)
    # The first failure's end, found before retry 1 could come.
    first = failure_end(app, case.reason, start, calm=BACKOFF.delay(1) / 2)
    latency = first - start  # the controller's own reconcile time, in every retry
    # The own time in a gap is measured where the witness sees it: what it saw, and the start
    # of a reconcile before its first trace, measured here.
    unseen = app.untraced_start(start)
    retries = range(1, FAILURES_BEFORE_FIX)
    if not case.traced:
        # A named quiet period: the cause stays through the retries, which apply nothing.
        through = first + sum(BACKOFF.delay(n) for n in retries)
        through += timing.slack(BACKOFF.delay(retries[-1]), latency * len(retries))
        seen = app.quiet(through - releases.recorder.mark(), since=first, dry_run=False)
        assert seen == [], f"applied while the cause stayed: {[a.describe() for a in seen]}"
    else:
        ladder = sum(BACKOFF.delay(n) for n in retries)
        seen = case.wait_failures(app, timeout=timing.reconcile + ladder)
        expected = [BACKOFF.delay(n) for n in retries]
        measured = gaps_between(attempt.at for attempt in seen)
        own_times = app.own_times(seen, expected, unseen, least=latency)
        print(
            f"{case.reason}: {len(seen)} failed attempts, gaps {seconds(measured)} s (backoff "
            f"{seconds(expected)} s; the controller's own time in them {seconds(own_times)} s)"
        )
        note = ticks_note(resync_clock, start, releases.recorder.mark())
        points = measurements.record(
            f"{case.reason}: retries of the failed attempts",
            timing,
            expected,
            measured,
            own_times,
        )
        off = [p.describe() for p in points if not p.ok]
        assert not off, f"the gaps between failed attempts are not the backoff's: {off}{note}"

    fixing = releases.recorder.mark()
    case.fix(app)
    failures = case.failures(app)
    if failures:
        # The retry after failure k waits delay(k), counted from that failure.
        last = failures[-1].at
        candidates = [(len(failures), last + BACKOFF.delay(len(failures)), latency)]
    else:
        # Failures leave no trace here: retries are due on the ladder from the first one,
        # each a reconcile time later.
        last = first
        candidates = [
            (n, first + BACKOFF.due(n), latency * n)
            for n in retries_after(fixing - first, timing, latency)
        ]
    latest = max(due + timing.slack(BACKOFF.delay(n), own) for n, due, own in candidates)
    try:
        recovered = case.recovery(
            app, since=fixing, timeout=latest - releases.recorder.mark() + timing.reconcile
        )
    except WitnessTimeout as error:
        release = app.get()
        pytest.fail(
            f"{case.clause} ({case!r}): not recovered within "
            f"{latest - last + timing.reconcile:.1f} s of the last failure after its cause was "
            f"removed (expected: a backoff retry, then Applied {case.settled}); measured: "
            f"Applied {condition(release)}, lastHandledSyncAt "
            f"{(release.get('status') or {}).get('lastHandledSyncAt')}\n{error}"
        )
    if failures:  # the own time in this gap is measured, as in the gaps before
        [in_gap] = app.own_times([failures[-1], recovered], [BACKOFF.delay(len(failures))], unseen)
        candidates = [(n, due, max(own, in_gap)) for n, due, own in candidates]
    else:  # the recovery may take longer than a failed retry (it renders): as the witness saw
        pause = min(BACKOFF.delay(n) - timing.lead(BACKOFF.delay(n)) for n, _, _ in candidates)
        recovery = max(latency, unseen + app.traced_start(recovered, pause))
        candidates = [(n, due, latency * (n - 1) + recovery) for n, due, _ in candidates]
    bands = {
        n: (due - timing.lead(BACKOFF.delay(n)), due + timing.slack(BACKOFF.delay(n), own))
        for n, due, own in candidates
    }
    took = recovered.at - last
    owns = {n: own for n, _, own in candidates}
    due_text = " or ".join(
        f"retry {n} ({low - last:.2f}..{high - last:.2f} s, the controller's own time "
        f"{owns[n]:.2f} s)"
        for n, (low, high) in bands.items()
    )
    print(
        f"{case.reason}: fixed {fixing - last:.2f} s after the last failure; recovered "
        f"{took:.2f} s after it; due: {due_text}"
    )
    note = ticks_note(resync_clock, start, recovered.at)
    assert any(low <= recovered.at <= high for low, high in bands.values()), (
        f"{case.clause} ({case!r}): recovered {took:.2f} s after the last failure; expected "
        f"{due_text} after it, with the controller's own time{note}"
    )
    app.wait_applied(*case.settled)
    case.check(app)


# -- REQ-2: the reasons that are not transient -----------------------------------------------

#: What the suite writes into the Applied message of an Unsupported Release (see Unsupported).
PROBE_MESSAGE = "overwritten by convoy-conformance: a reconcile writes the real message back"


class NotTransient:
    """One reason that is not transient, and a change that only a reconcile can reveal."""

    reason: ClassVar[str]
    sync_policy: ClassVar[Obj] = AUTOMATIC
    #: (status, reason) of Applied after a periodic reconcile has revealed the change
    after_periodic: ClassVar[tuple[str, str]]
    #: manual mode with a /sync pending at the Release's creation (see `requested`)
    pending_request: bool = False

    def requested(self) -> NotTransient:
        """This case in manual mode with a /sync pending when the Release is created: its
        reconcile ends in the same reason, and the request stays pending (SYNC-6)."""
        twin = copy.copy(self)
        twin.pending_request = True
        return twin

    def policy(self) -> Obj:
        return MANUAL if self.pending_request else self.sync_policy

    def annotations(self, own: dict[str, str] | None = None) -> dict[str, str]:
        """The Release's annotations at its creation: its own, and the pending request."""
        request = {SYNC_REQUESTED_AT: rfc3339(datetime.now(UTC))} if self.pending_request else {}
        return {**(own or {}), **request}

    def prepare(self, releases: Releases) -> None:
        """What the Release needs before it is created (none by default)."""

    def start(self, releases: Releases, sync_policy: Obj) -> App:
        """Create the Release; its first reconcile ends in the reason."""
        raise NotImplementedError

    def change(self, app: App) -> Revealed:
        """Make the change (no event); return a test of the Release: has a reconcile seen it?"""
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.reason


class NewRender(NotTransient):
    """A hold whose reconcile writes the renderRef of a new source to status (a status write
    the witness sees): the change is that new source."""

    def extra(self) -> list[Obj]:
        """Objects the render keeps beside its content."""
        return []

    def change(self, app: App) -> Revealed:
        return app.new_render(extra=self.extra(), settled=True)  # after `failure_end`


class Unappliable(NotTransient):
    """The render holds a ConfigMap whose data is not a string: the API server rejects it in
    the pre-apply dry run. The change fixes the source. Each reconcile leaves a trace: the
    dry run of the valid object, which comes first in the render."""

    reason = "Unappliable"
    after_periodic = ("True", "Applied")
    rejected = "rejected"

    def start(self, releases: Releases, sync_policy: Obj) -> App:
        app = App(releases, NAME)
        app.set_content("v1", extra=[invalid_object(self.rejected)])
        create_release(app, sync_policy, self.annotations())
        return app

    def change(self, app: App) -> Revealed:
        message = present_condition(app.get())["message"]
        assert self.rejected in message, f"the message does not name the object: {message}"
        app.set_content("v1")
        return lambda release: condition_status(release) == "True"


class WaitingForSync(NewRender):
    """Manual mode, never synced."""

    reason = "WaitingForSync"
    sync_policy = MANUAL
    after_periodic = ("False", "WaitingForSync")

    def start(self, releases: Releases, sync_policy: Obj) -> App:
        return releases.app(NAME, sync_policy=sync_policy)


class Unsupported(NotTransient):
    """spec.source.kind GitRepository. Nothing the suite can change outside the spec reaches
    this reconcile's outcome, so the change is a probe: the suite overwrites the Applied
    message through the status subresource (a status write starts no reconcile, TRIG-8), and
    a reconcile writes the real message back."""

    reason = "Unsupported"
    after_periodic = ("False", "Unsupported")

    def start(self, releases: Releases, sync_policy: Obj) -> App:
        app = App(releases, NAME)
        source = {"kind": "GitRepository", "name": "web"}
        create_release(app, sync_policy, self.annotations(), source=source)
        return app

    def change(self, app: App) -> Revealed:
        release = app.get()
        conditions = [
            {**c, "message": PROBE_MESSAGE} if c["type"] == "Applied" else c
            for c in release["status"]["conditions"]
        ]
        app.releases.resource.status.patch(
            name=app.name,
            namespace=app.namespace,
            body={"status": {"conditions": conditions}},
            content_type="application/merge-patch+json",
            field_manager=SUITE_MANAGER,
        )
        return lambda release: present_condition(release)["message"] != PROBE_MESSAGE


class Pinned(NotTransient):
    """Pinned at its creation to a render it does not have. The change removes the pin
    through the main resource (no event): a reconcile would dry-run and apply."""

    reason = "Pinned"
    after_periodic = ("True", "Applied")

    def start(self, releases: Releases, sync_policy: Obj) -> App:
        annotations = self.annotations({PIN: NO_RENDER})
        return releases.app(NAME, sync_policy=sync_policy, annotations=annotations)

    def change(self, app: App) -> Revealed:
        app.annotate({PIN: None})
        return lambda release: condition_status(release) == "True"


class HookFailed(NotTransient):
    """A preApply hook whose Widget is Degraded before the first reconcile applies it. The
    change makes the Widget Healthy: a reconcile would finish the batch and apply."""

    reason = "HookFailed"
    after_periodic = ("True", "Applied")
    hook = "migrate"

    def prepare(self, releases: Releases) -> None:
        widgets.create(App(releases, NAME), self.hook, "Degraded")

    def start(self, releases: Releases, sync_policy: Obj) -> App:
        app = App(releases, NAME)
        app.set_content("v1")
        hooks = json.dumps(widgets.pre_apply_hook(self.hook))
        create_release(app, sync_policy, self.annotations({LIFECYCLE: hooks}))
        return app

    def change(self, app: App) -> Revealed:
        widgets.set_health(app, self.hook, "Healthy")
        return lambda release: condition_status(release) == "True"


class WaitingForWave(NewRender):
    """Wave 1, behind a Release of wave 0 whose Widget never turns Healthy."""

    reason = "WaitingForWave"
    after_periodic = ("False", "WaitingForWave")

    def prepare(self, releases: Releases) -> None:
        low = releases.app(
            "low", sync_policy={"automatic": True}, wave=0, extra=[widgets.widget("worker")]
        )
        # Its Healthy condition settles at False before the higher wave exists.
        low.wait_for(lambda r: condition_status(r, "Healthy") == "False", "Healthy=False")

    def start(self, releases: Releases, sync_policy: Obj) -> App:
        return releases.app(NAME, sync_policy=sync_policy, annotations=self.annotations(), wave=1)


class WaitingForHooks(NewRender):
    """A preApply hook whose Widget never turns Healthy (its 60 s outlast the test)."""

    reason = "WaitingForHooks"
    after_periodic = ("False", "WaitingForHooks")

    def start(self, releases: Releases, sync_policy: Obj) -> App:
        hooks = json.dumps(widgets.pre_apply_hook())
        annotations = self.annotations({LIFECYCLE: hooks})
        return releases.app(NAME, sync_policy=sync_policy, annotations=annotations)


class WaitingForHealth(NewRender):
    """A postApply hook, and a render whose Widget never turns Healthy."""

    reason = "WaitingForHealth"
    after_periodic = ("False", "WaitingForHealth")

    def extra(self) -> list[Obj]:
        return [widgets.widget("worker")]

    def start(self, releases: Releases, sync_policy: Obj) -> App:
        hooks = json.dumps({"postApply": [[widgets.widget("notify")]]})
        annotations = self.annotations({LIFECYCLE: hooks})
        return releases.app(
            NAME, sync_policy=sync_policy, extra=self.extra(), annotations=annotations
        )


NOT_TRANSIENT = [
    Unsupported(),
    Unappliable(),
    Pinned(),
    HookFailed(),
    WaitingForSync(),
    WaitingForWave(),
    WaitingForHooks(),
    WaitingForHealth(),
]
NOT_TRANSIENT_CASES = [marks.case(c, c.reason, f"REQ-2.{c.reason}") for c in NOT_TRANSIENT]
#: Manual mode, a /sync pending: every reason but WaitingForSync (which is no request's)
REQUESTED_CASES = [
    marks.case(c.requested(), f"{c.reason}-request-pending", "REQ-2.request-pending")
    for c in NOT_TRANSIENT
    if c.reason != "WaitingForSync"
]


@pytest.mark.parametrize("case", NOT_TRANSIENT_CASES + REQUESTED_CASES)
def test_a_reason_that_is_not_transient_is_not_retried_with_backoff(
    case: NotTransient, releases: Releases, timing: Timing, resync_clock: ResyncClock
) -> None:
    """No interval: after the first failure nothing reconciles the Release during the quiet
    period, although its retryBackoff would retry after 1 s and 3 s.

    What is observable: once the failing reconcile has ended (its last status write: a
    reconcile may write several, or a condition when it starts), the test makes a change that
    any later reconcile reveals in the Release's status: for Unappliable, Pinned and HookFailed
    it then dry-runs and applies, for the waits it writes a new renderRef, for Unsupported it
    writes back the Applied message the suite overwrote. So a backoff retry shows as an apply
    or a dry run, or as the change revealed on the Release; status writes that reveal nothing
    count for nothing. At the end a /sync (an event) reconciles the Release and reveals the
    change: proof that the quiet period would have shown a retry. The "-request-pending" cases
    run in manual mode with a /sync pending from the start: a request that stays pending
    (SYNC-6) waits like the rest.
    What is not observable: a reconcile that writes nothing and changes nothing. For
    Unsupported the probe covers that only if the controller writes status when it differs
    from its outcome; a controller that retried Unsupported but skipped the write from memory
    of what it wrote would pass unseen (such a retry changes nothing, for anyone).
    """
    quiet = timing.quiet_for(BACKOFF.delay(1), BACKOFF.delay(2))
    case.prepare(releases)
    resync_clock.quiet_slot(timing.slack(0) + timing.settle + quiet)
    created = releases.recorder.mark()
    app = case.start(releases, case.policy())
    failed = failure_end(app, case.reason, created)
    revealed = case.change(app)
    changed = releases.recorder.mark()

    def not_reconciled() -> None:
        seen, release = app.attempts(since=failed + 1e-6), app.get()
        note = ticks_note(resync_clock, failed, releases.recorder.mark())
        assert seen == [], (
            f"reconciled {seen[0].at - failed:.2f} s after a {case.reason} failure with no "
            f"event: {seen[0].describe()}{note}"
        )
        assert not revealed(release), (
            f"reconciled within {releases.recorder.mark() - failed:.2f} s of a {case.reason} "
            f"failure with no event: the change made after it is in its status{note}"
        )
        assert present_condition(release)["reason"] == case.reason, condition(release)

    quiet_period(not_reconciled, seconds=failed + quiet - changed, step=POLL)
    print(
        f"{case.reason}: change made {changed - failed:.2f} s after the failure; quiet for "
        f"{quiet:g} s from the failure: no apply, no dry run, the change not revealed"
    )

    app.request_sync()
    app.wait_for(revealed, f"a reconcile after /sync revealing the change ({case.reason})")


@pytest.mark.parametrize("case", NOT_TRANSIENT_CASES)
def test_a_reason_that_is_not_transient_is_checked_again_at_the_periodic_reconcile(
    case: NotTransient, releases: Releases, timing: Timing, resync_clock: ResyncClock
) -> None:
    """interval 2s: the change made right after the failure is revealed by the periodic
    reconcile, one interval after the failure, with no event."""
    interval = 2.0
    case.prepare(releases)
    resync_clock.quiet_slot(timing.reconcile + interval + timing.slack(interval))
    created = releases.recorder.mark()
    app = case.start(releases, {**case.sync_policy, "interval": f"{interval:g}s"})
    failed = failure_end(app, case.reason, created)
    latency = failed - created  # the controller's own reconcile time
    revealed = case.change(app)
    changed = releases.recorder.mark()
    limit = interval + timing.slack(interval, latency)
    try:
        [trace, *_] = releases.recorder.wait_for(
            since=changed,
            subresource=None,
            where=app.is_trace,
            timeout=failed + limit - changed + timing.reconcile,
        )
    except WitnessTimeout as error:
        pytest.fail(
            f"{case.reason}: no reconcile within {limit + timing.reconcile:.1f} s of the "
            f"failure, with interval {interval:g} s: not checked again periodically\n{error}"
        )
    took = trace.at - failed
    print(
        f"{case.reason}: change made {changed - failed:.2f} s after the failure; next reconcile "
        f"{took:.2f} s after it (interval {interval:g} s)"
    )
    note = ticks_note(resync_clock, failed, trace.at)
    [point] = measurements.record(
        f"{case.reason}: the next reconcile after the failure", timing, [interval], [took], latency
    )
    assert point.ok, (
        f"the next reconcile came {took:.2f} s after the failure, not one interval "
        f"({interval:g} s: {timing.band_text(interval, latency)}): {trace.describe()}{note}"
    )
    release = app.wait_for(revealed, "the change revealed", timeout=timing.reconcile)
    status, reason = case.after_periodic
    applied = present_condition(release)
    assert (applied["status"], applied["reason"]) == (status, reason), applied
