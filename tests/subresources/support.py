"""Helpers of the subresource API tests: reading Releases, watching them, direct HTTPS."""

from __future__ import annotations

import http.client
import itertools
import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, watch

from conformance.clusters.ports import LOOPBACK
from convoy import api

Obj = dict[str, Any]


def annotations(release: Obj) -> dict[str, str]:
    return release["metadata"].get("annotations") or {}


def updates(k8s: client.ApiClient, since: Obj, until: str) -> list[tuple[Obj, Obj]]:
    """Each update of a Release after the state `since`, up to resourceVersion `until`.

    As (before, after) pairs from a watch: the controller's own status writes interleave with
    the test's, so a test finds its update among them instead of assuming it comes first.
    """
    meta = since["metadata"]
    stream = watch.Watch().stream(
        client.CustomObjectsApi(k8s).list_namespaced_custom_object,
        api.GROUP,
        api.VERSION,
        meta["namespace"],
        api.RELEASES,
        field_selector=f"metadata.name={meta['name']}",
        resource_version=meta["resourceVersion"],
        timeout_seconds=60,
    )
    states = [since]
    for event in stream:
        assert event["type"] == "MODIFIED", event["type"]
        states.append(event["object"])
        if event["object"]["metadata"]["resourceVersion"] == until:
            return list(itertools.pairwise(states))
    raise AssertionError(f"no update of {meta['name']} to resourceVersion {until} within 60 s")


def update_changing(
    k8s: client.ApiClient, since: Obj, until: str, annotation: str
) -> tuple[Obj, Obj]:
    """The first update after `since` that changed `annotation`: (before, after)."""
    for before, after in updates(k8s, since, until):
        if annotations(before).get(annotation) != annotations(after).get(annotation):
            return before, after
    raise AssertionError(f"no update up to resourceVersion {until} changed {annotation}")


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any


@dataclass
class Direct:
    """HTTPS to the controller's port, bypassing the kube-apiserver: what an attacker can try."""

    port: int
    serving_ca_pem: bytes

    def context(self, client_cert: tuple[Path, Path] | None) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.serving_ca_pem.decode())
        if client_cert:
            context.load_cert_chain(*map(str, client_cert))
        return context

    def request(
        self,
        method: str,
        path: str,
        *,
        client_cert: tuple[Path, Path] | None = None,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        chunked: bool = False,
    ) -> Answer:
        """One request; raises (ssl.SSLError, ConnectionError) when TLS refuses the caller."""
        connection = http.client.HTTPSConnection(
            LOOPBACK, self.port, context=self.context(client_cert), timeout=30
        )
        try:
            sent = {"Content-Type": "application/json", **(headers or {})}
            body_arg: Any = iter([body]) if chunked and body is not None else body
            connection.request(method, path, body=body_arg, headers=sent, encode_chunked=chunked)
            response = connection.getresponse()
            return Answer(response.status, json.loads(response.read() or b"null"))
        finally:
            connection.close()
