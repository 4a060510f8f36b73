"""The subresource API and `kubectl convoy`, as a user of the cluster calls them."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

import yaml
from kubernetes import client, watch

from conformance.kube import RawResponse, raw_request
from conformance.observe.releases import App
from convoyapi import API_VERSION, SUBRESOURCE_GROUP_VERSION

Obj = dict[str, Any]


def path(app: App, subresource: str) -> str:
    release = f"namespaces/{app.namespace}/releases/{app.name}"
    return f"/apis/{SUBRESOURCE_GROUP_VERSION}/{release}/{subresource}"


def post_sync(app: App, *, force: str | None = None) -> RawResponse:
    """POST releases/<name>/sync through the kube-apiserver, with ?force=<force> if given."""
    query = [] if force is None else [("force", force)]
    answer = raw_request(app.releases.api, "POST", path(app, "sync"), query=query)
    assert answer.ok, f"POST {path(app, 'sync')} answered {answer.status}: {answer.body}"
    return answer


def put(app: App, subresource: str, body: Any) -> RawResponse:
    answer = raw_request(app.releases.api, "PUT", path(app, subresource), body=body)
    assert answer.ok, f"PUT {path(app, subresource)} answered {answer.status}: {answer.body}"
    return answer


def delete(app: App, subresource: str) -> RawResponse:
    answer = raw_request(app.releases.api, "DELETE", path(app, subresource))
    assert answer.ok, f"DELETE {path(app, subresource)} answered {answer.status}: {answer.body}"
    return answer


def annotations_of(release: Obj) -> dict[str, str]:
    return release["metadata"].get("annotations") or {}


def update_changing(app: App, since: Obj, until: str, annotation: str) -> tuple[Obj, Obj]:
    """The update after `since` (up to resourceVersion `until`) that changed `annotation`.

    Read from a watch, as (before, after): the controller's status writes interleave with the
    write under test, so the test finds its update among them.
    """
    group, version = API_VERSION.split("/")
    stream = watch.Watch().stream(
        client.CustomObjectsApi(app.releases.api).list_namespaced_custom_object,
        group,
        version,
        app.namespace,
        "releases",
        field_selector=f"metadata.name={app.name}",
        resource_version=since["metadata"]["resourceVersion"],
        timeout_seconds=60,
    )
    states = [since]
    for event in stream:
        states.append(event["object"])
        if event["object"]["metadata"]["resourceVersion"] == until:
            break
    for before, after in itertools.pairwise(states):
        if annotations_of(before).get(annotation) != annotations_of(after).get(annotation):
            return before, after
    raise AssertionError(f"no update up to resourceVersion {until} changed {annotation}")


def kubectl_convoy(
    kubeconfig: Path,
    namespace: str,
    *args: str,
    namespace_from: Literal["flag", "context"] = "flag",
) -> subprocess.CompletedProcess:
    """`kubectl convoy ...` as a user runs it: kubectl finds the plugin on PATH.

    The namespace goes on the command line (`-n`), or with namespace_from="context" into the
    kubeconfig's current context, as `kubectl config set-context --current --namespace` puts
    it, and the command names none. The suite's own environment comes last on PATH, so a
    plugin the user put on PATH is the one tested.
    """
    if namespace_from == "flag":
        return _run_kubectl_convoy(kubeconfig, [*args, "-n", namespace])
    with tempfile.TemporaryDirectory(prefix="kubeconfig-") as scratch:
        copy = Path(scratch) / "config"
        copy.write_text(yaml.safe_dump(kubeconfig_in_namespace(kubeconfig, namespace)))
        return _run_kubectl_convoy(copy, list(args))


def _run_kubectl_convoy(kubeconfig: Path, args: list[str]) -> subprocess.CompletedProcess:
    kubectl = shutil.which("kubectl") or _local_kubectl()
    search = os.pathsep.join([os.environ.get("PATH", ""), str(Path(sys.executable).parent)])
    return subprocess.run(
        [kubectl, "convoy", *args],
        env={**os.environ, "PATH": search, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


#: Where a kubeconfig names files; a relative name is relative to the kubeconfig's directory.
_FILE_FIELDS = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key", "tokenFile")),
}


def kubeconfig_in_namespace(kubeconfig: Path, namespace: str) -> Obj:
    """The kubeconfig with `namespace` in its current context, made to live elsewhere: the
    files it names relative to its directory made absolute."""
    document = yaml.safe_load(kubeconfig.read_text())
    for section, (entry, fields) in _FILE_FIELDS.items():
        for item in document.get(section) or []:
            settings = item.get(entry) or {}
            for field in fields:
                if settings.get(field):
                    settings[field] = str(kubeconfig.parent / settings[field])  # keeps absolutes
    current = document["current-context"]
    context = next(c for c in document["contexts"] if c["name"] == current)
    context["context"]["namespace"] = namespace
    return document


def _local_kubectl() -> str:
    from conformance.clusters import binaries

    return str(binaries.resolve().kubectl)
