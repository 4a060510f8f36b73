"""Benign variants: differences the document allows. Each must pass the whole suite; one that
fails is a suite that fails conforming controllers."""

from __future__ import annotations

import threading
import time
from typing import Any

from convoy import apply, controller, observer, reconciler
from convoy.api import Reason
from convoy.backoff import default_limiter
from convoy.clock import Clock, RealClock
from convoy.workqueue import WorkQueue
from mutants import COMBINED, parts_of_combined, variant
from mutants.patching import wrap

Obj = dict[str, Any]


@variant("one-worker")
def one_worker() -> None:
    """One reconcile worker instead of two."""

    @wrap(controller.Controller, "__init__")
    def init(original, self, api_client, *, workers: int, **kwargs) -> None:
        original(self, api_client, workers=1, **kwargs)


@variant("slower-reconcile")
def slower_reconcile() -> None:
    """Every reconcile takes 300 ms longer (a slow render, say), before it applies."""

    @wrap(reconciler.Reconciler, "reconcile")
    def reconcile(original, self, release: Obj):
        time.sleep(0.3)
        return original(self, release)


@variant("other-field-manager")
def other_field_manager() -> None:
    """Renders are applied with the field manager "convoy-variant" instead of "convoy"."""
    apply.FIELD_MANAGER = "convoy-variant"


@variant("other-messages")
def other_messages() -> None:
    """Condition messages in other words, where neither the document nor the API reference
    dictates them: the in-sync message still says "in sync" and that apply waits for /sync,
    and Unappliable still names the object and the API server's answer."""

    @wrap(reconciler, "set_condition")
    def set_condition(original, status: Obj, release: Obj, outcome, now) -> None:
        message = outcome.message
        if "in sync" in message:
            message = "This Release is in sync; the next apply waits for a /sync request."
        elif outcome.reason is not Reason.UNAPPLIABLE:
            message = f"({outcome.reason.value}) as reported by the variant controller"
        original(status, release, reconciler.Outcome(outcome.applied, outcome.reason, message), now)


@variant("extra-labels")
def extra_labels() -> None:
    """Every applied object carries an extra label besides the release label."""

    @wrap(apply, "_server_side_apply")
    def server_side_apply(original, resource, obj: Obj, dry_run: str | None = None) -> None:
        metadata = dict(obj["metadata"])
        metadata["labels"] = {**(metadata.get("labels") or {}), "variant.example.com/extra": "1"}
        original(resource, {**obj, "metadata": metadata}, dry_run)


@variant("slower-observer")
def slower_observer() -> None:
    """The observer assesses health every 3 seconds instead of 2."""
    observer.PERIOD = 3.0


#: client-go's DefaultControllerRateLimiter bucket: 10 tokens a second, a burst of 100.
BUCKET_RATE, BUCKET_BURST = 10.0, 100


class TokenBucket:
    """golang.org/x/time/rate as client-go's BucketRateLimiter uses it: each delay asked for
    takes a token, and waits for one when none is left."""

    def __init__(self, clock: Clock) -> None:
        self._clock, self._tokens, self._last = clock, float(BUCKET_BURST), clock.now()
        self._lock = threading.Lock()

    def delay(self) -> float:
        with self._lock:
            now = self._clock.now()
            refilled = self._tokens + (now - self._last) * BUCKET_RATE
            self._tokens, self._last = min(BUCKET_BURST, refilled) - 1, now
            return max(0.0, -self._tokens / BUCKET_RATE)


@variant("controller-runtime-rate-limiter")
def controller_runtime_rate_limiter() -> None:
    """The queue's default limiter is controller-runtime's: the larger of the per-Release
    exponential one (5 ms doubling to 1000 s) and a token bucket all Releases share (10 a
    second, a burst of 100); a Release's retryBackoff passes it by, as RequeueAfter does."""

    @wrap(WorkQueue, "__init__")
    def init(original, self, clock: Clock | None = None, limiter=default_limiter) -> None:
        bucket = TokenBucket(clock or RealClock())
        original(self, clock, lambda n: max(limiter(n), bucket.delay()))


@variant(COMBINED)
def combined() -> None:
    """Every other benign variant at once."""
    for part in parts_of_combined():
        part.apply()
