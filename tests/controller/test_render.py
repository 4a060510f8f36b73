"""The render: sources and values read from a real API server, scopes from its discovery."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import pytest
from kubernetes import client

from convoy.api import RELEASE_LABEL, Reason, release_key
from convoy.render import Obj, Render, RenderError, canonical_json, render, substitute
from convoy.targets import Target

Put = Callable[[str, str, dict[str, str]], None]
MakeRelease = Callable[..., Obj]
Rendered = Callable[..., Render]

GREETING = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: greeting
data:
  text: ${greeting}
  owner: ${app.owner-name_1}
"""
ROLE = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: reader
rules: []
"""
SOURCE = {
    "a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\ndata: {k: v, n: '1'}\n"
    "---\n---\n"
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two, namespace: elsewhere}\n",
    "b.yml": ROLE,
}
VALUES = {"greeting": "hello", "app.owner-name_1": "team"}


@pytest.fixture
def rendered(
    core: client.CoreV1Api, target: Target, put: Put, make_release: MakeRelease
) -> Rendered:
    """Store `source` as the ConfigMap "src" and render a Release of it (spec as keywords)."""

    def run(source: dict[str, str], **spec: object) -> Render:
        put("ConfigMap", "src", source)
        return render(core, make_release(**spec), target.scope_of)

    return run


def test_objects_in_source_order_with_label_and_namespace(
    rendered: Rendered, namespace: str
) -> None:
    result = rendered(SOURCE)
    names = [
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in result.objects
    ]
    assert names == [
        ("ConfigMap", namespace, "one"),
        ("ConfigMap", "elsewhere", "two"),
        ("ClusterRole", None, "reader"),
    ]
    labels = {obj["metadata"]["labels"][RELEASE_LABEL] for obj in result.objects}
    assert labels == {release_key(namespace, "app")}


@pytest.mark.parametrize(
    ("api_version", "kind", "given", "expected"),
    [
        ("v1", "ConfigMap", None, "target"),
        ("v1", "ConfigMap", "own", "own"),
        # The server ignores the namespace of a cluster-scoped object; the render drops it.
        ("v1", "Namespace", "own", None),
        ("example.com/v1", "Unknown", None, "target"),  # a kind the server does not serve
    ],
)
def test_namespace_by_scope(
    rendered: Rendered, api_version: str, kind: str, given: str | None, expected: str | None
) -> None:
    metadata = {"name": "x", **({"namespace": given} if given else {})}
    manifest = json.dumps({"apiVersion": api_version, "kind": kind, "metadata": metadata})
    (obj,) = rendered({"x.yaml": manifest}, targetNamespace="target").objects
    assert obj["metadata"].get("namespace") == expected


def test_ref_is_the_documented_hash(rendered: Rendered) -> None:
    """Independent of canonical_json: plain json.dumps agrees on these ASCII, integer objects."""
    result = rendered(SOURCE)
    unlabelled = json.loads(json.dumps(result.objects))
    for obj in unlabelled:
        del obj["metadata"]["labels"]
    unlabelled.sort(
        key=lambda o: (
            o["apiVersion"],
            o["kind"],
            o["metadata"].get("namespace", ""),
            o["metadata"]["name"],
        )
    )
    text = json.dumps(unlabelled, sort_keys=True, separators=(",", ":"))
    assert result.ref == "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    ("variant", "same"),
    [
        pytest.param(SOURCE, True, id="identical"),
        pytest.param(
            {
                "0.yaml": ROLE,
                "z.yml": "apiVersion: v1\nkind: ConfigMap\n"
                "metadata: {namespace: elsewhere, name: two}\n---\n"
                "kind: ConfigMap\napiVersion: v1\ndata: {n: '1', k: v}\nmetadata: {name: one}\n",
                "notes.txt": "not a manifest",
            },
            True,
            id="reordered",
        ),
        pytest.param(
            {**SOURCE, "b.yml": ROLE.replace("[]", "[{verbs: [get]}]")}, False, id="changed"
        ),
    ],
)
def test_ref_depends_on_content_only(
    core: client.CoreV1Api,
    target: Target,
    put: Put,
    make_release: MakeRelease,
    variant: dict[str, str],
    same: bool,
) -> None:
    """Key order, document order, map key order, other keys and the Release do not count."""
    put("ConfigMap", "src", SOURCE)
    put("ConfigMap", "variant", variant)
    base = render(core, make_release(), target.scope_of)
    other = render(core, make_release("other", source={"name": "variant"}), target.scope_of)
    assert (base.ref == other.ref) is same
    assert base.ref == render(core, make_release(), target.scope_of).ref


@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
def test_values(rendered: Rendered, put: Put, kind: str) -> None:
    put(kind, "vals", VALUES)
    ref = {"ConfigMap": "configMapRef", "Secret": "secretRef"}[kind]
    (obj,) = rendered({"g.yaml": GREETING}, values={ref: {"name": "vals"}}).objects
    assert obj["data"] == {"text": "hello", "owner": "team"}


def test_without_values_the_text_is_unchanged(rendered: Rendered) -> None:
    (obj,) = rendered({"g.yaml": GREETING.replace("${greeting}", "$${greeting}")}).objects
    assert obj["data"] == {"text": "$${greeting}", "owner": "${app.owner-name_1}"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${greeting}!", "hello!"),
        ("$${greeting}", "${greeting}"),
        ("$$${greeting}", "$${greeting}"),
        ("$HOME $ {x} ${not a key} $$", "$HOME $ {x} ${not a key} $$"),
    ],
)
def test_substitute(text: str, expected: str) -> None:
    assert substitute(text, VALUES, "here", "values") == expected


def test_mutate_runs_before_the_ref(
    rendered: Rendered, core: client.CoreV1Api, target: Target, make_release: MakeRelease
) -> None:
    plain = rendered(SOURCE)

    def replace_data(objects: list[Obj]) -> list[Obj]:
        return [{**obj, "data": {"mutated": "yes"}} for obj in objects]

    mutated = render(core, make_release(), target.scope_of, mutate=replace_data)
    assert mutated.ref != plain.ref
    assert all(obj["data"] == {"mutated": "yes"} for obj in mutated.objects)
    assert all(RELEASE_LABEL in obj["metadata"]["labels"] for obj in mutated.objects)


DOC = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n"


@pytest.mark.parametrize(
    ("store", "spec", "reason", "message"),
    [
        pytest.param(
            {},
            {"source": {"kind": "GitRepository", "name": "src"}},
            Reason.UNSUPPORTED,
            "source kind GitRepository is not supported by this controller; use ConfigMap",
            id="unsupported",
        ),
        pytest.param(
            {}, {}, Reason.SOURCE_NOT_READY, "source ConfigMap {ns}/src not found", id="no-source"
        ),
        pytest.param(
            {"src": {"README.md": DOC}},
            {},
            Reason.SOURCE_NOT_READY,
            "source ConfigMap {ns}/src has no data key ending in .yaml or .yml",
            id="no-yaml-key",
        ),
        pytest.param(
            {"src": {"a.yaml": ROLE, "b.yaml": DOC + "data:\n  k: v\n   bad: x\n"}},
            {},
            Reason.SOURCE_NOT_READY,
            "source ConfigMap {ns}/src, key b.yaml, line 6: invalid YAML",
            id="yaml-error",
        ),
        pytest.param(
            {"src": {"a.yaml": DOC + "---\n---\n- a list\n"}},
            {},
            Reason.SOURCE_NOT_READY,
            "source ConfigMap {ns}/src, key a.yaml, document 3: not a Kubernetes object: "
            "it needs apiVersion, kind and metadata.name",
            id="not-an-object",
        ),
        pytest.param(
            {"src": {"a.yaml": DOC.replace("name: one", "labels: {}")}},
            {},
            Reason.SOURCE_NOT_READY,
            "key a.yaml, document 1: not a Kubernetes object",
            id="no-name",
        ),
        pytest.param(
            {"src": {"a.yaml": DOC, "b.yaml": DOC.replace("one}", "one, namespace: '{ns}'}")}},
            {},
            Reason.SOURCE_NOT_READY,
            "the source holds ConfigMap {ns}/one twice",
            id="duplicate",
        ),
        pytest.param(
            {"src": {"g.yaml": GREETING}},
            {"values": {"configMapRef": {"name": "vals"}}},
            Reason.VALUES_NOT_READY,
            "values ConfigMap {ns}/vals not found",
            id="no-values-configmap",
        ),
        pytest.param(
            {"src": {"g.yaml": GREETING}},
            {"values": {"secretRef": {"name": "vals"}}},
            Reason.VALUES_NOT_READY,
            "values Secret {ns}/vals not found",
            id="no-values-secret",
        ),
        pytest.param(
            {"src": {"g.yaml": GREETING}, "vals": {"greeting": "hi"}},
            {"values": {"configMapRef": {"name": "vals"}}},
            Reason.VALUES_NOT_READY,
            "source ConfigMap {ns}/src, key g.yaml: no value for ${app.owner-name_1} "
            "in values ConfigMap {ns}/vals",
            id="missing-value",
        ),
    ],
)
def test_render_errors(
    core: client.CoreV1Api,
    target: Target,
    put: Put,
    make_release: MakeRelease,
    namespace: str,
    store: dict[str, dict[str, str]],
    spec: Obj,
    reason: Reason,
    message: str,
) -> None:
    for name, data in store.items():
        put("ConfigMap", name, {key: text.replace("{ns}", namespace) for key, text in data.items()})
    with pytest.raises(RenderError) as raised:
        render(core, make_release(**spec), target.scope_of)
    assert raised.value.reason == reason
    assert message.replace("{ns}", namespace) in str(raised.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": [True, None, "x\n\u00e9"]}, '{"a":[true,null,"x\\n\u00e9"],"b":1}'),
        ({"\ufb01": 1, "\U0001f600": 2}, '{"\U0001f600":2,"\ufb01":1}'),  # UTF-16 order
        (1.0, "1"),
        (-2.5, "-2.5"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1.5e-7, "1.5e-7"),
        (2.5e-5, "0.000025"),
        (-1e-6, "-0.000001"),
    ],
)
def test_canonical_json(value: object, expected: str) -> None:
    assert canonical_json(value) == expected
