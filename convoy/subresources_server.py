"""The subresource API's transport: HTTPS that only the kube-apiserver's front proxy gets through.

The aggregator calls the controller with its front-proxy client certificate and names the user
in headers. So the TLS handshake demands a client certificate signed by the requestheader CA (a
caller without one gets no HTTP answer at all), the certificate's CN must be one of
requestheader-allowed-names when that list is set, and only then are the headers believed.
Every request is then authorized by a SubjectAccessReview in subresources.py.
"""

from __future__ import annotations

import argparse
import json
import logging
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from kubernetes import client

from convoy.subresources import ApiError, Request, Response, SubresourceAPI, User

log = logging.getLogger(__name__)

USER_HEADER = "X-Remote-User"
GROUP_HEADER = "X-Remote-Group"
UID_HEADER = "X-Remote-Uid"
EXTRA_HEADER_PREFIX = "x-remote-extra-"
AUTHENTICATED, UNAUTHENTICATED = "system:authenticated", "system:unauthenticated"
#: Where the kube-apiserver publishes its front proxy's CA and allowed names.
AUTHENTICATION_CONFIG_MAP = ("kube-system", "extension-apiserver-authentication")
MAX_BODY = 1 << 20
HANDSHAKE_TIMEOUT = 10.0
#: Longer than the aggregator keeps idle connections (90 s), so that it, not we, closes them.
IDLE_TIMEOUT = 300.0


@dataclass(frozen=True)
class FrontProxyTrust:
    """The requestheader CA and the client certificate names allowed to assert a user."""

    ca_pem: str
    allowed_names: frozenset[str]

    def admits(self, common_name: str | None) -> bool:
        """An empty list admits any certificate the CA signed, as the kube-apiserver does."""
        return not self.allowed_names or common_name in self.allowed_names


def front_proxy_trust(
    core: client.CoreV1Api, ca_file: str | None, allowed_names: list[str] | None
) -> FrontProxyTrust:
    """From the flags when --requestheader-client-ca is set, else from the cluster's ConfigMap."""
    if ca_file:
        return FrontProxyTrust(Path(ca_file).read_text(), frozenset(allowed_names or ()))
    namespace, name = AUTHENTICATION_CONFIG_MAP
    data = core.read_namespaced_config_map(name, namespace).data or {}
    ca_pem = data.get("requestheader-client-ca-file")
    if not ca_pem:
        raise RuntimeError(
            f"ConfigMap {namespace}/{name} has no requestheader-client-ca-file: the API server "
            "runs no front proxy; pass --requestheader-client-ca"
        )
    if allowed_names is None:
        allowed_names = json.loads(data.get("requestheader-allowed-names") or "[]")
    return FrontProxyTrust(ca_pem, frozenset(allowed_names))


