"""What the plugin keeps on pytest's config and items (pytest's stash): the keys alone, so that
the report reads them without loading the cluster providers."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.timing import Timing

#: The run's ID, shared by its xdist workers (it names the run's namespaces).
RUN_ID = pytest.StashKey[str]()
TIMING = pytest.StashKey[Timing]()
#: What the report says of the run's cluster: provider, why, Kubernetes version.
ENVIRONMENT = pytest.StashKey[dict[str, Any]]()
#: On a test item: one of its phases failed (the namespace fixture's teardown reads it).
TEST_FAILED = pytest.StashKey[bool]()
