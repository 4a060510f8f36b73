"""The `convoy-conformance` command."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import pytest

from conformance.clusters import binaries

SUITE_DIR = Path(__file__).parent / "suite"


def _binaries(args: argparse.Namespace) -> int:
    started = time.monotonic()
    found = binaries.resolve(args.kube_version, args.etcd_version)
    for name in ("etcd", "kube_apiserver", "kube_controller_manager", "kubectl"):
        print(f"{name.replace('_', '-'):24} {getattr(found, name)}")
    print(f"ready in {time.monotonic() - started:.0f} s")
    return 0


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    return int(pytest.main([str(SUITE_DIR), "-p", "no:cacheprovider", *extra]))


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(prog="convoy-conformance", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("binaries", help="find or build the local provider's binaries")
    build.add_argument("--kube-version", help="Kubernetes version, e.g. 1.36.3")
    build.add_argument("--etcd-version", help="etcd version, e.g. 3.6.16")
    commands.add_parser(
        "run", help="run the conformance suite; other arguments go to pytest", add_help=False
    )
    args, extra = parser.parse_known_args(argv)
    if args.command == "binaries":
        return _binaries(args)
    return _run(args, extra)


if __name__ == "__main__":
    sys.exit(main())
