"""Mutants of the section "retryBackoff": BACK-1..6."""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from convoy import backoff, controller, workqueue
from convoy.api import Reason
from mutants import mutant
from mutants.patching import wrap

Obj = dict[str, Any]


def _with_factor(spec_factor: Any) -> None:
    backoff.RetryBackoff.effective_factor = property(spec_factor)


# -- BACK-1 ------------------------------------------------------------------------------------
@mutant("backoff-exponent-off-by-one", "BACK-1.formula")
def backoff_exponent_off_by_one() -> None:
    """The delay before retry n is initial x factor^n instead of factor^(n-1)."""

    @wrap(backoff.RetryBackoff, "delay")
    def delay(original, self, retry: int) -> float:
        return original(self, retry + 1)


@mutant("factor-truncated-to-an-integer", "BACK-1.formula")
def factor_truncated_to_an_integer() -> None:
    """The factor is read as an integer: 1.5 becomes 1."""
    original = backoff._parse_factor
    backoff._parse_factor = lambda value: None if value is None else float(int(original(value)))


@mutant("initial-rounded-up-to-seconds", "BACK-1.formula")
def initial_rounded_up_to_seconds() -> None:
    """retryBackoff.initial is rounded up to whole seconds: 500ms becomes 1 s."""

    @wrap(backoff.RetryBackoff, "from_spec")
    def from_spec(original, spec):
        read = original(spec)
        if read is None:
            return None
        return backoff.RetryBackoff(float(math.ceil(read.initial)), read.factor, read.max)


@mutant("failures-counted-per-namespace", "BACK-1.per-release")
def failures_counted_per_namespace() -> None:
    """The failure count is kept per namespace: a Release's failures count for its
    neighbours' backoff too."""
    record, count, forget = (
        workqueue.FailureCounter.record,
        workqueue.FailureCounter.count,
        workqueue.FailureCounter.forget,
    )

    def namespace(item: str) -> str:
        return item.split("/", 1)[0] if isinstance(item, str) else item

    workqueue.FailureCounter.record = lambda self, item: record(self, namespace(item))
    workqueue.FailureCounter.count = lambda self, item: count(self, namespace(item))
    workqueue.FailureCounter.forget = lambda self, item: forget(self, namespace(item))


# -- BACK-2 ------------------------------------------------------------------------------------
@mutant("factor-below-one-kept", "BACK-2.below-1")
def factor_below_one_kept() -> None:
    """A factor below 1 is used as is instead of 2."""
    _with_factor(lambda self: 2.0 if self.factor is None else self.factor)


@mutant("unset-factor-is-1", "BACK-2.unset")
def unset_factor_is_1() -> None:
    """An unset factor defaults to 1 (no growth); only a given factor below 1 means 2."""
    _with_factor(
        lambda self: 1.0 if self.factor is None else (2.0 if self.factor < 1 else self.factor)
    )


@mutant("factor-1-taken-as-2", "BACK-2.exactly-1")
def factor_1_taken_as_2() -> None:
    """A factor of 1 or less is taken as 2 (<= instead of <)."""
    _with_factor(lambda self: 2.0 if self.factor is None or self.factor <= 1 else self.factor)


# -- BACK-3 ------------------------------------------------------------------------------------
@mutant("max-ignored", "BACK-3.max")
def max_ignored() -> None:
    """retryBackoff.max does not cap the delay."""
    backoff.RetryBackoff.effective_max = property(lambda self: 1000.0)


@mutant("max-caps-from-the-second-retry", "BACK-3.max-below-initial")
def max_caps_from_the_second_retry() -> None:
    """The cap applies from the second retry on: the first waits initial, above max."""

    @wrap(backoff.RetryBackoff, "delay")
    def delay(original, self, retry: int) -> float:
        return self.initial if retry == 1 else original(self, retry)


@mutant("default-cap-600", "BACK-3.default", phase="long")
def default_cap_600() -> None:
    """Without retryBackoff.max the cap is 600 seconds instead of 1000."""
    backoff.RetryBackoff.effective_max = property(
        lambda self: 600.0 if self.max is None else self.max
    )


