"""What a timing test measured reaches the report: its YAML entry and a chart on the page."""

from __future__ import annotations

import re

import pytest
import yaml

from conformance.certification import charts, measurements
from conformance.timing import Timing

LADDER_TEST = """
import pytest
from conformance.certification import measurements
from conformance.timing import Timing

@pytest.mark.clause("BACK-1.formula")
def test_ladder():
    measurements.record("applies refused", Timing(), [1, 2, 4], [1.02, 2.9])

@pytest.mark.clause("SYNC-4.same-second")
def test_no_timing():
    pass
"""


def test_a_point_is_accepted_inside_its_band_only() -> None:
    timing = Timing()
    low, high = timing.band(2.0)
    measured = [2.0, low - 0.001, high + 0.001]
    inside, below, above, never = measurements.record("outside a test", timing, [2.0] * 4, measured)
    assert inside.ok and not below.ok and not above.ok
    assert never.measured is None and not never.ok  # a delay that never came
    assert len(measurements.record("extra", timing, [2.0], [2.0, 2.0])) == 1


def test_each_point_takes_the_controllers_own_time_given_for_it() -> None:
    """A gap in which the controller spent 0.4 s of its own is accepted 0.4 s later than one
    in which it spent none; one figure for all stretches every band alike."""
    timing = Timing()
    high = timing.band(1.0)[1]
    measured = [high + 0.3] * 2
    slow, quick = measurements.record("periods", timing, [1.0, 1.0], measured, [0.4, 0.0])
    assert slow.ok and not quick.ok
    assert slow.high == pytest.approx(high + 0.4)
    assert all(p.ok for p in measurements.record("periods", timing, [1.0] * 2, measured, 0.4))


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_report_carries_and_draws_what_a_test_measured(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(LADDER_TEST)
    pytester.runpytest_subprocess("--report-dir=out", "-p", "no:cacheprovider", *workers)
    out = pytester.path / "out"
    report = yaml.safe_load((out / "conformance-report.yaml").read_text())
    tests = {t["name"].split("::")[-1]: t for t in report["tests"]}
    [ladder] = tests["test_ladder"]["measurements"]
    assert ladder["what"] == "applies refused"
    assert [p["measured"] for p in ladder["points"]] == [1.02, 2.9, None]
    assert [p["ok"] for p in ladder["points"]] == [True, False, False]
    assert "measurements" not in tests["test_no_timing"]

    page = (out / "conformance-report.html").read_text()
    [section] = re.findall(r"<section class='timing-rule' id='chart-BACK-1'>.*?</section>", page)
    assert section.count("<svg") == 1 and "test_ladder" in section
    assert section.count("class='point ok'") == 1 and section.count("class='point off'") == 2
    assert "chart-SYNC-4" not in page  # no measurement, no chart


def test_a_ladder_across_three_decades_is_drawn_on_a_log_scale() -> None:
    timing = Timing()
    expected = [0.005 * 2**n for n in range(11)]
    [*_, last] = measurements.record("default limiter", timing, expected, expected)
    assert last.ok
    svg = charts.chart_svg(
        {
            "what": "default limiter",
            "points": [
                {**p.__dict__, "ok": p.ok}
                for p in measurements.record("", timing, expected, expected)
            ],
        }
    )
    labels = re.findall(r"text-anchor='end'>([^<]+)</text>", svg)
    assert {"10 ms", "100 ms", "1 s"} <= set(labels), labels
    assert svg.count("<circle") == len(expected)


def test_a_late_tick_is_judged_once_against_the_timers_schedule() -> None:
    ticks = [0.0, 30.0, 60.7, 90.0, 120.0]  # one reconcile 0.7 s late; the timer on time
    assert measurements.against_schedule(ticks, 30.0) == pytest.approx([30, 30, 30.7, 30, 30])


def test_a_wrong_period_adds_up_to_a_drift() -> None:
    ticks = [29.5 * k for k in range(6)]
    lateness = [g - 30.0 for g in measurements.against_schedule(ticks, 30.0)]
    assert max(lateness) == pytest.approx(2.5)
