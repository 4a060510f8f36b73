"""A controller killed with SIGKILL loses no pending request, and handles a forced one once.

The reference controller runs as a host process on the local control plane; the tests kill it
with SIGKILL (no shutdown code runs) and start it again. What it must do after the restart is
read from the cluster only: the applied object, the status' handled times, and the witness'
record of apply attempts (a forced apply is an apply with no dry run before it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from conformance.clusters.processes import kill_now
from conformance.install.host import HostController
from conformance.observe.releases import App, Releases, applied_manual_app, kinds, parse_time
from conformance.polling import quiet_period
from conformance.timing import Timing
from convoy import observer
from tests.helpers import FORCE_HANDLED, HANDLED, wait_handled


@pytest.fixture
def killable(controller: HostController) -> Iterator[HostController]:
    """The session's controller, started again after the test whatever it left."""
    try:
        yield controller
    finally:
        if not (controller.process and controller.process.alive()):
            controller.start()


def crash(controller: HostController) -> None:
    assert controller.process is not None
    kill_now(controller.process)


def crash_while_applying(
    releases: Releases, app: App, controller: HostController, timing: Timing, *, force: bool
) -> datetime:
    """Request a sync; the witness holds its apply at a gate while the controller is killed.
    Returns the request's time."""
    gate = releases.recorder.gate(name=app.object_name, dry_run=False)
    written = parse_time(app.request_sync(at=app.next_pending_time(), force=force))
    gate.wait_entered(timing.reconcile)
    crash(controller)
    gate.open()
    return written


def test_a_sync_requested_while_the_controller_was_down_is_applied_after_its_restart(
    releases: Releases, killable: HostController
) -> None:
    app = applied_manual_app(releases)
    crash(killable)
    written = parse_time(app.request_sync(at=app.next_pending_time()))
    killable.start()
    app.wait_content("v2")
    wait_handled(app, HANDLED, written)


def test_a_sync_whose_apply_the_kill_cut_short_is_applied_after_the_restart(
    releases: Releases, killable: HostController, timing: Timing
) -> None:
    """The witness holds the apply at a gate; the controller dies while it waits there."""
    app = applied_manual_app(releases)
    written = crash_while_applying(releases, app, killable, timing, force=False)
    killable.start()
    app.wait_content("v2")
    wait_handled(app, HANDLED, written)


def test_a_forced_sync_cut_short_by_the_kill_is_handled_once_after_the_restart(
    releases: Releases, killable: HostController, timing: Timing
) -> None:
    app = applied_manual_app(releases)
    forced = crash_while_applying(releases, app, killable, timing, force=True)
    restarted = releases.recorder.mark()
    killable.start()
    wait_handled(app, FORCE_HANDLED, forced)
    assert kinds(app.attempts(since=restarted)) == ["apply"], "the forced apply after the restart"
    since = releases.recorder.mark()
    app.request_sync(at=app.next_pending_time())  # an ordinary request: the force is spent
    app.wait_attempts(since=since)
    assert kinds(app.attempts(since=since)) == ["dry-run", "apply"]


def test_a_forced_sync_handled_before_the_kill_is_not_handled_again(
    releases: Releases, killable: HostController, timing: Timing
) -> None:
    """The restarted controller's initial list reconciles the Release: nothing is pending, so
    nothing is applied, forced or not, over a quiet period after it is ready."""
    app = applied_manual_app(releases)
    forced = parse_time(app.request_sync(at=app.next_pending_time(), force=True))
    wait_handled(app, FORCE_HANDLED, forced)
    app.wait_content("v2")
    crash(killable)
    restarted = releases.recorder.mark()
    killable.start()
    written = releases.recorder.quiet(timing.quiet, since=restarted, name=app.object_name)
    assert written == [], f"written after the restart with nothing pending: {kinds(written)}"


def test_a_killed_controllers_temporary_files_go_when_the_suite_stops_it(
    controller: HostController,
) -> None:
    """A SIGKILLed process cannot remove its own temporary files (the discovery cache): the
    suite gives it a TMPDIR of its own and removes that."""
    log = controller.temp_dir.parent / "killed.log"
    # no subresource API: the session's controller serves it
    killed = HostController(controller.kubeconfig, log, resync=None, subresources=None).start()
    assert any(killed.temp_dir.iterdir()), "the controller keeps no temporary files in TMPDIR"
    crash(killed)
    killed.stop()
    assert not killed.temp_dir.exists()


#: CPU seconds the controller may spend in WATCH seconds with one manual Release whose drift
#: check cannot be made: an observation every interval costs milliseconds; one at once after
#: another takes a core.
WATCH, CPU_LIMIT = 4.0, 0.6


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/PID/stat (clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_drift_check_that_cannot_be_made_waits_its_interval(
    releases: Releases, killable: HostController
) -> None:
    """After a restart the applied render is not in memory; while the source still renders it
    the observer renders it again for the drift check. Once the source changes (manual mode:
    WaitingForSync, nothing applied), no check can be made until the next apply: each due one
    waits its interval, and the controller stays idle meanwhile."""
    app = releases.app("web", sync_policy={"interval": "1s"})
    app.request_sync()
    app.wait_applied("True", "Applied")
    killable.restart()
    # The restarted observer's first drift check renders the applied render again.
    quiet_period(lambda: None, seconds=observer.PERIOD + 1.0, step=observer.PERIOD + 1.0)
    app.set_content("v2")
    app.wait_applied("False", "WaitingForSync")
    assert killable.process is not None
    pid = killable.process.pid
    before = cpu_seconds(pid)
    quiet_period(lambda: None, seconds=WATCH, step=WATCH)  # a named quiet period: just watch
    used = cpu_seconds(pid) - before
    print(f"controller CPU in {WATCH:g} s of WaitingForSync after a restart: {used:.2f} s")
    assert used < CPU_LIMIT, f"the controller spent {used:.2f} s of CPU in {WATCH:g} s idle"
