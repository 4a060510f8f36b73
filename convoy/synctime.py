"""Times of /sync requests and the to-the-second "pending" comparison of the sync policy.

The annotation convoy.kumodo.io/sync-requested-at and status.lastHandledSyncAt are RFC 3339 times
as Kubernetes writes them (metav1.Time, which parses with Go's time.RFC3339 layout).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

EXAMPLE = "2026-11-29T14:05:09Z"

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})?",
    re.ASCII,
)
#: RFC 3339 as its section 5.6 allows and an OpenAPI `date-time` (a status field's format)
#: accepts: "T" and "Z" in either case.
_RFC3339_ANY_CASE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})?",
    re.ASCII,
)


def parse_sync_time(text: str) -> datetime:
    """Parse an RFC 3339 time ("Z" or a numeric offset, fractional seconds optional) to UTC.

    Strict like Go's time.Parse(time.RFC3339): an upper-case "T", no surrounding spaces, an offset
    required. Digits beyond microseconds are truncated (they cannot matter to the second).
    """
    return _parse(text, _RFC3339)


def parse_status_time(text: str) -> datetime:
    """A time of the Release's status (lastHandledSyncAt, rollout.startedAt, ...): any value
    the CRD's `date-time` format lets the API server store, which RFC 3339 allows in either
    case ("...t10:00:00.5z"); the controller writes them as format_sync_time does."""
    return _parse(text, _RFC3339_ANY_CASE)


def _parse(text: str, layout: re.Pattern[str]) -> datetime:
    match = layout.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise _invalid(text, "not an RFC 3339 date and time")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    if offset is None:
        raise _invalid(text, "no time zone; end it with Z or an offset such as +02:00")
    try:
        tz = _offset(offset)
        micro = int((fraction or "0")[:6].ljust(6, "0"))
        parsed = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tz
        )
        in_utc = parsed.astimezone(UTC)
    except (ValueError, OverflowError) as err:  # Overflow: outside years 1-9999 in UTC
        raise _invalid(text, str(err)) from None
    return in_utc


def format_sync_time(dt: datetime, precise: bool = False) -> str:
    """RFC 3339 in UTC with "Z": to the second like metav1.Time, or with microseconds if precise."""
    utc = _utc(dt)
    # The year by hand: strftime's %Y does not pad years before 1000 to four digits on glibc,
    # and a date-time the schema refuses would fail the whole status write.
    layout = "-%m-%dT%H:%M:%S.%fZ" if precise else "-%m-%dT%H:%M:%SZ"
    return f"{utc.year:04d}{utc.strftime(layout)}"


def truncate_to_second(dt: datetime) -> datetime:
    """Drop the sub-second part (in UTC), as a metav1.Time round trip does."""
    return _utc(dt).replace(microsecond=0)


def is_pending(requested: datetime | None, last_handled: datetime | None) -> bool:
    """Is a manual-mode /sync request pending? Requested later than last handled, to the second."""
    if requested is None:
        return False
    if last_handled is None:
        return True
    return truncate_to_second(requested) > truncate_to_second(last_handled)


def _utc(dt: datetime) -> datetime:
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"naive datetime {dt.isoformat()} has no time zone; sync times are UTC")
    return dt.astimezone(UTC)


def _offset(text: str) -> timezone:
    if text in ("Z", "z"):
        return UTC
    hours, minutes = int(text[1:3]), int(text[4:6])
    if hours > 23 or minutes > 59:
        raise ValueError(f"time zone offset {text} out of range")
    sign = -1 if text[0] == "-" else 1
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _invalid(text: object, reason: str) -> ValueError:
    return ValueError(
        f"invalid sync time {text!r}: {reason}; expected RFC 3339 such as {EXAMPLE!r}"
    )
