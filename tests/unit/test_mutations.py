"""The mutations and lifecycle annotations: parsing and merge patches (pure logic)."""

from __future__ import annotations

import json

import pytest

from convoy.api import Reason
from convoy.hooks import Lifecycle
from convoy.mutations import apply_mutations, merge_patch, parse_mutations
from convoy.render import RenderError


def deployment(name: str, namespace: str = "a") -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], {"a": "c"}, {"a": "c"}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_follows_rfc_7386(target: object, patch: object, expected: object) -> None:
    assert merge_patch(target, patch) == expected


def test_mutations_patch_every_matching_object_in_list_order() -> None:
    text = json.dumps(
        [
            {
                "target": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "patch": {"spec": {"replicas": 3}, "metadata": {"labels": {"tier": "front"}}},
            },
            {
                "target": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "patch": {"spec": {"replicas": 5}, "metadata": {"labels": {"app": None}}},
            },
            {
                "target": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "absent"},
                "patch": {"spec": {"replicas": 9}},
            },
        ]
    )
    objects = [deployment("web", "a"), deployment("web", "b"), deployment("api")]
    mutated = apply_mutations(parse_mutations(text), objects)
    for web in mutated[:2]:
        assert web["spec"]["replicas"] == 5
        assert web["metadata"]["labels"] == {"tier": "front"}
        assert web["spec"]["template"] == deployment("web")["spec"]["template"]
    assert mutated[2] == deployment("api")
    assert objects[0] == deployment("web", "a"), "the input objects are left as they were"


def test_no_annotation_is_no_mutation() -> None:
    assert parse_mutations(None) == []


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"target": {}}',
        '[{"target": {"apiVersion": "v1", "kind": "ConfigMap"}, "patch": {}}]',
        '[{"target": {"apiVersion": "v1", "kind": "ConfigMap", "name": ""}, "patch": {}}]',
        '[{"target": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}, "patch": 1}]',
        '[{"target": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}}]',
        '[{"target": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}, "patch": {},'
        ' "extra": 1}]',
    ],
)
def test_invalid_mutations_are_unappliable(text: str) -> None:
    with pytest.raises(RenderError) as raised:
        parse_mutations(text)
    assert raised.value.reason == Reason.UNAPPLIABLE
    assert "convoy.kumodo.io/mutations" in str(raised.value)


WIDGET = {"apiVersion": "testing.convoy.kumodo.io/v1", "kind": "Widget", "metadata": {"name": "m"}}


def test_lifecycle_batches() -> None:
    text = json.dumps({"preApply": [[WIDGET]], "postApply": [[WIDGET], [WIDGET, WIDGET]]})
    lifecycle = Lifecycle.parse(text)
    assert lifecycle.pre_apply == ((WIDGET,),)
    assert [len(batch) for batch in lifecycle.post_apply] == [1, 2]
    assert Lifecycle.parse(None) == Lifecycle()
    assert Lifecycle.parse("{}") == Lifecycle()


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"during": []},
        {"preApply": [WIDGET]},
        {"preApply": [[]]},
        {"postApply": [[{"kind": "Widget", "metadata": {"name": "m"}}]]},
        {"postApply": [[{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}]]},
    ],
    ids=["list", "unknown-phase", "batch-not-a-list", "empty-batch", "no-api-version", "no-name"],
)
def test_invalid_lifecycle_is_unappliable(document: object) -> None:
    with pytest.raises(RenderError) as raised:
        Lifecycle.parse(json.dumps(document))
    assert raised.value.reason == Reason.UNAPPLIABLE
