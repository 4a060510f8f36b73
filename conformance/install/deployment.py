"""A controller under test that a Deployment runs: a vendor's, on any cluster.

`--convoy-controller-deployment=NAMESPACE/NAME` names it (or --convoy-install=PATH installed
exactly one Deployment). The suite restarts it the way an operator would stop a controller:
it scales the Deployment to zero, waits until no pod of it is left, and scales it back. That
is what the restart rule (BACK-5) needs; everything else only reads the Deployment.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from kubernetes import client

from conformance.install.base import SharedController
from conformance.polling import poll_until

ROLLOUT_TIMEOUT = 300.0
POLL_STEP = 0.5
#: per pod: where xdist workers share the controller a failed test's diagnostics pick its own
#: lines out of everyone's, which a short tail no longer holds
LOG_LINES = 5000


class DeploymentError(RuntimeError):
    """The controller's Deployment is missing, scaled to zero, or did not roll out."""


def label_selector(selector: Any) -> str:
    """A LabelSelector as the `labelSelector` query parameter spells it."""
    terms = [f"{key}={value}" for key, value in sorted((selector.match_labels or {}).items())]
    for expression in selector.match_expressions or []:
        key, values = expression.key, ",".join(expression.values or [])
        terms.append(
            {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": key,
                "DoesNotExist": f"!{key}",
            }[expression.operator]
        )
    return ",".join(terms)


def without_resync(args: list[str]) -> list[str]:
    """`args` without --resync, written as one argument (--resync=2m) or two (--resync 2m)."""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--resync":
            skip = True
        elif not arg.startswith("--resync="):
            kept.append(arg)
    return kept


def rolled_out(deployment: Any) -> bool:
    """Every replica updated and available, and no pod of an older revision left."""
    wanted, status = deployment.spec.replicas, deployment.status
    return (status.observed_generation or 0) >= deployment.metadata.generation and all(
        (count or 0) == wanted
        for count in (status.replicas, status.updated_replicas, status.available_replicas)
    )


#: What the suite's Releases render, in namespaces it creates (so cluster-wide), and the verbs
#: apply, its dry run and prune use: a controller that may not do these fails every test, with
#: a Forbidden in its log, not with a clear error (docs/certification.md, "Rights").
RENDERED = (("", "configmaps"), ("testing.convoy.kumodo.io", "widgets"))
APPLY_VERBS = ("get", "create", "patch", "delete")


class ContainerArgs(NamedTuple):
    """A container's name and args as the long phase found them (JSON between the workers)."""

    container: str
    args: list[str]


