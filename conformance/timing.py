"""Every timeout and tolerance of the suite, in one place (like Gateway API's TimeoutConfig).

Each field is a named wait. Defaults suit a controller with its default flags; any field can be
overridden with `--timing NAME=SECONDS` (repeatable) or `--timing-file FILE` (YAML mapping).
A value above its certifying maximum makes the run non-certifying: generous waits could hide a
slow controller.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


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


def _field(default: float, maximum: float, help: str) -> float:
    return field(default=default, metadata={"maximum": maximum, "help": help})


@dataclass(frozen=True)
class Timing:
    reconcile: float = _field(
        15.0, 30.0, "from an event (create, annotation, spec change) to its visible effect"
    )
    quiet: float = _field(
        5.0,
        60.0,
        "quiet period of a 'nothing happens' check (stretched to cover the periods "
        "the check is about)",
    )
    tolerance: float = _field(1.0, 2.0, "absolute slack on a measured period or delay, in seconds")
    tolerance_ratio: float = _field(0.2, 0.25, "relative slack on a measured period or delay")
    controller_resync: float = _field(
        120.0,
        120.0,
        "not a wait: the --resync period the controller under test runs with "
        "(the document's default, 2 minutes, in a certifying run)",
    )

    def quiet_for(self, *periods: float) -> float:
        """A quiet period long enough to see each of `periods` pass three times."""
        return max([self.quiet, *(3 * period for period in periods)])

    def slack(self, expected: float) -> float:
        """How far a measured `expected` seconds may stray."""
        return self.tolerance + self.tolerance_ratio * expected

    def beyond_maximum(self) -> list[str]:
        """Fields set above their certifying maximum (resync must equal the default)."""
        return [
            f"{f.name}={getattr(self, f.name):g} (maximum {f.metadata['maximum']:g})"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) > f.metadata["maximum"]
            or (f.name == "controller_resync" and getattr(self, f.name) != f.default)
        ]

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
