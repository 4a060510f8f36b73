"""The kind-host tests' cluster changes none of this machine's kernel settings: they are read
before it is created, after every other test has used it, and after it is deleted (this test
ends its life, so it runs last; tests/kindhost/settings.py says which settings a node could
change and how the node's entrypoint keeps them)."""

from __future__ import annotations

import pytest

from tests.kindhost.conftest import SharedCluster
from tests.kindhost.settings import changed, kernel_settings

pytestmark = pytest.mark.kindhost


def test_a_kind_clusters_life_changes_no_kernel_setting_of_this_machine(
    shared_cluster: SharedCluster,
) -> None:
    before = shared_cluster.settings_before
    print(f"{len(before)} kernel settings read")
    during = changed(before, kernel_settings())
    shared_cluster.end()
    after = changed(before, kernel_settings())
    assert during == {}, "changed while the cluster ran (setting: (before, during))"
    assert after == {}, "changed after the cluster was deleted (setting: (before, after))"
