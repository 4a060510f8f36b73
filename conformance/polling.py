"""The one way the suite waits for something: poll with a deadline, never a bare sleep."""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


def _polls(seconds: float, step: float) -> Iterator[float]:
    """Yield the seconds left, every `step` seconds, the last time at the deadline (<= 0).

    The suite's one pause between looks: poll_until and quiet_period both step through it.
    """
    deadline = time.monotonic() + seconds
    while (remaining := deadline - time.monotonic()) > 0:
        yield remaining
        time.sleep(min(step, max(deadline - time.monotonic(), 0.0)))
    yield remaining


def poll_until(
    check: Callable[[], T | None],
    *,
    timeout: float,
    step: float,
    failure: Callable[[], Exception],
) -> T:
    """Call `check` every `step` seconds until it returns something truthy (never None, then),
    and return that.

    After `timeout` seconds (and one last check) raise `failure()`, built only then so its
    message can say what was seen last. `check` fails fast by raising (a child that died).
    """
    for _ in _polls(timeout, step):
        if result := check():
            return result
    raise failure()


def quiet_period(check: Callable[[], None], *, seconds: float, step: float) -> None:
    """A named quiet period: call `check` every `step` seconds, through to the end of
    `seconds`; `check` fails the period by raising."""
    for _ in _polls(seconds, step):
        check()


def wait_http_ok(
    url: str,
    *,
    alive: Callable[[], None],
    timeout: float,
    step: float,
    failure: Callable[[str], Exception],
    context: ssl.SSLContext | None = None,
    request_timeout: float = 5.0,
) -> None:
    """Poll `url` until it answers 2xx. `alive` raises when what serves it has died (fail
    fast); after `timeout` raise `failure(the last error seen)`."""
    last_error = "no answer yet"

    def answers() -> bool:
        nonlocal last_error
        alive()
        try:
            with urllib.request.urlopen(url, context=context, timeout=request_timeout):
                return True
        except (urllib.error.URLError, OSError) as error:
            last_error = str(error)
            return False

    poll_until(answers, timeout=timeout, step=step, failure=lambda: failure(last_error))
