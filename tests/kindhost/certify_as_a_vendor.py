"""A vendor's certifying runs, end to end, as docs/certification.md tells vendors to make them:
`make certify-vendor` (about two hours; not part of `make test`).

The kit is the wheel, installed into a fresh venv outside the checkout; the controller is the
reference image under a vendor's name, installed from the vendor's own manifests
(tests/kindhost/vendor_manifests.py) on a kind cluster of the kind host's engine. Then, with
each command's default workers: `convoy-conformance certify` from this machine, and
`convoy-conformance certify --in-cluster` against the same install; `verify-report` must
certify each report. It prints each step's wall time and each report's phases.

    python -m tests.kindhost.certify_as_a_vendor --work DIR [--only kind|in-cluster] \
        $(python -P -m conformance.kindhost options)
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import yaml

from conformance.clusters.kind import KindProvider
from conformance.incluster import image
from conformance.install import kind_commands
from tests.kindhost import vendor_manifests

#: the kind cluster's name (not the kind-host tests' own, which may run beside it)
CLUSTER = "acme-certification"
VENDOR_IMAGE = "acme.example/acme-convoy:1.2.3"
SUITE_IMAGE = "acme.example/convoy-conformance-suite:1.2.3"
IMPLEMENTATION = (
    "--implementation-organization=Acme",
    "--implementation-project=acme-convoy",
    "--implementation-version=v1.2.3",
    "--implementation-url=https://acme.example/acme-convoy",
    "--implementation-contact=convoy@acme.example",
)
T = TypeVar("T")


def timed(what: str, step: Callable[[], T]) -> T:
    started = time.monotonic()
    try:
        return step()
    finally:
        print(f"[{what}] {time.monotonic() - started:.0f} s", flush=True)


def run(*argv: str | Path, cwd: Path | None = None) -> None:
    print("$", shlex.join(str(arg) for arg in argv), flush=True)
    subprocess.run([str(arg) for arg in argv], cwd=cwd, check=True)


def install_the_kit(work: Path) -> Path:
    """The wheel, built from this checkout, in a venv of its own; return its command."""
    dist, venv = work / "dist", work / "kit"
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dist, ".",
        cwd=kind_commands.REPO_ROOT)  # fmt: skip
    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin" / "pip", "install", "--quiet", *dist.glob("convoy_conformance-*.whl"))
    return venv / "bin" / "convoy-conformance"


def install_the_controller(cluster: KindProvider, work: Path) -> vendor_manifests.VendorInstall:
    """The vendor's image on the node and its manifests applied, as the guide says."""
    kubectl = (str(cluster.kubectl_path), f"--kubeconfig={cluster.kubeconfig}")
    run(*kind_commands.docker_build_argv(VENDOR_IMAGE))
    load(cluster, VENDOR_IMAGE)
    install = vendor_manifests.write(
        work / "manifests", image=VENDOR_IMAGE, kubectl=cluster.kubectl_path
    )
    vendor_manifests.apply(kubectl, install)
    return install


def load(cluster: KindProvider, loaded: str) -> None:
    run(*kind_commands.kind_load_argv(str(cluster.kind_path), cluster.kind.name, loaded))


def certify(kit: Path, work: Path, name: str, options: list[str]) -> None:
    """One certifying run from outside the checkout, then verify-report on its report."""
    reports = work / f"reports-{name}"
    timed(f"certify {name}", lambda: run(kit, "certify", f"--report-dir={reports}",
                                         *IMPLEMENTATION, *options, cwd=work))  # fmt: skip
    report = reports / "conformance-report.yaml"
    run(kit, "verify-report", report, cwd=work)
    for phase in yaml.safe_load(report.read_text()).get("phases", []):
        print(f"  phase {phase['name']}: {phase['tests']} tests", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="outside the checkout")
    parser.add_argument("--only", choices=["kind", "in-cluster"])
    parser.add_argument("--cluster-name", default=CLUSTER)
    parser.add_argument("--kind-image", required=True)
    parser.add_argument("--kind-bin", required=True)
    parser.add_argument("--kind-kubectl-bin", required=True)
    parser.add_argument("--kind-config", type=Path)
    parser.add_argument("--callback-host", required=True)
    args, _ = parser.parse_known_args(argv)
    work = args.work.resolve()
    if work.is_relative_to(kind_commands.REPO_ROOT):
        parser.error("--work must be outside the checkout (the kit runs from its wheel)")
    work.mkdir(parents=True, exist_ok=True)
    kit = timed("the kit from its wheel", lambda: install_the_kit(work))
    cluster = KindProvider(
        args.cluster_name,
        image=args.kind_image,
        kind_bin=args.kind_bin,
        kubectl_bin=args.kind_kubectl_bin,
        config_file=args.kind_config,
        node_address=True,
    )
    timed("kind cluster", cluster.start)
    try:
        install = timed("the vendor's controller", lambda: install_the_controller(cluster, work))
        controller = [
            f"--convoy-controller-deployment={install.deployment}",
            f"--convoy-controller-container={install.container}",
        ]
        if args.only != "in-cluster":
            certify(kit, work, "kind", [
                "--cluster=kind", f"--cluster-name={cluster.kind.name}", "--keep-cluster",
                f"--kind-bin={args.kind_bin}", f"--kind-kubectl-bin={args.kind_kubectl_bin}",
                f"--kind-image={args.kind_image}", "--kind-node-address",
                f"--callback-host={args.callback_host}", "--convoy-install=none", *controller,
            ])  # fmt: skip
        if args.only != "kind":
            timed("suite image", lambda: image.build(SUITE_IMAGE, cluster.kubectl_path,
                                                     base=VENDOR_IMAGE))  # fmt: skip
            load(cluster, SUITE_IMAGE)
            certify(kit, work, "in-cluster", [
                "--in-cluster", f"--kubeconfig={cluster.kubeconfig}",
                f"--suite-image={SUITE_IMAGE}", *controller,
            ])  # fmt: skip
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
