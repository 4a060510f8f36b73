"""Building and driving Releases through the Kubernetes API, and reading what the controller did.

An App is a Release with its own source ConfigMap that renders one ConfigMap (its "content").
The controller is the only writer of that rendered object, so every create or update of it that
the witness records is an apply attempt or a pre-apply dry run of the controller; the suite's
own writes (drift) carry the field manager SUITE_MANAGER and are left out.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import yaml
from kubernetes import client

from conformance.kube import dynamic_api, read_or_none
from conformance.observe.witness import Attempt, Recorder
from conformance.polling import poll_until, quiet_period
from conformance.timing import Timing, parse_seconds
from convoyapi import API_VERSION, PIN, SYNC_FORCE_REQUESTED_AT, SYNC_REQUESTED_AT

#: A well-formed renderRef that no render has: a pin to it holds every render.
NO_RENDER = "sha256:" + "0" * 64
SUITE_MANAGER = "convoy-conformance"
POLL = 0.05
#: Waits at least this long are announced in the log (live with `convoy-conformance run`).
LONG_WAIT = 10.0
log = logging.getLogger("conformance")

Obj = dict[str, Any]
#: A test of a Release: has a reconcile seen the change that returned it?
Revealed = Callable[[Obj], bool]


def rfc3339(moment: datetime, offset: timedelta | None = None) -> str:
    """Microsecond precision and a Z, as the /sync endpoint writes it; with `offset`, the same
    instant written in that UTC offset (such as -05:00)."""
    if offset is None:
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    local = moment.astimezone(timezone(offset))
    return local.isoformat(timespec="microseconds")


def ago(seconds: float) -> datetime:
    """A request time `seconds` in the past: a second other than that of the apply it causes,
    so a controller that records the apply's time instead of the request's shows."""
    return datetime.now(UTC) - timedelta(seconds=seconds)


def mid_minute_ago() -> datetime:
    """Second 30 of the last minute: a time in the past, and a second whose neighbours (and the
    next few) are in the same minute, so that a comparison to the minute shows."""
    return (datetime.now(UTC) - timedelta(minutes=1)).replace(second=30, microsecond=0)


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def same_second(a: datetime, b: datetime) -> bool:
    """Request times are compared to the second (SYNC-4)."""
    return a.replace(microsecond=0) == b.replace(microsecond=0)


def condition(release: Obj, kind: str = "Applied") -> Obj | None:
    conditions = (release.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def present_condition(release: Obj, kind: str = "Applied") -> Obj:
    """Condition `kind`, which the Release must have by now."""
    found = condition(release, kind)
    meta = release["metadata"]
    assert found is not None, (
        f"Release {meta.get('namespace')}/{meta['name']} has no {kind} condition: "
        f"{(release.get('status') or {}).get('conditions')}"
    )
    return found


def condition_status(release: Obj, kind: str = "Applied") -> str | None:
    """The status of condition `kind` ("True", "False", "Unknown"), None before it is set."""
    return (condition(release, kind) or {}).get("status")


def content_object(name: str, content: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"content": content},
    }


def invalid_object(name: str) -> Obj:
    """A ConfigMap whose data is not a string: the API server rejects it in the pre-apply dry
    run (Unappliable)."""
    return {**content_object(name, "x"), "data": {"content": 1}}


@dataclass
class Releases:
    """Releases and their sources in the test's namespace."""

    api: client.ApiClient
    namespace: str
    recorder: Recorder
    timing: Timing

    def __post_init__(self) -> None:
        resources = dynamic_api(self.api).resources
        self.resource = resources.get(api_version=API_VERSION, kind="Release")
        self.core = client.CoreV1Api(self.api)

    def app(
        self,
        name: str,
        *,
        sync_policy: Obj | None = None,
        content: str = "v1",
        extra: list[Obj] | None = None,
        annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        **spec: Any,
    ) -> App:
        """Create the source, then the Release (so the first reconcile finds its source).

        The source renders the App's content object and the `extra` objects.
        """
        created = App(self, name)
        created.set_content(content, extra=extra)
        body: Obj = {
            "apiVersion": API_VERSION,
            "kind": "Release",
            "metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}},
            "spec": {"source": {"name": created.source_name}, **spec},
        }
        if sync_policy is not None:
            body["spec"]["syncPolicy"] = sync_policy
        self.resource.create(body=body, namespace=self.namespace)
        return created

    def cluster(self, name: str, spec: Obj | None = None) -> None:
        """A Cluster object; an empty spec names the cluster the controller runs against."""
        body = {
            "apiVersion": API_VERSION,
            "kind": "Cluster",
            "metadata": {"name": name},
            "spec": spec or {},
        }
        self._clusters().create(body=body, namespace=self.namespace)

    def patch_cluster(self, name: str, spec: Obj) -> None:
        """Merge `spec` into Cluster `name`'s spec (None removes a field)."""
        self._clusters().patch(
            body={"spec": spec},
            name=name,
            namespace=self.namespace,
            content_type="application/merge-patch+json",
        )

    def _clusters(self) -> Any:
        return dynamic_api(self.api).resources.get(api_version=API_VERSION, kind="Cluster")

    def delete_all(self) -> None:
        """Delete the namespace's Releases and wait until they are gone.

        A namespace's deletion leaves its Releases to the namespace controller, which takes
        seconds. Until then every resync reconciles them too, and the burst outlasts the settle
        period the next test's quiet slots allow it (ResyncClock.quiet_slot).
        """
        group, version = API_VERSION.split("/")
        client.CustomObjectsApi(self.api).delete_collection_namespaced_custom_object(
            group, version, self.namespace, self.resource.name
        )
        try:
            poll_until(
                lambda: not self.resource.get(namespace=self.namespace).items,
                timeout=self.timing.reconcile,
                step=POLL,
                failure=lambda: TimeoutError(
                    f"Releases in {self.namespace} not gone {self.timing.reconcile:g} s after "
                    "their deletion (finalizers?): the namespace's deletion removes them later"
                ),
            )
        except TimeoutError as late:
            log.warning("%s", late)


