"""`kubectl convoy`: the subresource API from the command line.

Installed as the executable `kubectl-convoy`, which kubectl's plugin convention runs for
`kubectl convoy ...`. Each command is one request to the aggregated path through the
kube-apiserver, made with the kubeconfig, context and namespace kubectl would use, so RBAC on
releases/sync (and the other subresources) decides who may run it. Exit codes are for scripts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import urllib3
import yaml
from kubernetes import client, config

from convoy import api
from convoy.api import Annotation
from convoy.subresources import Subresource, release_path

EXIT_OK, EXIT_API_ERROR, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
REQUEST_TIMEOUT = 30.0
EXIT_CODES = f"""exit codes:
  {EXIT_OK}  done
  {EXIT_API_ERROR}  the API answered with an error (not found, forbidden, invalid body, ...)
  {EXIT_USAGE}  usage error: bad arguments, or a --file that cannot be read or parsed
  {EXIT_UNREACHABLE}  cannot reach the cluster: no usable kubeconfig or context, network, TLS
"""


class Failure(Exception):
    """Ends the command: the message goes to stderr, the code is the exit code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Action:
    """One request to a Release's subresource, and what to say when it succeeded."""

    method: str
    subresource: Subresource
    done: str
    body: Any = None
    force: bool = False


# -- the commands --------------------------------------------------------------------------------
def sync(args: argparse.Namespace) -> Action:
    done = "forced sync requested" if args.force else "sync requested"
    return Action("POST", Subresource.SYNC, done, force=args.force)


def pin(args: argparse.Namespace) -> Action:
    body = {"renderRef": args.render_ref}
    return Action("PUT", Subresource.PIN, f"pinned to {args.render_ref}; sync requested", body)


def unpin(args: argparse.Namespace) -> Action:
    return Action("DELETE", Subresource.PIN, "unpinned; sync requested")


def annotation_command(subresource: Subresource) -> Callable[[argparse.Namespace], Action]:
    """mutations and lifecycle: PUT the document of --file, or DELETE with --clear."""

    def build(args: argparse.Namespace) -> Action:
        if args.clear:
            return Action("DELETE", subresource, f"{subresource} cleared; sync requested")
        document = read_document(args.file, sys.stdin)
        return Action("PUT", subresource, f"{subresource} set; sync requested", document)

    return build


def read_document(path: str, stdin: TextIO) -> Any:
    """JSON, or YAML for hand-written files; "-" is standard input."""
    try:
        text = stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise Failure(EXIT_USAGE, f"cannot read --file {path}: {error.strerror}") from None
    try:
        document = json.loads(text)
    except ValueError:
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise Failure(EXIT_USAGE, f"--file {path} is neither JSON nor YAML: {error}") from None
    if document is None:
        raise Failure(EXIT_USAGE, f"--file {path} is empty")
    return document


# -- the command line ----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-n", "--namespace", help="namespace of the Release (default: context's)")
    common.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"
    )
    common.add_argument("--context", help="kubeconfig context (default: the current one)")
    common.add_argument("name", metavar="NAME", help="name of the Release")
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="kubectl convoy",
        description="Requests to convoy Releases through the subresource API.",
        epilog=EXIT_CODES,
        formatter_class=formatter,
    )
    kinds = parser.add_subparsers(dest="kind", required=True, metavar="KIND")
    release = kinds.add_parser(
        "release", help="act on a Release", epilog=EXIT_CODES, formatter_class=formatter
    )
    verbs = release.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(
        name: str, build: Callable[[argparse.Namespace], Action], summary: str
    ) -> argparse.ArgumentParser:
        sub = verbs.add_parser(
            name, parents=[common], help=summary, epilog=EXIT_CODES, formatter_class=formatter
        )
        sub.set_defaults(action=build)
        return sub

    verb("sync", sync, "request a sync (POST .../sync)").add_argument(
        "--force", action="store_true", help="forced: skip the dry run, start a new rollout"
    )
    verb("pin", pin, "hold the Release at a render").add_argument(
        "render_ref", metavar="RENDERREF", help="sha256:<64 hex digits>"
    )
    verb("unpin", unpin, "remove the pin")
    for subresource in (Subresource.MUTATIONS, Subresource.LIFECYCLE):
        sub = verb(subresource, annotation_command(subresource), f"set or clear {subresource}")
        choice = sub.add_mutually_exclusive_group(required=True)
        choice.add_argument("-f", "--file", help="JSON or YAML document; - reads stdin")
        choice.add_argument("--clear", action="store_true", help=f"remove the {subresource}")
    return parser


# -- the request ---------------------------------------------------------------------------------
def connect(args: argparse.Namespace) -> tuple[client.ApiClient, str]:
    """An API client and the namespace, resolved as kubectl resolves them."""
    try:
        contexts, current = config.list_kube_config_contexts(config_file=args.kubeconfig)
        chosen = current
        if args.context:
            chosen = next((c for c in contexts if c["name"] == args.context), None)
            if chosen is None:
                raise config.ConfigException(f"context {args.context!r} not found")
        api_client = config.new_client_from_config(
            config_file=args.kubeconfig, context=args.context
        )
    except (config.ConfigException, OSError, yaml.YAMLError) as error:
        raise Failure(EXIT_UNREACHABLE, f"no usable kubeconfig: {error}") from None
    namespace = args.namespace or chosen["context"].get("namespace") or "default"
    return api_client, namespace


def send(api_client: client.ApiClient, namespace: str, name: str, action: Action) -> Any:
    """The request; the answer's JSON on success, a Failure otherwise."""
    method, url, headers, body, _ = api_client.param_serialize(
        action.method,
        release_path(namespace, name, action.subresource),
        query_params=[("force", "true")] if action.force else [],
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body=action.body,
        auth_settings=["BearerToken"],
    )
    try:
        response = api_client.call_api(method, url, headers, body, _request_timeout=REQUEST_TIMEOUT)
        data = response.read()
    except (urllib3.exceptions.HTTPError, client.ApiException) as error:
        where = api_client.configuration.host
        raise Failure(EXIT_UNREACHABLE, f"cannot reach {where}: {error}") from None
    if not 200 <= response.status < 300:
        raise Failure(EXIT_API_ERROR, api_error(response.status, data))
    return json.loads(data)


def api_error(status: int, data: bytes) -> str:
    """kubectl's wording: "Error from server (Reason): message"."""
    try:
        answer = json.loads(data)
        return f"Error from server ({answer['reason']}): {answer['message']}"
    except (ValueError, KeyError, TypeError):
        text = data.decode(errors="replace").strip() or "no message"
        hint = ""
        if status in (404, 503):
            hint = " (is the subresource API installed and its APIService Available?)"
        return f"Error from server (HTTP {status}): {text}{hint}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        action = args.action(args)
        api_client, namespace = connect(args)
        with api_client:
            answer = send(api_client, namespace, args.name, action)
    except Failure as failure:
        print(f"error: {failure}" if failure.code != EXIT_API_ERROR else failure, file=sys.stderr)
        return failure.code
    requested = answer["metadata"]["annotations"][Annotation.SYNC_REQUESTED_AT]
    print(f"release.{api.GROUP}/{args.name} {action.done} at {requested}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
