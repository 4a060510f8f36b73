"""The controller's resync ticks, learned from a sentinel Release, to keep quiet periods clean.

A resync reconciles every Release at once, so in a check that nothing starts a reconcile it
would look like a violation. The sentinel is an automatic Release in a namespace of its own
that nothing else touches: after its first reconcile (its creation), every apply attempt of it
is a resync tick. Knowing the last tick and the period, `quiet_slot` starts a quiet period only
where no tick can fall into it, instead of excusing attempts that happen to coincide with one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from itertools import pairwise

from kubernetes import client
from kubernetes.client import ApiException

from conformance.harness.namespaces import RUN_LABEL, delete_namespace
from conformance.kube import dynamic_api
from conformance.observe.releases import App, Releases, condition, not_by_suite
from conformance.observe.witness import Attempt, Witness, WitnessTimeout
from conformance.polling import poll_until
from conformance.timing import Timing
from convoyapi import API_VERSION

log = logging.getLogger("conformance")

#: how often a quiet slot looks whether a tick's burst has reached the test's Releases
REACH_STEP = 0.2

#: the ticks the next one is predicted from: enough to find one that waited little in the
#: controller's queue, few enough that the period's drift (the resync's own time) stays small
PHASE_TICKS = 4


def next_tick_due(recent: list[float], last: float, period: float) -> float:
    """When the tick after `last` is due, from the `recent` ticks seen. The sentinel's
    reconcile comes when the controller's queue reaches it, anywhere in a tick's burst (behind
    other workers' Releases where they share the controller): the resync itself came no later
    than the earliest of the recent ticks, counted in whole periods."""
    phases = [tick for tick in recent if tick <= last] or [last]
    return min(tick + (round((last - tick) / period) + 1) * period for tick in phases)


#: the Applied reasons of a Release whose reconciles apply: an automatic one in any other
#: state (waiting, held, pinned, its source not ready) may apply nothing at a resync
APPLYING = {"Applied", "DeployFailed", "PruneFailed"}


def _applying_releases(
    api: client.ApiClient, namespace: str
) -> Iterator[tuple[str, set[tuple[str, str]]]]:
    """The automatic Releases in `namespace` whose reconciles apply, and that are not being
    deleted, each with the (kind, name) of the objects its status says it applied."""
    resource = dynamic_api(api).resources.get(api_version=API_VERSION, kind="Release")
    try:
        items = resource.get(namespace=namespace).to_dict()["items"]
    except ApiException:  # the namespace is going
        return
    for item in items:
        automatic = ((item.get("spec") or {}).get("syncPolicy") or {}).get("automatic") is True
        reason = (condition(item) or {}).get("reason")
        if automatic and reason in APPLYING and not item["metadata"].get("deletionTimestamp"):
            applied = item["status"].get("appliedObjects") or []
            yield item["metadata"]["name"], {(o["kind"], o["name"]) for o in applied}


class ResyncClock:
    def __init__(
        self,
        api: client.ApiClient,
        witness: Witness,
        period: float,
        timing: Timing,
        run_id: str,
        started: Callable[[], float] = lambda: 0.0,
        shared: Callable[[list[float]], list[float]] = list,
    ) -> None:
        self._api = api
        #: when the controller under test last started (time.monotonic(); 0.0: unknown, as for
        #: one the suite does not run): a restart resets the resync phase
        self._started = started
        #: every worker's ticks from this worker's, where workers share the controller
        self._shared = shared
        self._witness = witness
        self.period = period
        self._timing = timing
        self._run_id = run_id
        self.namespace = f"convoy-resync-sentinel-{run_id}"
        self._sentinel: App | None = None
        self._created_at = 0.0
        # A tick reconciles every Release in the cluster; give the burst time to drain. It is
        # short: the sentinel's and the running tests' (each test's end deletes its own).
        self.settle = timing.settle + timing.slack(0)

    def __enter__(self) -> ResyncClock:
        core = client.CoreV1Api(self._api)
        core.create_namespace(
            {"metadata": {"name": self.namespace, "labels": {RUN_LABEL: self._run_id}}}
        )
        self._recorder = self._witness.watch(self.namespace)
        releases = Releases(self._api, self.namespace, self._recorder, self._timing)
        self._sentinel = releases.app("sentinel", sync_policy={"automatic": True})
        # Every apply attempt after the one of its creation is a tick. The clock is made right
        # after the controller (re)starts, when its first reconcile may wait for its leadership.
        created = self._sentinel.wait_attempts(timeout=self._timing.takeover)
        self._created_at = created[-1].at + 1e-6
        return self

    @property
    def sentinel(self) -> App:
        """The Release whose reconciles are the clock's ticks (made on entering the clock)."""
        if self._sentinel is None:
            raise RuntimeError("the resync clock is read outside its `with` block")
        return self._sentinel

    def __exit__(self, *exc: object) -> None:
        self._recorder.close()
        delete_namespace(client.CoreV1Api(self._api), self.namespace)

    @property
    def controller_started_at(self) -> float:
        """When the controller under test last started, as this worker knows it (0.0: unknown);
        the ticks count from then."""
        return self._started()

    def ticks(self) -> list[float]:
        """Times of the resync reconciles seen so far (since the controller last started)."""
        self._follow_restart(wait=False)
        return [a.at for a in self.sentinel.attempts(since=self._created_at, dry_run=False)]

    def ticks_from(self, at: float) -> list[float]:
        """The ticks since `at` (a test's start): those of the test's own bursts. Earlier ones
        came in other tests' bursts, where the sentinel's reconcile may wait behind theirs."""
        return [tick for tick in self.ticks() if tick >= at]

    def _follow_restart(self, *, wait: bool) -> None:
        """After a restart the ticks count from the restarted controller's initial list."""
        started = self._started()
        if started <= self._created_at:
            return
        if wait:  # the restarted controller's first reconcile may wait for its leadership
            self.sentinel.wait_attempts(since=started, timeout=self._timing.takeover)
        initial = self.sentinel.attempts(since=started, dry_run=False)
        if initial:
            self._created_at = initial[0].at + 1e-6

    def _recent_ticks(self, last: float) -> list[float]:
        """The ticks of the last PHASE_TICKS periods up to `last`, every worker's where they
        share the controller, since it last started."""
        since = max(self._started(), last - PHASE_TICKS * self.period)
        return [tick for tick in self._shared(self.ticks()) if since < tick <= last]

    def wait_tick(self, *, after: float) -> float | None:
        """The first tick after `after`, waiting up to a period; None when none comes."""
        limit = self.period + self._timing.slack(self.period) - (time.monotonic() - after)
        try:
            found = self.sentinel.wait_attempts(since=after, timeout=max(limit, 0.0))
        except WitnessTimeout:
            return None
        return found[0].at

    def longest_slot(self) -> float:
        """The longest quiet period that fits between two ticks: a slot of it starts right
        after a tick's burst has settled, within `timing.settle` of that (a wait's wake-up
        comes late on a loaded machine; a slot that must start at once would be missed at
        every tick)."""
        return self.period - self._timing.slack(0) - self.settle - self._timing.settle

    def quiet_slot(self, length: float) -> None:
        """Return when a period of `length` seconds free of resync ticks starts now."""
        guard = self._timing.slack(0)  # timer jitter and reconcile time around the tick
        if length + guard + self.settle > self.period:
            raise ValueError(
                f"a quiet period of {length:g} s cannot fit between resync ticks "
                f"{self.period:g} s apart; raise --timing controller_resync or lower quiet"
            )
        self._follow_restart(wait=True)
        while True:
            now, last = time.monotonic(), self._last_tick()
            if last is None:
                if self.wait_tick(after=self._created_at) is None:
                    log.warning(
                        "no resync tick within %g s: quiet periods are not aligned", self.period
                    )
                    return
                continue
            due = next_tick_due(self._recent_ticks(last), last, self.period)
            # No later than the last start of a slot before the next tick: writes that go on
            # (a test's own short interval) are no burst.
            drained = self._burst_end(last) + self._timing.settle
            settled = max(last + self.settle, min(drained, due - length - guard))
            if now < settled:
                # The settle period, a named quiet period: the reconciles of a resync burst
                # drain. A tick meanwhile ends it early; the loop then settles after that one.
                self.sentinel.quiet(settled - now, since=self._recorder.mark())
                continue
            # The resync itself came a period before the next one is due: a Release's
            # reconcile of it may come before the sentinel's.
            self._wait_reached(due - self.period - guard, until=due - length - guard)
            now = time.monotonic()
            # The tick after the last one seen: a tick is never skipped, and one that comes
            # late (the informer's resync has jitter) has not passed because its time has.
            if now + length + guard < due:
                return
            if self.wait_tick(after=due - guard) is None:
                return  # the resync stopped: nothing left to keep clear of

    def _unreached(self, resynced: float) -> list[str]:
        """The applying automatic Releases in this worker's namespaces that applied before
        the resync at `resynced` and that no reconcile has reached since: each reconcile of
        one applies, or dry-runs the apply (a refused dry run ends it).
        A tick's burst reaches a Release when the controller's queue does: seconds after the
        sentinel where workers share a controller that their tests keep busy."""
        unreached = []
        for recorder in self._witness.recorders():
            if recorder.namespace == self.namespace:
                continue
            for name, objects in _applying_releases(self._api, recorder.namespace):

                def rendered(attempt: Attempt, objects: set[tuple[str, str]] = objects) -> bool:
                    return not_by_suite(attempt) and (attempt.kind.kind, attempt.name) in objects

                attempts = [a.at for a in recorder.attempts(where=rendered)]
                if attempts and attempts[-1] < resynced:
                    unreached.append(f"{recorder.namespace}/{name}")
        return unreached

    def _wait_reached(self, resynced: float, *, until: float) -> None:
        """Wait, until `until` at most, for the resync's burst to reach this worker's automatic
        Releases (at once when it has): a slot that began before would see the reconcile of
        that resync."""
        try:
            poll_until(
                lambda: not self._unreached(resynced),
                timeout=until - REACH_STEP - time.monotonic(),
                step=REACH_STEP,
                failure=lambda: TimeoutError(", ".join(self._unreached(resynced))),
            )
        except TimeoutError as unreached:
            log.warning("the resync's burst has not reached %s; the slot starts anyway", unreached)

    def tick_explaining(self, at: float) -> float | None:
        """The tick whose resync burst a controller write at `at` is part of, None if none:
        the sentinel's reconcile and `at` linked by controller writes in this run's
        namespaces, each within `timing.settle` of the one before (a burst's reconciles come
        one after another at the controller's speed, the sentinel's anywhere among them)."""
        writes = self._witness.times(since=at - self.period, where=not_by_suite)
        for tick in self.ticks():
            low, high = sorted((tick, at))
            chain = [low, *(w for w in writes if low < w < high), high]
            if all(later - earlier < self._timing.settle for earlier, later in pairwise(chain)):
                return tick
        return None

    def _burst_end(self, tick: float) -> float:
        """When the burst of reconciles the resync at `tick` started ended, as far as this
        run's namespaces show it: the controller's last write before a pause of
        `timing.settle` (a controller of one worker and slow reconciles drains a burst of a
        few Releases in seconds)."""
        end = tick
        for at in self._witness.times(since=tick, where=not_by_suite):
            if at - end >= self._timing.settle:
                break
            end = at
        return end

    def overdue(self) -> float | None:
        """Seconds past its due time (the period and the band's late side after the last tick,
        the controller's start or the sentinel's creation, and a burst's settle period) that
        the next tick has not come; None while it is not due yet."""
        started = self._started()
        last = max([self._created_at, started, *self.ticks()[-1:]])
        due = last + self.period + self._timing.slack(self.period) + self.settle
        late = time.monotonic() - due
        return late if late > 0 else None

    def _last_tick(self) -> float | None:
        """The last tick seen; before the first one, the controller's start when the suite
        started it (its resync loop begins after that, so no tick comes a period sooner);
        None when neither tells where the ticks are."""
        ticks = self.ticks()
        if ticks:
            return ticks[-1]
        started = self._started()
        if started and time.monotonic() < started + self.period:
            return started
        return None
