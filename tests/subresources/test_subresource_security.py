"""Who gets through: only the front proxy reaches the API, and RBAC decides for each user.

Through the kube-apiserver, users are impersonated by the admin client. Straight to the
controller's port, the tests present what an attacker could: no certificate, a certificate of
another CA, one of the right CA with a name the front proxy does not have, and the front proxy's
own certificate naming a user whom RBAC does not allow (the server's own SubjectAccessReview).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from conformance.clusters import pki
from conformance.kube import raw_request
from convoy.api import Annotation
from convoy.subresources import release_path
from convoyapi import SUBRESOURCE_GROUP_VERSION
from tests.subresources.support import Direct, annotations

Obj = dict[str, Any]
REFUSED = (ssl.SSLError, ConnectionError)


def test_a_caller_without_a_client_certificate_gets_nothing(
    direct: Direct, namespace: str, release: str, read_release: Callable[[str], Obj]
) -> None:
    before = annotations(read_release(release))
    headers = {"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"}
    with pytest.raises(REFUSED):
        direct.request("POST", release_path(namespace, release, "sync"), headers=headers)
    assert annotations(read_release(release)) == before


def test_a_certificate_of_another_ca_gets_nothing(
    direct: Direct, namespace: str, release: str, tmp_path: Path
) -> None:
    stranger = pki.issue(pki.new_ca("stranger-ca"), "front-proxy-client", client=True)
    with pytest.raises(REFUSED):
        direct.request(
            "POST",
            release_path(namespace, release, "sync"),
            client_cert=stranger.write(tmp_path, "stranger"),
            headers={"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"},
        )


def test_a_front_proxy_ca_certificate_with_a_name_not_allowed_is_401(
    direct: Direct, front_proxy_ca: pki.KeyPair, namespace: str, release: str, tmp_path: Path
) -> None:
    """requestheader-allowed-names: the CA alone does not let a certificate assert users."""
    intruder = pki.issue(front_proxy_ca, "intruder", client=True)
    answer = direct.request(
        "POST",
        release_path(namespace, release, "sync"),
        client_cert=intruder.write(tmp_path, "intruder"),
        headers={"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"},
    )
    assert answer.status == 401, answer
    assert "intruder" in answer.body["message"]


def test_the_front_proxy_without_a_user_is_401(
    direct: Direct, front_proxy_cert: tuple[Path, Path]
) -> None:
    answer = direct.request(
        "GET", f"/apis/{SUBRESOURCE_GROUP_VERSION}", client_cert=front_proxy_cert
    )
    assert answer.status == 401, answer


def test_the_server_authorizes_the_user_the_front_proxy_names(
    direct: Direct,
    front_proxy_cert: tuple[Path, Path],
    grant: Callable[[str, str, list[str]], None],
    namespace: str,
    release: str,
    read_release: Callable[[str], Obj],
) -> None:
    """Its own SubjectAccessReview, not only the kube-apiserver's: denied, then allowed."""
    path = release_path(namespace, release, "sync")

    def post(user: str) -> Any:
        headers = {"X-Remote-User": user, "X-Remote-Group": "system:authenticated"}
        return direct.request("POST", path, client_cert=front_proxy_cert, headers=headers)

    denied = post("mallory")
    assert denied.status == 403, denied
    assert 'User "mallory" cannot create resource "releases/sync"' in denied.body["message"]
    assert Annotation.SYNC_REQUESTED_AT not in annotations(read_release(release))
    grant("trent", "sync", ["create"])
    assert post("trent").status == 200
    assert Annotation.SYNC_REQUESTED_AT in annotations(read_release(release))


def test_a_chunked_body_from_the_front_proxy_is_read(
    direct: Direct,
    front_proxy_cert: tuple[Path, Path],
    namespace: str,
    release: str,
    read_release: Callable[[str], Obj],
) -> None:
    """A proxied request whose length the client did not declare arrives chunked."""
    answer = direct.request(
        "PUT",
        release_path(namespace, release, "pin"),
        client_cert=front_proxy_cert,
        headers={"X-Remote-User": "admin", "X-Remote-Group": "system:masters"},
        body=b'{"renderRef": "sha256:' + b"0" * 64 + b'"}',
        chunked=True,
    )
    assert answer.status == 200, answer
    assert annotations(read_release(release))[Annotation.PIN] == "sha256:" + "0" * 64


def test_rbac_on_releases_sync_decides_through_the_apiserver(
    impersonating: Callable[[str], client.ApiClient],
    grant: Callable[[str, str, list[str]], None],
    namespace: str,
    release: str,
    read_release: Callable[[str], Obj],
) -> None:
    """A user without create on releases/sync gets 403; one with it gets the annotation written.

    The grant is exactly the subresource and verb: it lets alice POST sync, and not PUT pin.
    """
    grant("alice", "sync", ["create"])
    sync = release_path(namespace, release, "sync")
    denied = raw_request(impersonating("bob"), "POST", sync)
    assert denied.status == 403, denied
    assert Annotation.SYNC_REQUESTED_AT not in annotations(read_release(release))
    allowed = raw_request(impersonating("alice"), "POST", sync)
    assert allowed.status == 200, allowed
    written = annotations(read_release(release))[Annotation.SYNC_REQUESTED_AT]
    assert annotations(allowed.body)[Annotation.SYNC_REQUESTED_AT] == written
    body = {"renderRef": "sha256:" + "0" * 64}
    pin = raw_request(
        impersonating("alice"), "PUT", release_path(namespace, release, "pin"), body=body
    )
    assert pin.status == 403, pin
