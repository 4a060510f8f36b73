"""The pytest plugin: the suite's options and hooks; the fixtures live in
conformance.harness.fixtures.

Loaded by the `pytest11` entry point when the package is installed, so `pytest conformance`
and the project's own `pytest tests` share one set of fixtures.
"""

from __future__ import annotations

import argparse
import os
import secrets
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pluggy
import pytest
import yaml

from conformance import timing
from conformance.certification import verdicts
from conformance.certification.report import IMPLEMENTATION_FIELDS, PHASES, ReportPlugin
from conformance.clusters.base import Cluster
from conformance.clusters.select import PROVIDERS, Choice
from conformance.document import catalog, model_profiles
from conformance.harness.run_cluster import (
    CHOICE,
    KEEP_CHOICES,
    is_xdist_worker,
    kind_provider,
    provider_choice,
)
from conformance.harness.stash import RUN_ID, TEST_FAILED, TIMING
from conformance.install import on_kind
from conformance.observe import diagnostics
from conformance.timing import TEST_TIMEOUT

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController
from conformance.certification.verify import test_key
from conformance.harness.turns import STOPS_CONTROLLER

pytest_plugins = [
    "conformance.harness.fixtures.cluster",
    "conformance.harness.fixtures.convoy",
    "conformance.harness.scheduling",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("convoy-conformance")
    group.addoption(
        "--cluster",
        choices=PROVIDERS,
        default="auto",
        help="cluster provider: kind where Docker runs privileged containers and kind is on "
        "PATH, else a local control plane; or an existing cluster by --kubeconfig",
    )
    group.addoption(
        "--kube-version",
        default=None,
        help="Kubernetes version of the local control plane (default: conformance/versions.yaml)",
    )
    group.addoption("--etcd-version", default=None, help="etcd version of the local provider")
    group.addoption(
        "--callback-host",
        default=None,
        help="an address of this machine that the API server can reach: needed for an "
        "existing cluster; on kind it replaces the kind network's gateway",
    )
    group.addoption(
        "--witness-service",
        default=None,
        metavar="NAMESPACE/NAME:PORT",
        help="with --cluster=existing, the suite runs in a pod behind this Service: the "
        "witness serves on PORT (xdist worker gwN on PORT+N) and the API server calls it "
        "through the Service (convoy-conformance run --in-cluster sets it)",
    )
    group.addoption(
        "--kind-config",
        type=Path,
        default=None,
        help="kind's cluster config file for a cluster the suite creates",
    )
    group.addoption(
        "--kind-node-address",
        action="store_true",
        help="reach the kind cluster's API server at its node's address rather than the port "
        "kind publishes on this machine (a Docker engine in a network namespace of its own: "
        "python -m conformance.kindhost)",
    )
    group.addoption(
        "--timing",
        action="append",
        default=[],
        metavar="NAME=SECONDS",
        help="override one field of the timing config (repeatable); see the run's header",
    )
    group.addoption("--timing-file", type=Path, help="YAML mapping of timing overrides")
    group.addoption(
        "--convoy-install",
        default="reference",
        metavar="reference|none|PATH",
        help="reference: install and run the reference controller; none: a controller is "
        "already running; PATH: apply a vendor's manifests (file, directory or kustomization) "
        "and wait for their Deployments",
    )
    group.addoption(
        "--convoy-controller-deployment",
        default=None,
        metavar="NAMESPACE/NAME",
        help="the Deployment that runs the controller under test (with --convoy-install none "
        "or PATH): the restart rule scales it to zero and back. Default with PATH: the one "
        "Deployment of the manifests; without it the restart rule is not checked",
    )
    group.addoption(
        "--convoy-controller-container",
        default=None,
        metavar="NAME",
        help="the container of that Deployment that runs the controller, when it runs more "
        "than one (a sidecar): the long phase of a certifying run sets its --resync",
    )
    group.addoption("--convoy-mutant", default=None, help=argparse.SUPPRESS)
    # the kill run's: a running local control plane's directory (conformance.lanes)
    group.addoption("--reuse-control-plane", type=Path, default=None, help=argparse.SUPPRESS)
    group.addoption(
        "--report-dir",
        type=Path,
        default=None,
        help="write conformance-report.yaml, conformance-report.html and junit.xml here",
    )
    group.addoption(
        "--keep-namespaces",
        choices=KEEP_CHOICES,
        default="never",
        help="leave a test's namespace (Releases, target objects, its witness record) in place "
        "when it failed (on-failure) or always, and print how to look at it; the run does not "
        "certify then. On a cluster the suite made, keep the cluster too (--keep-cluster)",
    )
    group.addoption(
        "--rerun-failed",
        type=Path,
        default=None,
        metavar="REPORT",
        help="run only the tests this conformance-report.yaml lists as failed or in error "
        "(such a run does not certify)",
    )
    group.addoption(
        "--certify-phase",
        choices=list(PHASES),
        default=None,
        help="the phase of a certifying run this is (convoy-conformance certify sets it)",
    )
    group.addoption(
        "--previous-phase",
        type=Path,
        default=None,
        help="the report of the certifying run's previous phase, carried on into this one",
    )
    group.addoption(
        "--model-profile",
        choices=list(model_profiles.PROFILES),
        default=None,
        help="the model-based run's sequences: ci (the same 10 at every run; a development "
        "run's default), long (40 new ones; a certifying run's default), kill (ci without "
        "shrinking)",
    )
    group.addoption(
        "--model-seed",
        type=int,
        default=None,
        help="draw the model-based run's sequences from this seed (a run prints its own): "
        "with the same profile, the same sequences again",
    )
    for field in IMPLEMENTATION_FIELDS:
        group.addoption(
            f"--implementation-{field}",
            default=None,
            help=f"the implementation's {field} (required for a certifying run)",
        )
    # pytest-kind-ng's own options serve the kind and existing providers unchanged:
    # --cluster-name, --keep-cluster, --kubeconfig, --kind-image, --kind-bin, --kind-kubectl-bin.


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    report_dir = config.getoption("report_dir")
    if report_dir and not config.option.xmlpath:
        config.option.xmlpath = str(report_dir / "junit.xml")  # before junitxml reads it
    config.pluginmanager.register(ReportPlugin(config), "convoy-conformance-report")
    config.addinivalue_line("markers", "clause(*ids): the catalog clauses this test checks")
    config.addinivalue_line(
        "markers",
        "long: needs the controller's resync above its ladder (the long phase of a certifying "
        "run: -m long)",
    )
    config.addinivalue_line(
        "markers",
        f"{STOPS_CONTROLLER}: stops the controller under test; where xdist workers share the "
        "controller, it runs while no other test does",
    )
    config.stash[TIMING] = timing.build(config.getoption("timing"), config.getoption("timing_file"))
    if is_xdist_worker(config):
        shared = config.workerinput  # type: ignore[attr-defined]  # set by xdist on a worker
        config.stash[RUN_ID] = f"{shared['convoy_run_id']}-{shared['workerid']}"
        if "convoy_choice" in shared:
            config.stash[CHOICE] = Choice(*shared["convoy_choice"])
    else:
        config.stash[RUN_ID] = secrets.token_hex(4)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: WorkerController) -> None:
    """xdist: hand each worker the run ID and the provider decided here."""
    choice = provider_choice(node.config)
    node.workerinput["convoy_run_id"] = node.config.stash[RUN_ID]
    node.workerinput["convoy_choice"] = [choice.provider, choice.reason]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Delete the kind cluster once, after every worker is done with it (unless kept)."""
    config = session.config
    used_kind = CHOICE in config.stash and config.stash[CHOICE].provider == "kind"
    if used_kind and not is_xdist_worker(config):
        kind = kind_provider(config, keep=config.getoption("keep_cluster"))
        if session.testsfailed:
            report_dir = Path(config.getoption("report_dir") or "reports")
            on_kind.installer_for(kind, report_dir / "diagnostics").collect_diagnostics()
        kind.stop()


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash[TIMING]
    lines = ["convoy-conformance timing (seconds; override with --timing NAME=SECONDS):"]
    lines += [f"  {name:18} {value:8g}  {help}" for name, value, help in settings.rows()]
    return lines


#: pytest-timeout's per-test limit counts the test alone, not its fixtures: the first test of
#: a worker carries the cluster's creation, the controller image's build and its rollout.
TEST_BODY_ONLY = pytest.mark.timeout(func_only=True)


def default_timeout_mark(config: pytest.Config) -> pytest.MarkDecorator:
    """The mark of a test without its own: the limit configured for the run, else the suite's
    (the installed kit has no ini file that would set one)."""
    configured = (
        config.getoption("timeout", None) is not None
        or os.environ.get("PYTEST_TIMEOUT")
        or config.getini("timeout")
    )
    return TEST_BODY_ONLY if configured else pytest.mark.timeout(TEST_TIMEOUT, func_only=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every clause a test names must be in the catalog (a bare rule ID is not a clause); with
    --rerun-failed, only the tests the report lists as failed run (conformance.harness.scheduling
    then puts the longest first)."""
    rerun = config.getoption("rerun_failed")
    if rerun:
        failed = failed_tests(rerun)
        chosen = {item.nodeid: test_key(item.nodeid) in failed for item in items}
        config.hook.pytest_deselected(items=[item for item in items if not chosen[item.nodeid]])
        items[:] = [item for item in items if chosen[item.nodeid]]
    default_timeout = default_timeout_mark(config)
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(default_timeout)
        unknown = catalog.unknown_ids(catalog.clauses_of(item))
        if unknown:
            rules = [catalog.BY_ID[i] for i in unknown if i in catalog.BY_ID]
            hint = "".join(
                f"; {r.id} is a rule: name its clauses ({', '.join(c.id for c in r.clauses)})"
                for r in rules
            )
            raise pytest.UsageError(f"{item.nodeid}: unknown clause ID(s) {unknown}{hint}")


