"""Namespaces the suite creates: named after their test, labelled with the run, removed at the
test's end (unless --keep-namespaces keeps a failed test's, or every test's)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kubernetes import client

from conformance.clusters.base import Cluster
from conformance.kube import delete_if_present

RUN_LABEL = "conformance.convoy.kumodo.io/run"
#: A namespace --keep-namespaces left in place: the session's sweep leaves it too.
KEPT_LABEL = "conformance.convoy.kumodo.io/kept"


def namespace_name(test_name: str) -> str:
    """A DNS label from the test's name plus a random suffix: readable and unique."""
    slug = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")
    return f"t-{slug[:48].rstrip('-')}-{secrets.token_hex(3)}"


def delete_namespace(core: client.CoreV1Api, name: str) -> None:
    """Start the deletion; the namespace controller finishes it without the test waiting."""
    delete_if_present(lambda: core.delete_namespace(name))


@contextmanager
def temporary_namespace(
    core: client.CoreV1Api, test_name: str, run_id: str, keep: Callable[[], bool] = lambda: False
) -> Iterator[str]:
    """A namespace named after `test_name`, labelled with the run, deleted however it ends,
    unless `keep()` says at its end to leave it (labelled KEPT_LABEL) for a person to look at."""
    name = namespace_name(test_name)
    core.create_namespace({"metadata": {"name": name, "labels": {RUN_LABEL: run_id}}})
    try:
        yield name
    finally:
        if keep():
            core.patch_namespace(name, {"metadata": {"labels": {KEPT_LABEL: "true"}}})
        else:
            delete_namespace(core, name)


def sweep_namespaces(cluster: Cluster, run_id: str) -> None:
    """Delete whatever namespaces of this run a failing test or a crash left behind."""
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        selector = f"{RUN_LABEL}={run_id},!{KEPT_LABEL}"
        leftovers = core.list_namespace(label_selector=selector).items
        for leftover in leftovers:
            delete_namespace(core, leftover.metadata.name)
