"""Generated requests to the subresource API, and clients that never finish.

Through the kube-apiserver (hypothesis: paths, methods, query strings, bodies) every request gets
an answer within its timeout, never a 5xx, and a 4xx says why. Straight to the controller's port,
a client that never finishes its headers and many connections that never say anything get
nothing, while the server goes on answering the front proxy and the kube-apiserver.
"""

from __future__ import annotations

import json
import select
import socket
import ssl
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from conformance.clusters.local import LOOPBACK
from conformance.kube import raw_request
from convoyapi import SUBRESOURCE_GROUP_VERSION
from tests.subresources.support import Direct

REQUESTS = 300
#: No answer within this many seconds is a hang.
ANSWER_TIMEOUT = 10.0
IDLE_CONNECTIONS = 100
#: How long the never-finished clients are watched for an answer they must not get.
SILENCE = 2.0
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
SUBRESOURCES = ["sync", "pin", "mutations", "lifecycle"]

segments = st.text(min_size=1, max_size=20).map(lambda text: quote(text, safe=""))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
bodies = st.one_of(
    st.just(b""),
    st.binary(max_size=200),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.fixed_dictionaries({"renderRef": st.text(max_size=80)}).map(
        lambda value: json.dumps(value).encode()
    ),
)
queries = st.lists(
    st.tuples(
        st.sampled_from(["force", "dryRun", "fieldManager", "x"]) | st.text(max_size=8),
        st.sampled_from(["true", "false", "1", "", "True"]) | st.text(max_size=8),
    ),
    max_size=3,
).map(urlencode)


@st.composite
def paths(draw: st.DrawFn, namespace: str, release: str) -> str:
    namespace = draw(st.sampled_from([namespace, "absent"]) | segments)
    name = draw(st.sampled_from([release, "missing"]) | segments)
    subresource = draw(st.sampled_from(SUBRESOURCES) | segments)
    tail = draw(st.sampled_from(["", "/extra", "/"]))
    release = f"namespaces/{namespace}/releases/{name}"
    return f"/apis/{SUBRESOURCE_GROUP_VERSION}/{release}/{subresource}{tail}"


def send(api: client.ApiClient, method: str, path: str, query: str, body: bytes) -> tuple:
    """One request as bytes through the kube-apiserver (the client's own serializer would
    refuse most of what is generated here); returns (status, body)."""
    _, url, headers, _, _ = api.param_serialize(method, path, auth_settings=["BearerToken"])
    answer = api.rest_client.pool_manager.request(
        method,
        f"{url}?{query}" if query else url,
        body=body or None,
        headers={**headers, "Content-Type": "application/json"},
        timeout=ANSWER_TIMEOUT,
        retries=False,
    )
    return answer.status, answer.data


@settings(
    max_examples=REQUESTS,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_generated_request_through_the_apiserver_gets_a_clear_answer_never_a_5xx(
    k8s: client.ApiClient, namespace: str, release: str, data: st.DataObject
) -> None:
    method = data.draw(st.sampled_from(METHODS), "method")
    path = data.draw(paths(namespace, release), "path")
    status, body = send(k8s, method, path, data.draw(queries, "query"), data.draw(bodies, "body"))
    assert status < 500, (status, body)
    if status >= 400 and method != "HEAD":
        assert body.strip(), f"{status} without a body"


@pytest.fixture
def never_finished(direct: Direct, front_proxy_cert: tuple[Path, Path]) -> Iterator[list]:
    """Connections that say nothing (no TLS handshake at all), and one that opens TLS as the
    front proxy and never finishes its request's headers."""
    with ExitStack() as stack:
        idle = [
            stack.enter_context(socket.create_connection((LOOPBACK, direct.port)))
            for _ in range(IDLE_CONNECTIONS)
        ]
        tls = direct.context(front_proxy_cert)
        raw = stack.enter_context(socket.create_connection((LOOPBACK, direct.port)))
        slow = stack.enter_context(tls.wrap_socket(raw, server_hostname=LOOPBACK))
        slow.sendall(
            f"POST /apis/{SUBRESOURCE_GROUP_VERSION} HTTP/1.1\r\nHost: convoy\r\nX-Rem".encode()
        )
        yield [*idle, slow]


def answers(connections: list[socket.socket]) -> list[bytes]:
    """What the server sent on any of them within SILENCE seconds (closing without a word, or a
    TLS session ticket, is not an answer)."""
    readable, _, _ = select.select(connections, [], [], SILENCE)
    said = []
    for connection in readable:
        connection.settimeout(0.2)
        try:
            said.append(connection.recv(1024))
        except (TimeoutError, ssl.SSLError, ConnectionError):
            continue
    return [data for data in said if data]


def test_clients_that_never_finish_get_nothing_and_the_server_keeps_serving(
    direct: Direct,
    front_proxy_cert: tuple[Path, Path],
    k8s: client.ApiClient,
    never_finished: list[socket.socket],
) -> None:
    user = {"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"}
    answer = direct.request(
        "GET", f"/apis/{SUBRESOURCE_GROUP_VERSION}", client_cert=front_proxy_cert, headers=user
    )
    assert answer.status == 200, answer
    assert raw_request(k8s, "GET", f"/apis/{SUBRESOURCE_GROUP_VERSION}").status == 200
    said = answers(never_finished)
    assert not said, f"{len(said)} unfinished clients got an answer, first: {said[0]!r}"
