"""Generated bad input (hypothesis) against the real API server and the reference controller.

Every generated spec.syncPolicy is either refused by the CRD's validation with a message that
names the field, or accepted, and then the Release gets a clear Applied condition (a documented
reason, a message). Every generated sync-requested-at value is either a time (then the request
is handled: lastHandledSyncAt is its second) or ignored ("a value that does not parse is
ignored": WaitingForSync, nothing applied). After each batch the controller still runs and
still handles a /sync of another Release, so no value crashed it or stopped its other work.
A status write the schema refused would leave the condition out, which the checks see.

Values come in batches (one Release each) so that a thousand cost a few dozen reconcile waits.
"""

from __future__ import annotations

import itertools
import string
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from conformance.install.host import HostController
from conformance.observe.releases import App, Obj, Releases, condition
from conformance.polling import poll_until
from convoy.api import Reason
from convoyapi import API_VERSION, SYNC_FORCE_REQUESTED_AT, SYNC_REQUESTED_AT
from tests.helpers import HANDLED, wait_handled

BATCH = 25
BATCHES = 40  # 1,000 values of each kind
GENERATED = settings(
    max_examples=BATCHES,
    deadline=None,
    derandomize=True,  # the same values every run: CI is never red by the draw
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
names = itertools.count()
#: Values tried, by test and by what became of them (printed at the end of the module).
tally: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def print_tally() -> Iterator[None]:
    yield
    print("generated values:", ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))


# -- spec.syncPolicy ------------------------------------------------------------------------
UNITS = ["h", "m", "s", "ms", "us", "µs", "ns", "d", "", "S", "sec"]
number_text = st.one_of(
    st.integers(min_value=-5, max_value=10**15).map(str),
    st.floats(min_value=-10, max_value=10**6, allow_nan=False).map(lambda f: f"{f:g}"),
    st.sampled_from([".5", "1.", "0", "00", "-0", "1e3", "0x10"]),
)
go_durations = st.lists(st.tuples(number_text, st.sampled_from(UNITS)), min_size=1, max_size=3).map(
    lambda parts: "".join(n + u for n, u in parts)
)
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=70),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["a", "seconds"]), st.integers(), max_size=2),
)
durations = st.one_of(go_durations, junk, st.sampled_from(["", " 5s", "5s ", "1h30m", "P1D"]))
factors = st.one_of(
    st.floats(min_value=-1e300, max_value=1e300, allow_nan=False),
    st.sampled_from([0, 1, 0.999, 1.0001, -1, 10**30]),
    junk,
)
backoffs = st.one_of(
    st.fixed_dictionaries(
        {}, optional={"initial": durations, "factor": factors, "max": durations, "jitter": junk}
    ),
    junk,
)
sync_policies = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "automatic": st.one_of(st.booleans(), junk),
            "interval": durations,
            "retryBackoff": backoffs,
            "unknownField": junk,
        },
    ),
    junk,
)

# -- sync-requested-at ----------------------------------------------------------------------
offsets = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
moments = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)


@st.composite
def rfc3339_times(draw: st.DrawFn) -> tuple[str, datetime]:
    """A well-formed RFC 3339 time (Z or an offset, a fraction or none) and its instant."""
    moment, offset = draw(moments), draw(st.one_of(st.just(UTC), offsets))
    local = moment.astimezone(offset)
    digits = draw(st.sampled_from([0, 1, 3, 6, 9]))
    fraction = f".{local.microsecond:06d}{'0' * 3}"[: digits + 1] if digits else ""
    zone = "Z" if offset is UTC and draw(st.booleans()) else local.strftime("%z")
    zone = zone if zone == "Z" else f"{zone[:3]}:{zone[3:]}"
    return f"{local.year:04d}-{local:%m-%dT%H:%M:%S}{fraction}{zone}", moment


def variant(text: str, how: str) -> str:
    """An RFC 3339 time changed in a way the document leaves open (RFC 3339 itself allows some:
    a lower-case t and z, a leap second; ISO 8601 others)."""
    return {
        "lower": text.lower(),
        "space": text.replace("T", " "),
        "no zone": text.rstrip("Z")[:19],
        "leap second": text[:17] + "60Z",
        "compact zone": text[:19] + "+0100",
    }[how]


#: The variants that keep the instant of the time they change (the others move it or make it
#: ambiguous: then any second will do, if the controller takes the value at all).
SAME_INSTANT = {"lower", "space"}
garbage = st.one_of(
    st.text(alphabet=string.ascii_letters + " :-+.", max_size=30),
    st.sampled_from(["", "now", "0", "-1", "1733000000", "2026-13-01T00:00:00Z"]),
    st.sampled_from(["2026-02-30T00:00:00Z", "2026-12-01T24:00:00Z", "2026-12-01T10:61:00Z"]),
    st.sampled_from(["2026-12-01", "10:00:00Z", "2026-12-01T10:00:00+25:00", "T" * 300]),
)
#: Well-formed, but in UTC outside years 1-9999
OUT_OF_RANGE = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]


