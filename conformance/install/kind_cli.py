"""The kind installer's command line, for CI steps and by hand:

python -m conformance.install.kind_cli install --cluster-name NAME [--resync 2m]
python -m conformance.install.kind_cli diagnostics --cluster-name NAME --out DIR
python -m conformance.install.kind_cli uninstall --cluster-name NAME
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from conformance.install.kind_commands import (
    CONTROLLER_SELECTOR,
    NAMESPACE,
    kind_export_kubeconfig_argv,
)
from conformance.install.on_kind import Installer, InstallError, run_command


def _installer(args: argparse.Namespace, kubeconfig_dir: Path) -> Installer:
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else kubeconfig_dir / "kubeconfig"
    if not args.kubeconfig:
        proc = run_command(kind_export_kubeconfig_argv(args.kind, args.cluster_name, kubeconfig))
        if proc.returncode != 0:
            raise InstallError(f"kind export kubeconfig failed: {proc.stderr.strip()}")
    return Installer(
        kubectl=args.kubectl,
        kubeconfig=kubeconfig,
        kind=args.kind,
        cluster=args.cluster_name,
        diagnostics_dir=Path(args.out),
    )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(
        prog="python -m conformance.install.kind_cli",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("install", "build, load, apply and wait for the reference controller"),
        ("diagnostics", "collect kind's logs, the controller's logs and events"),
        ("uninstall", "delete the controller's objects (not the CRDs)"),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--cluster-name", default="pytest-kind", help="the kind cluster")
        sub.add_argument("--kind", default="kind", help="the kind binary")
        sub.add_argument("--kubectl", default="kubectl", help="the kubectl binary")
        sub.add_argument("--kubeconfig", help="default: exported from kind for --cluster-name")
        sub.add_argument("--out", default="reports/diagnostics", help="diagnostics directory")
        if name == "install":
            sub.add_argument(
                "--resync", default=None, help="the controller's --resync (default: the manifest's)"
            )
            sub.add_argument("--image", default=None, help="image name:tag (default: a unique tag)")
        if name == "diagnostics":
            sub.add_argument("--namespace", default=NAMESPACE, help="the controller's namespace")
            sub.add_argument(
                "--selector", default=CONTROLLER_SELECTOR, help="the controller pods' labels"
            )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="convoy-kubeconfig-") as tmp:
        try:
            installer = _installer(args, Path(tmp))
            if args.command == "install":
                image = installer.install(image=args.image, resync=args.resync)
                print(f"installed the reference controller ({image})")
            elif args.command == "uninstall":
                installer.uninstall()
            else:
                where = installer.collect_diagnostics(
                    namespace=args.namespace, selector=args.selector
                )
                print(f"diagnostics in {where}")
        except InstallError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
