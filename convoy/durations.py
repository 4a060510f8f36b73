"""Go / Kubernetes duration strings (metav1.Duration, time.ParseDuration and Duration.String)."""

from __future__ import annotations

import re
from decimal import Decimal

_NS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign, as Go accepts and prints
    "\u03bcs": 1_000,  # Greek mu, also accepted by Go
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_NS_PER_S = 1_000_000_000
_MAX_NS = 2**63 - 1  # Go's Duration is an int64 of nanoseconds

_UNITS = "|".join(sorted(map(re.escape, _NS_PER_UNIT), key=len, reverse=True))
_NUMBER = r"(\d+\.?\d*|\.\d+)"
_TERM = re.compile(rf"{_NUMBER}({_UNITS})", re.ASCII)
_WHOLE = re.compile(rf"(?:{_NUMBER}(?:{_UNITS}))+", re.ASCII)


def parse_duration(text: str) -> float:
    """Parse a duration like "300ms", "1.5s", "2m" or "1h30m" into seconds.

    Follows Go's time.ParseDuration (which metav1.Duration uses), except that signs are refused:
    no convoy duration may be negative. Sub-nanosecond digits are truncated, as in Go.
    """
    if text == "0":
        return 0.0
    if not isinstance(text, str) or not _WHOLE.fullmatch(text):
        raise ValueError(
            f"invalid duration {text!r}: expected a non-negative Go duration such as "
            '"300ms", "1.5s", "2m" or "1h30m" (units ns, us, ms, s, m, h)'
        )
    total = sum(int(Decimal(number) * _NS_PER_UNIT[unit]) for number, unit in _TERM.findall(text))
    if total > _MAX_NS:
        raise ValueError(f"invalid duration {text!r}: out of range (more than about 292 years)")
    return total / _NS_PER_S


def format_duration(seconds: float) -> str:
    """Format seconds as Go's Duration.String does: "300ms", "1.5s", "1h30m0s", "0s"."""
    if seconds < 0:
        raise ValueError(f"cannot format negative duration {seconds} s")
    ns = round(seconds * _NS_PER_S)
    if ns == 0:
        return "0s"
    if ns < _NS_PER_S:
        for unit in ("ms", "\u00b5s", "ns"):
            if ns >= _NS_PER_UNIT[unit]:
                return _decimal(ns, _NS_PER_UNIT[unit]) + unit
    hours, ns = divmod(ns, _NS_PER_UNIT["h"])
    minutes, ns = divmod(ns, _NS_PER_UNIT["m"])
    text = _decimal(ns, _NS_PER_S) + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text


def _decimal(value: int, unit: int) -> str:
    """value/unit as a decimal without trailing zeros (unit is a power of ten)."""
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
