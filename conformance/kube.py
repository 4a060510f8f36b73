"""Small helpers over the official client that the suite and the project's tests share."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from kubernetes import client
from kubernetes.dynamic import DynamicClient

from convoyapi.discovery import dynamic_client

T = TypeVar("T")


def read_or_none(read: Callable[[], T]) -> T | None:
    """`read()`, or None when the object is not there (404); any other error is raised."""
    try:
        return read()
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def delete_if_present(delete: Callable[[], object]) -> None:
    """`delete()`, done already when the object is not there (404); any other error is raised."""
    read_or_none(delete)


@dataclass(frozen=True)
class RawResponse:
    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def raw_request(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    body: Any = None,
    query: list[tuple[str, str]] | None = None,
) -> RawResponse:
    """A request to any API path (subresources, aggregated APIs); errors come back, not raised."""
    method, url, headers, payload, _ = api.param_serialize(
        method,
        path,
        query_params=query or [],
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    try:
        response = api.call_api(method, url, headers, payload)
        response.read()
        status, data = response.status, response.data
    except client.ApiException as error:
        status, data = error.status, error.body
    return RawResponse(status, _decode(data))


def _decode(data: bytes | str | None) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode() if isinstance(data, bytes) else data


_dynamic_clients: WeakKeyDictionary[client.ApiClient, DynamicClient] = WeakKeyDictionary()


def dynamic_api(api: client.ApiClient) -> DynamicClient:
    """One dynamic client per API client, its discovery in memory (convoy.discovery)."""
    if api not in _dynamic_clients:
        _dynamic_clients[api] = dynamic_client(api)
    return _dynamic_clients[api]
