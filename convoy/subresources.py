"""The subresource API: /sync, /pin, /mutations and /lifecycle of a Release, as an aggregated API.

A CRD cannot serve `POST releases/<name>/sync`, so the controller serves these paths itself
behind an APIService (docs/api-reference.md, "Subresource API"). This module is that API without
its transport: discovery, routing, authorization by SubjectAccessReview, and the single merge
patch each write makes, so a request and its data land in one update of the Release (one
resourceVersion, one watch event). subresources_server.py adds TLS and the front proxy.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import quote, unquote

from kubernetes import client

from convoy import api, synctime
from convoy.api import Annotation
from convoy.clock import Clock, RealClock
from convoy.hooks import Lifecycle
from convoy.mutations import parse_mutations
from convoy.render import RenderError
from convoyapi import SUBRESOURCE_GROUP, SUBRESOURCE_GROUP_VERSION, SUBRESOURCE_VERSION

log = logging.getLogger(__name__)

Obj = dict[str, Any]

PREFIX = f"/apis/{SUBRESOURCE_GROUP_VERSION}"
#: The field manager of the annotation writes, so managedFields say who wrote them.
FIELD_MANAGER = "convoy-subresources"

_ROUTE = re.compile(
    rf"{re.escape(PREFIX)}/namespaces/(?P<namespace>[^/]+)/releases/(?P<name>[^/]+)"
    r"/(?P<subresource>[^/]+)"
)
VERBS = {"GET": "get", "POST": "create", "PUT": "update", "DELETE": "delete"}


class Subresource(StrEnum):
    SYNC = "sync"
    PIN = "pin"
    MUTATIONS = "mutations"
    LIFECYCLE = "lifecycle"


#: The methods each subresource accepts; any other gets 405.
METHODS: dict[Subresource, tuple[str, ...]] = {
    Subresource.SYNC: ("POST",),
    Subresource.PIN: ("PUT", "DELETE"),
    Subresource.MUTATIONS: ("PUT", "DELETE"),
    Subresource.LIFECYCLE: ("PUT", "DELETE"),
}
RENDER_REF = re.compile(r"sha256:[0-9a-f]{64}")


def pin_value(body: Any) -> str:
    """`{"renderRef": "sha256:<64 hex>"}` -> the renderRef; ValueError says what is wrong."""
    if not isinstance(body, dict) or set(body) != {"renderRef"}:
        raise ValueError('expected a JSON object with exactly one key, "renderRef"')
    ref = body["renderRef"]
    if not (isinstance(ref, str) and RENDER_REF.fullmatch(ref)):
        raise ValueError(f"renderRef {ref!r} is not sha256: and 64 lowercase hex digits")
    return ref


def checked_by(parse: Callable[[str], object]) -> Callable[[Any], str]:
    """The annotation text of a body, if the controller's own parser of it accepts it.

    One parser for the server and the controller: the API never writes a value that the
    reconcile would reject as Unappliable, and never rejects one the reconcile would accept.
    """

    def value(body: Any) -> str:
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
        try:
            parse(text)
        except RenderError as error:
            raise ValueError(str(error)) from None
        return text

    return value


#: The annotation a PUT writes (a DELETE removes) and how the PUT's body becomes its value.
WRITES: dict[Subresource, tuple[Annotation, Callable[[Any], str]]] = {
    Subresource.PIN: (Annotation.PIN, pin_value),
    Subresource.MUTATIONS: (Annotation.MUTATIONS, checked_by(parse_mutations)),
    Subresource.LIFECYCLE: (Annotation.LIFECYCLE, checked_by(Lifecycle.parse)),
}


def release_path(namespace: str, name: str, subresource: Subresource | str) -> str:
    """The API path of a Release's subresource, as clients send it to the kube-apiserver."""
    namespace, name = quote(namespace, safe=""), quote(name, safe="")
    return f"{PREFIX}/namespaces/{namespace}/releases/{name}/{subresource}"


