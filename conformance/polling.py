"""The one way the suite waits for something: poll with a deadline, never a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll_until(
    check: Callable[[], T],
    *,
    timeout: float,
    step: float,
    failure: Callable[[], Exception],
) -> T:
    """Call `check` every `step` seconds until it returns something truthy, and return that.

    After `timeout` seconds (and one last check) raise `failure()`, built only then so its
    message can say what was seen last. `check` fails fast by raising (a child that died).
    """
    deadline = time.monotonic() + timeout
    while True:
        if result := check():
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise failure()
        time.sleep(min(step, remaining))
