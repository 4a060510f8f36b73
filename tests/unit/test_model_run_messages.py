"""How a model-based failure reads in the report: the steps first, every distinct failure."""

from __future__ import annotations

from hypothesis.errors import FlakyStrategyDefinition

from conformance.harness.model_based import described, without_a_shrunk_replay


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


def test_a_failure_whose_replay_drew_other_steps_reads_as_the_first_failure() -> None:
    first = AssertionError("create(automatic, 1s) -> render(v2) turning Healthy: no /sync")
    replay = FlakyStrategyDefinition("Inconsistent data generation!")
    found = without_a_shrunk_replay(first, replay)
    assert found.splitlines()[0] == str(first)
    assert "its replay went otherwise" in found and "Inconsistent data generation!" in found
