"""Mutants of the section "retryBackoff": BACK-1..6."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from convoy import backoff, controller, policy, workqueue
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
    _count_failures_by(lambda item: item.split("/", 1)[0])


@mutant("retry-backoff-kept-for-the-ladder", "BACK-1.formula")
def retry_backoff_kept_for_the_ladder() -> None:
    """The retryBackoff a Release has at its first failure serves the whole ladder (a limiter
    per item, made once): an edit between failures counts only after a success or a hold."""
    kept: dict[str, backoff.RetryBackoff | None] = {}
    lock = threading.Lock()

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        read = result.policy
        if read is not None and result.outcome.reason.transient:
            with lock:
                if self.queue.num_requeues(key) == 0:
                    kept[key] = read.backoff
                curve = kept.get(key, read.backoff)
            result.policy = policy.SyncPolicy(read.automatic, read.interval, curve)
        return original(self, key, result)


@mutant("interval-takes-the-retries-place", "BACK-1.with-interval")
def interval_takes_the_retries_place() -> None:
    """A Release with an interval is not retried with backoff: its periodic reconcile will
    retry it anyway, thought the author."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        interval = result.policy.interval if result.policy else 0
        if result.outcome.reason.transient and interval > 0:
            self.queue.add_after(key, interval)
            return f"next in {interval:g}s"
        return original(self, key, result)


@mutant("interval-also-after-a-transient-failure", "BACK-1.with-interval")
def interval_also_after_a_transient_failure() -> None:
    """After a transient failure the periodic reconcile is scheduled too, beside the backoff
    retry (every outcome schedules it, thought the author): with an interval shorter than a
    retry's delay, the Release is retried every interval."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        decided = original(self, key, result)
        interval = result.policy.interval if result.policy else 0
        if result.outcome.reason.transient and interval > 0:
            self.queue.add_after(key, interval)
        return decided


@mutant("failures-counted-per-reason", "BACK-4.nothing-else")
def failures_counted_per_reason() -> None:
    """The failure count starts again when the transient reason changes (a count per cause):
    a source deleted halfway up a ladder of refused applies retries after the first delay."""
    last: dict[str, Reason] = {}
    lock = threading.Lock()

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        reason = result.outcome.reason
        with lock:
            before, last[key] = last.get(key), reason
        if reason.transient and before is not None and before.transient and before != reason:
            self.queue.forget(key)
        return original(self, key, result)


@mutant("failures-counted-per-name", "BACK-1.per-release")
def failures_counted_per_name() -> None:
    """The failure count is kept by the Release's name alone: a Release of the same name in
    another namespace counts on from its failures."""
    _count_failures_by(lambda item: item.split("/", 1)[-1])


def _count_failures_by(part: Callable[[str], str]) -> None:
    """The failure count keyed by `part` of the Release's key (namespace/name)."""
    record, count, forget = (
        workqueue.FailureCounter.record,
        workqueue.FailureCounter.count,
        workqueue.FailureCounter.forget,
    )

    def key(item: str) -> str:
        return part(item) if isinstance(item, str) else item

    workqueue.FailureCounter.record = lambda self, item: record(self, key(item))
    workqueue.FailureCounter.count = lambda self, item: count(self, key(item))
    workqueue.FailureCounter.forget = lambda self, item: forget(self, key(item))


# -- BACK-2 ------------------------------------------------------------------------------------
@mutant("factor-below-one-kept", "BACK-2.below-1")
def factor_below_one_kept() -> None:
    """A factor below 1 is used as is instead of 2."""
    _with_factor(lambda self: 2.0 if self.factor is None else self.factor)


@mutant("negative-factor-taken-as-1", "BACK-2.below-1")
def negative_factor_taken_as_1() -> None:
    """Only a factor from 0 up to 1 is taken as 2; a negative one, an invalid value to the
    author, means no growth (1)."""
    _with_factor(
        lambda self: 2.0 if self.factor is None or 0 <= self.factor < 1 else max(self.factor, 1.0)
    )


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
    "BACK-4.hold-WaitingForWave",
    "BACK-4.hold-WaitingForHealth",
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


@mutant("HookFailed-resets-count", "BACK-4.nothing-else")
def hook_failed_resets_count() -> None:
    """HookFailed counts among the holds (it is listed beside Pinned as not transient): a
    failed hook batch resets the failure count."""
    controller.HOLDS = controller.HOLDS | {Reason.HOOK_FAILED}


@mutant("WaitingForHealth-keeps-count", "BACK-4.hold-WaitingForHealth")
def waiting_for_health_keeps_count() -> None:
    """WaitingForHealth is left out of the holds: a render applied and waiting for its
    postApply hooks does not reset the failure count (it is neither Applied nor failed)."""
    _not_a_hold(Reason.WAITING_FOR_HEALTH)