@dataclass
class DeploymentController(SharedController):
    """The controller under test as the Deployment `namespace/name`, stopped by scaling to 0."""

    api: client.ApiClient
    namespace: str
    name: str
    timeout: float = ROLLOUT_TIMEOUT
    #: the replicas to scale back to, read from the Deployment when the suite attaches
    replicas: int = 0
    #: its pods' label selector, read at attach (a Deployment's selector is immutable)
    selector: str = ""
    #: time.monotonic() of the last start (0: started before the suite): the resync restarts
    started_at: float = 0.0
    #: the name of the controller's container (--convoy-controller-container); None: the
    #: Deployment's only container
    container: str | None = None

    @classmethod
    def named(
        cls, api: client.ApiClient, reference: str, container: str | None = None
    ) -> DeploymentController:
        namespace, _, name = reference.partition("/")
        if not namespace or not name or "/" in name:
            raise DeploymentError(
                f"--convoy-controller-deployment={reference!r}: expected NAMESPACE/NAME"
            )
        return cls(api, namespace, name, container=container)

    def __str__(self) -> str:
        return f"Deployment {self.namespace}/{self.name}"

    def attach(self) -> DeploymentController:
        """Check the Deployment is there and rolled out; remember its replicas."""
        deployment = self._read()
        if not deployment.spec.replicas:
            raise DeploymentError(f"{self} is scaled to zero: no controller runs")
        self.replicas = deployment.spec.replicas
        self.selector = label_selector(deployment.spec.selector)
        self._wait_rolled_out()
        return self

    def describe(self) -> dict[str, Any]:
        return describe_deployment(self.api, self.namespace, self.name)

    def check_rights(self) -> None:
        """The controller's service account may apply, dry-run and prune what the suite's
        Releases render, in any namespace; else a clear error naming what it may not do."""
        template = self._read().spec.template.spec
        account = template.service_account_name or "default"
        user = f"system:serviceaccount:{self.namespace}:{account}"
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{self.namespace}"]
        missing = [
            f"{verb} {resource}" + f".{group}" * bool(group)
            for group, resource in RENDERED
            for verb in APPLY_VERBS
            if not may(self.api, user, groups, group, resource, verb)
        ]
        if missing:
            raise DeploymentError(
                f"{self} runs as {user}, which may not {', '.join(missing)} in every namespace: "
                "the suite's Releases render ConfigMaps and test-only Widgets into namespaces of "
                'its own (docs/certification.md, "Rights the suite\'s renders need")'
            )

    def stop(self) -> None:
        """Scale to zero and wait until no pod of the Deployment is left, terminating or not."""
        self._scale(0)
        poll_until(
            lambda: not self.pods(),
            timeout=self.timeout,
            step=POLL_STEP,
            failure=lambda: DeploymentError(
                f"{self}: pods left after {self.timeout:g} s at zero replicas: "
                f"{', '.join(pod.metadata.name for pod in self.pods())}"
            ),
        )

    def start(self) -> DeploymentController:
        self.started_at = time.monotonic()
        self._scale(self.replicas)
        self._wait_rolled_out()
        return self

    def run_with_resync(self, seconds: float) -> ContainerArgs:
        """Restart the controller with --resync=<seconds>, the flag the document names, in the
        args of the controller's container (the long phase of a certifying run). It is stopped
        first, so that no pod with the old flags reconciles meanwhile. Returns the container
        and the args it found, for `restore`."""
        container = self.controller_container()
        found = ContainerArgs(container.name, list(container.args or []))
        self.stop()
        self._set_args(found.container, [*without_resync(found.args), f"--resync={seconds:g}s"])
        self.start()
        return found

    def restore(self, found: ContainerArgs | None = None) -> None:
        """Put back what run_with_resync found, and scale back to the replicas found at attach
        if a test left it otherwise: the suite leaves the vendor's controller as it found it,
        also after a failed restart."""
        if found is not None:
            self._set_args(found.container, found.args)
        if self.replicas and self._read().spec.replicas != self.replicas:
            self._scale(self.replicas)

    def controller_container(self) -> Any:
        """The container that runs the controller: the one --convoy-controller-container
        names, or the Deployment's only one (a sidecar must never get the controller's flag)."""
        containers = self._read().spec.template.spec.containers
        names = [container.name for container in containers]
        if self.container is None and len(containers) == 1:
            return containers[0]
        if self.container in names:
            return containers[names.index(self.container)]
        said = f"--convoy-controller-container={self.container}: no such container; " * bool(
            self.container
        )
        raise DeploymentError(
            f"{self} runs containers {', '.join(names)}: {said}name the controller's with "
            "--convoy-controller-container"
        )

    def _set_args(self, container: str, args: list[str]) -> None:
        """Replace the args of `container`, found by name again: the patch tests the name at
        that index, so that a template changed meanwhile is refused, never patched wrongly."""
        names = [c.name for c in self._read().spec.template.spec.containers]
        path = f"/spec/template/spec/containers/{names.index(container)}"
        # A list is sent as a JSON patch (application/json-patch+json).
        patch = [
            {"op": "test", "path": f"{path}/name", "value": container},
            {"op": "replace", "path": f"{path}/args", "value": args},
        ]
        client.AppsV1Api(self.api).patch_namespaced_deployment(self.name, self.namespace, patch)

    def check(self) -> None:
        """A controller that is no longer available at the end of the run is an error."""
        deployment = self._read()
        if (deployment.status.available_replicas or 0) < self.replicas:
            raise DeploymentError(
                f"{self} has {deployment.status.available_replicas or 0} of {self.replicas} "
                f"replica(s) available at the end of the run"
            )

    def pods(self) -> list[Any]:
        return (
            client.CoreV1Api(self.api)
            .list_namespaced_pod(self.namespace, label_selector=self.selector)
            .items
        )

    def logs(self) -> str:
        """The last lines of each pod's log (what the diagnostics of a failed test show)."""
        core, parts = client.CoreV1Api(self.api), []
        for pod in self.pods():
            try:
                log = core.read_namespaced_pod_log(
                    pod.metadata.name, self.namespace, tail_lines=LOG_LINES
                )
            except client.ApiException as error:
                log = f"(no log: {error.status} {error.reason})"
            parts.append(f"--- pod {pod.metadata.name} ---\n{log}")
        return "\n".join(parts) or f"(no pod of {self} runs)"

    def _read(self) -> Any:
        try:
            return client.AppsV1Api(self.api).read_namespaced_deployment(self.name, self.namespace)
        except client.ApiException as error:
            if error.status == 404:
                raise DeploymentError(
                    f"{self} not found: --convoy-controller-deployment names the Deployment "
                    f"that runs the controller under test"
                ) from None
            raise

    def _scale(self, replicas: int) -> None:
        client.AppsV1Api(self.api).patch_namespaced_deployment_scale(
            self.name, self.namespace, {"spec": {"replicas": replicas}}
        )

    def _wait_rolled_out(self) -> None:
        deployment = None

        def done() -> bool:
            nonlocal deployment
            deployment = self._read()
            return rolled_out(deployment)

        poll_until(
            done,
            timeout=self.timeout,
            step=POLL_STEP,
            failure=lambda: DeploymentError(
                f"{self} not rolled out with {self.replicas} replica(s) after "
                f"{self.timeout:g} s; status: {deployment.status if deployment else None}"
            ),
        )


def may(
    api: client.ApiClient, user: str, groups: list[str], group: str, resource: str, verb: str
) -> bool:
    """Whether the API server allows `user` `verb` on `resource` in every namespace."""
    review = client.AuthorizationV1Api(api).create_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": groups,
                "resourceAttributes": {"group": group, "resource": resource, "verb": verb},
            },
        }
    )
    return bool(review.status.allowed)


def describe_deployment(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    """The controller under test as the cluster shows it (for the report): its Deployment, each
    container's image and args, and the image digest its running pods report."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    deployment = apps.read_namespaced_deployment(name, namespace)
    pods = core.list_namespaced_pod(
        namespace, label_selector=label_selector(deployment.spec.selector)
    ).items
    running = {
        status.name: status.image_id
        for pod in pods
        for status in (pod.status.container_statuses or [])
    }
    containers = [
        {
            "name": container.name,
            "image": container.image,
            "imageID": running.get(container.name) or None,
            "args": list(container.args or []),
        }
        for container in deployment.spec.template.spec.containers
    ]
    return {"deployment": f"{namespace}/{name}", "containers": containers}
