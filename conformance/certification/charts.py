"""The report's charts: each measured delay or period against the document's value and the band
the suite accepts, as inline SVG (no script, no network: the page stays one file).

One chart per measurement (a backoff ladder, the gaps of a period): a column per retry or gap,
the accepted band as a bar, the document's value as a line across it, what was measured as a
dot, green inside the band, red outside; a red square at the top of a column that never came.
A ladder that spans more than a factor of 20 is drawn on a logarithmic scale.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from typing import Any

WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 36
LOG_ABOVE = 20.0
COLOURS = {
    "plot": "#f7faff",
    "band": "#cfe3fa",
    "expected": "#0a4f9e",
    "ok": "#1a7f37",
    "off": "#cf222e",
}


def chart_svg(measurement: dict[str, Any]) -> str:
    points = measurement["points"]
    scale = _scale(points)
    slot = (WIDTH - LEFT - RIGHT) / max(len(points), 1)
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='chart' width='{WIDTH}' "
        f"height='{HEIGHT}' viewBox='0 0 {WIDTH} {HEIGHT}' role='img' "
        f"aria-label='{html.escape(measurement['what'], quote=True)}'>",
        f"<text x='{LEFT}' y='16' font-size='13' font-weight='bold'>"
        f"{html.escape(measurement['what'])}</text>",
        *_axes(scale, len(points), slot),
    ]
    for index, point in enumerate(points):
        parts += _column(point, LEFT + slot * (index + 0.5), slot, scale, index + 1)
    parts.append("</svg>")
    return "".join(parts)


def legend_svg() -> str:
    items = [
        ("band", "accepted band", "rect"),
        ("expected", "the document's value", "line"),
        ("ok", "measured, accepted", "circle"),
        ("off", "measured, refused or missing", "circle"),
    ]
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' class='legend' width='{WIDTH}' height='24'>"]
    for number, (key, label, shape) in enumerate(items):
        x = 8 + number * 160
        colour = COLOURS[key]
        parts.append(
            {
                "rect": f"<rect x='{x}' y='6' width='14' height='12' fill='{colour}'/>",
                "line": f"<line x1='{x}' x2='{x + 14}' y1='12' y2='12' stroke='{colour}' "
                "stroke-width='2'/>",
                "circle": f"<circle cx='{x + 7}' cy='12' r='4' fill='{colour}'/>",
            }[shape]
        )
        parts.append(f"<text x='{x + 20}' y='16' font-size='11'>{label}</text>")
    parts.append("</svg>")
    return "".join(parts)


Scale = Callable[[float], float]


def _scale(points: list[dict[str, Any]]) -> tuple[Scale, list[float]]:
    """y of a value in seconds, and the values to label on the axis."""
    values = [v for p in points for v in (p["low"], p["high"], p["measured"]) if v is not None]
    positive = [v for v in values if v > 0] or [1.0]
    low, high = min(positive), max(positive)
    bottom, top = HEIGHT - BOTTOM, TOP
    if high / low > LOG_ABOVE:
        floor, ceiling = math.log10(low / 1.5), math.log10(high * 1.5)

        def log_y(v: float) -> float:
            share = (math.log10(max(v, low / 1.5)) - floor) / (ceiling - floor)
            return bottom - share * (bottom - top)

        ticks = [10.0**e for e in range(math.ceil(floor), math.floor(ceiling) + 1)]
        return log_y, ticks
    ceiling = high * 1.1

    def linear_y(v: float) -> float:
        return bottom - max(v, 0.0) / ceiling * (bottom - top)

    step = _round_step(ceiling / 4)
    return linear_y, [step * n for n in range(int(ceiling / step) + 1)]


def _round_step(raw: float) -> float:
    """The smallest of 1, 2 and 5 times a power of ten that is at least `raw`."""
    power = 10.0 ** math.floor(math.log10(raw))
    return next(power * m for m in (1, 2, 5, 10) if power * m >= raw)


def _axes(scale: tuple[Scale, list[float]], count: int, slot: float) -> list[str]:
    y, ticks = scale
    bottom = HEIGHT - BOTTOM
    parts = [
        f"<rect class='plot' x='{LEFT}' y='{TOP}' width='{WIDTH - LEFT - RIGHT}' "
        f"height='{bottom - TOP}' fill='{COLOURS['plot']}'/>",
        f"<line x1='{LEFT}' x2='{LEFT}' y1='{TOP}' y2='{bottom}' stroke='#57606a'/>",
        f"<line x1='{LEFT}' x2='{WIDTH - RIGHT}' y1='{bottom}' y2='{bottom}' stroke='#57606a'/>",
        f"<text x='{LEFT + (WIDTH - LEFT - RIGHT) / 2}' y='{HEIGHT - 4}' font-size='11' "
        "text-anchor='middle'>retry or period, in order</text>",
    ]
    for tick in ticks:
        parts.append(
            f"<text x='{LEFT - 6}' y='{y(tick) + 4:.1f}' font-size='10' text-anchor='end'>"
            f"{_seconds(tick)}</text>"
            f"<line x1='{LEFT - 3}' x2='{WIDTH - RIGHT}' y1='{y(tick):.1f}' y2='{y(tick):.1f}' "
            "stroke='#eaeef2'/>"
        )
    step = max(1, math.ceil(count / 20))
    for number in range(1, count + 1, step):
        x = LEFT + slot * (number - 0.5)
        parts.append(
            f"<text x='{x:.1f}' y='{bottom + 14}' font-size='10' text-anchor='middle'>"
            f"{number}</text>"
        )
    return parts


def _column(
    point: dict[str, Any], x: float, slot: float, scale: tuple[Scale, list[float]], number: int
) -> list[str]:
    y, _ = scale
    width = max(min(slot * 0.6, 40.0), 3.0)
    measured = point["measured"]
    said = "missing" if measured is None else _seconds(measured)
    tip = (
        f"{number}: expected {_seconds(point['expected'])}, accepted "
        f"{_seconds(point['low'])}..{_seconds(point['high'])}, measured {said}"
    )
    parts = [
        f"<g class='point {'ok' if point['ok'] else 'off'}'><title>{html.escape(tip)}</title>",
        f"<rect x='{x - width / 2:.1f}' y='{y(point['high']):.1f}' width='{width:.1f}' "
        f"height='{max(y(point['low']) - y(point['high']), 1.0):.1f}' fill='{COLOURS['band']}'/>",
        f"<line x1='{x - width / 2:.1f}' x2='{x + width / 2:.1f}' y1='{y(point['expected']):.1f}' "
        f"y2='{y(point['expected']):.1f}' stroke='{COLOURS['expected']}' stroke-width='2'/>",
    ]
    if measured is None:
        parts.append(  # a red square at the top of the column: never came
            f"<rect x='{x - 4:.1f}' y='{TOP + 2}' width='8' height='8' fill='{COLOURS['off']}'/>"
        )
    else:
        colour = COLOURS["ok" if point["ok"] else "off"]
        parts.append(f"<circle cx='{x:.1f}' cy='{y(measured):.1f}' r='4' fill='{colour}'/>")
    parts.append("</g>")
    return parts


def _seconds(value: float) -> str:
    if value == 0:
        return "0"
    if value < 1:
        return f"{value * 1000:.3g} ms"
    return f"{value:.3g} s"
