"""Benign variants: differences the document allows. Each must pass the whole suite; one that
fails is a suite that fails conforming controllers."""

from __future__ import annotations

import time
from typing import Any

from convoy import apply, controller, observer, reconciler
from convoy.api import Reason
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


@variant(COMBINED)
def combined() -> None:
    """Every other benign variant at once."""
    for part in parts_of_combined():
        part.apply()
