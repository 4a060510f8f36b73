"""The suite's xdist schedule: each worker starts with one of the longest tests."""

from __future__ import annotations

import json

import pytest

#: Three long tests (marked as the model-based shards are) among short ones; each test
#: writes down the worker that ran it and when.
TESTS = """
import json, os, time
import pytest

def _ran(name):
    with open("ran.jsonl", "a") as out:
        out.write(json.dumps([name, os.environ["PYTEST_XDIST_WORKER"], time.time()]) + "\\n")

@pytest.mark.parametrize("index", range(6))
def test_short(index):
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
    result.assert_outcomes(passed=9)
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
    assert len(_workers_of(pytester, "-n", "12")) == 9
