"""Dry run, apply, prune and drift against a real API server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from conformance.kube import read_or_none
from convoy.api import FIELD_MANAGER, RELEASE_LABEL, Reason, release_key
from convoy.apply import (
    ApplyError,
    apply,
    drift,
    dry_run,
    matches,
    prune,
    reference,
    without_empty_maps,
)
from convoy.render import Obj
from convoy.targets import Target
from convoyapi.discovery import dynamic_client

ConfigMap = Callable[..., Obj]


def live(core: client.CoreV1Api, namespace: str, name: str) -> client.V1ConfigMap | None:
    return read_or_none(lambda: core.read_namespaced_config_map(name, namespace))


def gizmo(namespace: str, crd: Obj, name: str = "g") -> Obj:
    return {
        "apiVersion": f"{crd['spec']['group']}/v1",
        "kind": "Gizmo",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": 1},
    }


def test_dry_run_creates_nothing(
    target: Target, core: client.CoreV1Api, config_map: ConfigMap, namespace: str
) -> None:
    dry_run(target, [config_map("a", k="v")])
    assert live(core, namespace, "a") is None


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        pytest.param(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "data": 5},
            "dry run of ConfigMap {ns}/bad failed: failed to create typed patch object",
            id="invalid",
        ),
        pytest.param(
            {"apiVersion": "example.com/v1", "kind": "Nope", "metadata": {"name": "bad"}},
            "dry run of Nope {ns}/bad failed: the API server does not serve kind Nope in "
            "example.com/v1",
            id="unserved",
        ),
    ],
)
def test_dry_run_failure_names_the_object(
    target: Target, config_map: ConfigMap, namespace: str, bad: Obj, message: str
) -> None:
    bad["metadata"]["namespace"] = namespace
    with pytest.raises(ApplyError) as raised:
        dry_run(target, [config_map("good", k="v"), bad])
    assert raised.value.reason == Reason.UNAPPLIABLE
    assert str(raised.value).startswith(message.replace("{ns}", namespace))


def test_dry_run_skips_what_the_render_creates(
    target: Target,
    core: client.CoreV1Api,
    config_map: ConfigMap,
    gizmo_crd: Obj,
    extra_namespace: str,
) -> None:
    """A new Namespace and a new CRD cannot exist before the apply: their contents pass."""
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": extra_namespace}},
        config_map("inside", extra_namespace),
        gizmo_crd,
        gizmo(extra_namespace, gizmo_crd),
    ]
    dry_run(target, objects)
    assert target.scope_of(objects[3]["apiVersion"], "Gizmo") is None
    with pytest.raises(client.ApiException, match="Not Found"):
        core.read_namespace(extra_namespace)


def test_apply_creates_then_reapplies_without_change(
    target: Target, core: client.CoreV1Api, config_map: ConfigMap, namespace: str
) -> None:
    objects = [config_map("a", k="v"), config_map("b", k="w")]
    assert apply(target, objects) == [reference(obj) for obj in objects]
    first = live(core, namespace, "a")
    assert first.data == {"k": "v"}
    assert first.metadata.labels[RELEASE_LABEL] == release_key(namespace, "app")
    assert [entry.manager for entry in first.metadata.managed_fields] == [FIELD_MANAGER]
    apply(target, objects)
    assert live(core, namespace, "a").metadata.resource_version == first.metadata.resource_version


def test_apply_takes_fields_from_other_managers(
    target: Target, core: client.CoreV1Api, config_map: ConfigMap, namespace: str
) -> None:
    """force=true: a field another manager owns goes to convoy, with convoy's value."""
    resource = target.resource("v1", "ConfigMap")
    resource.server_side_apply(body=config_map("a", k="theirs"), field_manager="someone-else")
    apply(target, [config_map("a", k="ours")])
    assert live(core, namespace, "a").data == {"k": "ours"}


def test_apply_order(
    target: Target, config_map: ConfigMap, gizmo_crd: Obj, extra_namespace: str
) -> None:
    """Namespaces, then CRDs, then the rest in render order: each finds what it needs."""
    namespace_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": extra_namespace}}
    inside = config_map("inside", extra_namespace)
    custom = gizmo(extra_namespace, gizmo_crd)
    applied = apply(target, [inside, custom, gizmo_crd, namespace_obj])
    assert applied == [reference(obj) for obj in (namespace_obj, gizmo_crd, inside, custom)]
    assert target.resource(custom["apiVersion"], "Gizmo").get(name="g", namespace=extra_namespace)


def widget(namespace: str, **spec: object) -> Obj:
    return {
        "apiVersion": "testing.convoy.kumodo.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": namespace},
        "spec": spec,
    }


