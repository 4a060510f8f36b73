"""Every timeout and tolerance of the suite, in one place (like Gateway API's TimeoutConfig).

Each field is a named wait. Defaults suit a controller with its default flags; any field can be
overridden with `--timing NAME=SECONDS` (repeatable) or `--timing-file FILE` (YAML mapping).
A value above its certifying maximum makes the run non-certifying: generous waits could hide a
slow controller.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
#: The long phase's resync: above the default limiter's whole ladder to its 1000 s cap
#: (about 2,311 s) with its slack and the guards of a resync-free slot.
LONG_RESYNC = 3000.0
#: The document's default resync period (flag --resync).
DOCUMENT_RESYNC = 120.0
#: How often the observer assesses health, as the API reference says ("every 2 seconds"): a
#: quiet period about what it would send waits a few of these.
OBSERVER_PERIOD = 2.0
#: A lifecycle hook batch not Healthy this long after its first apply fails (HookFailed), as the
#: API reference says; the reference schedules a reconcile at that deadline, which the document
#: leaves open.
HOOK_BATCH_TIMEOUT = 60.0
#: pytest-timeout's limit on a test's body where neither --timeout, PYTEST_TIMEOUT nor an ini
#: file sets one (the installed kit has no ini): long enough for the slowest test of a
#: development run, which marks its own where it needs more.
TEST_TIMEOUT = 600.0


def parse_seconds(value: object) -> float:
    """Seconds from a number, or from a duration such as "90s", "2m", "1m30s", "500ms"."""
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{value!r} is not a number of seconds or a duration such as 2m or 90s")
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def gaps_between(times: Iterable[float]) -> list[float]:
    """Seconds from each of `times` to the next: the periods and delays a test measures."""
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def _field(default: float, maximum: float, help: str) -> float:
    return field(default=default, metadata={"maximum": maximum, "help": help})


@dataclass(frozen=True)
class Timing:
    reconcile: float = _field(
        15.0, 30.0, "from an event (create, annotation, spec change) to its visible effect"
    )
    takeover: float = _field(
        25.0,
        60.0,
        "from a controller's restart (its pods ready, or its process started) to its first "
        "reconcile: a replica elected on a Lease waits for its predecessor's to expire "
        "(client-go's default lease duration, 15 s from when it first sees it, then a "
        "jittered retry period of up to 4.4 s)",
    )
    quiet: float = _field(
        5.0,
        60.0,
        "quiet period of a 'nothing happens' check (stretched to cover the periods "
        "the check is about)",
    )
    early: float = _field(
        0.1,
        0.25,
        "how much sooner than the document's delay or period a measured one may come, in "
        "seconds (timer and API latency jitter; nothing may retry before its delay)",
    )
    late: float = _field(
        0.5,
        1.0,
        "how much later than the document's delay or period a measured one may come, in "
        "seconds, beyond the controller's own time in it (measured in each test; per gap where "
        "the witness sees each reconcile)",
    )
    ratio: float = _field(0.02, 0.05, "relative slack on a measured delay or period, on both sides")
    stall: float = _field(
        0.5,
        1.0,
        "how much later still one period of a measured series may come, in seconds, where the "
        "series' sum is held to `late`: a loaded machine stalls a reconcile, or the observer on "
        "the same Release, unseen by the witness (0.54 s and 0.60 s measured in whole-suite "
        "runs); a period off shows in the sum",
    )
    settle: float = _field(
        1.0,
        5.0,
        "how long the controller must leave a namespace alone before a test counts it settled",
    )
    controller_resync: float = _field(
        DOCUMENT_RESYNC,
        DOCUMENT_RESYNC,
        "not a wait: the --resync period the controller under test runs with "
        "(the document's default, 2 minutes, in a certifying run)",
    )
    long_resync: float = _field(
        LONG_RESYNC,
        LONG_RESYNC,
        "not a wait: the --resync period of the long phase of a certifying run, longer than "
        "the longest backoff ladder the suite climbs",
    )

    def quiet_for(self, *periods: float) -> float:
        """A quiet period long enough to see each of `periods` pass three times."""
        return max([self.quiet, *(3 * period for period in periods)])

    def room(self, reconciles: int) -> float:
        """What a resync-free slot leaves for the own time of `reconciles` reconciles, beyond
        the slack of its periods: a slot too short lets a tick's burst delay the measurement
        (the combined variant's reconciles took up to 1 s each on a loaded machine)."""
        return 2 * self.late * reconciles

    def slack(self, expected: float, latency: float = 0.0) -> float:
        """How much later than `expected` seconds a measured delay or period may come: timer
        and load jitter, and `latency`, the controller's own reconcile time as measured."""
        return self.late + latency + self.ratio * expected

    def lead(self, expected: float) -> float:
        """How much sooner than `expected` seconds a measured delay or period may come."""
        return self.early + self.ratio * expected

    def band(self, expected: float, latency: float = 0.0) -> tuple[float, float]:
        """The measured values accepted for a delay or period of `expected` seconds."""
        return expected - self.lead(expected), expected + self.slack(expected, latency)

    def fits(self, measured: float, expected: float, latency: float = 0.0) -> bool:
        low, high = self.band(expected, latency)
        return low <= measured <= high

    def band_text(self, expected: float, latency: float = 0.0) -> str:
        low, high = self.band(expected, latency)
        return f"{low:.3f}..{high:.3f} s"

    def beyond_maximum(self, *, long_phase: bool = False) -> list[str]:
        """Fields set above their certifying maximum. The controller's resync must be the
        document's default, or in the long phase of a certifying run, long_resync."""
        resync = self.long_resync if long_phase else type(self).controller_resync
        wrong = [
            f"{f.name}={getattr(self, f.name):g} (maximum {f.metadata['maximum']:g})"
            for f in dataclasses.fields(self)
            if f.name != "controller_resync" and getattr(self, f.name) > f.metadata["maximum"]
        ]
        if self.controller_resync != resync:
            wrong.append(f"controller_resync={self.controller_resync:g} (must be {resync:g})")
        return wrong

    def rows(self) -> list[tuple[str, float, str]]:
        return [
            (f.name, getattr(self, f.name), f.metadata["help"]) for f in dataclasses.fields(self)
        ]


def build(overrides: list[str], file: Path | None) -> Timing:
    """Defaults, then the options file, then each `NAME=SECONDS` from the command line."""
    values: dict[str, float] = {}
    if file:
        values.update({k: parse_seconds(v) for k, v in yaml.safe_load(file.read_text()).items()})
    for item in overrides:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--timing {item!r}: expected NAME=SECONDS")
        values[name.strip()] = parse_seconds(value)
    known = {f.name for f in dataclasses.fields(Timing)}
    unknown = sorted(values.keys() - known)
    if unknown:
        raise ValueError(f"unknown timing field(s) {unknown}; known: {sorted(known)}")
    return Timing(**values)