# -- BACK-4 ------------------------------------------------------------------------------------
def _count_kept_when(keeps: Callable[[Any], bool]) -> None:
    """The failure count is not forgotten after a reconcile whose result `keeps` it."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        if not keeps(result):
            return original(self, key, result)
        forget = self.queue.forget
        self.queue.forget = lambda item: None
        try:
            return original(self, key, result)
        finally:
            self.queue.forget = forget


@mutant(
    "hold-keeps-count",
    "BACK-4.success",
    "BACK-4.hold-WaitingForSync",
    "BACK-4.hold-Pinned",
    "BACK-4.hold-WaitingForHooks",
)
def hold_keeps_count() -> None:
    """A success or a hold does not reset the failure count."""
    _count_kept_when(lambda result: True)


@mutant("success-keeps-count", "BACK-4.success")
def success_keeps_count() -> None:
    """Only a hold resets the failure count; a success keeps counting."""
    _count_kept_when(lambda result: result.outcome.applied)


def _not_a_hold(reason: Reason) -> None:
    controller.HOLDS = controller.HOLDS - {reason}


@mutant("WaitingForSync-keeps-count", "BACK-4.hold-WaitingForSync")
def waiting_for_sync_keeps_count() -> None:
    """WaitingForSync is left out of the holds: it does not reset the failure count."""
    _not_a_hold(Reason.WAITING_FOR_SYNC)


@mutant("WaitingForHooks-keeps-count", "BACK-4.hold-WaitingForHooks")
def waiting_for_hooks_keeps_count() -> None:
    """WaitingForHooks is left out of the holds: it does not reset the failure count."""
    _not_a_hold(Reason.WAITING_FOR_HOOKS)


@mutant("Pinned-keeps-count", "BACK-4.hold-Pinned")
def pinned_keeps_count() -> None:
    """Pinned is left out of the holds: it does not reset the failure count."""
    _not_a_hold(Reason.PINNED)


# -- BACK-5 ------------------------------------------------------------------------------------
@mutant("count-survives-restart", "BACK-5.restart")
def count_survives_restart() -> None:
    """Failure counts are saved to a file and restored when the controller restarts."""

    def state_file(api_client) -> Path:
        # One file per API server: runs against other clusters never read each other's counts.
        server = hashlib.sha256(api_client.configuration.host.encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"convoy-mutant-counts-{os.getuid()}-{server}.json"

    def read(state: Path) -> dict[str, int]:
        try:
            return json.loads(state.read_text())
        except (OSError, ValueError):
            return {}

    @wrap(controller.Controller, "__init__")
    def init(original, self, api_client, *args, **kwargs) -> None:
        original(self, api_client, *args, **kwargs)
        self.mutant_state = state_file(api_client)
        for key, count in read(self.mutant_state).items():
            for _ in range(count):
                self.queue._failures.record(key)

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        decided = original(self, key, result)
        counts = read(self.mutant_state) | {key: self.queue.num_requeues(key)}
        # Written aside and renamed: a controller stopped mid-write leaves the old file whole.
        written = self.mutant_state.with_suffix(f".{threading.get_ident()}.tmp")
        written.write_text(json.dumps(counts))
        written.replace(self.mutant_state)
        return decided


# -- BACK-6 ------------------------------------------------------------------------------------
def _default_limiter(limiter: Any) -> None:
    controller_queue_init = controller.WorkQueue.__init__

    def init(self, clock=None, limiter_=backoff.default_limiter) -> None:
        controller_queue_init(self, clock, limiter)

    controller.WorkQueue.__init__ = init


@mutant("default-limiter-starts-at-50ms", "BACK-6.ladder")
def default_limiter_starts_at_50ms() -> None:
    """The default rate limiter starts at 50 milliseconds instead of 5."""
    _default_limiter(lambda retry: min(10 * backoff.default_delay(retry - 1), 1000.0))


@mutant("default-limiter-cap-600", "BACK-6.cap", phase="long")
def default_limiter_cap_600() -> None:
    """The default rate limiter stops doubling at 600 seconds instead of 1000."""
    _default_limiter(lambda retry: min(backoff.default_delay(retry - 1), 600.0))
