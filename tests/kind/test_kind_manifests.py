"""manifests/ on a real API server: what the kind installer applies, accepted and served.

The overlay the kind installer writes (manifests/ + the generated serving-certificate Secret +
the APIService's caBundle + a unique image tag) is applied to a bare local control plane of
these tests' own (tests/kind/conftest.py: the session's cluster hosts the suite's own
registration of the same APIService) the way the installer applies it: the Namespace, a
server-side dry run of everything, then for real.
The plain base (what `kubectl apply --server-side -k manifests` sends) gets a dry run too.
No kubelet runs here, so no controller pod starts: the tests check that every object is accepted
and stored, the CRDs and the APIService are served, the pod template passes Pod Security
"restricted", and the RBAC grants what the controller uses.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from kubernetes import client, dynamic

from conformance.clusters.local import LocalControlPlane
from conformance.install import kind_commands, on_kind
from conformance.install.host import HostController, service_account_kubeconfig
from conformance.kube import dynamic_api
from conformance.observe.releases import condition
from conformance.resources import CONTROLLER, MANIFESTS
from convoyapi import API_SERVICE, API_VERSION
from tests.helpers import wait_until

SERVICE_ACCOUNT = f"system:serviceaccount:{kind_commands.NAMESPACE}:convoy-controller"
SA_GROUPS = [
    "system:serviceaccounts",
    f"system:serviceaccounts:{kind_commands.NAMESPACE}",
    "system:authenticated",
]
IMAGE = "convoy-controller:conformance-test"


@dataclass
class Installed:
    overlay: Path
    objects: list[dict[str, Any]]
    cert: on_kind.ServingCertificate
    base_dry_run: str
    installer: on_kind.Installer


def kustomize(kubectl: str, directory: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=True
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def installed(
    bare_cluster: LocalControlPlane, kubectl: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    cluster = bare_cluster
    work = tmp_path_factory.mktemp("install")
    installer = on_kind.Installer(
        kubectl=kubectl, kubeconfig=cluster.kubeconfig, diagnostics_dir=work / "diagnostics"
    )
    cert = on_kind.serving_certificate()
    args = on_kind.controller_args(on_kind.deployment_args(), resync="30s")
    overlay = on_kind.write_overlay(work / "overlay", image=IMAGE, cert=cert, args=args)
    try:
        installer.run(
            kind_commands.apply_argv(
                kubectl,
                cluster.kubeconfig,
                file=CONTROLLER / "namespace.yaml",
            ),
            "applying the namespace",
        )
        base_dry_run = installer.run(
            kind_commands.apply_argv(
                kubectl, cluster.kubeconfig, kustomization=MANIFESTS, dry_run=True
            ),
            "the server-side dry run of manifests/",
        )
        installer.apply(overlay)
        yield Installed(overlay, kustomize(kubectl, overlay), cert, base_dry_run, installer)
    finally:
        installer.uninstall()


@pytest.fixture(scope="module")
def k8s(bare_k8s: client.ApiClient) -> client.ApiClient:
    """The bare control plane's client (shadows the session cluster's in this module)."""
    return bare_k8s


@pytest.fixture(scope="module")
def resources(k8s: client.ApiClient) -> dynamic.DynamicClient:
    return dynamic_api(k8s).resources


def live(resources: Any, obj: dict[str, Any]) -> dict[str, Any]:
    resource = resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    meta = obj["metadata"]
    return resource.get(name=meta["name"], namespace=meta.get("namespace")).to_dict()


def test_the_plain_base_passes_a_server_side_dry_run(installed: Installed, kubectl: str) -> None:
    """`kubectl apply --server-side -k manifests`: every object accepted by the server."""
    base = kustomize(kubectl, MANIFESTS)
    accepted = [line for line in installed.base_dry_run.splitlines() if "(server dry run)" in line]
    assert len(accepted) == len(base), installed.base_dry_run
    kinds = {obj["kind"] for obj in base}
    assert {
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "RoleBinding",
        "Deployment",
        "Service",
        "APIService",
    } <= kinds


def test_the_installer_dry_runs_before_it_applies(installed: Installed) -> None:
    verbs = [argv[2:] for argv in installed.installer.issued]
    dry = next(i for i, a in enumerate(verbs) if "--dry-run=server" in a and "-k" in a)
    real = next(i for i, a in enumerate(verbs) if "--dry-run=server" not in a and "-k" in a)
    assert dry < real


def test_every_object_of_the_overlay_is_stored(installed: Installed, resources: Any) -> None:
    names = []
    for obj in installed.objects:
        stored = live(resources, obj)
        assert stored["metadata"]["name"] == obj["metadata"]["name"]
        names.append(f"{obj['kind']}/{obj['metadata']['name']}")
    print("stored:", ", ".join(names))
    assert any(o["kind"] == "Secret" for o in installed.objects), "no serving-cert Secret"


def test_the_deployment_runs_the_unique_image_with_the_manifest_args(
    installed: Installed, k8s: client.ApiClient
) -> None:
    deployment = client.AppsV1Api(k8s).read_namespaced_deployment(
        kind_commands.DEPLOYMENT, kind_commands.NAMESPACE
    )
    container = deployment.spec.template.spec.containers[0]
    assert container.image == IMAGE
    assert container.args == ["--resync=30s", *on_kind.deployment_args()]
    assert container.args[1:3] == ["--health-port=8081", "--metrics-port=8080"]
    security = container.security_context
    assert security.read_only_root_filesystem and security.run_as_non_root
    assert security.allow_privilege_escalation is False
    assert security.capabilities.drop == ["ALL"]
    assert security.seccomp_profile.type == "RuntimeDefault"
    probes = (container.liveness_probe.http_get, container.readiness_probe.http_get)
    assert [(p.path, p.port) for p in probes] == [("/healthz", "health"), ("/readyz", "health")]
    ports = {p.name: p.container_port for p in container.ports}
    assert ports == {"health": 8081, "metrics": 8080, "https": 8443}
    assert container.resources.requests and container.resources.limits


def test_the_crds_are_established_and_served(installed: Installed, k8s: client.ApiClient) -> None:
    extensions = client.ApiextensionsV1Api(k8s)
    for name in ("releases", "clusters", "releaseinventories"):
        crd = extensions.read_custom_resource_definition(f"{name}.convoy.kumodo.io")
        conditions = {c.type: c.status for c in crd.status.conditions}
        assert conditions.get("Established") == "True", conditions
        listed = client.CustomObjectsApi(k8s).list_namespaced_custom_object(
            "convoy.kumodo.io", "v1alpha1", kind_commands.NAMESPACE, name
        )
        assert listed["items"] == []


def test_the_apiservice_is_served_with_the_generated_ca(
    installed: Installed, k8s: client.ApiClient
) -> None:
    registration = client.ApiregistrationV1Api(k8s)
    service = registration.read_api_service(API_SERVICE)
    assert service.spec.group == "subresources.convoy.kumodo.io"
    assert service.spec.version == "v1alpha1"
    assert base64.b64decode(service.spec.ca_bundle) == installed.cert.ca_pem
    ref = service.spec.service
    assert (ref.namespace, ref.name, ref.port) == (
        kind_commands.NAMESPACE,
        kind_commands.SERVICE,
        443,
    )

    def judged() -> bool:
        status = registration.read_api_service(API_SERVICE).status
        return any(c.type == "Available" for c in (status.conditions or []))

    wait_until(judged, 30, "the aggregator to judge the APIService")
    conditions = registration.read_api_service(API_SERVICE).status.conditions
    # No pod runs here (no kubelet), so no endpoint: Available=False is expected on this provider.
    print("APIService conditions:", [(c.type, c.status, c.reason) for c in conditions])


def test_the_service_sends_443_to_the_https_port(
    installed: Installed, k8s: client.ApiClient
) -> None:
    service = client.CoreV1Api(k8s).read_namespaced_service(
        kind_commands.SERVICE, kind_commands.NAMESPACE
    )
    assert service.spec.type == "ClusterIP" and service.spec.cluster_ip
    [port] = service.spec.ports
    assert (port.port, port.target_port) == (443, "https")
    assert service.spec.selector == {
        "app.kubernetes.io/name": "convoy",
        "app.kubernetes.io/component": "controller",
    }


def test_the_serving_certificate_names_the_service(installed: Installed) -> None:
    cert = x509.load_pem_x509_certificate(installed.cert.cert_pem)
    ca = x509.load_pem_x509_certificate(installed.cert.ca_pem)
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "convoy-subresources.convoy-system.svc" in sans.get_values_for_type(x509.DNSName)


def test_the_pod_template_passes_pod_security_restricted(
    installed: Installed, k8s: client.ApiClient
) -> None:
    """The namespace enforces "restricted"; a server-side dry run of the Deployment's pod is
    admitted, and the same pod made privileged is refused (so enforcement is on)."""
    core = client.CoreV1Api(k8s)
    template = yaml.safe_load((CONTROLLER / "deployment.yaml").read_text())
    spec = template["spec"]["template"]["spec"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "convoy-psa"}, "spec": spec}
    core.create_namespaced_pod(kind_commands.NAMESPACE, pod, dry_run="All")
    privileged = yaml.safe_load(yaml.safe_dump(pod))
    privileged["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod(kind_commands.NAMESPACE, privileged, dry_run="All")
    assert refused.value.status == 403 and "restricted" in refused.value.body


def allowed(k8s: client.ApiClient, **attributes: str) -> bool:
    review = client.AuthorizationV1Api(k8s).create_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": SERVICE_ACCOUNT,
                "groups": SA_GROUPS,
                "resourceAttributes": attributes,
            },
        }
    )
    return bool(review.status.allowed)


CONVOY = "convoy.kumodo.io"
GRANTED = [
    {"group": CONVOY, "resource": "releases", "verb": "list"},
    {"group": CONVOY, "resource": "releases", "verb": "watch"},
    {"group": CONVOY, "resource": "releases", "verb": "get", "namespace": "team-a"},
    {"group": CONVOY, "resource": "releases", "verb": "patch", "namespace": "team-a"},
    {"group": CONVOY, "resource": "releases", "subresource": "status", "verb": "patch"},
    {"group": CONVOY, "resource": "releaseinventories", "verb": "create"},
    {"group": CONVOY, "resource": "releaseinventories", "subresource": "status", "verb": "patch"},
    {"group": CONVOY, "resource": "clusters", "verb": "get"},
    {"group": "", "resource": "configmaps", "verb": "get", "namespace": "team-a"},
    {"group": "", "resource": "secrets", "verb": "get", "namespace": "team-a"},
    {"group": "", "resource": "events", "verb": "create", "namespace": "team-a"},
    # the aggregated API's delegated authentication and authorization
    {"group": "authentication.k8s.io", "resource": "tokenreviews", "verb": "create"},
    {"group": "authorization.k8s.io", "resource": "subjectaccessreviews", "verb": "create"},
    {
        "group": "",
        "resource": "configmaps",
        "verb": "watch",
        "namespace": "kube-system",
        "name": "extension-apiserver-authentication",
    },
]
#: Outside convoy's own role and the targets' kinds and verbs (get/patch/create/delete only):
#: the verbs no code of the controller uses, and the subresources and kinds "*" would grant.
REFUSED = [
    {"group": "", "resource": "secrets", "verb": "list"},
    {"group": "", "resource": "secrets", "verb": "create", "namespace": "team-a"},
    {"group": "", "resource": "configmaps", "verb": "watch", "namespace": "team-a"},
    {"group": CONVOY, "resource": "releases", "verb": "update", "namespace": "team-a"},
    {"group": CONVOY, "resource": "releases", "subresource": "status", "verb": "update"},
    {"group": CONVOY, "resource": "releases", "subresource": "finalizers", "verb": "update"},
    {"group": CONVOY, "resource": "releaseinventories", "verb": "get", "namespace": "team-a"},
    {"group": CONVOY, "resource": "releaseinventories", "verb": "patch", "namespace": "team-a"},
    {"group": CONVOY, "resource": "releaseinventories", "subresource": "status", "verb": "update"},
    {"group": "", "resource": "events", "verb": "patch", "namespace": "team-a"},
    {"group": "", "resource": "events", "verb": "list"},
    {"group": CONVOY, "resource": "clusters", "verb": "list"},
    {"group": CONVOY, "resource": "clusters", "verb": "watch"},
    {"group": CONVOY, "resource": "clusters", "subresource": "status", "verb": "patch"},
    {"group": CONVOY, "resource": "clusters", "subresource": "status", "verb": "update"},
    {"group": "", "resource": "pods", "subresource": "exec", "verb": "create", "namespace": "a"},
    {"group": "", "resource": "pods", "subresource": "attach", "verb": "create", "namespace": "a"},
    {
        "group": "",
        "resource": "serviceaccounts",
        "subresource": "token",
        "verb": "create",
        "namespace": "team-a",
    },
    {"group": "", "resource": "nodes", "subresource": "proxy", "verb": "get"},
    {"group": "rbac.authorization.k8s.io", "resource": "roles", "verb": "create", "namespace": "a"},
    {"group": "rbac.authorization.k8s.io", "resource": "clusterroles", "verb": "escalate"},
    {"group": "rbac.authorization.k8s.io", "resource": "clusterroles", "verb": "bind"},
]


@pytest.mark.parametrize("attributes", GRANTED, ids=lambda a: "-".join(a.values()))
def test_the_controller_may_do_what_it_does(
    installed: Installed, k8s: client.ApiClient, attributes: dict[str, str]
) -> None:
    assert allowed(k8s, **attributes), attributes


@pytest.mark.parametrize("attributes", REFUSED, ids=lambda a: "-".join(a.values()))
def test_the_controller_may_not_do_more(
    installed: Installed, k8s: client.ApiClient, attributes: dict[str, str]
) -> None:
    assert not allowed(k8s, **attributes), attributes


def test_the_targets_role_aggregates_the_default_rule(
    installed: Installed, k8s: client.ApiClient
) -> None:
    """The aggregated ClusterRole gets its rules from kube-controller-manager's
    clusterrole-aggregation controller: then the controller may apply, read and prune the
    default kinds, and still not update or list them."""
    rbac = client.RbacAuthorizationV1Api(k8s)

    def aggregated() -> bool:
        return bool(rbac.read_cluster_role("convoy-controller-targets").rules)

    wait_until(aggregated, 30, "the targets role to be aggregated")
    for verb in ("get", "patch", "create", "delete"):
        assert allowed(k8s, group="apps", resource="deployments", verb=verb, namespace="team-a")
    assert not allowed(k8s, group="apps", resource="deployments", verb="update", namespace="x")
    assert not allowed(k8s, group="apps", resource="deployments", verb="list")


def test_a_refusal_to_the_controllers_service_account_fails_the_controllers_check(
    installed: Installed, bare_cluster: LocalControlPlane, k8s: client.ApiClient, tmp_path: Path
) -> None:
    """The host controller as the suite runs it on a cluster of its own: with the Deployment's
    service account and roles. A render of a kind the roles leave out (a Secret) is refused, the
    Release says so, and the controller's check fails the run with the API server's words."""
    identity = service_account_kubeconfig(k8s, bare_cluster.kubeconfig, tmp_path / "sa.kubeconfig")
    namespace = "identity-check"
    core = client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": namespace}})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "rendered"}}
    core.create_namespaced_config_map(
        namespace,
        {"metadata": {"name": "source"}, "data": {"manifests.yaml": yaml.safe_dump(secret)}},
    )
    releases = dynamic_api(k8s).resources.get(api_version=API_VERSION, kind="Release")
    spec = {"source": {"name": "source"}, "syncPolicy": {"automatic": True}}
    body = {"apiVersion": API_VERSION, "kind": "Release", "metadata": {"name": "web"}}
    releases.create(body=body | {"spec": spec}, namespace=namespace)
    controller = HostController(
        bare_cluster.kubeconfig,
        tmp_path / "controller.log",
        resync=30,
        subresources=None,
        identity=identity,
    ).start()
    try:

        def refused() -> bool:
            found = condition(releases.get(name="web", namespace=namespace).to_dict())
            return bool(found and found["reason"] == "Unappliable")  # its dry run refused

        wait_until(refused, 30, "the apply of a Secret to be refused")
        # The controller logs a reconcile's outcome after it writes the status.
        refusal = 'cannot patch resource "secrets"'
        wait_until(lambda: refusal in controller.logs(), 10, "the controller to log the refusal")
        with pytest.raises(PermissionError, match=refusal):
            controller.check()
    finally:
        controller.stop()
        core.delete_namespace(namespace)
