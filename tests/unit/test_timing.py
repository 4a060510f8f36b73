"""The timing config: one source of every wait and tolerance, and the bands that judge delays."""

from __future__ import annotations

import pytest

from conformance.timing import DOCUMENT_RESYNC, LONG_RESYNC, Timing, build, parse_seconds


def test_a_band_is_tight_before_the_delay_and_allows_the_reconcile_time_after_it() -> None:
    timing = Timing()
    low, high = timing.band(2.0)
    assert low == pytest.approx(2.0 - 0.1 - 0.04)
    assert high == pytest.approx(2.0 + 0.5 + 0.04)
    assert timing.band(2.0, latency=0.3) == pytest.approx((low, high + 0.3))


@pytest.mark.parametrize(
    ("measured", "expected", "latency", "fits"),
    [
        (1.03, 1.0, 0.0, True),
        (0.85, 1.0, 0.0, False),  # sooner than the delay: nobody may retry early
        (1.62, 1.0, 0.0, False),
        (1.62, 1.0, 0.35, True),  # a slower controller's own time is allowed for
        (3.0, 2.3, 0.03, False),  # 2300ms rounded up to whole seconds
        (2.0, 2.3, 0.03, False),  # ... or down
    ],
)
def test_fits_judges_a_measured_delay_against_its_band(
    measured: float, expected: float, latency: float, fits: bool
) -> None:
    assert Timing().fits(measured, expected, latency) is fits


def test_a_certifying_run_has_the_default_resync_and_the_long_phase_its_own() -> None:
    assert Timing().beyond_maximum() == []
    assert Timing(controller_resync=30).beyond_maximum() == [
        f"controller_resync=30 (must be {DOCUMENT_RESYNC:g})"
    ]
    long_phase = Timing(controller_resync=LONG_RESYNC)
    assert long_phase.beyond_maximum(long_phase=True) == []
    assert long_phase.beyond_maximum() != []
    assert Timing(late=2).beyond_maximum() == ["late=2 (maximum 1)"]


def test_overrides_come_from_the_file_then_the_command_line(tmp_path) -> None:
    file = tmp_path / "timing.yaml"
    file.write_text("reconcile: 20s\nquiet: 1m\n")
    built = build(["quiet=7", "controller_resync=30s"], file)
    assert (built.reconcile, built.quiet, built.controller_resync) == (20, 7, 30)
    with pytest.raises(ValueError, match="unknown timing field"):
        build(["tolerance=1"], None)
    assert parse_seconds("1m30s") == 90 and parse_seconds("500ms") == 0.5