def test_an_empty_map_applies_over_the_fields_convoy_had_in_it(
    target: Target, namespace: str
) -> None:
    """`spec: {}` after `spec: {version: 2}`, as a rollback applies it: kube-apiserver would store
    the emptied spec as null, which the Widget's schema (spec: type object) rejects."""
    apply(target, [widget(namespace)])
    apply(target, [widget(namespace, version=2)])
    dry_run(target, [widget(namespace)])
    resource = target.resource("testing.convoy.kumodo.io/v1", "Widget")
    assert resource.get(name="w", namespace=namespace).to_dict()["spec"] == {"version": 2}
    apply(target, [widget(namespace)])
    assert resource.get(name="w", namespace=namespace).to_dict()["spec"] == {}
    assert drift(target, [widget(namespace)]) == []


def test_without_empty_maps() -> None:
    obj = {"a": {}, "b": {"c": {}}, "d": {"e": {}, "f": 1}, "g": [], "h": [{}], "i": None}
    assert without_empty_maps(obj) == {"d": {"f": 1}, "g": [], "h": [{}], "i": None}
    assert obj["a"] == {} and obj["b"] == {"c": {}}, "the object itself is left as it is"


def test_apply_failure_names_the_object(target: Target, config_map: ConfigMap) -> None:
    objects = [config_map("a"), config_map("lost", "no-such-namespace")]
    with pytest.raises(ApplyError) as raised:
        apply(target, objects)
    assert raised.value.reason == Reason.DEPLOY_FAILED
    assert str(raised.value) == (
        'apply of ConfigMap no-such-namespace/lost failed: namespaces "no-such-namespace" not found'
    )


def test_prune_deletes_exactly_the_removed_objects(
    target: Target, core: client.CoreV1Api, config_map: ConfigMap, namespace: str
) -> None:
    kept, dropped = [config_map("kept")], [config_map("dropped-1"), config_map("dropped-2")]
    apply(target, kept + dropped)
    gone = reference(config_map("gone"))  # never created: its 404 counts as done
    previous = [reference(obj) for obj in kept + dropped] + [gone]
    deleted = prune(target, previous, kept)
    assert deleted == [reference(obj) for obj in dropped]
    present = {name: live(core, namespace, name) is not None for name in ("kept", "dropped-1")}
    assert present == {"kept": True, "dropped-1": False}, "deleted at once: no finalizers"


def test_prune_identity_ignores_the_version(target: Target, namespace: str) -> None:
    """An object rendered now in another version of its group is the same object: it stays."""
    scaler = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 2,
        },
    }
    apply(target, [scaler])
    previous = reference(scaler) | {"apiVersion": "autoscaling/v1"}
    assert prune(target, [previous], [scaler]) == []
    assert target.resource("autoscaling/v2", "HorizontalPodAutoscaler").get(
        name="web", namespace=namespace
    )


def test_prune_failure(
    target: Target, config_map: ConfigMap, namespace: str, tmp_path: Path
) -> None:
    """A user who may not delete: impersonated by the admin client, denied by RBAC."""
    apply(target, [config_map("a")])
    configuration = target.api.configuration
    with client.ApiClient(configuration, "Impersonate-User", "convoy-test-nobody") as api:
        nobody = Target(api, dynamic_client(api), "nobody")
        with pytest.raises(ApplyError) as raised:
            prune(nobody, [reference(config_map("a"))], [])
    assert raised.value.reason == Reason.PRUNE_FAILED
    assert str(raised.value).startswith(f"prune of ConfigMap {namespace}/a failed: ")
    assert "forbidden" in str(raised.value)


def test_drift(
    target: Target, core: client.CoreV1Api, config_map: ConfigMap, namespace: str
) -> None:
    objects = [
        config_map("same", k="v"),
        config_map("changed", k="v"),
        config_map("deleted", k="v"),
    ]
    apply(target, objects)
    core.patch_namespaced_config_map("same", namespace, {"metadata": {"annotations": {"x": "y"}}})
    core.patch_namespaced_config_map("changed", namespace, {"data": {"k": "other"}})
    core.delete_namespaced_config_map("deleted", namespace)
    assert drift(target, objects) == [reference(objects[1]), reference(objects[2])]


@pytest.mark.parametrize(
    ("rendered", "live_value", "expected"),
    [
        ({"a": 1}, {"a": 1, "added": 2}, True),
        ({"a": {"b": [1, {"c": 2}]}}, {"a": {"b": [1, {"c": 2, "d": 3}]}}, True),
        ({"a": [1, 2]}, {"a": [1, 2, 3]}, False),
        ({"a": None}, {}, True),
        ({"a": "1"}, {"a": 1}, False),
        ({"a": {}}, {"a": "x"}, False),
    ],
)
def test_matches(rendered: object, live_value: object, expected: bool) -> None:
    assert matches(rendered, live_value) is expected