def failed_tests(report_path: Path) -> set[str]:
    """The tests (by test_key) a report lists as failed or in error."""
    try:
        written = yaml.safe_load(report_path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise pytest.UsageError(f"--rerun-failed {report_path}: cannot read it: {error}") from None
    failed = {
        test_key(test["name"])
        for test in written.get("tests") or []
        if test.get("result") in ("failed", "error")
    }
    if not failed:
        raise pytest.UsageError(f"--rerun-failed {report_path}: the report lists no failed test")
    return failed


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """On a failure, attach the namespace's Releases and events and the controller's log."""
    outcome = yield
    report = outcome.get_result()
    verdict = verdicts.verdict_of(call.excinfo.value if call.excinfo else None)
    if verdict is not None:
        report.user_properties.append((verdicts.PROPERTY, verdict.value))
    if report.failed:
        item.stash[TEST_FAILED] = True
    funcargs = getattr(item, "funcargs", {})
    if report.failed and "namespace" in funcargs and "k8s" in funcargs:
        text = diagnostics.collect(
            funcargs["k8s"],
            funcargs["namespace"],
            funcargs.get("controller"),
            funcargs.get("resync_clock"),
        )
        report.sections.append(("convoy diagnostics", text))
    elif report.failed and report.when == "setup":
        attach_cluster_health(report, funcargs.get("cluster"))


def attach_cluster_health(report: pytest.TestReport, cluster: object) -> None:
    """A set-up that failed once the cluster had started (a session fixture: the CRDs, the
    controller): whether a part of the cluster died, and its last log lines."""
    if isinstance(cluster, Cluster) and (health := cluster.health_report()):
        report.sections.append(("cluster health", health))