@dataclass(frozen=True)
class User:
    """Who the front proxy says is calling (X-Remote-User, X-Remote-Group, ...)."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str | None = None
    extra: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    user: User
    body: bytes = b""


@dataclass(frozen=True)
class Response:
    status: int
    body: Obj
    headers: dict[str, str] = field(default_factory=dict)


class ApiError(Exception):
    """An answer other than success, carried to the caller as a metav1 Status."""

    def __init__(
        self, code: int, reason: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.response = Response(code, status_body(code, reason, message), headers or {})


def status_body(code: int, reason: str, message: str) -> Obj:
    """A metav1 Status, the error body kubectl and client libraries know how to show."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@dataclass(frozen=True)
class Route:
    namespace: str
    name: str
    subresource: Subresource

    @classmethod
    def parse(cls, path: str) -> Route:
        match = _ROUTE.fullmatch(path)
        if not match or match["subresource"] not in METHODS:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        namespace, name = unquote(match["namespace"]), unquote(match["name"])
        return cls(namespace, name, Subresource(match["subresource"]))

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}/{self.subresource}"


class SubresourceAPI:
    """Answers one authenticated request; the transport has checked who the caller is."""

    def __init__(self, api_client: client.ApiClient, clock: Clock | None = None) -> None:
        self._reviews = client.AuthorizationV1Api(api_client)
        self._releases = client.CustomObjectsApi(api_client)
        self._clock = clock or RealClock()

    def handle(self, request: Request) -> Response:
        try:
            if request.path in DOCUMENTS:
                return self._document(request)
            return self._write(request, Route.parse(request.path))
        except ApiError as error:
            return error.response
        except Exception:  # a bug or a lost API server must still get the caller an answer
            log.exception("%s %s failed", request.method, request.path)
            return ApiError(
                500, "InternalError", "internal error; see the controller's log"
            ).response

    # -- discovery and OpenAPI -----------------------------------------------------------------
    def _document(self, request: Request) -> Response:
        _allow(request.method, ("GET",))
        attributes = {"path": request.path, "verb": "get"}
        self._authorize(request.user, "nonResourceAttributes", attributes)
        return Response(200, DOCUMENTS[request.path])

    # -- writes --------------------------------------------------------------------------------
    def _write(self, request: Request, route: Route) -> Response:
        _allow(request.method, METHODS[route.subresource])
        attributes = {
            "verb": VERBS[request.method],
            "namespace": route.namespace,
            "name": route.name,
            "group": SUBRESOURCE_GROUP,
            "version": SUBRESOURCE_VERSION,
            "resource": api.RELEASES,
            "subresource": route.subresource.value,
        }
        self._authorize(request.user, "resourceAttributes", attributes)
        annotations = self._annotations(request, route.subresource)
        metadata = self._patch(route, annotations)
        log.info(
            "%s %s by %s: %s", request.method, route, request.user.name, json.dumps(annotations)
        )
        body = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1"}
        return Response(200, {**body, "metadata": metadata})

    def _annotations(self, request: Request, subresource: Subresource) -> dict[str, str | None]:
        """Everything one request writes: its data and the /sync request, for one update."""
        now = synctime.format_sync_time(self._clock.wall(), precise=True)
        written: dict[str, str | None] = {Annotation.SYNC_REQUESTED_AT: now}
        if subresource is Subresource.SYNC:
            if _force(request.query):
                written[Annotation.SYNC_FORCE_REQUESTED_AT] = now
            return written
        annotation, value_of = WRITES[subresource]
        try:
            value = value_of(_json(request.body)) if request.method == "PUT" else None
        except ValueError as error:
            raise ApiError(400, "BadRequest", f"invalid {subresource} body: {error}") from None
        return {annotation: value, **written}

    def _patch(self, route: Route, annotations: dict[str, str | None]) -> Obj:
        try:
            patched = self._releases.patch_namespaced_custom_object(
                api.GROUP,
                api.VERSION,
                route.namespace,
                api.RELEASES,
                route.name,
                {"metadata": {"annotations": annotations}},
                field_manager=FIELD_MANAGER,
                _content_type="application/merge-patch+json",
            )
        except client.ApiException as error:
            raise _relayed(error, route) from None
        return patched["metadata"]

    # -- authorization -------------------------------------------------------------------------
    def _authorize(self, user: User, kind: str, attributes: Obj) -> None:
        """Ask the API server whether `user` may do this, as the kube-apiserver itself would.

        `kind` is resourceAttributes or nonResourceAttributes of a SubjectAccessReview spec.
        """
        spec: Obj = {"user": user.name, "groups": list(user.groups), "extra": user.extra}
        spec[kind] = attributes
        if user.uid:
            spec["uid"] = user.uid
        try:
            review = self._reviews.create_subject_access_review({"spec": spec})
        except client.ApiException as error:
            log.error("SubjectAccessReview failed: %s %s", error.status, error.reason)
            raise ApiError(
                500, "InternalError", f"cannot authorize the request: {error.reason}"
            ) from None
        if not review.status.allowed:
            raise ApiError(403, "Forbidden", _forbidden(user, attributes, review.status.reason))


