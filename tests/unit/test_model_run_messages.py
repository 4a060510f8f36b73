"""How a model-based failure reads in the report: the steps first, every distinct failure."""

from __future__ import annotations

from conformance.harness.model_based import described


def test_an_assertion_reads_as_its_message_naming_the_steps() -> None:
    steps = "create(automatic, 1s-x2) -> refuse(1) and sync: lastHandledSyncAt set"
    assert described(AssertionError(steps)) == steps


def test_each_distinct_failure_hypothesis_found_is_numbered() -> None:
    found = ExceptionGroup(
        "Hypothesis found 2 distinct failures.",
        [AssertionError("create(manual, 1s-x2) -> sync(now): Applied"), TimeoutError("no retry")],
    )
    assert described(found).splitlines() == [
        "Hypothesis found 2 distinct failures.",
        "1. create(manual, 1s-x2) -> sync(now): Applied",
        "2. TimeoutError('no retry')",
    ]
