"""How a run orders its tests and hands them to xdist workers: the longest first, one at a time.

The suite mostly waits on the document's own timings, and a few tests (the model-based
shards) take minutes where the others take seconds. xdist's own schedulers hand out
contiguous blocks at the start, so all the long tests can land on one worker and run one
after another. Here the tests marked starts_first come first, every worker starts with one of
them, and each worker gets its next test when it is done with one: a greedy schedule, whose
wall time stays near the longest test plus a worker's set-up. A test that stops the
controller comes last: where the workers share one, it runs alone.
"""

from __future__ import annotations

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScheduling
from xdist.workermanage import WorkerController

from conformance.harness.run_cluster import is_xdist_worker
from conformance.harness.turns import STOPS_CONTROLLER

#: The marker of a test that runs far longer than the others (the model-based run).
STARTS_FIRST = "starts_first"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked starts_first first; on an xdist worker, the tests that stop the controller
    last (stopping_tests_last); the rest keep the collection's order."""
    items.sort(key=lambda item: item.get_closest_marker(STARTS_FIRST) is None)  # stable
    if is_xdist_worker(config):
        items[:] = stopping_tests_last(items, config.workerinput["workercount"])  # type: ignore[attr-defined]


def stopping_tests_last(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """`items` with the tests that stop the controller handed out last.

    Where the workers share one controller (kind, a vendor's), such a test waits until every
    running test is done and no test starts meanwhile (conformance.harness.turns). Handed out
    early, it waited for the model-based shards, minutes, with the other workers idle (8 tests
    of test_force.py waited 115-133 s each on kind); last, that wait is the run's own tail.
    LongestFirst gives each worker the collection's last test as its second one at the
    start, so these go just before the last `workers` tests."""
    stopping = [item for item in items if item.get_closest_marker(STOPS_CONTROLLER)]
    others = [item for item in items if not item.get_closest_marker(STOPS_CONTROLLER)]
    cut = max(len(others) - workers, 0)
    return [*others[:cut], *stopping, *others[cut:]]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{STARTS_FIRST}: takes minutes where the others take seconds; it starts first, so that "
        "the rest run beside it instead of after it",
    )


class LongestFirst(LoadScheduling):
    """The collection's order is longest first (pytest_collection_modifyitems). A worker runs
    a test only once it holds the next one, so it starts with two: one from the front (the
    longest left) and one from the back (the collection's last, which waits behind it)."""

    #: LoadScheduling's: the node IDs, once every worker collected the same
    collection: list[str] | None

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self.maxschedchunk = 1  # then one test at a time, to whichever worker is free

    def schedule(self) -> None:
        if self.collection is not None:
            super().schedule()  # a worker that came up late: give it work like the others
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        collection = next(iter(self.node2collection.values()))
        self.collection = collection
        self.pending[:] = range(len(collection))
        for node in self.nodes:
            self._send_tests(node, 1)
        for node in self.nodes:
            self._send_last(node)
        if not self.pending:
            for node in self.nodes:
                node.shutdown()

    def _send_last(self, node: WorkerController) -> None:
        if self.pending:
            last = self.pending.pop()
            self.node2pending[node].append(last)
            node.send_runtest_some([last])


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LongestFirst | None:
    """-n's default distribution (load) becomes LongestFirst; any --dist named on the
    command line other than load keeps xdist's own scheduler."""
    return LongestFirst(config, log) if config.getoption("dist") == "load" else None