@st.composite
def variants(draw: st.DrawFn) -> tuple[str, Meaning]:
    text, moment = draw(rfc3339_times())
    how = draw(st.sampled_from(["lower", "space", "no zone", "leap second", "compact zone"]))
    return variant(text, how), ("either", moment if how in SAME_INSTANT else None)


#: What a value means: the instant it must be handled as, "garbage" (it must be ignored), or
#: ("either", instant or None): ignored, or handled as that instant's (any) second.
Meaning = datetime | str | tuple[str, datetime | None]
annotation_values: st.SearchStrategy[tuple[str, Meaning]] = st.one_of(
    rfc3339_times(),
    garbage.map(lambda text: (text, "garbage")),
    variants(),
    st.sampled_from(OUT_OF_RANGE).map(lambda text: (text, ("either", None))),
)


# -- checks -----------------------------------------------------------------------------------
def wait_all(
    releases: Releases, wanted: list[str], done: Callable[[Obj], bool], what: str
) -> dict[str, Obj]:
    """Poll the namespace's Releases until each of `wanted` satisfies `done`."""
    seen: dict[str, Obj] = {}

    def all_done() -> dict[str, Obj] | None:
        listed = releases.resource.get(namespace=releases.namespace).to_dict()["items"]
        seen.update({r["metadata"]["name"]: r for r in listed})
        return seen if all(name in seen and done(seen[name]) for name in wanted) else None

    def missing() -> AssertionError:
        late = [name for name in wanted if not (name in seen and done(seen[name]))]
        shown = {name: condition(seen[name]) if name in seen else "absent" for name in late[:5]}
        return AssertionError(f"{len(late)} Releases without {what}: {shown}")

    return poll_until(all_done, timeout=releases.timing.reconcile, step=0.2, failure=missing)


def clear_applied(release: Obj) -> bool:
    found = condition(release)
    documented = {reason.value for reason in Reason}
    return bool(found and found["reason"] in documented and found.get("message"))


@pytest.fixture
def still_working(controller: HostController, releases: Releases) -> Callable[[], None]:
    """After a batch: the controller runs, and handles a /sync of a Release outside it."""
    canary = releases.app("canary")

    def check() -> None:
        controller.check()
        written = canary.request_sync(at=canary.next_pending_time())
        wait_handled(canary, HANDLED, datetime.fromisoformat(written))

    return check


@pytest.fixture
def source(releases: Releases) -> str:
    """A source ConfigMap the batches' Releases share (one object, named per Release)."""
    shared = App(releases, "shared")
    shared.set_content("v1")
    return shared.source_name


def create(releases: Releases, name: str, spec: Obj, annotations: dict | None = None) -> None:
    metadata = {"name": name, "annotations": annotations or {}}
    body = {"apiVersion": API_VERSION, "kind": "Release", "metadata": metadata, "spec": spec}
    releases.resource.create(body=body, namespace=releases.namespace)


def delete_batch(releases: Releases, created: list[str]) -> None:
    """A generated 1ns interval reconciles without pause: each batch goes when it is checked."""
    for name in created:
        releases.resource.delete(name=name, namespace=releases.namespace)


@GENERATED
@given(policies=st.lists(sync_policies, min_size=BATCH, max_size=BATCH))
def test_every_generated_sync_policy_is_refused_clearly_or_gets_a_clear_applied_condition(
    releases: Releases, source: str, still_working: Callable[[], None], policies: list[object]
) -> None:
    """Every other Release names a source that does not exist: a transient failure, so that the
    retry delays are computed from the generated retryBackoff too."""
    created = []
    for number, policy in enumerate(policies):
        name = f"policy-{next(names)}"
        spec = {"source": {"name": source if number % 2 else "absent"}, "syncPolicy": policy}
        try:
            create(releases, name, spec)
        except client.ApiException as refused:
            assert refused.status == 422, f"{policy!r}: {refused.status} {refused.body}"
            assert "spec.syncPolicy" in (refused.body or ""), f"{policy!r}: {refused.body}"
            tally["syncPolicy refused by the schema"] += 1
            continue
        created.append(name)
        tally["syncPolicy accepted"] += 1
    wait_all(releases, created, clear_applied, "an Applied condition with a documented reason")
    delete_batch(releases, created)
    still_working()


def handled_as(release: Obj, meaning: Meaning) -> bool:
    """Has the first reconcile dealt with the value the way it must (or may)?"""
    status = release.get("status") or {}
    handled = status.get("lastHandledSyncAt")
    if isinstance(meaning, datetime):
        return (
            handled is not None and handled[:19] == f"{meaning.year:04d}-{meaning:%m-%dT%H:%M:%S}"
        )
    waiting = (condition(release) or {}).get("reason") == Reason.WAITING_FOR_SYNC
    ignored = waiting and not status.get("lastSuccessful") and handled is None
    if meaning == "garbage" or ignored:
        return ignored
    _, instant = meaning
    return handled is not None and (instant is None or handled_as(release, instant))


