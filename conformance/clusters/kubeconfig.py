"""Kubeconfig files with embedded credentials, and API clients built from them."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml
from kubernetes import client, config


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def render_kubeconfig(
    server: str, ca_pem: bytes, cert_pem: bytes, key_pem: bytes, name: str = "convoy-local"
) -> str:
    """A one-context kubeconfig that authenticates with a client certificate."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": name,
                "user": {
                    "client-certificate-data": _b64(cert_pem),
                    "client-key-data": _b64(key_pem),
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    return yaml.safe_dump(document, sort_keys=False)


def api_client(
    kubeconfig: Path, credentials_dir: Path | None = None, context: str | None = None
) -> client.ApiClient:
    """A fresh ApiClient for `kubeconfig`; never touches the process-wide default config.

    The client writes embedded credentials to files, in `credentials_dir` if given, else in
    the system temp directory, from which only a clean exit of the process removes them."""
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(kubeconfig),
        context=context,
        client_configuration=configuration,
        temp_file_path=str(credentials_dir) if credentials_dir else None,
    )
    return client.ApiClient(configuration)
