"""`python -m convoy`: the reference controller, as a host process or as the container command."""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kubernetes import client, config

from convoy import leader, subresources_server
from convoy.controller import Controller
from convoy.durations import parse_duration

log = logging.getLogger("convoy")
POD_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="convoy", description="The reference convoy controller.")
    parser.add_argument("--kubeconfig", help="kubeconfig file; default: in-cluster configuration")
    parser.add_argument(
        "--resync",
        default="2m",
        type=parse_duration,
        help="informer resync period (Go duration; default 2m)",
    )
    parser.add_argument("--workers", type=int, default=2, help="concurrent reconciles")
    parser.add_argument("--namespace", help="watch only this namespace (default: all)")
    parser.add_argument(
        "--health-port", type=int, default=8081, help="port of /healthz and /readyz (0: off)"
    )
    parser.add_argument("--metrics-port", type=int, default=8080, help="port of /metrics (0: off)")
    parser.add_argument("--log-level", default="INFO")
    add_leader_election_arguments(parser)
    subresources_server.add_arguments(parser)
    args = parser.parse_args(argv)
    subresources_server.check_arguments(parser, args)
    return args


def add_leader_election_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("leader election (several replicas)")
    group.add_argument(
        "--leader-elect",
        action="store_true",
        help="reconcile only while holding a Lease; the other replicas wait for it",
    )
    group.add_argument(
        "--leader-election-namespace", help="the Lease's namespace (default: the pod's)"
    )
    group.add_argument("--leader-election-id", default="convoy-controller", help="its name")
    group.add_argument(
        "--leader-elect-release-on-exit",
        action="store_true",
        help="give the Lease up on SIGTERM, so that a successor need not wait for it to expire",
    )


def leader_elector(args: argparse.Namespace, api: client.ApiClient) -> leader.LeaderElector:
    namespace = args.leader_election_namespace or Path(POD_NAMESPACE_FILE).read_text().strip()
    identity = f"{socket.gethostname()}_{uuid.uuid4()}"
    return leader.LeaderElector(api, namespace, args.leader_election_id, identity)


def api_client(kubeconfig: str | None) -> client.ApiClient:
    configuration = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)


Route = Callable[[], tuple[bool, str]]


def serve(port: int, routes: dict[str, Route]) -> None:
    """A tiny HTTP server for probes and metrics, in a daemon thread."""
    if not port:
        return

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answer = routes.get(self.path)
            ok, body = answer() if answer else (False, "not found\n")
            self.send_response(200 if ok else (404 if answer is None else 503))
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            """Probes are frequent; they are not news."""

    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(message)s")
    controller = Controller(
        api_client(args.kubeconfig),
        resync=args.resync,
        workers=args.workers,
        namespace=args.namespace,
    )
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    controller.start_caches()
    # Before the probes: once /readyz answers, the subresource API is listening too.
    subresources_server.start(args, api_client(args.kubeconfig))
    serve(
        args.health_port,
        {
            "/healthz": lambda: (True, "ok\n"),
            "/readyz": lambda: (controller.informer.wait_synced(0), "ok\n"),
        },
    )
    serve(args.metrics_port, {"/metrics": lambda: (True, controller.metrics())})
    log.info("convoy controller: resync %gs, %d workers", args.resync, args.workers)
    elector = leader_elector(args, api_client(args.kubeconfig)) if args.leader_elect else None
    code = work_until_stopped(controller, elector, done, args.leader_elect_release_on_exit)
    log.info("convoy controller stopped")
    return code


def work_until_stopped(
    controller: Controller,
    elector: leader.LeaderElector | None,
    done: threading.Event,
    release_on_exit: bool,
) -> int:
    """Reconcile (once elected, with an elector) until `done`; 1 if the Lease was lost."""
    lost = threading.Event()

    def give_up() -> None:  # as controller-runtime's managers do: a replica that lost it exits
        lost.set()
        done.set()

    if elector is None or elector.acquire(done):
        if elector is not None:
            elector.keep(done, on_lost=give_up)
        controller.start_work()
        log.info("convoy controller reconciling")
    done.wait()
    controller.stop()
    if elector is not None and release_on_exit and not lost.is_set():
        elector.release()
    return 1 if lost.is_set() else 0


if __name__ == "__main__":
    raise SystemExit(main())
