"""python -m conformance.kindhost up | env | options | down

up       start the engine (conformance.kindhost.engine) and build what it lacks: the node
         image, the controller's base image, kind; print how long each took
env      the environment for kind, docker and the suite: DOCKER_HOST, CONVOY_CONTROLLER_BASE
options  the suite's options for a cluster on this engine (--cluster=kind and the rest)
down     stop the engine and remove its network namespace (its images stay cached)
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time
from pathlib import Path

import yaml

from conformance.clusters.binaries import resolve
from conformance.install.kind_commands import CONTROLLER_BASE_ARG
from conformance.kindhost import engine, images


def kind_config_path(found: engine.Engine) -> Path:
    return found.run_dir / "kind-config.yaml"


def up(found: engine.Engine) -> None:
    versions = images.versions()
    for what, step in (
        ("engine", found.up),
        ("node image", lambda: images.node_image(found, versions)),
        ("controller base image", lambda: images.controller_base(found, versions)),
        ("kind", lambda: images.kind_binary(versions)),
    ):
        started = time.monotonic()
        step()
        print(f"kindhost: {what} ready in {time.monotonic() - started:.1f} s", file=sys.stderr)
    config = yaml.safe_dump(images.kind_config(versions), sort_keys=False)
    kind_config_path(found).write_text(config)


def environment(found: engine.Engine) -> dict[str, str]:
    return {**found.env(), CONTROLLER_BASE_ARG: images.controller_base_name(images.versions())}


def options(found: engine.Engine) -> list[str]:
    versions = images.versions()
    kubectl = resolve(versions.kubernetes, versions.etcd).kubectl
    return [
        "--cluster=kind",
        f"--kind-image={images.node_image_name(versions)}",
        f"--kind-bin={images.kind_binary(versions)}",
        f"--kind-kubectl-bin={kubectl}",
        f"--kind-config={kind_config_path(found)}",
        "--kind-node-address",
        f"--callback-host={engine.host_address()}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.kindhost", description=__doc__)
    parser.add_argument("command", choices=["up", "env", "options", "down"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    found = engine.Engine()
    try:
        if args.command == "up":
            up(found)
        elif args.command == "env":
            print(" ".join(f"{k}={shlex.quote(v)}" for k, v in environment(found).items()))
        elif args.command == "options":
            print(shlex.join(options(found)))
        else:
            found.down()
    except engine.EngineError as error:
        print(f"kindhost {args.command}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
