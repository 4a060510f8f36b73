"""Turns at a shared controller, between processes as xdist workers take them."""

from __future__ import annotations

import fcntl
import multiprocessing
import time
from pathlib import Path

from conformance.harness.fixtures.convoy import restart_with_resync
from conformance.harness.turns import ControllerTurns
from conformance.install.deployment import ContainerArgs
from conformance.polling import poll_until

DEADLINE = 20.0
# Spawned, not forked: a forked child would inherit the parent's locked file descriptions.
SPAWN = multiprocessing.get_context("spawn")


def take(directory: str, turn: str, log: multiprocessing.Queue) -> None:
    turns = ControllerTurns("run", Path(directory))
    with turns.stopping() if turn == "stopping" else turns.using():
        log.put((turn, "in"))
        log.put((turn, "out"))


def start(directory: Path, turn: str, log: multiprocessing.Queue) -> multiprocessing.Process:
    process = SPAWN.Process(target=take, args=(str(directory), turn, log))
    process.start()
    return process


def locked(path: Path) -> bool:
    """Whether another process holds `path` (a non-blocking try that gives back at once)."""
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def test_tests_that_use_the_controller_run_side_by_side(tmp_path: Path) -> None:
    log: multiprocessing.Queue = SPAWN.Queue()
    with ControllerTurns("run", tmp_path).using():
        other = start(tmp_path, "using", log)
        assert log.get(timeout=DEADLINE) == ("using", "in")
    other.join(DEADLINE)


def test_a_test_that_stops_the_controller_runs_alone_and_before_later_ones(
    tmp_path: Path,
) -> None:
    """While a test uses the controller, the stopper waits at the turnstile; a test that comes
    after it waits for the stopper, not only for the first test."""
    log: multiprocessing.Queue = SPAWN.Queue()
    turnstile = tmp_path / "convoy-controller-run.turnstile"
    with ControllerTurns("run", tmp_path).using():
        stopper = start(tmp_path, "stopping", log)
        poll_until(
            lambda: locked(turnstile),
            timeout=DEADLINE,
            step=0.05,
            failure=lambda: AssertionError("the stopper never reached the turnstile"),
        )
        later = start(tmp_path, "using", log)
        assert log.empty(), "nobody gets in while the first test uses the controller"
    events = [log.get(timeout=DEADLINE) for _ in range(4)]
    assert events == [("stopping", "in"), ("stopping", "out"), ("using", "in"), ("using", "out")]
    for process in (stopper, later):
        process.join(DEADLINE)


def join_session(
    directory: str, ready: multiprocessing.Event, leave: multiprocessing.Event
) -> None:
    """A worker in the run's session: it records a setup or teardown it was the one to do."""

    def note(line: str) -> None:
        with (Path(directory) / "record").open("a") as record:
            record.write(line + "\n")

    def setup() -> list[str]:
        note("setup")
        return ["--resync=2m"]

    def teardown(found: list[str]) -> None:
        note(f"teardown {found}")

    with ControllerTurns("run", Path(directory)).session(setup, teardown):
        ready.set()
        leave.wait(DEADLINE)


def test_a_change_for_the_run_is_made_by_the_first_worker_and_undone_by_the_last(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record"
    workers = []
    for _ in range(3):
        ready, leave = SPAWN.Event(), SPAWN.Event()
        process = SPAWN.Process(target=join_session, args=(str(tmp_path), ready, leave))
        process.start()
        assert ready.wait(DEADLINE)
        workers.append((process, leave))
    assert record.read_text() == "setup\n"
    for process, leave in workers:
        assert record.read_text() == "setup\n", "undone while a worker was still in the run"
        leave.set()
        process.join(DEADLINE)
    assert record.read_text() == "setup\nteardown ['--resync=2m']\n"


def record_restart(directory: str, at: float) -> None:
    ControllerTurns("run", Path(directory)).restarted(at)


def test_a_restart_one_worker_records_is_the_last_restart_every_worker_reads(
    tmp_path: Path,
) -> None:
    """Restart times are time.monotonic(), one clock for the machine's processes: the latest
    wins, whichever worker records it, and one recorded late changes nothing."""
    reader = ControllerTurns("run", tmp_path)
    assert reader.last_restart() == 0.0, "a restart before any was recorded"
    for at in (100.0, 250.0, 180.0):
        process = SPAWN.Process(target=record_restart, args=(str(tmp_path), at))
        process.start()
        process.join(DEADLINE)
    assert reader.last_restart() == 250.0


class RestartedDeployment:
    """A vendor's Deployment as the long phase restarts it, without a cluster."""

    started_at = 0.0

    def run_with_resync(self, seconds: float) -> ContainerArgs:
        self.started_at = time.monotonic()
        return ContainerArgs("controller", [f"--resync={seconds:g}s"])


def restart_for_the_long_phase(directory: str, started: multiprocessing.Queue) -> None:
    deployment, turns = RestartedDeployment(), ControllerTurns("run", Path(directory))
    with turns.session(lambda: restart_with_resync(deployment, turns, 3000), lambda _: None):
        started.put(deployment.started_at)


def test_the_long_phases_restart_is_the_last_restart_of_every_worker(tmp_path: Path) -> None:
    """The worker that restarts a vendor's Deployment with the long phase's --resync records
    it: the others' resync clocks would otherwise wait for a tick ~3000 s after no start."""
    started: multiprocessing.Queue = SPAWN.Queue()
    worker = SPAWN.Process(target=restart_for_the_long_phase, args=(str(tmp_path), started))
    worker.start()
    at = started.get(timeout=DEADLINE)
    worker.join(DEADLINE)
    assert at > 0.0
    assert ControllerTurns("run", tmp_path).last_restart() == at


def test_workers_share_their_resync_ticks_each_once(tmp_path: Path) -> None:
    first, second = ControllerTurns("run", tmp_path), ControllerTurns("run", tmp_path)
    assert first.share_ticks([100.5, 130.4]) == [100.5, 130.4]
    assert second.share_ticks([100.1]) == [100.1, 100.5, 130.4]
    assert first.share_ticks([100.5, 130.4, 160.2]) == [100.1, 100.5, 130.4, 160.2]
