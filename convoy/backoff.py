"""Retry delays: client-go's default item rate limiter and spec.syncPolicy.retryBackoff.

A limiter here is a pure function of the failure count: `limiter(n)` is the delay before retry n,
where n >= 1 is the number of consecutive failures of the item including the one just seen. The
counts themselves live in the work queue (one FailureCounter per queue), so swapping the formula
for a Release never loses its count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from convoy.durations import parse_duration

Limiter = Callable[[int], float]
"""Delay in seconds before retry n (n >= 1)."""

DEFAULT_BASE_NS = 5_000_000  # 5 ms
DEFAULT_MAX_S = 1000.0
_DEFAULT_MAX_NS = 1000 * 1_000_000_000
# 5 ms << 18 > 1000 s; anything at or past this exponent is capped (and never overflows).
_DEFAULT_CAP_EXPONENT = 18


def default_delay(failures: int) -> float:
    """client-go's ItemExponentialFailureRateLimiter(5ms, 1000s).When: 5 ms * 2**failures.

    `failures` counts the failures before this one (0 for the first retry), as client-go's
    exponent does. Computed in integer nanoseconds like Go, so the results are exact decimals.
    """
    if failures < 0:
        raise ValueError(f"failures must be >= 0, got {failures}")
    if failures >= _DEFAULT_CAP_EXPONENT:
        return DEFAULT_MAX_S
    return min(DEFAULT_BASE_NS << failures, _DEFAULT_MAX_NS) / 1_000_000_000


def default_limiter(retry: int) -> float:
    """The default rate limiter as a Limiter: delay before retry n is default_delay(n - 1)."""
    return default_delay(_check_retry(retry) - 1)


@dataclass(frozen=True)
class RetryBackoff:
    """spec.syncPolicy.retryBackoff: delay before retry n = initial * factor**(n-1), capped.

    `factor` and `max` hold what the spec says (None when unset); delay() applies the document's
    rules: a factor below 1 (unset included) means 2, an unset max means 1000 s.
    """

    initial: float
    factor: float | None = None
    max: float | None = None

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None) -> RetryBackoff | None:
        """Build from the retryBackoff object; None when initial is unset (use the default).

        Durations are Go duration strings. A zero duration counts as unset, as Go's omitempty
        would have it: initial "0s" falls back to the default limiter, max "0s" means 1000 s.
        """
        if not spec or spec.get("initial") is None:
            return None
        initial = parse_duration(spec["initial"])
        if initial == 0:
            return None
        max_ = spec.get("max")
        return cls(
            initial=initial,
            factor=_parse_factor(spec.get("factor")),
            max=None if max_ is None else parse_duration(max_) or None,
        )

    @property
    def effective_factor(self) -> float:
        return 2.0 if self.factor is None or self.factor < 1 else self.factor

    @property
    def effective_max(self) -> float:
        return DEFAULT_MAX_S if self.max is None else self.max

    def delay(self, retry: int) -> float:
        """Delay in seconds before retry number `retry` (>= 1). A Limiter."""
        exponent = _check_retry(retry) - 1
        cap = self.effective_max
        try:
            raw = self.initial * self.effective_factor**exponent
        except OverflowError:
            return cap
        return min(raw, cap)


def _check_retry(retry: int) -> int:
    if retry < 1:
        raise ValueError(f"retry number must be >= 1, got {retry}")
    return retry


def _parse_factor(value: object) -> float | None:
    """factor may arrive as a JSON number or a numeric string (API conventions avoid floats)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"invalid retryBackoff.factor {value!r}: expected a number such as 1.5")
    try:
        factor = float(value)
    except ValueError:
        raise ValueError(
            f"invalid retryBackoff.factor {value!r}: expected a number such as 1.5"
        ) from None
    if not math.isfinite(factor):
        raise ValueError(f"invalid retryBackoff.factor {value!r}: must be finite")
    return factor
