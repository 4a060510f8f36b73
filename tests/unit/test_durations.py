"""Go duration strings: time.ParseDuration and Duration.String."""

from __future__ import annotations

import re

import pytest

from convoy.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("0s", 0.0),
        ("300ms", 0.3),
        ("1.5s", 1.5),
        (".5s", 0.5),
        ("1.s", 1.0),
        ("2m", 120.0),
        ("1h30m", 5400.0),
        ("1h0m0s", 3600.0),
        ("2h45m30.5s", 9930.5),
        ("1500us", 0.0015),
        ("1\u00b5s", 1e-6),
        ("1\u03bcs", 1e-6),
        ("7ns", 7e-9),
        ("1.0000000009s", 1.0),  # Go truncates below a nanosecond
    ],
)
def test_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["", "5", "1.5", "-1s", "+1s", "1d", "1 s", " 1s", "s", ".s", "1sm", "1h-5m", "99999999h"],
)
def test_parse_rejects_by_name(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (7e-9, "7ns"),
        (1e-6, "1\u00b5s"),
        (0.0015, "1.5ms"),
        (0.3, "300ms"),
        (1.5, "1.5s"),
        (120, "2m0s"),
        (1000, "16m40s"),
        (3600, "1h0m0s"),
        (5400, "1h30m0s"),
        (9930.5, "2h45m30.5s"),
    ],
)
def test_format_like_go_and_round_trip(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


def test_format_rejects_negative() -> None:
    with pytest.raises(ValueError, match="negative"):
        format_duration(-1)