def _allow(method: str, allowed: tuple[str, ...]) -> None:
    if method not in allowed:
        raise ApiError(
            405,
            "MethodNotAllowed",
            f"{method} is not supported here; allowed: {', '.join(allowed)}",
            {"Allow": ", ".join(allowed)},
        )


def _force(query: dict[str, list[str]]) -> bool:
    values = query.get("force", ["false"])
    if values[-1] not in ("true", "false"):
        raise ApiError(400, "BadRequest", f"force must be true or false, not {values[-1]!r}")
    return values[-1] == "true"


def _json(body: bytes) -> Any:
    if not body.strip():
        raise ApiError(400, "BadRequest", "a JSON body is required")
    try:
        return json.loads(body, parse_constant=_no_constant)
    except ValueError as error:
        raise ApiError(400, "BadRequest", f"the body is not JSON: {error}") from None


def _no_constant(name: str) -> None:
    """NaN and Infinity are not JSON, though Python's parser accepts them."""
    raise ValueError(f"{name} is not a JSON value")


def _forbidden(user: User, attributes: Obj, reason: str | None) -> str:
    if "path" in attributes:
        what = f'forbidden: User "{user.name}" cannot get path "{attributes["path"]}"'
    else:
        what = (
            f'releases.{SUBRESOURCE_GROUP} "{attributes["name"]}" is forbidden: '
            f'User "{user.name}" cannot {attributes["verb"]} resource '
            f'"releases/{attributes["subresource"]}" in API group '
            f'"{SUBRESOURCE_GROUP}" in the namespace "{attributes["namespace"]}"'
        )
    return f"{what}: {reason}" if reason else what


def _relayed(error: client.ApiException, route: Route) -> ApiError:
    """The API server's answer to the write, told in terms of the Release."""
    if error.status == 404:
        return ApiError(404, "NotFound", f'releases.{api.GROUP} "{route.name}" not found')
    try:
        status = json.loads(error.body)
        return ApiError(error.status, status["reason"], status["message"])
    except (TypeError, ValueError, KeyError):
        return ApiError(error.status or 500, "InternalError", f"writing the Release: {error}")


def _documents() -> dict[str, Obj]:
    """What the aggregator and kubectl read: legacy discovery, and OpenAPI without schemas.

    The aggregator downloads /openapi/v2 and /openapi/v3 of every APIService and logs an error
    and retries forever when they are missing; the subresources have no schema to publish.
    """
    version = {"groupVersion": SUBRESOURCE_GROUP_VERSION, "version": SUBRESOURCE_VERSION}
    group = {"name": SUBRESOURCE_GROUP, "versions": [version], "preferredVersion": version}
    resources = [
        {
            "name": f"{api.RELEASES}/{subresource}",
            "singularName": "",
            "namespaced": True,
            "group": api.GROUP,
            "version": api.VERSION,
            "kind": "Release",
            "verbs": [VERBS[method] for method in methods],
        }
        for subresource, methods in METHODS.items()
    ]
    return {
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]},
        f"/apis/{SUBRESOURCE_GROUP}": {"kind": "APIGroup", "apiVersion": "v1", **group},
        PREFIX: {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": SUBRESOURCE_GROUP_VERSION,
            "resources": resources,
        },
        "/openapi/v2": {
            "swagger": "2.0",
            "info": {"title": "convoy subresources", "version": SUBRESOURCE_VERSION},
            "paths": {},
        },
        "/openapi/v3": {"paths": {}},
    }


DOCUMENTS = _documents()