def _count_reset_by(trigger: str) -> None:
    @wrap(controller.Controller, "enqueue")
    def enqueue(original, self, key: str, why: str) -> None:
        if why == trigger:
            self.queue.forget(key)
        original(self, key, why)


@mutant("spec-change-resets-count", "BACK-4.nothing-else")
def spec_change_resets_count() -> None:
    """A spec change resets the failure count (the author took a new spec for a new start)."""
    _count_reset_by("generation-changed")


@mutant("sync-resets-count", "BACK-4.nothing-else")
def sync_resets_count() -> None:
    """A /sync resets the failure count (a user's request starts the ladder again)."""
    _count_reset_by("sync-requested")


@mutant("any-outcome-without-a-retry-resets-count", "BACK-4.nothing-else")
def any_outcome_without_a_retry_resets_count() -> None:
    """Every reconcile that schedules no backoff retry resets the failure count (client-go's
    habit of Forget whenever an item is not rate-limited), Unappliable included."""

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        if not result.outcome.reason.transient:
            self.queue.forget(key)
        return original(self, key, result)


@mutant("WaitingForWave-keeps-count", "BACK-4.hold-WaitingForWave")
def waiting_for_wave_keeps_count() -> None:
    """WaitingForWave is left out of the holds: it does not reset the failure count."""
    _not_a_hold(Reason.WAITING_FOR_WAVE)


@mutant("Pinned-keeps-count", "BACK-4.hold-Pinned")
def pinned_keeps_count() -> None:
    """Pinned is left out of the holds: it does not reset the failure count."""
    _not_a_hold(Reason.PINNED)


# -- BACK-5 ------------------------------------------------------------------------------------
#: Where count-survives-restart keeps the counts: a ConfigMap beside the controller (its
#: namespace in a cluster, "default" for a host process), which a restarted pod still finds.
COUNTS_CONFIGMAP = "convoy-mutant-failure-counts"
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@mutant("count-survives-restart", "BACK-5.restart")
def count_survives_restart() -> None:
    """Failure counts are saved in a ConfigMap and restored when the controller restarts."""

    def namespace() -> str:
        if _SERVICE_ACCOUNT_NAMESPACE.exists():
            return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
        return "default"

    def read(core: client.CoreV1Api) -> dict[str, int]:
        try:
            found = core.read_namespaced_config_map(COUNTS_CONFIGMAP, namespace())
        except client.ApiException:
            return {}
        return json.loads((found.data or {}).get("counts") or "{}")

    def write(core: client.CoreV1Api, counts: dict[str, int]) -> None:
        body = {
            "metadata": {"name": COUNTS_CONFIGMAP},
            "data": {"counts": json.dumps(counts, sort_keys=True)},
        }
        try:  # a patch: in a cluster the controller may patch and create, not update
            core.patch_namespaced_config_map(COUNTS_CONFIGMAP, namespace(), body)
        except client.ApiException as error:
            if error.status != 404:
                raise
            core.create_namespaced_config_map(namespace(), body)

    @wrap(controller.Controller, "__init__")
    def init(original, self, api_client, *args, **kwargs) -> None:
        original(self, api_client, *args, **kwargs)
        self.mutant_core = client.CoreV1Api(api_client)
        self.mutant_lock = threading.Lock()
        for key, count in read(self.mutant_core).items():
            for _ in range(count):
                self.queue._failures.record(key)

    @wrap(controller.Controller, "_requeue")
    def requeue(original, self, key: str, result) -> str:
        decided = original(self, key, result)
        with self.mutant_lock:  # two workers never write over each other's count
            write(self.mutant_core, read(self.mutant_core) | {key: self.queue.num_requeues(key)})
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


@mutant("empty-retry-backoff-starts-at-1s", "BACK-6.without-initial")
def empty_retry_backoff_starts_at_1s() -> None:
    """A retryBackoff without initial counts as set, with a default initial of 1 s: only a
    Release without any retryBackoff gets the default rate limiter."""

    @wrap(backoff.RetryBackoff, "from_spec")
    def from_spec(original, spec):
        if spec is not None and "initial" not in spec:
            return backoff.RetryBackoff(initial=1.0)
        return original(spec)


@mutant("default-limiter-cap-600", "BACK-6.cap", phase="long")
def default_limiter_cap_600() -> None:
    """The default rate limiter stops doubling at 600 seconds instead of 1000."""
    _default_limiter(lambda retry: min(backoff.default_delay(retry - 1), 600.0))
