"""/sync request times: RFC 3339 parsing and formatting, and the to-the-second comparison."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from convoy.synctime import (
    EXAMPLE,
    format_sync_time,
    is_pending,
    parse_status_time,
    parse_sync_time,
    truncate_to_second,
)

BASE = datetime(2026, 11, 29, 14, 5, 9, tzinfo=UTC)
PLUS2 = timezone(timedelta(hours=2))


def at(text: str | None) -> datetime | None:
    return None if text is None else parse_sync_time(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-29T14:05:09Z", BASE),
        ("2026-11-29T14:05:09+00:00", BASE),
        ("2026-11-29T16:05:09+02:00", BASE),
        ("2026-11-29T14:05:09.123456Z", BASE.replace(microsecond=123456)),
        ("2026-11-29T14:05:09.123456789Z", BASE.replace(microsecond=123456)),
        ("2026-11-29T09:05:09.5-05:00", BASE.replace(microsecond=500000)),
        ("2026-11-29T14:35:09.1+00:30", BASE.replace(microsecond=100000)),
    ],
)
def test_parse_to_utc(text: str, expected: datetime) -> None:
    parsed = parse_sync_time(text)
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "not an RFC 3339"),
        ("yesterday", "not an RFC 3339"),
        ("1796047509", "not an RFC 3339"),
        ("2026-11-29 14:05:09Z", "not an RFC 3339"),
        ("2026-11-29t14:05:09z", "not an RFC 3339"),
        (" 2026-11-29T14:05:09Z", "not an RFC 3339"),
        ("2026-11-29T14:05Z", "not an RFC 3339"),
        ("2026-11-29T14:05:09", "no time zone"),
        ("2026-13-01T00:00:00Z", "month"),
        ("2026-02-30T00:00:00Z", "day"),
        ("2026-11-29T24:00:00Z", "hour"),
        ("2026-11-29T14:05:60Z", "second"),
        ("2026-11-29T14:05:09+24:00", "offset"),
        ("0001-01-01T00:00:00+01:00", "out of range"),  # year 0 in UTC
        ("9999-12-31T23:59:59-01:00", "out of range"),  # year 10000 in UTC
    ],
)
def test_parse_errors_say_what_and_show_the_format(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(text))) as info:
        parse_sync_time(text)
    message = str(info.value)
    assert reason in message
    assert EXAMPLE in message


@pytest.mark.parametrize(
    ("dt", "precise", "text"),
    [
        (BASE, False, "2026-11-29T14:05:09Z"),
        (BASE.replace(microsecond=999999), False, "2026-11-29T14:05:09Z"),
        (datetime(2026, 11, 29, 16, 5, 9, 42, tzinfo=PLUS2), False, "2026-11-29T14:05:09Z"),
        (BASE, True, "2026-11-29T14:05:09.000000Z"),
        (datetime(2026, 11, 29, 16, 5, 9, 42, tzinfo=PLUS2), True, "2026-11-29T14:05:09.000042Z"),
        (datetime(5, 1, 1, 12, 0, 0, tzinfo=UTC), False, "0005-01-01T12:00:00Z"),  # 4 digits
    ],
)
def test_format_utc(dt: datetime, precise: bool, text: str) -> None:
    assert format_sync_time(dt, precise=precise) == text
    assert parse_sync_time(text) == (dt if precise else truncate_to_second(dt))


@pytest.mark.parametrize(
    "call",
    [
        lambda: format_sync_time(datetime(2026, 11, 29)),
        lambda: truncate_to_second(datetime(2026, 11, 29)),
        lambda: is_pending(datetime(2026, 11, 29), BASE),
    ],
)
def test_naive_datetimes_are_refused(call: Callable[[], object]) -> None:
    with pytest.raises(ValueError, match="no time zone"):
        call()


@pytest.mark.parametrize(
    ("requested", "last_handled", "pending"),
    [
        ("2026-11-29T14:05:09.900Z", "2026-11-29T14:05:09.100Z", False),  # same second
        ("2026-11-29T14:05:09.100Z", "2026-11-29T14:05:09.900Z", False),
        ("2026-11-29T14:05:09Z", "2026-11-29T14:05:09Z", False),
        ("2026-11-29T14:05:10Z", "2026-11-29T14:05:09.999Z", True),  # next second
        ("2026-11-29T14:05:10Z", "2026-11-29T14:05:09Z", True),
        ("2026-11-29T14:05:08Z", "2026-11-29T14:05:09Z", False),  # earlier
        ("2026-11-29T16:05:09.7+02:00", "2026-11-29T14:05:09Z", False),  # equal, other zones
        ("2026-11-29T09:05:10-05:00", "2026-11-29T16:05:09+02:00", True),
        ("2026-11-29T14:05:09Z", None, True),  # never handled
        (None, "2026-11-29T14:05:09Z", False),  # never requested
        (None, None, False),
    ],
)
def test_is_pending_to_the_second(
    requested: str | None, last_handled: str | None, pending: bool
) -> None:
    assert is_pending(at(requested), at(last_handled)) is pending


def test_is_pending_compares_aware_datetimes_in_utc() -> None:
    same_second = datetime(2026, 11, 29, 16, 5, 9, 999999, tzinfo=PLUS2)
    assert not is_pending(same_second, BASE)
    assert is_pending(same_second + timedelta(microseconds=1), BASE)


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29t14:05:09z",
        "2026-11-29T14:05:09z",
        "2026-11-29t16:05:09+02:00",
        "2026-11-29T14:05:09.000000001Z",
    ],
)
def test_a_status_time_is_read_as_the_api_server_stores_it(text: str) -> None:
    """RFC 3339 allows a lower-case t and z, and a status's date-time format lets the API
    server store them: the controller reads them (the annotation parser stays Go's)."""
    assert truncate_to_second(parse_status_time(text)) == BASE
    if text[10] == "t" or text.endswith("z"):
        with pytest.raises(ValueError):
            parse_sync_time(text)
