"""What the suite needs of any controller under test, whoever installed it and however it runs:
a host process of one xdist worker's own (conformance.install.host), the reference Deployment
on kind (conformance.install.on_kind), a vendor's Deployment (conformance.install.deployment).
The fixtures, the suite and the model-based run see a controller only through this."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

from conformance.certification.verdicts import not_supported


class ControllerUnderTest(Protocol):
    #: time.monotonic() of the last start: a restart starts the resync period anew
    started_at: float

    @property
    def per_worker(self) -> bool:
        """This xdist worker runs it alone (the local provider's host process); otherwise the
        run's workers share it, and only a test that has it alone stops it
        (conformance.harness.turns)."""
        ...

    def start(self) -> object: ...

    def stop(self) -> None: ...

    def restart(self) -> None:
        """Stop and start again: what the restart rule needs."""
        ...

    def crash(self) -> None:
        """End it without a clean shutdown (SIGKILL), then start it again: nothing of its
        memory survives. A shared controller is crashed by nobody (not_supported)."""
        ...

    def check(self) -> None:
        """Raise when it does not run while it should, or the API server refused it."""
        ...

    def logs(self) -> str: ...

    def describe(self) -> dict[str, Any]:
        """What runs, as the report records it."""
        ...


@contextlib.contextmanager
def stopped(controller: ControllerUnderTest) -> Iterator[None]:
    """The controller stopped while the block runs, and started again however it ends."""
    controller.stop()
    try:
        yield
    finally:
        controller.start()


class SharedController:
    """What a controller the run's xdist workers share (a Deployment) has in common: it is
    restarted by stopping and starting it, and nobody crashes it."""

    @property
    def per_worker(self) -> bool:
        return False

    def stop(self) -> None:
        raise NotImplementedError

    def start(self) -> object:
        raise NotImplementedError

    def restart(self) -> None:
        self.stop()
        self.start()

    def crash(self) -> None:
        not_supported("the suite crashes only a controller of its xdist worker's own")
