"""The render: the objects convoy would apply for a Release as it is now, and their renderRef.

docs/api-reference.md ("Render and renderRef") is the definition; in short:
ConfigMap source keys ending .yaml/.yml in sorted order -> `${key}` substitution from the values
(only when spec.values is set) -> multi-document YAML -> namespace defaulting by the target's
discovery -> mutations -> renderRef over the objects sorted by (apiVersion, kind, namespace, name),
serialized as RFC 8785 canonical JSON. The release label is not part of the render (so the same
source gives the same renderRef in every Release); `Render.objects` carries it because those are
the objects that the dry run and the apply send.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes import client

from convoy.api import RELEASE_LABEL, Reason, release_key
from convoy.targets import api_message

Obj = dict[str, Any]
#: (apiVersion, kind) -> True namespaced, False cluster-scoped, None not known to the server.
ScopeOf = Callable[[str, str], bool | None]
Mutate = Callable[[list[Obj]], list[Obj]]

SOURCE_KIND = "ConfigMap"
SOURCE_SUFFIXES = (".yaml", ".yml")
#: `$${` (the escape of a literal `${`) or a placeholder `${key}`.
_PLACEHOLDER = re.compile(r"\$\$\{|\$\{([A-Za-z0-9_.-]+)\}")


class RenderError(Exception):
    """The Release cannot be rendered; `reason` is the Applied reason, the message what to fix."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Render:
    """objects: in render order (source keys sorted, documents in order), with the release label.
    ref: the renderRef, over the same objects without the release label.
    """

    objects: tuple[Obj, ...]
    ref: str


def render(
    core: client.CoreV1Api,
    release: Obj,
    scope_of: ScopeOf,
    *,
    mutate: Mutate | None = None,
) -> Render:
    """Render `release` from its source and values, read through `core` (the controller's cluster).

    `scope_of` answers from the target cluster's discovery; `mutate` (the mutations) runs on the
    objects before the renderRef is computed. Raises RenderError.
    """
    namespace, name = release["metadata"]["namespace"], release["metadata"]["name"]
    spec = release.get("spec") or {}
    source, texts = _source_texts(core, namespace, spec.get("source") or {})
    texts = {f"{source}, key {key}": text for key, text in texts.items()}
    if spec.get("values"):
        values, origin = _values(core, namespace, spec["values"])
        texts = {where: substitute(text, values, where, origin) for where, text in texts.items()}
    objects = [obj for where, text in texts.items() for obj in parse(text, where)]
    default_namespace = spec.get("targetNamespace") or namespace
    for obj in objects:
        _place(obj, scope_of(obj["apiVersion"], obj["kind"]), default_namespace)
    _check_unique(objects)
    if mutate is not None:
        objects = mutate(objects)
    label = release_key(namespace, name)
    return Render(tuple(_labelled(obj, label) for obj in objects), render_ref(objects))


def substitute(text: str, values: dict[str, str], where: str, origin: str) -> str:
    """Replace `${key}` by its value and `$${` by `${`; any other `$` stays as it is."""
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key is None:
            return "${"
        if key not in values:
            missing.append(f"${{{key}}}")
            return match.group(0)
        return values[key]

    result = _PLACEHOLDER.sub(replace, text)
    if missing:
        names = ", ".join(dict.fromkeys(missing))
        raise RenderError(Reason.VALUES_NOT_READY, f"{where}: no value for {names} in {origin}")
    return result


def parse(text: str, where: str) -> list[Obj]:
    """The objects of a multi-document YAML stream; empty documents are skipped.

    Documents are counted from 1, empty ones included, so the number matches the `---` a user
    counts in the file.
    """
    try:
        documents = list(yaml.load_all(text, Loader=_KubernetesLoader))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = f", line {mark.line + 1}" if mark else ""
        problem = error.problem or error.context
        raise RenderError(
            Reason.SOURCE_NOT_READY, f"{where}{line}: invalid YAML: {problem}"
        ) from None
    except yaml.YAMLError as error:
        raise RenderError(Reason.SOURCE_NOT_READY, f"{where}: invalid YAML: {error}") from None
    return [
        _as_object(document, f"{where}, document {index}")
        for index, document in enumerate(documents, start=1)
        if document is not None
    ]


def render_ref(objects: list[Obj]) -> str:
    """sha256:<hex> of the canonical JSON of the objects, sorted by _sort_key."""
    ordered = sorted(objects, key=_sort_key)
    return "sha256:" + hashlib.sha256(canonical_json(ordered).encode()).hexdigest()


def canonical_json(value: Any) -> str:
    """RFC 8785 (JCS): keys sorted by UTF-16 code units, no whitespace, ECMAScript numbers."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda item: item[0].encode("utf-16-be"))
        return "{" + ",".join(f"{_string(k)}:{canonical_json(v)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(canonical_json(item) for item in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, float):
        return _number(value)
    return json.dumps(value)  # None, bool, int


def _string(text: str) -> str:
    # Python escapes exactly what JCS escapes (", \, control characters) when ensure_ascii is off.
    return json.dumps(text, ensure_ascii=False)


def _number(value: float) -> str:
    """ECMAScript Number::toString from Python's shortest round-trip repr."""
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    power = int(exponent)
    if -7 < power < 0:  # ECMAScript writes 1e-6 <= |x| < 1e-4 in fixed notation, Python not
        sign, digits = ("-", mantissa[1:]) if mantissa.startswith("-") else ("", mantissa)
        return f"{sign}0.{'0' * (-power - 1)}{digits.replace('.', '')}"
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


class _KubernetesLoader(yaml.SafeLoader):
    """Safe YAML as Kubernetes reads it: timestamps stay strings (sigs.k8s.io/yaml goes through
    JSON), and a bare `=` is a string, not PyYAML's constructor-less `value` tag."""


