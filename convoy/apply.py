"""Dry run, apply, prune and drift of rendered objects on a target cluster.

Everything goes through the dynamic client, so any kind the target serves works. Each function
raises ApplyError with the Applied reason of its step and a message that names the object
(`Kind namespace/name`) and quotes the API server; none of them writes Release status.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError
from kubernetes.dynamic.resource import Resource

from convoy.api import FIELD_MANAGER, Reason
from convoy.render import Obj, describe, identity
from convoy.targets import Target, api_message

NAMESPACE = ("", "Namespace")
CRD = ("apiextensions.k8s.io", "CustomResourceDefinition")
#: How long apply waits for the CRDs it applied to be served before applying the rest.
CRD_ESTABLISHED_TIMEOUT = 30.0
_POLL = 0.1
#: Prune goes in reverse apply order: what lives in a Namespace or is defined by a CRD first.
_PRUNE_RANK = {CRD: 1, NAMESPACE: 2}


class ApplyError(Exception):
    """A step failed: UNAPPLIABLE (dry run), DEPLOY_FAILED (apply) or PRUNE_FAILED (prune)."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def reference(obj: Obj) -> Obj:
    """{apiVersion, kind, namespace (only if set), name} of an object or a reference."""
    metadata = obj.get("metadata") or obj
    ref = {"apiVersion": obj["apiVersion"], "kind": obj["kind"]}
    if metadata.get("namespace"):
        ref["namespace"] = metadata["namespace"]
    return {**ref, "name": metadata["name"]}


def dry_run(target: Target, objects: Sequence[Obj]) -> None:
    """Server-side apply of every object with dryRun=All; raises ApplyError(UNAPPLIABLE).

    An object that needs something the same render creates cannot be checked before the apply:
    a custom resource whose CRD is in the render and not served yet, and an object in a
    Namespace of the render that does not exist yet. Those are skipped, as Argo CD does;
    any other kind the target does not serve fails the dry run.
    """
    namespaces = {obj["metadata"]["name"] for obj in objects if _kind(obj) == NAMESPACE}
    defined = {_defined_kind(obj) for obj in objects if _kind(obj) == CRD}
    for obj in objects:
        if _kind(obj) in defined and target.scope_of(obj["apiVersion"], obj["kind"]) is None:
            continue
        with _failing(Reason.UNAPPLIABLE, f"dry run of {describe(obj)}"):
            try:
                _apply_body(target.resource(obj["apiVersion"], obj["kind"]), obj, "All")
            except client.ApiException as error:
                if not _missing_namespace(error, namespaces):
                    raise


def apply(target: Target, objects: Sequence[Obj]) -> list[Obj]:
    """Server-side apply of every object, forcing conflicts; raises ApplyError(DEPLOY_FAILED).

    Namespaces first, then CRDs (waiting until they are served), then the rest in render order,
    so that each object finds what it needs. The first failure stops the apply. Returns the
    references of the applied objects, in the order applied.
    """
    first = [obj for obj in objects if _kind(obj) == NAMESPACE]
    crds = [obj for obj in objects if _kind(obj) == CRD]
    rest = [obj for obj in objects if _kind(obj) not in (NAMESPACE, CRD)]
    for obj in first + crds:
        _apply_one(target, obj)
    _wait_established(target, crds)
    for obj in rest:
        _apply_one(target, obj)
    return [reference(obj) for obj in first + crds + rest]


def prune(target: Target, previous: Sequence[Obj], current: Sequence[Obj]) -> list[Obj]:
    """Delete the objects of `previous` that are not in `current`; returns what it deleted.

    `previous` is status.appliedObjects (docs/api-reference.md "Prune"). Identity ignores the
    version: group, kind, namespace, name. Objects go in reverse apply order (CRDs and Namespaces
    last); a 404, or a kind no longer served, counts as done and is not returned. Any other
    failure raises ApplyError(PRUNE_FAILED).
    """
    keep = {_identity(target, obj) for obj in current}
    doomed = {_identity(target, ref): reference(ref) for ref in previous}
    ordered = sorted(
        (ref for key, ref in doomed.items() if key not in keep),
        key=lambda ref: _PRUNE_RANK.get(_kind(ref), 0),
    )
    return [ref for ref in ordered if _delete(target, ref)]


def drift(target: Target, objects: Sequence[Obj]) -> list[Obj]:
    """References of the objects that are missing from the target or differ from the render.

    A rendered field differs when the live object holds another value there (see `matches`);
    fields the render does not set (defaults, status, other managers' fields) never count.
    Errors other than a missing object or kind propagate as ApiException.
    """
    return [reference(obj) for obj in objects if not _in_place(target, obj)]


def matches(rendered: Any, live: Any) -> bool:
    """docs/api-reference.md "Drift": a map matches when each rendered key matches, a list when
    it has the same length and each item matches, a scalar when equal. A rendered null matches
    an absent field, because a server-side apply removes a field set to null."""
    if isinstance(rendered, dict):
        return isinstance(live, dict) and all(matches(v, live.get(k)) for k, v in rendered.items())
    if isinstance(rendered, list):
        return (
            isinstance(live, list)
            and len(live) == len(rendered)
            and all(matches(r, v) for r, v in zip(rendered, live, strict=True))
        )
    return rendered == live


def _apply_one(target: Target, obj: Obj) -> None:
    with _failing(Reason.DEPLOY_FAILED, f"apply of {describe(obj)}"):
        _apply_body(target.resource(obj["apiVersion"], obj["kind"]), obj)