@dataclass
class App:
    """One Release under test, seen from outside as a user sees it: the Release `name` in
    the test's namespace, its source ConfigMap `<name>-source` (whose content is the render;
    changing it starts no reconcile) and the object it renders, `<name>-content`, which only
    the controller writes. What every test drives: create and change the Release, request
    /syncs, change the source or the object behind the controller's back, and wait for what
    the controller makes of it (conditions, status, the object), each wait with a deadline
    from the run's timing and a failure message that names what was expected."""

    releases: Releases
    name: str

    @property
    def source_name(self) -> str:
        return f"{self.name}-source"

    @property
    def object_name(self) -> str:
        """The rendered object: only the controller writes it."""
        return f"{self.name}-content"

    @property
    def namespace(self) -> str:
        return self.releases.namespace

    # -- the source (changing it starts no reconcile) ----------------------------------------
    def set_content(self, content: str, *, extra: list[Obj] | None = None) -> None:
        objects = [content_object(self.object_name, content), *(extra or [])]
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.source_name},
            "data": {"manifests.yaml": yaml.safe_dump_all(objects, sort_keys=True)},
        }
        core = self.releases.core
        try:
            core.replace_namespaced_config_map(self.source_name, self.namespace, body)
        except client.ApiException as error:
            if error.status != 404:
                raise
            core.create_namespaced_config_map(self.namespace, body)

    def new_render(
        self, content: str = "v2", *, extra: list[Obj] | None = None, settled: bool = False
    ) -> Revealed:
        """Give the source new content (no event); return a test of the Release: has a
        reconcile since written the new render's renderRef to status? Every reconcile does,
        holds included, so it reveals a reconcile that applies nothing. The renderRef it
        compares with is the one the last reconcile wrote: `settled` when the caller knows
        that reconcile has ended (its last trace seen), else read once the status has stayed
        the same for `timing.settle`."""
        before = (self.status() if settled else self.settled_status()).get("renderRef")
        assert before, f"Release {self.namespace}/{self.name}: no renderRef in its status"
        self.set_content(content, extra=extra)
        return lambda release: (release.get("status") or {}).get("renderRef") != before

    # -- the Release -------------------------------------------------------------------------
    def get(self) -> Obj:
        return self.releases.resource.get(name=self.name, namespace=self.namespace).to_dict()

    def delete(self) -> None:
        """Delete the Release and wait until it is gone (the controller has let it go)."""
        self.releases.resource.delete(name=self.name, namespace=self.namespace)
        poll_until(
            lambda: read_or_none(self.get) is None,
            timeout=self.releases.timing.reconcile,
            step=POLL,
            failure=lambda: AssertionError(
                f"Release {self.namespace}/{self.name} not gone "
                f"{self.releases.timing.reconcile:g} s after its deletion"
            ),
        )

    def patch(self, body: Obj, *, subresource: str | None = None) -> Obj:
        resource = self.releases.resource
        target = resource.status if subresource == "status" else resource
        return target.patch(
            name=self.name,
            namespace=self.namespace,
            body=body,
            content_type="application/merge-patch+json",
            field_manager=SUITE_MANAGER,  # so that the witness can tell the suite's writes
        ).to_dict()

    def annotate(self, annotations: Mapping[str, str | None]) -> Obj:
        return self.patch({"metadata": {"annotations": annotations}})

    def pin_nowhere(self) -> None:
        """Pin the Release to a render it never has, through the main resource (no event)."""
        self.annotate({PIN: NO_RENDER})

    def request_sync(self, at: datetime | None = None, *, force: bool = False) -> str:
        """Write the /sync annotations as the endpoint does; return the time written."""
        written = rfc3339(at or datetime.now(UTC))
        annotations = {SYNC_REQUESTED_AT: written}
        if force:
            annotations[SYNC_FORCE_REQUESTED_AT] = written
        self.annotate(annotations)
        return written

    def next_pending_time(self) -> datetime:
        """The earliest request time that is pending: a second after the last handled one
        (now, if none was handled), and never the time the annotation holds already (writing
        that would change nothing). With a request handled in the past it is in the past too,
        so that a controller recording the time of its reconcile instead shows."""
        release = self.get()
        handled = (release.get("status") or {}).get("lastHandledSyncAt")
        written = (release["metadata"].get("annotations") or {}).get(SYNC_REQUESTED_AT)
        candidates = [
            parse_time(handled).replace(microsecond=0) + timedelta(seconds=1)
            if handled
            else datetime.now(UTC)
        ]
        with contextlib.suppress(ValueError):  # a time that does not parse holds no request
            candidates.append(parse_time(written or "") + timedelta(microseconds=1))
        return max(candidates)

    def status(self) -> Obj:
        return self.get().get("status") or {}

    def settled_status(self) -> Obj:
        """The status once what the document and the API reference say of it has stayed the
        same for `timing.settle`: what the last reconcile wrote, however many writes that took
        (a condition first and the rest after it, say), and whatever else it writes at each
        reconcile. Read a field beside the one a test waited for here."""
        timing, status = self.releases.timing, self.status()
        stable_since = self.releases.recorder.mark()

        def stable() -> bool:
            nonlocal status, stable_since
            now, read = self.releases.recorder.mark(), self.status()
            if documented(read) != documented(status):
                status, stable_since = read, now
            return now - stable_since >= timing.settle

        poll_until(
            stable,
            timeout=timing.reconcile,
            step=POLL,
            failure=lambda: AssertionError(
                f"Release {self.namespace}/{self.name}: its status did not stay the same for "
                f"{timing.settle:g} s within {timing.reconcile:g} s: {documented(status)}"
            ),
        )
        return status

    def wait_for(
        self, predicate: Callable[[Obj], object], what: str, timeout: float | None = None
    ) -> Obj:
        """Poll the Release until `predicate(release)` holds; fail naming `what`."""
        limit = self.releases.timing.reconcile if timeout is None else timeout
        announce(f"{self.namespace}/{self.name}: {what}", limit)
        release: Obj = {}

        def holds() -> Obj | None:
            nonlocal release
            release = self.get()
            return release if predicate(release) else None

        return poll_until(
            holds,
            timeout=limit,
            step=POLL,
            failure=lambda: AssertionError(
                f"Release {self.namespace}/{self.name}: no {what} after {limit:g} s; "
                f"Applied is {condition(release)}"
            ),
        )

    def settle(self) -> None:
        """Wait until the controller has left the test's namespace alone for `timing.settle`
        seconds: the reconciles the setup started (an observer's /sync, say) are done, so the
        next step's evidence is the next step's own."""
        recorder, calm = self.releases.recorder, self.releases.timing.settle
        poll_until(
            lambda: not recorder.quiet(calm, since=recorder.mark(), where=not_by_suite),
            timeout=self.releases.timing.reconcile,
            step=0.0,
            failure=lambda: AssertionError(
                f"{self.namespace}: the controller never left it alone for {calm:g} s within "
                f"{self.releases.timing.reconcile:g} s"
            ),
        )

    def holds_for(self, predicate: Callable[[Obj], object], what: str, seconds: float) -> None:
        """A quiet period on the Release: `predicate` must hold at every poll for `seconds`."""

        def holds() -> None:
            release = self.get()
            assert predicate(release), (
                f"Release {self.namespace}/{self.name}: {what} stopped holding; status "
                f"{release.get('status')}"
            )

        quiet_period(holds, seconds=seconds, step=POLL)

    def stays(self, status: str, reason: str, seconds: float) -> None:
        """A quiet period: Applied keeps `status` and `reason` at every poll, and the
        controller neither applies nor dry-runs the render meanwhile."""
        since = self.releases.recorder.mark()
        self.holds_for(
            lambda release: applied_is(release, status, reason),
            f"Applied={status} with reason {reason}",
            seconds,
        )
        seen = self.attempts(since=since)
        assert seen == [], (
            f"Release {self.namespace}/{self.name}: applied or dry-ran while Applied was "
            f"{status} {reason}: {[attempt.describe() for attempt in seen]}"
        )
        print(f"{self.name}: Applied={status} {reason} for {seconds:g} s, no apply, no dry run")

    def wait_applied(self, status: str, reason: str, timeout: float | None = None) -> Obj:
        """Wait until the Applied condition has `status` and `reason`."""

        return self.wait_for(
            lambda release: applied_is(release, status, reason),
            f"Applied={status} with reason {reason}",
            timeout,
        )

    def wait_rollout(self, phase: str, timeout: float | None = None) -> Obj:
        """Wait until status.rollout is in `phase`; return the rollout."""
        release = self.wait_for(
            lambda r: rollout_phase(r) == phase,
            f"rollout phase {phase}",
            timeout,
        )
        return release["status"]["rollout"]

    def wait_content(self, content: str, timeout: float | None = None) -> Obj:
        """Wait until the rendered object holds `content` in the target."""
        return self.wait_for(
            lambda _: (self.live_object() or {}).get("data") == {"content": content},
            f"{self.object_name} applied with content {content!r}",
            timeout,
        )

    # -- the rendered object -------------------------------------------------------------------
    def live_object(self) -> Obj | None:
        found = read_or_none(
            lambda: self.releases.core.read_namespaced_config_map(self.object_name, self.namespace)
        )
        return None if found is None else self.releases.api.sanitize_for_serialization(found)

    def rendered_object(self) -> Obj:
        """The rendered object, which must be there."""
        found = self.live_object()
        assert found is not None, (
            f"the rendered object {self.namespace}/{self.object_name} of Release {self.name} "
            "is not there"
        )
        return found

    def drift(self, content: str = "drifted") -> None:
        """Change the rendered object behind the controller's back."""
        self.releases.core.patch_namespaced_config_map(
            self.object_name,
            self.namespace,
            {"data": {"content": content}},
            field_manager=SUITE_MANAGER,
        )

    def delete_object(self) -> None:
        """Delete the rendered object behind the controller's back."""
        self.releases.core.delete_namespaced_config_map(self.object_name, self.namespace)

    def attempts(self, *, since: float | None = None, dry_run: bool | None = None) -> list[Attempt]:
        """The controller's writes of the rendered object: applies, or dry runs."""
        return self.releases.recorder.attempts(
            since=since, name=self.object_name, dry_run=dry_run, where=not_by_suite
        )

    def target_writes(self, *, since: float | None = None) -> list[Attempt]:
        """The controller's writes of any object in the target (its render's, a hook's), dry
        runs too: what is not the Release, its inventory, an Event, what Kubernetes writes in
        every namespace, or the suite's source."""

        def of_the_target(attempt: Attempt) -> bool:
            return (
                not_by_suite(attempt)
                and attempt.kind.kind not in NOT_TARGET_KINDS
                and (attempt.kind.kind, attempt.name) not in KUBERNETES_OWN
                and attempt.name != self.source_name
            )

        return self.releases.recorder.attempts(since=since, where=of_the_target)

    def wait_attempts(
        self,
        count: int = 1,
        *,
        since: float | None = None,
        dry_run: bool | None = False,
        timeout: float | None = None,
    ) -> list[Attempt]:
        limit = self.releases.timing.reconcile if timeout is None else timeout
        announce(f"{count} write(s) of {self.namespace}/{self.object_name}", limit)
        return self.releases.recorder.wait_for(
            count=count,
            since=since,
            name=self.object_name,
            dry_run=dry_run,
            where=not_by_suite,
            timeout=limit,
        )

    def wait_applies_of(self, names: set[str], *, since: float) -> set[str]:
        """Wait until the controller has applied each of the objects `names` since `since`."""
        recorder, limit = self.releases.recorder, self.releases.timing.reconcile
        applied: set[str] = set()

        def all_applied() -> set[str] | None:
            nonlocal applied
            seen = recorder.attempts(since=since, dry_run=False, where=not_by_suite)
            applied = {attempt.name for attempt in seen} & names
            return applied if applied == names else None

        return poll_until(
            all_applied,
            timeout=limit,
            step=POLL,
            failure=lambda: AssertionError(
                f"{self.namespace}: within {limit:g} s the controller applied "
                f"{sorted(applied) or 'nothing'} of the render, not {sorted(names - applied)}"
            ),
        )

    def quiet(self, seconds: float, *, since: float, dry_run: bool | None = None) -> list[Attempt]:
        """Watch `seconds` for controller writes of the rendered object made since `since`;
        return any seen. Required: the record's every earlier write would end the watch at once."""
        return self.releases.recorder.quiet(
            seconds, since=since, name=self.object_name, dry_run=dry_run, where=not_by_suite
        )

    def reconcile_time(self, since: float, *, calm: float | None = None) -> float:
        """How long the reconcile that an event at `since` started took, as the witness saw
        it: up to its last trace (`reconcile_end`). Call it once the reconcile's outcome
        shows. Timing tests add it to their bands: it is the controller's own time, which
        every measured period and delay includes once."""
        return self.reconcile_end(since, calm=calm) - since

    def reconcile_end(self, since: float, *, calm: float | None = None) -> float:
        """When the reconcile that an event at `since` started ended, as the witness saw it.
        Call it once the reconcile's outcome shows: it ended with its last trace by then (a
        write of this Release's status, an apply or a dry run of its render), or with the
        writes that followed that one each within `calm` seconds (default:
        `pause_between_reconciles`; less where a retry follows sooner): the rest of an outcome
        written in several patches. Pauses before the outcome showed are the reconcile's own
        (a condition written when it starts, a slow render), whatever their length."""
        recorder, timing = self.releases.recorder, self.releases.timing
        calm = self.pause_between_reconciles() if calm is None else calm
        shown = recorder.mark()
        end: float | None = None

        def ended() -> bool:
            nonlocal end
            times = [trace.at for trace in self.traces(since=since)]
            before = [at for at in times if at <= shown]
            if not before:
                return False
            end = before[-1]
            for at in times[len(before) :]:
                if at - end >= calm:
                    return True
                end = at
            return recorder.mark() - end >= calm

        poll_until(
            ended,
            timeout=timing.reconcile,
            step=POLL,
            failure=lambda: AssertionError(
                f"Release {self.namespace}/{self.name}: no trace of a reconcile since the event, "
                f"or its writes never paused for {calm:g} s, within {timing.reconcile:g} s"
            ),
        )
        assert end is not None
        return end

    def pause_between_reconciles(self) -> float:
        """A pause of the controller's traces that ends a reconcile: `timing.settle`, or half
        the Release's interval where that is shorter (the next periodic reconcile comes then)."""
        written = ((self.get().get("spec") or {}).get("syncPolicy") or {}).get("interval")
        interval = parse_seconds(written) if written else 0.0
        return (
            min(self.releases.timing.settle, interval / 2)
            if interval
            else self.releases.timing.settle
        )

    def reconcile_end_after(self, last_attempt: float, before: float, delay: float) -> float:
        """When the reconcile whose last apply or dry run came at `last_attempt` ended, given
        that the retry it scheduled `delay` seconds later made its first one at `before`: with
        the writes of its outcome that follow that attempt, each sooner than `delay` after the
        one before. The retry's own writes (a condition written when it starts) come `delay`
        after the outcome at the soonest; a pause within the reconcile before its apply (a
        slow render) is its own, however long."""
        end = last_attempt
        for trace in self.traces(since=last_attempt):
            if trace.at <= end:
                continue
            if trace.at >= before or trace.at - end >= delay:
                break
            end = trace.at
        return end

    def own_time(self, attempt: Attempt, following: Attempt, delay: float) -> float:
        """The controller's own time, as the witness saw it, between `attempt` and
        `following`, the attempt of the reconcile due `delay` after the one of `attempt`: the
        rest of that reconcile (the writes of its outcome) and the start of the following one
        up to `following` (a condition written when it starts, a slow render). What remains of
        the gap is the wait between the two reconciles and what the following one did before
        its first trace (`untraced_start`). A trace that comes the delay after the one before
        it, less the timer's lead, starts the following reconcile."""
        end = self._end_before_retry(attempt, following.at, delay)
        traced = [trace.at for trace in self.traces(since=end) if end < trace.at < following.at]
        return (end - attempt.at) + (following.at - min([following.at, *traced]))

    def retry_started(self, attempt: Attempt, delay: float) -> bool:
        """Has the witness seen the reconcile due `delay` after the one of `attempt` start:
        a trace the delay (less the timer's lead) after the one before it?"""
        end = self._end_before_retry(attempt, math.inf, delay)
        return any(trace.at > end for trace in self.traces(since=end))

    def _end_before_retry(self, attempt: Attempt, before: float, delay: float) -> float:
        """`reconcile_end_after` for the reconcile of `attempt`, whose next one is due `delay`
        after it: a trace the delay, less the timer's lead, after the one before starts it."""
        threshold = delay - self.releases.timing.lead(delay)
        return self.reconcile_end_after(attempt.at, before, threshold)

    def own_times(
        self,
        attempts: Sequence[Attempt],
        delays: Sequence[float],
        untraced: float,
        *,
        least: float = 0.0,
    ) -> list[float]:
        """The controller's own time in each gap between consecutive `attempts`, due `delays`
        apart: `untraced` (see `untraced_start`) and what the witness saw (`own_time`), or
        `least` (a reconcile time the test measured) where that is more."""
        pairs = zip(itertools.pairwise(attempts), delays, strict=True)
        return [
            max(least, untraced + self.own_time(attempt, following, delay))
            for (attempt, following), delay in pairs
        ]

    def traced_start(self, attempt: Attempt, pause: float) -> float:
        """How long the reconcile of `attempt` ran before it, as the witness saw it: back to
        the first of the traces that lead up to it, each less than `pause` (the shortest wait
        between two reconciles) after the one before (a condition written when it starts, a
        slow render), within one reconcile timeout."""
        start = attempt.at
        window = attempt.at - self.releases.timing.reconcile
        for trace in reversed(self.traces(since=window)):
            if trace.at >= start:
                continue
            if start - trace.at >= pause:
                break
            start = trace.at
        return attempt.at - start

    def untraced_start(self, since: float) -> float:
        """How long the reconcile that a write of this Release after `since` started ran
        before the witness saw its first trace (a watch event, a read, a render: nothing a
        witness sees): from the last write of the Release by someone other than the
        controller (`since`, if none) to that trace."""
        first = self.traces(since=since)[0]
        writes = self.releases.recorder.attempts(
            since=since,
            kind="Release",
            name=self.name,
            where=lambda attempt: attempt.user != first.user and attempt.at <= first.at,
        )
        return first.at - max([since, *(attempt.at for attempt in writes)])

    def is_trace(self, attempt: Attempt) -> bool:
        """Is `attempt` something a reconcile of this Release leaves with the witness: an
        apply or dry run of its rendered object, or a write of its status by the controller?"""
        if not not_by_suite(attempt):
            return False
        rendered = attempt.name == self.object_name and attempt.subresource == ""
        status = (attempt.kind.kind, attempt.name, attempt.subresource) == (
            "Release",
            self.name,
            "status",
        )
        return rendered or status

    def status_writes(self, *, since: float | None = None) -> list[Attempt]:
        """The controller's writes of this Release's status, each with the status it stored."""
        return self.releases.recorder.attempts(
            since=since, kind="Release", name=self.name, subresource="status", where=not_by_suite
        )

    def traces(self, *, since: float) -> list[Attempt]:
        """The traces of reconciles of this Release since `since` (see `is_trace`)."""
        return self.releases.recorder.attempts(since=since, subresource=None, where=self.is_trace)

    def deny_applies(self, times: int | None = None) -> None:
        """Make the next apply attempts fail (not the dry runs): DeployFailed on demand."""
        self.releases.recorder.deny(
            times=times,
            name=self.object_name,
            dry_run=False,
            where=not_by_suite,
            message="apply refused for the test",
        )