def tls_context(cert_file: str, key_file: str, trust: FrontProxyTrust) -> ssl.SSLContext:
    """Serving certificate; a client certificate from the requestheader CA is required."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=trust.ca_pem)
    context.set_alpn_protocols(["http/1.1"])
    return context


class SubresourceServer(ThreadingHTTPServer):
    """One thread per connection; the TLS handshake runs in that thread, not the accept loop."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        api: SubresourceAPI,
        tls: ssl.SSLContext,
        trust: FrontProxyTrust,
    ) -> None:
        super().__init__(address, _Handler)
        self.api = api
        self.trust = trust
        self._tls = tls

    @property
    def port(self) -> int:
        return self.server_address[1]

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, name="subresources", daemon=True).start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """`request` is a TCP connection's socket (socketserver types it for UDP too)."""
        request.settimeout(HANDSHAKE_TIMEOUT)
        try:
            connection = self._tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as error:
            log.info("refused a connection from %s: %s", client_address[0], error)
            return
        with connection:
            super().finish_request(connection, client_address)

    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        log.warning("connection from %s failed", client_address[0], exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT
    server: SubresourceServer

    def _serve(self) -> None:
        try:
            body = self._read_body()
        except ApiError as error:
            self._send(error.response, close=True)  # what is left of the body is unread
            return
        try:
            response = self.server.api.handle(self._request(self._authenticate(), body))
        except ApiError as error:
            response = error.response
        self._send(response)

    # Every method the kube-apiserver proxies: the API answers those a route lacks with 405
    # (BaseHTTPRequestHandler would answer a method without a do_ method with 501).
    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _serve

    def _request(self, user: User, body: bytes) -> Request:
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        return Request(self.command, url.path, query, user, body)

    def _authenticate(self) -> User:
        """The handshake verified the certificate; now its name, then the asserted user."""
        subject = dict(pair[0] for pair in self.connection.getpeercert()["subject"])
        common_name = subject.get("commonName")
        if not self.server.trust.admits(common_name):
            raise ApiError(
                401, "Unauthorized", f"client certificate {common_name!r} may not assert users"
            )
        name = self.headers.get(USER_HEADER)
        if not name:
            raise ApiError(401, "Unauthorized", f"no user in {USER_HEADER}")
        extra: dict[str, list[str]] = {}
        for header, value in self.headers.items():
            if header.lower().startswith(EXTRA_HEADER_PREFIX):
                key = unquote(header[len(EXTRA_HEADER_PREFIX) :]).lower()
                extra.setdefault(key, []).append(value)
        return User(
            name,
            _groups(self.headers.get_all(GROUP_HEADER) or []),
            self.headers.get(UID_HEADER),
            extra,
        )

    def _read_body(self) -> bytes:
        try:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                return self._read_chunked()
            length = int(self.headers.get("Content-Length") or 0)
            if length < 0:
                raise ValueError(length)
        except ValueError:
            raise ApiError(400, "BadRequest", "malformed Content-Length or chunk size") from None
        _check_size(length)
        return self.rfile.read(length)

    def _read_chunked(self) -> bytes:
        body = bytearray()
        while size := int(self.rfile.readline(1024).split(b";")[0], 16):
            _check_size(len(body) + size)
            body += self.rfile.read(size)
            self.rfile.readline(1024)  # the CRLF after each chunk
        while self.rfile.readline(1024).strip():  # trailers, up to the empty line
            pass
        return bytes(body)

    def _send(self, response: Response, *, close: bool = False) -> None:
        data = json.dumps(response.body).encode()
        self.send_response(response.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")  # also ends this connection's loop
        self.end_headers()
        if self.command != "HEAD":  # a HEAD answer has the headers of a GET, not its body
            self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """The aggregator polls discovery often; writes are logged by the API itself."""
        log.debug(format, *args)


def _groups(asserted: list[str]) -> tuple[str, ...]:
    """Like the kube-apiserver's authenticators: every authenticated user is system:authenticated.

    The aggregator's own requests (OpenAPI downloads as system:aggregator) name no group, and
    RBAC grants discovery and /openapi to that group.
    """
    if AUTHENTICATED in asserted or UNAUTHENTICATED in asserted:
        return tuple(asserted)
    return (*asserted, AUTHENTICATED)


def _check_size(length: int) -> None:
    if length > MAX_BODY:
        raise ApiError(413, "RequestEntityTooLarge", f"the body exceeds {MAX_BODY} bytes")


# -- the controller's flags ----------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("subresource API (aggregated; docs/api-reference.md)")
    group.add_argument(
        "--subresource-port", type=int, default=0, help="HTTPS port of the API (0: off)"
    )
    group.add_argument(
        "--subresource-address", default="0.0.0.0", help="address to listen on (default 0.0.0.0)"
    )
    group.add_argument("--subresource-cert", help="serving certificate file (PEM)")
    group.add_argument("--subresource-key", help="serving private key file (PEM)")
    group.add_argument(
        "--requestheader-client-ca",
        help="CA of the front proxy's client certificates (PEM file); default: the "
        "requestheader-client-ca-file of kube-system/extension-apiserver-authentication",
    )
    group.add_argument(
        "--requestheader-allowed-names",
        type=lambda text: [name for name in text.split(",") if name],
        help="comma-separated CNs allowed to assert users (empty: any the CA signed); "
        "default: from that ConfigMap when --requestheader-client-ca is unset, else empty",
    )


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.subresource_port and not (args.subresource_cert and args.subresource_key):
        parser.error("--subresource-port needs --subresource-cert and --subresource-key")


def start(args: argparse.Namespace, api_client: client.ApiClient) -> SubresourceServer | None:
    """Serve the subresource API as the flags say; None when --subresource-port is 0."""
    if not args.subresource_port:
        return None
    trust = front_proxy_trust(
        client.CoreV1Api(api_client),
        args.requestheader_client_ca,
        args.requestheader_allowed_names,
    )
    server = SubresourceServer(
        (args.subresource_address, args.subresource_port),
        SubresourceAPI(api_client),
        tls_context(args.subresource_cert, args.subresource_key, trust),
        trust,
    )
    server.start()
    log.info(
        "subresource API on https://%s:%d (front proxy names: %s)",
        args.subresource_address,
        server.port,
        ", ".join(sorted(trust.allowed_names)) or "any",
    )
    return server
