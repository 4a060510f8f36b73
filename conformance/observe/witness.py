"""The witness: an admission webhook that records each create and update in the test namespaces.

The suite runs it on this machine and registers it with the cluster, one
ValidatingWebhookConfiguration per watched namespace. The API server calls it for every CREATE
and UPDATE there, dry runs included (sideEffects None), before the object is stored; so the
record shows each apply attempt of a controller and its time, whether the apply changed
anything or not, and whether it was a pre-apply dry run. On a test's request it denies chosen
attempts, which makes an apply fail on demand without breaking the controller.

Deletes are opt-in, per object: a second webhook of the same configuration receives the DELETE
of objects that carry the label DELETES_LABEL (see `witness_deletes`), and nothing else, so the
deletion of a namespace and of everything unlabelled in it never depends on the witness. A
denied delete of a labelled object is how a prune fails on demand (PruneFailed).

Times are monotonic receive times at the witness: compare them with `Recorder.mark()`, never
with wall clocks of other machines.
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import json
import logging
import secrets
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit

from kubernetes import client

from conformance.clusters import pki
from conformance.clusters.base import CallbackAddress
from conformance.kube import delete_if_present, read_or_none
from conformance.polling import poll_until

log = logging.getLogger(__name__)

PATH = "/validate"
#: Labels each configuration with the namespace it watches, so a later session can remove
#: configurations that a crashed one left behind.
WATCH_LABEL = "conformance.convoy.kumodo.io/witness"
#: Marks the probe objects `Witness.watch` sends to learn that the webhook is live.
PROBE_LABEL = "conformance.convoy.kumodo.io/witness-probe"
#: Opts an object in to DELETE interception: only objects with this label set to "true" send
#: their deletes to the witness (an objectSelector; for a DELETE the API server matches it
#: against the stored object).
DELETES_LABEL = "conformance.convoy.kumodo.io/witness-deletes"
DENIAL = "denied by the convoy-conformance witness at the test's request"
LIVE_TIMEOUT = 30.0
WAIT_TIMEOUT = 30.0
PROBE_STEP = 0.1
#: What the API server waits for an answer; the witness answers in milliseconds.
WEBHOOK_TIMEOUT_SECONDS = 5
#: The longest a gate holds an answer: well inside the API server's patience.
HOLD_LIMIT = WEBHOOK_TIMEOUT_SECONDS - 2.0
#: Bounds the TLS handshake and the request read of one connection, so that a stuck client
#: cannot keep a server thread forever.
CONNECTION_TIMEOUT = 10.0
#: Events (recorded by anyone, controllers included) and leases are noise for every rule. CEL
#: matchConditions exclude them while resources stays "*", so the test-only CRDs and any kind a
#: render holds are covered without a list to maintain.
MATCH_CONDITIONS = [
    {"name": "not-events", "expression": "request.resource.resource != 'events'"},
    {
        "name": "not-leases",
        "expression": "!(request.resource.group == 'coordination.k8s.io'"
        " && request.resource.resource == 'leases')",
    },
]


class WitnessTimeout(AssertionError):
    """The attempts a test waited for did not come; the message says which and what came."""


@dataclass(frozen=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    def __str__(self) -> str:
        return f"{self.group or 'core'}/{self.version}/{self.kind}"


@dataclass(frozen=True)
class Attempt:
    """One create or update the API server asked the witness about."""

    #: time.monotonic() when the witness received the review
    at: float
    wall: datetime
    uid: str
    #: CREATE or UPDATE; a server-side apply is CREATE when the object is new, else UPDATE.
    #: DELETE for objects that opted in with DELETES_LABEL.
    operation: str
    kind: GroupVersionKind
    namespace: str
    name: str
    #: "" for the main resource, "status" for a status write
    subresource: str
    dry_run: bool
    #: request.options.fieldManager: set by server-side apply and by clients that name one
    field_manager: str | None
    user: str
    #: resourceVersion of the stored object the update or delete starts from; None for a create
    resource_version: str | None
    #: True when a deny rule made the witness refuse it (the attempt still happened)
    denied: bool = False
    #: a status write's status as it would be stored (the whole status, not the patch)
    status: dict[str, Any] | None = None
    #: a main-resource write's annotations as they would be stored
    annotations: dict[str, str] = field(default_factory=dict)

    def what(self) -> str:
        """The write alone: its operation, object and flags."""
        flags = " dry-run" * self.dry_run + " DENIED" * self.denied
        path = f"{self.kind.kind}/{self.name}" + f"/{self.subresource}" * bool(self.subresource)
        return f"{self.operation} {path}{flags}"

    def describe(self) -> str:
        return f"{self.what()} manager={self.field_manager} user={self.user} at={self.at:.3f}"


@dataclass(frozen=True)
class Match:
    """Which attempts a query or a deny rule is about. None matches anything.

    `subresource` defaults to "": the main resource only, so a count of applies never includes
    status writes; pass "status" for those or None for both.
    """

    kind: str | None = None
    name: str | None = None
    operation: str | None = None
    dry_run: bool | None = None
    field_manager: str | None = None
    user: str | None = None
    subresource: str | None = ""
    where: Callable[[Attempt], bool] | None = None

    def __call__(self, attempt: Attempt) -> bool:
        wanted = (
            (self.kind, attempt.kind.kind),
            (self.name, attempt.name),
            (self.operation, attempt.operation),
            (self.dry_run, attempt.dry_run),
            (self.field_manager, attempt.field_manager),
            (self.user, attempt.user),
            (self.subresource, attempt.subresource),
        )
        fields_match = all(want is None or want == got for want, got in wanted)
        return fields_match and (self.where is None or self.where(attempt))

    def describe(self) -> str:
        fields = dataclasses.asdict(self)
        return ", ".join(f"{key}={value!r}" for key, value in fields.items() if value is not None)


@dataclass
class _DenyRule:
    match: Match
    #: None: deny until allow_all(); else how many more attempts to deny
    remaining: int | None
    message: str
    code: int


class Gate:
    """Holds the answer to matching attempts until the test opens it, so that a test can act
    while a controller's reconcile is blocked in that call. Never longer than HOLD_LIMIT: the
    API server gives up on the webhook after WEBHOOK_TIMEOUT_SECONDS."""

    def __init__(self, match: Match, times: int) -> None:
        self.match = match
        self.remaining = times
        self._entered = threading.Event()
        self._opened = threading.Event()

    def hold(self) -> None:
        """In the server's thread of the held request: wait until opened (or the limit)."""
        self._entered.set()
        self._opened.wait(HOLD_LIMIT)

    def wait_entered(self, timeout: float) -> None:
        """Wait until an attempt is held at the gate."""
        if not self._entered.wait(timeout):
            raise WitnessTimeout(f"no attempt matching {self.match.describe()} reached the gate")

    def open(self) -> None:
        self._opened.set()