def _apply_body(resource: Resource, obj: Obj, dry_run: str | None = None) -> None:
    """Server-side apply of `obj`, working around the API server turning an empty map into null.

    When an apply sets a map to `{}` and the field manager owned fields inside it from an
    earlier apply (`spec: {}` after `spec: {version: 2}`), kube-apiserver removes those fields
    and stores the emptied map as null (structured-merge-diff's RemoveItems, kubernetes/kubernetes
    issues 104694 and 117447), which the schema of a custom resource rejects with 422
    `Invalid value: "null"`. The render is fine, and applies to a new object: so, on that error,
    apply it first without its empty maps (removing the maps and the fields convoy owned in them;
    fields of other managers stay), then as it is, which adds the empty maps back. A dry run
    checks the first step only, since nothing it does persists.
    """
    try:
        _server_side_apply(resource, obj, dry_run)
    except client.ApiException as error:
        emptied = without_empty_maps(obj)
        if not _null_for_empty_map(error) or emptied == obj:
            raise
        try:
            _server_side_apply(resource, emptied, dry_run)
        except client.ApiException:
            raise error from None
        if dry_run is None:
            _server_side_apply(resource, obj, dry_run)


def without_empty_maps(obj: Obj) -> Obj:
    """A copy of `obj` without the keys whose value is `{}`, or is a map that has nothing else
    (`{"a": {"b": {}}}` loses `a`). Lists are kept as they are."""
    kept: Obj = {}
    for key, value in obj.items():
        if isinstance(value, dict):
            value = without_empty_maps(value)
            if not value:
                continue
        kept[key] = value
    return kept


def _null_for_empty_map(error: client.ApiException) -> bool:
    return error.status == 422 and 'Invalid value: "null"' in api_message(error)


def _server_side_apply(resource: Resource, obj: Obj, dry_run: str | None = None) -> None:
    metadata = obj["metadata"]
    resource.server_side_apply(
        body=obj,
        name=metadata["name"],
        namespace=metadata.get("namespace"),
        field_manager=FIELD_MANAGER,
        force_conflicts=True,
        dry_run=dry_run,
    )


def _wait_established(target: Target, crds: Sequence[Obj]) -> None:
    """Until each CRD is Established: only then does the API server serve its kind."""
    if not crds:
        return
    resource = target.resource("apiextensions.k8s.io/v1", CRD[1])
    deadline = time.monotonic() + CRD_ESTABLISHED_TIMEOUT
    for crd in crds:
        with _failing(Reason.DEPLOY_FAILED, f"apply of {describe(crd)}"):
            while not _established(resource.get(name=crd["metadata"]["name"]).to_dict()):
                if time.monotonic() > deadline:
                    raise ApplyError(
                        Reason.DEPLOY_FAILED,
                        f"{describe(crd)} is not Established {CRD_ESTABLISHED_TIMEOUT:.0f} s "
                        "after its apply; check its status conditions",
                    )
                time.sleep(_POLL)


def _established(crd: Obj) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _delete(target: Target, ref: Obj) -> bool:
    """Delete one object in the background; False when it (or its kind) was gone already."""
    with _failing(Reason.PRUNE_FAILED, f"prune of {describe(ref)}"):
        try:
            resource = target.resource(ref["apiVersion"], ref["kind"])
            resource.delete(
                name=ref["name"], namespace=ref.get("namespace"), propagation_policy="Background"
            )
        except (ResourceNotFoundError, NotFoundError):
            return False
    return True


def _in_place(target: Target, obj: Obj) -> bool:
    metadata = obj["metadata"]
    try:
        resource = target.resource(obj["apiVersion"], obj["kind"])
        live = resource.get(name=metadata["name"], namespace=metadata.get("namespace"))
    except (ResourceNotFoundError, NotFoundError):
        return False
    return matches(obj, live.to_dict())


def _identity(target: Target, obj: Obj) -> tuple[str, str, str, str]:
    """identity(), with the namespace dropped for kinds the target serves cluster-scoped: a
    render made before its CRD was served defaults a namespace that the server then drops."""
    group, kind, namespace, name = identity(obj)
    if namespace and target.scope_of(obj["apiVersion"], kind) is False:
        namespace = ""
    return group, kind, namespace, name


def _kind(obj: Obj) -> tuple[str, str]:
    return obj["apiVersion"].rpartition("/")[0], obj["kind"]


def _defined_kind(crd: Obj) -> tuple[str, str]:
    spec = crd.get("spec") or {}
    return spec.get("group", ""), (spec.get("names") or {}).get("kind", "")


def _missing_namespace(error: client.ApiException, namespaces: set[str]) -> bool:
    """A 404 for one of `namespaces` (the API server names the namespace in Status details)."""
    try:
        details = json.loads(error.body or "").get("details") or {}
    except (ValueError, AttributeError):
        return False
    return (
        error.status == 404
        and details.get("kind") == "namespaces"
        and details.get("name") in namespaces
    )


@contextmanager
def _failing(reason: Reason, action: str) -> Iterator[None]:
    """Turn API, discovery and connection errors into ApplyError(reason) naming the action."""
    try:
        yield
    except ResourceNotFoundError as error:
        raise ApplyError(reason, f"{action} failed: {error}") from None
    except client.ApiException as error:
        raise ApplyError(reason, f"{action} failed: {api_message(error)}") from None
    except urllib3.exceptions.HTTPError as error:
        raise ApplyError(reason, f"{action} failed: API server not reachable: {error}") from None
