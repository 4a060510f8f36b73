"""API discovery kept in memory, for the dynamic clients of the suite and the controller.

The dynamic client's default discoverer caches discovery in a file per server URL in the
system temp directory: a file each short-lived test cluster leaves behind, shared (and raced
over) by every process that talks to the same server. One process's clients need no file.
"""

from __future__ import annotations

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.discovery import LazyDiscoverer

#: A cache file that never exists: the discoverer starts empty and discovers lazily.
_NO_CACHE_FILE = "/nonexistent/convoy-discovery.json"


class InMemoryDiscoverer(LazyDiscoverer):
    def __init__(self, api: client.ApiClient, cache_file: str | None) -> None:
        super().__init__(api, _NO_CACHE_FILE)

    def _write_cache(self) -> None:
        """Nothing is written: the cache lives as long as its client."""


def dynamic_client(api: client.ApiClient) -> DynamicClient:
    return DynamicClient(api, discoverer=InMemoryDiscoverer)
