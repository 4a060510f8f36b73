"""The suite's xdist schedule: each worker starts with one of the longest tests."""

from __future__ import annotations

import json

import pytest

from conformance.harness.scheduling import stopping_tests_last

#: Three long tests (marked as the model-based shards are) and one that stops the controller
#: (as BACK-5's restart does) among short ones; each test writes down the worker that ran it
#: and when.
TESTS = """
import json, os, time
import pytest

def _ran(name):
    with open("ran.jsonl", "a") as out:
        out.write(json.dumps([name, os.environ["PYTEST_XDIST_WORKER"], time.time()]) + "\\n")

@pytest.mark.parametrize("index", range(6))
def test_short(index):
    _ran(f"short{index}")

@pytest.mark.stops_controller
def test_stopping():
    _ran("stopping")

@pytest.mark.parametrize("index", range(6, 12))
def test_short_after(index):
    _ran(f"short{index}")

@pytest.mark.starts_first
@pytest.mark.parametrize("index", range(3))
def test_long(index):
    _ran(f"long{index}")
    time.sleep(2)
"""


def _workers_of(pytester: pytest.Pytester, *args: str) -> dict[str, str]:
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=16)
    lines = (pytester.path / "ran.jsonl").read_text().splitlines()
    return {name: worker for name, worker, _ in map(json.loads, lines)}


def test_each_worker_starts_with_one_of_the_longest_tests(pytester: pytest.Pytester) -> None:
    workers = _workers_of(pytester, "-n", "3")
    assert len({workers[f"long{index}"] for index in range(3)}) == 3, workers


def test_a_dist_named_on_the_command_line_keeps_its_own_schedule(
    pytester: pytest.Pytester,
) -> None:
    """loadfile hands a file's tests to one worker."""
    workers = _workers_of(pytester, "-n", "3", "--dist", "loadfile")
    assert len(set(workers.values())) == 1, workers


def test_more_workers_than_tests_run_each_test_once(pytester: pytest.Pytester) -> None:
    assert len(_workers_of(pytester, "-n", "20")) == 16


def test_a_test_that_stops_the_controller_is_handed_out_last(pytester: pytest.Pytester) -> None:
    """Where workers share a controller it runs alone: handed out early, it kept them idle
    until the long tests were done. The last three go out at the start, as each worker's
    second test, so it goes just before them."""
    pytester.makepyfile(TESTS)
    collected, _ = pytester.inline_genitems("-p", "no:cacheprovider")
    others = [item.name for item in collected if item.name != "test_stopping"]
    names = [item.name for item in stopping_tests_last(collected, workers=3)]
    assert names == [*others[:-3], "test_stopping", *others[-3:]], names
