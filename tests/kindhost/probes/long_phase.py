"""Probes of the long phase's mechanics on a vendor's Deployment, run by
tests/kindhost/test_long_phase_on_a_vendor_deployment.py in a pytest of their own with the long
phase's options and `--dist each`, so that every xdist worker runs each of them.

Not a test module of the project (its name does not start with test_): only that test runs it.
"""

from __future__ import annotations

import os
import time

import pytest

from conformance.install.base import ControllerUnderTest
from conformance.observe.resync import ResyncClock
from conformance.timing import Timing

#: the monotonic time before the probes' pytest started (the same clock in every process)
NOT_BEFORE = "CONVOY_PROBE_NOT_BEFORE"
#: set: a probe fails on purpose, after which the Deployment must still be restored
FAIL = "CONVOY_PROBE_FAIL"
CONTAINER = "CONVOY_PROBE_CONTAINER"

pytestmark = pytest.mark.long


def test_this_workers_resync_clock_counts_from_the_long_phases_restart(
    controller: ControllerUnderTest, resync_clock: ResyncClock, timing: Timing
) -> None:
    started, now = resync_clock.controller_started_at, time.monotonic()
    not_before = float(os.environ[NOT_BEFORE])
    assert not_before < started < now, (
        f"this worker's resync clock counts from {started:.1f} (monotonic), not from the long "
        f"phase's restart, which came between {not_before:.1f} and now ({now:.1f})"
    )
    args = {c["name"]: c["args"] for c in controller.describe()["containers"]}
    resync = f"--resync={timing.long_resync:g}s"
    controller_args = args.pop(os.environ[CONTAINER])
    assert resync in controller_args, f"{resync} not in the controller's args {controller_args}"
    assert all(resync not in sidecar for sidecar in args.values()), f"a sidecar got it: {args}"
    print(f"resync clock from {started:.1f} (restart after {not_before:.1f}): {controller_args}")


@pytest.mark.skipif(FAIL not in os.environ, reason="fails only on purpose")
def test_a_failure_in_the_long_phase() -> None:
    pytest.fail("on purpose: the Deployment must be restored whatever failed")
