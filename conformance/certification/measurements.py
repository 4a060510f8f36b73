"""What a timing test measured, against what the document prescribes, for the report.

A test judges each measured delay or period against the band `Timing.band` accepts around the
document's value; `record` keeps the same figures for the test's report entry (the YAML lists
them, the HTML page draws them). The plugin gives each test an empty record and attaches it to
the test's report as a user property, so that it travels from xdist workers too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from itertools import repeat, zip_longest
from typing import Any

from conformance.timing import Timing

#: The user property that carries a test's measurements (JSON).
PROPERTY = "convoy_measurements"

_recorded: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Point:
    """One delay or period: the document's value, the accepted band, what was measured (None:
    it never came)."""

    expected: float
    low: float
    high: float
    measured: float | None

    @property
    def ok(self) -> bool:
        return self.measured is not None and self.low <= self.measured <= self.high

    def describe(self) -> str:
        """What a failure message says of it: measured, expected, and the accepted band."""
        measured = "nothing" if self.measured is None else f"{self.measured:.3f} s"
        return (
            f"{measured} measured for {self.expected:g} s "
            f"(accepted {self.low:.3f}..{self.high:.3f} s)"
        )


def record(
    what: str,
    timing: Timing,
    expected: Sequence[float],
    measured: Sequence[float],
    latency: float | Sequence[float] = 0.0,
) -> list[Point]:
    """Keep `measured` against `expected` (pairwise; a measured value missing at the end is a
    delay that never came) for the running test's report; return the points. `latency` is
    the controller's own time in each (one for all, or one per measured value)."""
    latencies = repeat(latency) if isinstance(latency, float | int) else iter(latency)
    points = [
        Point(want, *timing.band(want, next(latencies, 0.0)), got)
        for want, got in zip_longest(expected, measured)
        if want is not None
    ]
    if _recorded is not None:
        entry = {"what": what, "unit": "s", "points": [_point(p) for p in points]}
        _recorded.append(entry)
    return points


def against_schedule(times: Sequence[float], period: float) -> list[float]:
    """The gaps of a periodic timer's events as a timer keeps them: each event's lateness
    against the schedule of the least-delayed one (`period` apart), plus `period`. A late
    event shortens the gap after it, but not the timer's schedule: so each event is judged
    once, and a wrong period by the drift it adds up to."""
    offsets = [at - k * period for k, at in enumerate(times)]
    phase = min(offsets, default=0.0)
    return [period + offset - phase for offset in offsets]


def _point(point: Point) -> dict[str, Any]:
    rounded = {k: None if v is None else round(v, 4) for k, v in asdict(point).items()}
    return {**rounded, "ok": point.ok}


@contextmanager
def recording() -> Iterator[list[dict[str, Any]]]:
    """Collect what `record` keeps while the block runs (one test)."""
    global _recorded
    _recorded = []
    try:
        yield _recorded
    finally:
        _recorded = None


def as_property(recorded: list[dict[str, Any]]) -> tuple[str, str]:
    return PROPERTY, json.dumps(recorded)


def from_properties(properties: Sequence[tuple[str, object]]) -> list[dict[str, Any]]:
    found = dict(properties).get(PROPERTY)
    return json.loads(str(found)) if found else []