#: A retryBackoff whose first retry no test waits out: only an event can reconcile sooner.
DISTANT_RETRY = {"initial": "10m"}

#: Kinds a controller writes in a Release's namespace that are not its target's objects.
NOT_TARGET_KINDS = ("Release", "ReleaseInventory", "Event")

#: What Kubernetes writes in every new namespace (kube-controller-manager's root CA publisher
#: and service account controller), on kind while a test runs: no controller's target.
KUBERNETES_OWN = (("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default"))


#: The conditions the API reference defines; a controller may write others (kstatus's
#: Reconciling, say), which the suite never reads.
DOCUMENTED_CONDITIONS = ("Applied", "Healthy")


def documented(status: Obj) -> Obj:
    """What the API reference says of a Release's status, without the times a controller may
    write at each reconcile: its conditions' status, reason and message, the renders, the
    handled requests, the rollout."""
    conditions = {
        c["type"]: (c.get("status"), c.get("reason"), c.get("message"))
        for c in status.get("conditions") or []
        if c.get("type") in DOCUMENTED_CONDITIONS
    }
    return {
        "conditions": conditions,
        "renderRef": status.get("renderRef"),
        "lastSuccessful": (status.get("lastSuccessful") or {}).get("renderRef"),
        "lastHandledSyncAt": status.get("lastHandledSyncAt"),
        "lastHandledForceSyncAt": status.get("lastHandledForceSyncAt"),
        "rollout": status.get("rollout"),
    }