@GENERATED
@given(values=st.lists(annotation_values, min_size=BATCH, max_size=BATCH))
def test_every_generated_request_time_is_handled_as_its_second_or_ignored(
    releases: Releases,
    source: str,
    still_working: Callable[[], None],
    values: list[tuple[str, Meaning]],
) -> None:
    """Each Release is created with the annotation: its first reconcile is the verdict."""
    batch = {f"time-{next(names)}": value for value in values}
    for name, (text, _) in batch.items():
        create(releases, name, {"source": {"name": source}}, {SYNC_REQUESTED_AT: text})
    outcome = wait_all(
        releases,
        list(batch),
        lambda r: clear_applied(r) and handled_as(r, batch[r["metadata"]["name"]][1]),
        "the request handled as its second, or ignored",
    )
    handled = sum(
        bool((outcome[name].get("status") or {}).get("lastHandledSyncAt")) for name in batch
    )
    tally["request time handled"] += handled
    tally["request time ignored"] += len(batch) - handled
    delete_batch(releases, list(batch))
    still_working()


@pytest.mark.parametrize("annotation", [SYNC_REQUESTED_AT, SYNC_FORCE_REQUESTED_AT])
@pytest.mark.parametrize("automatic", [True, False], ids=["automatic", "manual"])
def test_a_request_time_that_does_not_parse_blocks_nothing_and_the_message_says_so(
    releases: Releases, annotation: str, automatic: bool
) -> None:
    """Ignored, not InvalidSpec: an automatic Release still applies; a manual one waits for a
    /sync, and a valid request later is handled."""
    app = releases.app(
        "web", sync_policy={"automatic": automatic}, annotations={annotation: "soon"}
    )
    status, reason = ("True", Reason.APPLIED) if automatic else ("False", Reason.WAITING_FOR_SYNC)
    found = condition(app.wait_applied(status, reason))
    assert found and f"annotation {annotation} ignored" in found["message"], found
    if not automatic:
        written = app.request_sync(at=datetime.now(UTC))  # nothing handled yet: pending
        wait_handled(app, HANDLED, datetime.fromisoformat(written))


# -- status fields the controller reads --------------------------------------------------------
#: The status times the controller parses, and what else a status with that time needs.
STATUS_TIMES = ("lastHandledSyncAt", "lastHandledForceSyncAt", "rollout.startedAt")
status_times = st.one_of(
    rfc3339_times().map(lambda found: found[0]),
    st.tuples(rfc3339_times(), st.sampled_from(sorted(SAME_INSTANT | {"leap second"}))).map(
        lambda drawn: variant(drawn[0][0], drawn[1])
    ),
    garbage,
)


def status_with(field: str, text: str, render: str) -> Obj:
    if field == "rollout.startedAt":
        return {"rollout": {"phase": "Progressing", "renderRef": render, "startedAt": text}}
    return {field: text}


@settings(GENERATED, max_examples=BATCHES // 4)
@given(
    values=st.lists(
        st.tuples(st.sampled_from(STATUS_TIMES), status_times), min_size=BATCH, max_size=BATCH
    )
)
def test_every_status_time_the_api_server_stores_leaves_the_controller_working(
    releases: Releases,
    source: str,
    still_working: Callable[[], None],
    values: list[tuple[str, str]],
) -> None:
    """A status is the controller's own record, but anyone with the right may write it, and the
    API server stores every value its `date-time` format accepts (a lower-case t and z among
    them). With each such value in a status field the controller reads, the next reconcile
    still runs to its end: a new render after a /sync is reported in status.renderRef."""
    rollouts = {"failurePolicy": {"healthTimeout": "1h"}}
    batch = {f"status-{next(names)}": value for value in values}
    for name, (field, _) in batch.items():
        spec = {"source": {"name": source}, "syncPolicy": {"automatic": True}}
        create(releases, name, {**spec, **(rollouts if field.startswith("rollout") else {})})
    first = wait_all(releases, list(batch), lambda r: clear_applied(r), "a first reconcile")
    stored = []
    for name, (field, text) in batch.items():
        render = first[name]["status"]["renderRef"]
        try:
            body = {"status": status_with(field, text, render)}
            App(releases, name).patch(body, subresource="status")
        except client.ApiException as refused:
            assert refused.status == 422, f"{field} {text!r}: {refused.status} {refused.body}"
            tally["status time refused by the schema"] += 1
            continue
        stored.append(name)
        tally[f"status {field} stored"] += 1
    App(releases, "shared").set_content(f"v{next(names)}")
    for name in stored:
        App(releases, name).request_sync()
    before = {name: first[name]["status"]["renderRef"] for name in stored}
    wait_all(
        releases,
        stored,
        lambda r: (r.get("status") or {}).get("renderRef") != before[r["metadata"]["name"]],
        "the new render reported after a /sync",
    )
    delete_batch(releases, list(batch))
    still_working()
