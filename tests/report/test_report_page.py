"""The report page as a person sees it: rendered by a real headless browser (Debian's
Chromium), its screenshot checked for structure, not pixels: the BACK-1 chart is on the page,
with one accepted band per retry, a green dot for each delay inside its band and a red mark for
each one outside or missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from conformance.certification.charts import COLOURS

#: A BACK-1 ladder of four retries: two in their bands, one late, one that never came.
LADDER_TEST = """
import pytest
from conformance.certification import measurements
from conformance.timing import Timing

@pytest.mark.clause("BACK-1.formula")
def test_ladder():
    measurements.record("applies refused", Timing(), [1, 2, 4, 8], [1.02, 2.01, 4.9])
"""
#: Tall enough for the whole page (every rule is listed above the charts).
WINDOW = (1100, 20000)


#: A measured dot's diameter, and then some.
DOT = 12
#: A grid line across a plot area is at most this many rows.
GRID_LINE = 3


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium not found: `make browser-packages` installs Debian's")
    return found


def screenshot(chromium: str, page: Path, out: Path) -> Image.Image:
    argv = [
        chromium,
        "--headless",
        "--no-sandbox",  # root in CI's container; the page is the suite's own file
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--screenshot={out}",
        page.as_uri(),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and out.exists(), proc.stderr[-2000:]
    return Image.open(out).convert("RGB")


def chart_boxes(image: Image.Image) -> list[tuple[int, int]]:
    """The row ranges of the charts' plot areas (their background colour, which a grid line
    crosses for a row or two)."""
    plot, pixels = rgb(COLOURS["plot"]), image.load()
    rows = [y for y in range(image.height) if any(pixels[x, y] == plot for x in range(0, 700, 2))]
    boxes: list[list[int]] = []
    for y in rows:
        if boxes and y - boxes[-1][1] <= GRID_LINE:
            boxes[-1][1] = y
        else:
            boxes.append([y, y])
    return [(top, bottom) for top, bottom in boxes]


def columns_of(image: Image.Image, colour: tuple[int, int, int], top: int, bottom: int) -> int:
    """How many columns of the chart hold `colour` between rows top and bottom (a dot on a
    line splits it; columns are far wider apart than a dot)."""
    pixels = image.load()
    xs = [
        x for x in range(image.width) if any(pixels[x, y] == colour for y in range(top, bottom + 1))
    ]
    return sum(1 for i, x in enumerate(xs) if i == 0 or x - xs[i - 1] > DOT)


def test_the_page_draws_the_back_1_ladder_against_its_bands(
    pytester: pytest.Pytester, chromium: str, tmp_path: Path
) -> None:
    pytester.makepyfile(LADDER_TEST)
    pytester.runpytest_subprocess("--report-dir=out", "-p", "no:cacheprovider")
    page = pytester.path / "out" / "conformance-report.html"
    image = screenshot(chromium, page, tmp_path / "page.png")
    boxes = chart_boxes(image)
    print(f"screenshot {image.size}: charts at rows {boxes}")
    [(top, bottom)] = boxes  # one chart: the only measurement
    assert bottom - top > 100, "the plot area is drawn at its size"
    assert columns_of(image, rgb(COLOURS["band"]), top, bottom) == 4
    assert columns_of(image, rgb(COLOURS["expected"]), top, bottom) == 4
    assert columns_of(image, rgb(COLOURS["ok"]), top, bottom) == 2
    assert columns_of(image, rgb(COLOURS["off"]), top, bottom) == 2
