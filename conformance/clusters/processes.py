"""Child processes that never outlive the test run and never fail silently."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

_PR_SET_PDEATHSIG = 1


class ChildDied(RuntimeError):
    """A managed child exited while it was needed; the message names it and shows its log."""


#: Signals a child must be able to receive whatever the starting thread blocked at that moment
#: (a signal mask is inherited; multiprocessing blocks SIGINT and SIGTERM while it starts
#: its resource tracker): SIGTERM is how a child is stopped, SIGINT how a run is interrupted.
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def die_with_parent() -> None:
    """Linux: the kernel kills the child when the process that started it dies (also SIGKILL);
    the stop signals are unblocked and at their defaults, as in a process a shell starts."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    unblock_stop_signals()


def unblock_stop_signals() -> None:
    """For a child between fork and exec: the stop signals unblocked and at their defaults."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


@dataclass
class ManagedProcess:
    """One child process with its log file; stopped with SIGTERM, then SIGKILL."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                preexec_fn=die_with_parent,
            )

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} was never started"
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def report(self) -> str:
        """Whether it runs (or how it ended), and the last lines of its log."""
        if self.popen is None:
            return f"{self.name}: never started"
        code = self.popen.poll()
        state = "running" if code is None else f"exited with code {code}"
        return (
            f"{self.name} (pid {self.pid}): {state}; last lines of {self.log_path}:\n{self.tail()}"
        )

    def check(self) -> None:
        """Raise ChildDied when the child has exited."""
        if self.popen is not None and self.popen.poll() is not None:
            raise ChildDied(self.report())

    def stop(self, grace: float = 10.0) -> None:
        if not self.alive():
            return
        assert self.popen is not None
        self.popen.terminate()
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def kill_now(process: ManagedProcess) -> None:
    """SIGKILL, for tests that check how a crash is reported."""
    os.kill(process.pid, signal.SIGKILL)
    assert process.popen is not None
    process.popen.wait()
