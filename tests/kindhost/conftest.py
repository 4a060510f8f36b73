"""Tests on the kind host's engine: `make test-kind` starts it and passes its options."""

from __future__ import annotations

import os

import pytest

from conformance.clusters.kind import KindProvider
from conformance.kindhost.engine import Engine


@pytest.fixture(scope="session")
def engine() -> Engine:
    running = Engine()
    if not running.answers() or os.environ.get("DOCKER_HOST") != running.docker_host:
        pytest.fail(
            "the kind host's engine is not running or DOCKER_HOST is not its socket: "
            "make test-kind, or `python -m conformance.kindhost up` and its env and options"
        )
    return running


def own_kind_cluster(config: pytest.Config, name: str) -> KindProvider:
    """A cluster of a test's own on the engine, with the run's kind options."""
    option = config.getoption
    return KindProvider(
        name,
        image=option("kind_image"),
        kind_bin=option("kind_bin"),
        kubectl_bin=option("kind_kubectl_bin"),
        config_file=option("kind_config"),
        node_address=option("kind_node_address"),
    )