_KubernetesLoader.yaml_implicit_resolvers = {
    first: [
        (tag, pattern)
        for tag, pattern in resolvers
        if tag not in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value")
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _as_object(document: Any, where: str) -> Obj:
    """A document as a JSON-shaped Kubernetes object, or SourceNotReady naming the document."""
    try:
        obj = json.loads(json.dumps(document, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise RenderError(
            Reason.SOURCE_NOT_READY, f"{where}: a value cannot be represented in JSON: {error}"
        ) from None
    if not _is_object(obj):
        raise RenderError(
            Reason.SOURCE_NOT_READY,
            f"{where}: not a Kubernetes object: it needs apiVersion, kind and metadata.name",
        )
    return obj


def _is_object(obj: Any) -> bool:
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        return False
    required = (obj.get("apiVersion"), obj.get("kind"), obj["metadata"].get("name"))
    return all(isinstance(value, str) and value for value in required)


def _source_texts(
    core: client.CoreV1Api, namespace: str, source: Obj
) -> tuple[str, dict[str, str]]:
    """The source (for messages) and its manifest texts by key, in sorted (byte) order."""
    kind = source.get("kind") or SOURCE_KIND
    if kind != SOURCE_KIND:
        raise RenderError(
            Reason.UNSUPPORTED,
            f"source kind {kind} is not supported by this controller; use {SOURCE_KIND}",
        )
    origin = f"source ConfigMap {namespace}/{source.get('name')}"
    config_map = _read(
        core.read_namespaced_config_map,
        namespace,
        source.get("name"),
        origin,
        Reason.SOURCE_NOT_READY,
    )
    data = config_map.data or {}
    keys = sorted((key for key in data if key.endswith(SOURCE_SUFFIXES)), key=str.encode)
    if not keys:
        raise RenderError(
            Reason.SOURCE_NOT_READY,
            f"{origin} has no data key ending in .yaml or .yml: put the manifests under such keys",
        )
    return origin, {key: data[key] for key in keys}


def _values(core: client.CoreV1Api, namespace: str, values: Obj) -> tuple[dict[str, str], str]:
    """The values and where they come from (for messages)."""
    if "configMapRef" in values:
        name = values["configMapRef"]["name"]
        origin = f"values ConfigMap {namespace}/{name}"
        config_map = _read(
            core.read_namespaced_config_map, namespace, name, origin, Reason.VALUES_NOT_READY
        )
        return dict(config_map.data or {}), origin
    if "secretRef" in values:
        name = values["secretRef"]["name"]
        origin = f"values Secret {namespace}/{name}"
        secret = _read(
            core.read_namespaced_secret, namespace, name, origin, Reason.VALUES_NOT_READY
        )
        return _decoded(secret.data or {}, origin), origin
    raise RenderError(Reason.VALUES_NOT_READY, "spec.values must set configMapRef or secretRef")


def _decoded(data: dict[str, str], origin: str) -> dict[str, str]:
    try:
        return {key: base64.b64decode(value).decode() for key, value in data.items()}
    except (binascii.Error, UnicodeDecodeError) as error:
        raise RenderError(
            Reason.VALUES_NOT_READY, f"{origin} holds a value that is not UTF-8 text: {error}"
        ) from None


def _read(
    read: Callable[..., Any], namespace: str, name: str | None, origin: str, reason: Reason
) -> Any:
    try:
        return read(name, namespace)
    except client.ApiException as error:
        if error.status == 404:
            raise RenderError(reason, f"{origin} not found") from None
        raise RenderError(reason, f"could not read {origin}: {api_message(error)}") from None


def _place(obj: Obj, namespaced: bool | None, default_namespace: str) -> None:
    """Give a namespaced (or unknown) kind a namespace; a cluster-scoped one none.

    The API server ignores the namespace of a cluster-scoped object: dropping it keeps the
    renderRef and the prune identity equal to what the server stores.
    """
    metadata = obj["metadata"]
    if namespaced is False:
        metadata.pop("namespace", None)
    elif not metadata.get("namespace"):
        metadata["namespace"] = default_namespace


def _check_unique(objects: list[Obj]) -> None:
    seen: set[tuple[str, str, str, str]] = set()
    for obj in objects:
        key = identity(obj)
        if key in seen:
            raise RenderError(Reason.SOURCE_NOT_READY, f"the source holds {describe(obj)} twice")
        seen.add(key)


def identity(obj: Obj) -> tuple[str, str, str, str]:
    """The same object in any version: API group, kind, namespace ("" if none), name."""
    metadata = obj.get("metadata") or obj
    group = obj["apiVersion"].rpartition("/")[0]
    return group, obj["kind"], metadata.get("namespace") or "", metadata["name"]


def describe(obj: Obj) -> str:
    """`Kind namespace/name`, or `Kind name` for a cluster-scoped object, for messages."""
    metadata = obj.get("metadata") or obj
    namespace = metadata.get("namespace")
    return (
        f"{obj['kind']} {namespace}/{metadata['name']}"
        if namespace
        else f"{obj['kind']} {metadata['name']}"
    )


def _sort_key(obj: Obj) -> tuple[str, str, str, str]:
    metadata = obj["metadata"]
    return obj["apiVersion"], obj["kind"], metadata.get("namespace") or "", metadata["name"]


def _labelled(obj: Obj, release: str) -> Obj:
    labelled = copy.deepcopy(obj)
    metadata = labelled["metadata"]
    labels = metadata.get("labels") or {}
    if isinstance(labels, dict):  # anything else is left for the dry run to reject
        metadata["labels"] = {**labels, RELEASE_LABEL: release}
    return labelled