class Recorder:
    """The attempts in one namespace, and the deny rules a test set for them. Thread-safe."""

    def __init__(self, namespace: str, on_close: Callable[[], None] = lambda: None) -> None:
        self.namespace = namespace
        self._on_close = on_close
        self._changed = threading.Condition()
        self._attempts: list[Attempt] = []
        self._rules: list[_DenyRule] = []
        self._gates: list[Gate] = []
        self._live = threading.Event()
        self._closed = False

    # -- what the server calls ---------------------------------------------------------------
    def review(self, request: dict[str, Any], at: float, wall: datetime) -> dict[str, Any]:
        """Record the request and answer it: allowed, unless a deny rule takes it."""
        labels = _metadata(request.get("object")).get("labels") or {}
        if PROBE_LABEL in labels:
            self._live.set()
            return {"uid": request["uid"], "allowed": True}
        attempt = _attempt(request, at, wall)
        with self._changed:
            rule = next((r for r in self._rules if r.match(attempt)), None)
            if rule is not None:
                attempt = dataclasses.replace(attempt, denied=True)
                self._spend(rule)
            gate = next((g for g in self._gates if g.match(attempt)), None)
            if gate is not None:
                gate.remaining -= 1
                if gate.remaining == 0:
                    self._gates.remove(gate)
            self._attempts.append(attempt)
            self._changed.notify_all()
        log.debug("witness %s: %s", self.namespace, attempt.describe())
        if gate is not None:
            gate.hold()
        return _response(request["uid"], rule)

    def _spend(self, rule: _DenyRule) -> None:
        if rule.remaining is None:
            return
        rule.remaining -= 1
        if rule.remaining == 0:
            self._rules.remove(rule)

    @property
    def live(self) -> bool:
        """True once a probe reached the witness: the API server calls the webhook."""
        return self._live.is_set()

    # -- queries -----------------------------------------------------------------------------
    def mark(self) -> float:
        """Now, on the clock of `Attempt.at`: pass it as `since` to ask about what follows."""
        return time.monotonic()

    def attempts(self, *, since: float | None = None, **filters: Any) -> list[Attempt]:
        """The recorded attempts matching `filters` (the fields of `Match`), oldest first."""
        match = Match(**filters)
        with self._changed:
            return self._select(match, since)

    def _select(self, match: Match, since: float | None) -> list[Attempt]:
        return [a for a in self._attempts if (since is None or a.at >= since) and match(a)]

    def wait_for(
        self,
        *,
        count: int = 1,
        timeout: float = WAIT_TIMEOUT,
        since: float | None = None,
        **filters: Any,
    ) -> list[Attempt]:
        """Wait until at least `count` attempts match; return all that match by then.

        Wakes on each new attempt rather than polling, so the return is as prompt as the record.
        """
        match = Match(**filters)
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(found := self._select(match, since)) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WitnessTimeout(self._report(match, since, count, timeout, found))
                self._changed.wait(remaining)
            return found

    def quiet(self, seconds: float, *, since: float | None = None, **filters: Any) -> list[Attempt]:
        """Watch for `seconds`; return the matching attempts (empty: it stayed quiet).

        Returns at the first matching attempt, so a test of "nothing happens" fails fast.
        """
        match = Match(**filters)
        deadline = time.monotonic() + seconds
        with self._changed:
            while not (found := self._select(match, since)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            return found

    def _report(
        self, match: Match, since: float | None, count: int, timeout: float, found: list[Attempt]
    ) -> str:
        seen = self._select(Match(subresource=None), since)
        lines = [f"  {a.describe()}" for a in seen] or ["  (none)"]
        return (
            f"witness {self.namespace}: waited {timeout:.1f} s for {count} attempt(s) matching "
            f"{match.describe() or 'anything'}, got {len(found)}; all attempts since then:\n"
            + "\n".join(lines)
        )

    # -- deny rules --------------------------------------------------------------------------
    def deny(
        self, *, times: int | None = None, message: str = "", code: int = 403, **filters: Any
    ) -> None:
        """Deny the next `times` matching attempts (None: all, until `allow_all`).

        A denied attempt is recorded too, with denied=True. The API server answers the client
        with `code` and a message that names the witness, so a failure is never mistaken for a
        controller bug. Rules are checked in the order they were added.
        """
        if times is not None and times < 1:
            raise ValueError(f"times must be at least 1, or None for all: {times}")
        text = f"{DENIAL}: {message}" if message else DENIAL
        with self._changed:
            self._rules.append(_DenyRule(Match(**filters), times, text, code))

    def gate(self, *, times: int = 1, **filters: Any) -> Gate:
        """Hold the answer to the next `times` matching attempts until the gate is opened."""
        gate = Gate(Match(**filters), times)
        with self._changed:
            self._gates.append(gate)
        return gate

    def allow_all(self) -> None:
        with self._changed:
            self._rules.clear()
            gates, self._gates = self._gates, []
        for gate in gates:
            gate.open()

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Unregister the webhook of this namespace (idempotent); the record stays readable."""
        self.allow_all()  # nothing stays held or refused for a test that is over
        if not self._closed:
            self._closed = True
            self._on_close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _metadata(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def witness_deletes(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` (a manifest) with DELETES_LABEL added: the witness will see its deletes."""
    metadata = dict(obj.get("metadata") or {})
    metadata["labels"] = {**(metadata.get("labels") or {}), DELETES_LABEL: "true"}
    return {**obj, "metadata": metadata}


def _attempt(request: dict[str, Any], at: float, wall: datetime) -> Attempt:
    gvk = request["kind"]
    old = _metadata(request.get("oldObject"))
    # A DELETE has no object, only the stored oldObject.
    current = _metadata(request.get("object")) or old
    subresource = request.get("subResource") or ""
    return Attempt(
        at=at,
        wall=wall,
        uid=request["uid"],
        operation=request["operation"],
        kind=GroupVersionKind(gvk["group"], gvk["version"], gvk["kind"]),
        namespace=request.get("namespace") or "",
        # request.name is empty for a create with generateName; the object has the name by now
        name=request.get("name") or current.get("name", ""),
        subresource=subresource,
        dry_run=bool(request.get("dryRun")),
        field_manager=(request.get("options") or {}).get("fieldManager"),
        user=(request.get("userInfo") or {}).get("username", ""),
        resource_version=old.get("resourceVersion"),
        status=(request.get("object") or {}).get("status") if subresource == "status" else None,
        annotations={} if subresource else dict(current.get("annotations") or {}),
    )


def _response(uid: str, rule: _DenyRule | None) -> dict[str, Any]:
    if rule is None:
        return {"uid": uid, "allowed": True}
    reason = "Forbidden" if rule.code == 403 else "Invalid" if rule.code == 422 else ""
    status = {"code": rule.code, "reason": reason, "message": rule.message}
    return {"uid": uid, "allowed": False, "status": status}


class _Handler(BaseHTTPRequestHandler):
    """Answers AdmissionReview v1 on PATH; one request per connection.

    HTTP/1.0 closes each connection after its answer: no idle connection that the API server
    might reuse at the moment this side times it out (a failed call, with failurePolicy Fail, is
    a failed apply). Keep-alive measured no faster here: ~40 ms per call of Nagle and delayed
    ACK against ~2 ms for a fresh TLS connection.
    """

    server: _Server

    def do_POST(self) -> None:
        if urlsplit(self.path).path != PATH:  # the API server appends ?timeout=5s
            self.send_error(404)
            return
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = self.server.review(review["request"])
        body = json.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("witness http: " + format, *args)


class _Server(ThreadingHTTPServer):
    """TLS per connection, in the connection's own thread.

    Wrapping the listening socket instead would run every handshake in the accept loop, where
    one slow client stalls all others.
    """

    def __init__(
        self,
        address: tuple[str, int],
        context: ssl.SSLContext,
        review: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.context = context
        self.review = review

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(CONNECTION_TIMEOUT)
        with self.context.wrap_socket(request, server_side=True) as tls:
            super().finish_request(tls, client_address)


class Witness:
    """The webhook server of one pytest session and the configurations it registered.

    `callback.host` is the address the API server dials: an IP address is bound and named in
    the certificate as such; a DNS name is named in the certificate and the server binds every
    interface. With `callback.service` (the suite in a pod), the API server calls that Service,
    whose target is `port` here; else the port is any free one.
    """

    def __init__(self, api: client.ApiClient, callback: CallbackAddress, port: int = 0) -> None:
        self.api = api
        self.host = callback.host
        self.service = callback.service
        self.port = port
        self._ca = pki.new_ca("convoy-conformance-witness-ca")
        self._recorders: dict[str, Recorder] = {}
        self._lock = threading.Lock()
        #: What reached the witness for no watched namespace: a configuration outliving its
        #: recorder for a moment after close, or a leak. Always allowed.
        self.strays = Recorder("(unwatched)")
        self._server: _Server | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Witness:
        self._remove_stale_configurations()
        address = (_bind_host(self.host), self.port)
        self._server = _Server(address, self._tls_context(), self._review)
        threading.Thread(
            target=self._server.serve_forever, name="convoy-witness", daemon=True
        ).start()
        log.info("witness serving at %s", self.where)
        return self

    def close(self) -> None:
        """Unregister every webhook still registered, then stop serving (idempotent)."""
        try:
            for recorder in list(self._recorders.values()):
                recorder.close()
        finally:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
                self._server = None

    def __enter__(self) -> Witness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the witness is not serving: call start() first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self._server.server_address[1]}{PATH}"

    @property
    def where(self) -> str:
        """Where the API server calls the witness, for messages and the report."""
        if self.service is None:
            return self.url
        port = self._server.server_address[1] if self._server else self.port
        return f"service {self.service.namespace}/{self.service.name} (port {port})"

    def _client_config(self) -> dict[str, Any]:
        ca_bundle = base64.b64encode(self._ca.cert_pem).decode()
        if self.service is None:
            return {"url": self.url, "caBundle": ca_bundle}
        reference = {
            "namespace": self.service.namespace,
            "name": self.service.name,
            "port": self.port,
            "path": PATH,
        }
        return {"service": reference, "caBundle": ca_bundle}

    def _tls_context(self) -> ssl.SSLContext:
        serving = pki.issue(
            self._ca, "convoy-conformance-witness", server=True, **_ip_or_dns(self.host)
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        # load_cert_chain reads files only; they live just long enough to be read.
        with tempfile.TemporaryDirectory(prefix="convoy-witness-") as directory:
            context.load_cert_chain(*serving.write(Path(directory), "serving"))
        return context

    def _review(self, request: dict[str, Any]) -> dict[str, Any]:
        at, wall = time.monotonic(), datetime.now(UTC)
        with self._lock:
            recorder = self._recorders.get(request.get("namespace") or "", self.strays)
        return recorder.review(request, at, wall)

    def recorders(self) -> list[Recorder]:
        """The recorders of the namespaces the witness watches now."""
        with self._lock:
            return list(self._recorders.values())

    def times(self, *, since: float, where: Callable[[Attempt], bool]) -> list[float]:
        """The times of the attempts `where` accepts since `since`, in every namespace the
        witness watches (its status writes too), in order."""
        return sorted(
            a.at
            for r in self.recorders()
            for a in r.attempts(since=since, subresource=None, where=where)
        )

    # -- watching a namespace ----------------------------------------------------------------
    def watch(self, namespace: str, *, timeout: float = LIVE_TIMEOUT) -> Recorder:
        """Register the webhook for `namespace` and return once the API server calls it."""
        recorder = Recorder(namespace, on_close=lambda: self._unwatch(namespace))
        with self._lock:
            if namespace in self._recorders:
                raise ValueError(f"the witness already watches namespace {namespace}")
            self._recorders[namespace] = recorder
        try:
            self._admission.create_validating_webhook_configuration(self._configuration(namespace))
            self._await_live(recorder, timeout)
        except BaseException:
            recorder.close()
            raise
        return recorder

    def _unwatch(self, namespace: str) -> None:
        with self._lock:
            self._recorders.pop(namespace, None)
        self._delete_configuration(configuration_name(namespace))

    @property
    def _admission(self) -> client.AdmissionregistrationV1Api:
        return client.AdmissionregistrationV1Api(self.api)

    def _configuration(self, namespace: str) -> dict[str, Any]:
        common = {
            "clientConfig": self._client_config(),
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": namespace},
            },
            "matchConditions": MATCH_CONDITIONS,
            # None: the witness has no side effects, so the API server calls it for dry runs.
            "sideEffects": "None",
            # Fail: an attempt the witness did not see must not happen unseen.
            "failurePolicy": "Fail",
            "timeoutSeconds": WEBHOOK_TIMEOUT_SECONDS,
            "admissionReviewVersions": ["v1"],
        }
        writes = {
            "name": f"{namespace}.witness.conformance.convoy.kumodo.io",
            **common,
            "rules": [
                {
                    "apiGroups": ["*"],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    # Status writes show a controller's reconciles even when it applies
                    # nothing; other subresources (scale, token, eviction) are not needed.
                    "resources": ["*", "*/status"],
                    # The namespace itself is cluster-scoped, so its status updates during
                    # deletion never depend on the witness.
                    "scope": "Namespaced",
                }
            ],
        }
        # Deletes only of objects that opted in: deleting a namespace deletes everything in it,
        # and with failurePolicy Fail that must not depend on the witness for the rest.
        deletes = {
            "name": f"{namespace}.deletes.witness.conformance.convoy.kumodo.io",
            **common,
            "rules": [
                {
                    "apiGroups": ["*"],
                    "apiVersions": ["*"],
                    "operations": ["DELETE"],
                    "resources": ["*"],
                    "scope": "Namespaced",
                }
            ],
            "objectSelector": {"matchLabels": {DELETES_LABEL: "true"}},
        }
        return {
            "metadata": {
                "name": configuration_name(namespace),
                "labels": {WATCH_LABEL: namespace},
            },
            "webhooks": [writes, deletes],
        }

    def _await_live(self, recorder: Recorder, timeout: float) -> None:
        """Send dry-run probes until one reaches the witness.

        The API server picks up a new configuration from its informer a moment after the create;
        until then attempts would pass unseen. A dry-run create stores nothing, so there is
        nothing to delete, and the probe label keeps probes out of the record.
        """
        core = client.CoreV1Api(self.api)
        probe = {
            "metadata": {
                "name": f"witness-probe-{secrets.token_hex(3)}",
                "labels": {PROBE_LABEL: "true"},
            }
        }

        def probed() -> bool:
            core.create_namespaced_config_map(recorder.namespace, probe, dry_run="All")
            return recorder.live

        poll_until(
            probed,
            timeout=timeout,
            step=PROBE_STEP,
            failure=lambda: TimeoutError(
                f"the API server did not call the witness at {self.where} for namespace "
                f"{recorder.namespace} within {timeout:.0f} s: can it reach {self.host}?"
            ),
        )

    # -- cleanup -----------------------------------------------------------------------------
    def _delete_configuration(self, name: str) -> None:
        delete_if_present(lambda: self._admission.delete_validating_webhook_configuration(name))

    def _remove_stale_configurations(self) -> None:
        """Remove configurations a crashed session left for namespaces that are gone or going.

        With failurePolicy Fail and nobody answering, such a configuration would refuse every
        update there, finalizer removals included, and keep the namespace terminating forever.
        """
        core = client.CoreV1Api(self.api)
        stale = self._admission.list_validating_webhook_configuration(label_selector=WATCH_LABEL)
        for configuration in stale.items:
            if not _namespace_alive(core, configuration.metadata.labels[WATCH_LABEL]):
                log.info("witness: removing stale %s", configuration.metadata.name)
                self._delete_configuration(configuration.metadata.name)


def configuration_name(namespace: str) -> str:
    return f"convoy-witness-{namespace}"


def _namespace_alive(core: client.CoreV1Api, name: str) -> bool:
    found = read_or_none(lambda: core.read_namespace(name))
    return found is not None and found.metadata.deletion_timestamp is None


class _HostNames(TypedDict, total=False):
    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...]


def _ip_or_dns(host: str) -> _HostNames:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return {"dns_names": (host,)}
    return {"ip_addresses": (host,)}


def _bind_host(host: str) -> str:
    """An IP address is bound as it is; a DNS name may resolve to any interface: bind all."""
    return host if "ip_addresses" in _ip_or_dns(host) else ""