def rollout_phase(release: Obj) -> str | None:
    return ((release.get("status") or {}).get("rollout") or {}).get("phase")


def applied_is(release: Obj, status: str, reason: str) -> bool:
    applied = condition(release)
    return bool(applied and (applied["status"], applied["reason"]) == (status, reason))


def announce(what: str, seconds: float) -> None:
    """Tell a person following a run what a long wait is for, and for how long at most."""
    if seconds >= LONG_WAIT:
        log.info("waiting up to %.0f s for %s", seconds, what)


def not_by_suite(attempt: Attempt) -> bool:
    return attempt.field_manager != SUITE_MANAGER


def applied_automatic_app(
    releases: Releases, name: str = "web", *, sync_policy: Obj | None = None, **spec: Any
) -> App:
    """An automatic Release (with `sync_policy`'s other fields) that applied at its creation."""
    app = releases.app(name, sync_policy={"automatic": True, **(sync_policy or {})}, **spec)
    app.wait_applied("True", "Applied")
    return app


def content_mutations(app: App, content: str = "mutated") -> list[Obj]:
    """A value of the mutations annotation: set the content of the App's object."""
    target = {"apiVersion": "v1", "kind": "ConfigMap", "name": app.object_name}
    return [{"target": target, "patch": {"data": {"content": content}}}]


def synced_manual_app(releases: Releases, name: str = "web", **spec: Any) -> App:
    """A manual Release whose first /sync (second 30 of the last minute) was applied:
    lastHandledSyncAt is set, in the past, so that later request times can be in the past.
    Settled: the request's own event may come during the creation's reconcile and start one
    more, and the observer's /sync and health data for the applied render start one each
    (SYNC-9, TRIG-6); any of them would take a test's next step for its own."""
    app = releases.app(name, **spec)
    app.request_sync(at=mid_minute_ago())
    app.wait_for(lambda r: (r.get("status") or {}).get("lastHandledSyncAt"), "lastHandledSyncAt")
    app.settle()
    return app


def applied_manual_app(releases: Releases, name: str = "web", **spec: Any) -> App:
    """A manual Release applied once (at a request in the past), with a new render waiting for
    the next request: changed once the apply's reconciles are done, so that only the next
    reconcile can report it (and only the next request apply it)."""
    app = synced_manual_app(releases, name, **spec)
    app.set_content("v2")
    return app


def kinds(attempts: list[Attempt]) -> list[str]:
    """Apply attempts as "dry-run" or "apply": a forced apply is an apply with no dry run."""
    return ["dry-run" if a.dry_run else "apply" for a in attempts]
