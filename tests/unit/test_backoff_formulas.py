"""The default rate limiter and spec.syncPolicy.retryBackoff, exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from convoy.backoff import RetryBackoff, default_delay, default_limiter

# client-go's ItemExponentialFailureRateLimiter(5ms, 1000s), indexed by earlier failures.
DEFAULT_SEQUENCE = [
    0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56,
    5.12, 10.24, 20.48, 40.96, 81.92, 163.84, 327.68, 655.36, 1000.0,
]  # fmt: skip
CAP_INDEX = 18  # 5 ms * 2**18 = 1310.72 s is the first value over the cap


def test_default_sequence_reaches_cap_at_index_18() -> None:
    assert [default_delay(f) for f in range(len(DEFAULT_SEQUENCE))] == DEFAULT_SEQUENCE
    assert DEFAULT_SEQUENCE.index(1000.0) == CAP_INDEX


@pytest.mark.parametrize("failures", [CAP_INDEX, CAP_INDEX + 1, 64, 1100, 10**9])
def test_default_stays_capped_without_overflow(failures: int) -> None:
    assert default_delay(failures) == 1000.0


@pytest.mark.parametrize("retry", range(1, 21))
def test_default_limiter_is_one_based(retry: int) -> None:
    assert default_limiter(retry) == default_delay(retry - 1)


@pytest.mark.parametrize("call", [lambda: default_delay(-1), lambda: default_limiter(0)])
def test_default_rejects_bad_counts(call: Callable[[], float]) -> None:
    with pytest.raises(ValueError, match=">="):
        call()


@pytest.mark.parametrize(
    ("spec", "delays"),
    [
        ({"initial": "1s", "factor": 3}, [1, 3, 9, 27, 81]),
        ({"initial": "1s", "factor": 0.5}, [1, 2, 4, 8]),  # factor < 1 means 2
        ({"initial": "1s", "factor": "0"}, [1, 2, 4]),
        ({"initial": "1s"}, [1, 2, 4, 8]),  # unset factor means 2
        ({"initial": "1s", "factor": 1}, [1, 1, 1]),
        ({"initial": "500ms", "factor": "1.5"}, [0.5, 0.75, 1.125]),
        ({"initial": "1s", "max": "5s"}, [1, 2, 4, 5, 5]),
        ({"initial": "100s", "factor": 4}, [100, 400, 1000, 1000]),  # unset max means 1000 s
        ({"initial": "1s", "max": "0s"}, [1, 2, 4]),  # zero max counts as unset
        ({"initial": "2h"}, [1000, 1000]),  # the cap applies to retry 1 as well
    ],
)
def test_retry_backoff_delays(spec: dict[str, Any], delays: list[float]) -> None:
    backoff = RetryBackoff.from_spec(spec)
    assert backoff is not None
    assert [backoff.delay(n) for n in range(1, len(delays) + 1)] == delays


@pytest.mark.parametrize("factor", [2.0, 1e300])
@pytest.mark.parametrize("retry", [1100, 10**9])
def test_retry_backoff_caps_without_overflow(factor: float, retry: int) -> None:
    assert RetryBackoff(initial=1.0, factor=factor, max=60.0).delay(retry) == 60.0
    assert RetryBackoff(initial=1.0, factor=factor).delay(retry) == 1000.0


def test_from_spec_parses_fields() -> None:
    spec = {"initial": "500ms", "factor": "1.5", "max": "1m"}
    assert RetryBackoff.from_spec(spec) == RetryBackoff(initial=0.5, factor=1.5, max=60.0)


@pytest.mark.parametrize(
    "spec", [None, {}, {"factor": 3, "max": "10s"}, {"initial": None}, {"initial": "0s"}]
)
def test_from_spec_without_initial_means_default_limiter(spec: dict[str, Any] | None) -> None:
    assert RetryBackoff.from_spec(spec) is None


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"initial": "5"}, "'5'"),
        ({"initial": "-1s"}, "'-1s'"),
        ({"initial": "1s", "max": "forever"}, "'forever'"),
        ({"initial": "1s", "factor": "fast"}, "'fast'"),
        ({"initial": "1s", "factor": True}, "True"),
        ({"initial": "1s", "factor": "nan"}, "'nan'"),
    ],
)
def test_from_spec_rejects_bad_values_by_name(spec: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        RetryBackoff.from_spec(spec)


def test_delay_rejects_retry_zero() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        RetryBackoff(initial=1.0).delay(0)
