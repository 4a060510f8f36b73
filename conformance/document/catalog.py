"""The rule catalog: every rule of the sync-policy document, by ID, split into its clauses.

The single source of rule and clause IDs. A rule is one sentence of the document that a
controller can obey or break; a clause is one part of it that a controller can break on its own:
each listed reason, each event, each subresource and write method, each default, each boundary,
each "fails or waits", each direction of a relation. A clause ID is its rule's ID, a dot and a
name (`REQ-2.HookFailed`); rule IDs are those of the document's checklist, unchanged.

Each conformance test names the clauses it checks with `@pytest.mark.clause("ID", ...)`; the
plugin rejects unknown IDs and bare rule IDs, and the project's tests fail when a clause has no
test or a test names none. `convoy-conformance rules --json` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

DOCUMENT = "sync-policy.txt"
DOCUMENT_VERSION = "2026-11"
#: What the tests of a clause that only a certifying run can check say when they skip.
CERTIFYING_ONLY = "certifying run only"


@dataclass(frozen=True)
class Clause:
    id: str
    statement: str
    #: Why a development run cannot check it, and which part of a certifying run does; None
    #: when every run checks it.
    certifying_only: str | None = None

    @property
    def rule_id(self) -> str:
        return self.id.split(".", 1)[0]


@dataclass(frozen=True)
class Rule:
    id: str
    section: str
    statement: str
    clauses: tuple[Clause, ...]


def rule(rule_id: str, section: str, statement: str, *clauses: tuple[str, ...]) -> Rule:
    """A rule and its clauses, each given as (name, statement[, certifying_only])."""
    return Rule(
        rule_id,
        section,
        statement,
        tuple(Clause(f"{rule_id}.{name}", *rest) for name, *rest in clauses),
    )


MODE = "Automatic and manual mode"
SYNC = "The /sync request"
FORCE = "Forced sync"
TRIGGERS = "What starts a reconcile"
REQUEUE = "Requeue rules"
INTERVAL = "interval"
BACKOFF = "retryBackoff"
#: The long phase of a certifying run: the controller restarted with a resync period longer
#: than the ladders it must not interrupt.
LONG_PHASE = (
    "needs a resync period longer than the ladder (over 40 minutes): checked in the long phase "
    "of a certifying run"
)
SHIPPED_PHASE = (
    "needs the controller run as shipped, without --resync: checked in the first phase of a "
    "certifying run"
)

TRANSIENT_REASONS = (
    "SourceNotReady",
    "ValuesNotReady",
    "ClusterNotReady",
    "DeployFailed",
    "PruneFailed",
)
NOT_TRANSIENT_REASONS = (
    "Unsupported",
    "Unappliable",
    "Pinned",
    "HookFailed",
    "WaitingForSync",
    "WaitingForWave",
    "WaitingForHooks",
    "WaitingForHealth",
)

RULES: tuple[Rule, ...] = (
    rule(
        "MODE-1",
        MODE,
        "spec.syncPolicy.automatic chooses the mode; when it is not set the Release behaves as "
        "automatic: false, that is in manual mode.",
        (
            "unset",
            "Without automatic (no syncPolicy, an empty one, or one with other fields "
            "only) the Release is in manual mode.",
        ),
        (
            "no-default",
            "The field has no default: nothing writes one into spec, where it stays unset.",
        ),
        ("false", "automatic: false is manual mode."),
        ("true", "automatic: true is automatic mode."),
        (
            "changed",
            "A change of automatic takes effect at the reconcile it starts: true to "
            "false stops the applies, false to true applies.",
        ),
    ),
    rule(
        "AUTO-1",
        MODE,
        "In automatic mode every reconcile applies the whole render, even when neither the "
        "render nor the target changed.",
        (
            "unchanged",
            "Each reconcile applies, also when neither the render nor the target "
            "changed since the last apply.",
        ),
        (
            "whole-render",
            "Each reconcile applies every object of the render, not only those "
            "that changed or drifted.",
        ),
    ),
    rule(
        "AUTO-2",
        MODE,
        "In automatic mode each periodic reconcile repairs drift: a rendered object changed or "
        "deleted in the target is restored as rendered.",
        (
            "changed",
            "A rendered object changed in the target is restored at the next periodic reconcile.",
        ),
        (
            "deleted",
            "A rendered object deleted from the target is created again at the next "
            "periodic reconcile.",
        ),
    ),
    rule(
        "MAN-1",
        MODE,
        "Manual mode with no pending /sync and a render equal to status.lastSuccessful.renderRef:"
        " Applied is True with reason Applied, and its message says the Release is in sync and "
        "that apply waits for /sync.",
        (
            "in-sync",
            "Render equal to lastSuccessful.renderRef: Applied=True, reason Applied, at "
            "every reconcile while nothing is pending.",
        ),
        ("message", "The message says that the Release is in sync and that apply waits for /sync."),
        (
            "render-back",
            "A render that changes back to lastSuccessful.renderRef is in sync "
            "again (the comparison is with the last applied render, not the last one seen).",
        ),
        (
            "not-held",
            "What would hold an apply (a pin, a lower wave not settled) changes nothing: with "
            "no /sync pending, Applied=True and reason Applied.",
        ),
    ),
    rule(
        "MAN-2",
        MODE,
        "Manual mode with no pending /sync and a render that differs from "
        "status.lastSuccessful.renderRef, or none applied yet: Applied is False with reason "
        "WaitingForSync.",
        (
            "never-applied",
            "Nothing applied yet: Applied=False, reason WaitingForSync, at every "
            "reconcile while nothing is pending.",
        ),
        (
            "different",
            "A render that differs from lastSuccessful.renderRef: Applied=False, "
            "reason WaitingForSync, at every reconcile while nothing is pending.",
        ),
        (
            "not-held",
            "What would hold an apply (a pin, a lower wave not settled) changes nothing: with "
            "no /sync pending, Applied=False and reason WaitingForSync.",
        ),
        (
            "after-failed-prune",
            "A render whose apply succeeded and whose prune failed is not the last "
            "successful apply: with the request gone, Applied=False, reason WaitingForSync.",
        ),
    ),
    rule(
        "MAN-3",
        MODE,
        "In manual mode without a pending /sync nothing is applied (drift stays) and the "
        "pre-apply dry run does not run.",
        ("in-sync", "In sync (MAN-1): no apply, no dry run, drift stays."),
        ("different", "A different render (MAN-2): no apply, no dry run."),
        ("never-applied", "Nothing applied yet (MAN-2): no apply, no dry run."),
        (
            "no-rollback",
            "A rollout whose healthTimeout passes (failurePolicy action Rollback) is not rolled "
            "back: a rollback is an apply; the rollout ends Failed.",
        ),
        (
            "no-hooks",
            "No lifecycle hook runs either: none of the lifecycle's hook objects is applied "
            "while the render waits for /sync.",
        ),
    ),
    rule(
        "SYNC-1",
        SYNC,
        "POST releases/<name>/sync stores the current time in the annotation "
        "convoy.kumodo.io/sync-requested-at.",
        (
            "current-time",
            "The annotation holds the time of the POST, also when it held an earlier time before.",
        ),
        ("named-release", "Only the named Release is written."),
    ),
    rule(
        "SYNC-2",
        SYNC,
        "A change of the sync-requested-at annotation starts a reconcile.",
        ("later", "A change to a later time starts a reconcile."),
        ("earlier", "A change to an earlier time starts a reconcile."),
        ("removed", "Removing the annotation starts a reconcile."),
        (
            "same-instant",
            "The same instant written in another form (another UTC offset) is a change of the "
            "annotation, and starts a reconcile.",
        ),
        (
            "while-reconciling",
            "A change that comes while the Release is being reconciled starts another "
            "reconcile after that one.",
        ),
        (
            "during-backoff",
            "A change that comes while a failure's backoff retry is scheduled starts a "
            "reconcile at once, not at the retry.",
        ),
    ),
    rule(
        "SYNC-3",
        SYNC,
        "In manual mode a request is pending while the annotation time is later than "
        "status.lastHandledSyncAt, and a pending request is applied.",
        (
            "later",
            "An annotation later than lastHandledSyncAt (or with none) is pending and is applied.",
        ),
        (
            "not-later",
            "An annotation earlier than lastHandledSyncAt is not pending: nothing is applied.",
        ),
        (
            "any-form",
            "Every RFC 3339 form of the time is read: with or without a fraction, of any "
            "length, with Z or a numeric offset.",
        ),
        (
            "absolute-time",
            "Times compare as instants: an annotation with a UTC offset, or on another "
            "date, is later or earlier by the instant it names, not by its digits or its "
            "time of day.",
        ),
        (
            "per-release",
            "Each Release's requests are pending against its own lastHandledSyncAt: a request "
            "to one Release applies nothing of its neighbour's.",
        ),
        (
            "at-creation",
            "An annotation already set when the Release is created is a pending "
            "request for its first reconcile.",
        ),
        (
            "in-sync",
            "A pending request is applied also when the render is the applied one (in "
            "sync): dry run and apply run, and the apply mends drift.",
        ),
        (
            "not-force-alone",
            "The force annotation alone, later than lastHandledSyncAt, is no pending "
            "request: the next reconcile applies nothing.",
        ),
    ),
    rule(
        "SYNC-4",
        SYNC,
        "The pending check compares whole seconds: an annotation within the same second as "
        "lastHandledSyncAt is not pending, one a second later is.",
        (
            "same-second",
            "An annotation in the same second as lastHandledSyncAt, whatever its "
            "fraction, is not pending.",
        ),
        ("next-second", "An annotation at the start of the next second is pending."),
    ),
    rule(
        "SYNC-5",
        SYNC,
        "status.lastHandledSyncAt is written only after a successful apply.",
        (
            "after-success",
            "A successful apply writes lastHandledSyncAt: the handled request's "
            "time, to the second (not the time of the apply).",
        ),
        ("not-on-failure", "A failed apply leaves lastHandledSyncAt as it was."),
        (
            "not-while-waiting",
            "A reconcile that waits (a hold) leaves lastHandledSyncAt as it was.",
        ),
    ),
    rule(
        "SYNC-6",
        SYNC,
        "When the apply fails or waits, the request stays pending and the next reconcile tries "
        "the apply again.",
        (
            "transient-failure",
            "After a transient failure (DeployFailed) the retry applies the "
            "request, without a new one, while it is pending: not once it is withdrawn.",
        ),
        (
            "failure",
            "After a failure that is not transient (Unappliable) the next periodic "
            "reconcile applies the request, without a new one.",
        ),
        (
            "wait",
            "After a wait (Pinned) the next periodic reconcile applies the request once "
            "nothing holds it, without a new one.",
        ),
        (
            "render-failure",
            "When the render cannot be made (SourceNotReady, ValuesNotReady, "
            "ClusterNotReady: the Cluster missing, or each form of its kubeconfig unusable) the "
            "request stays pending, and the backoff retry that renders applies it, without a "
            "new one.",
        ),
        (
            "across-a-restart",
            "A request left pending by a failed apply, or written while the controller was "
            "down, is applied by the restarted controller without a new one.",
        ),
    ),
    rule(
        "SYNC-7",
        SYNC,
        "Automatic mode does not use status.lastHandledSyncAt: a /sync only starts a reconcile.",
        (
            "not-read",
            "A /sync no later than lastHandledSyncAt still starts a reconcile that applies.",
        ),
        (
            "not-written",
            "Applies in automatic mode leave lastHandledSyncAt as it was: unset, or what "
            "manual mode handled.",
        ),
        (
            "each-request",
            "Each /sync starts a reconcile, a second one in the same second too (each POST "
            "writes the time it came, which changes the annotation again).",
        ),
    ),
    rule(
        "SYNC-8",
        SYNC,
        "Writes to the /pin, /mutations and /lifecycle subresources also set sync-requested-at, "
        "and each counts as a /sync request in manual mode.",
        *(
            (
                f"{method}-{subresource}",
                f"{method} /{subresource} sets sync-requested-at in the "
                "same update, and in manual mode the write is a request that is applied.",
            )
            for method in ("PUT", "DELETE")
            for subresource in ("pin", "mutations", "lifecycle")
        ),
    ),
    rule(
        "SYNC-9",
        SYNC,
        "The observer sends a /sync when a sync wave completes, when health assessment reaches "
        "a new render, and when a batch of lifecycle hooks completes; in manual mode each "
        "counts as a request.",
        (
            "wave",
            "A completed wave sends a /sync to each Release of the next wave (the lowest "
            "above); in manual mode each is applied.",
        ),
        (
            "wave-complete",
            "A wave completes when every Release of it is Applied and Healthy: one alone "
            "sends no /sync.",
        ),
        (
            "wave-once",
            "A wave completes once: its Releases updated again while Applied and Healthy (an "
            "annotation, a reconcile that applies the same render) send no more /syncs.",
        ),
        (
            "wave-by-apply",
            "A wave also completes when its last Release turns Applied while Healthy already "
            "(a hold lifted): the next wave gets its /sync.",
        ),
        (
            "new-render",
            "Health assessment reaching a new render sends a /sync; in manual mode it is applied.",
        ),
        (
            "new-render-once",
            "Only a new render reaching Healthy sends one: the render staying Healthy, or "
            "turning Healthy again (applied again meanwhile or not), sends no more.",
        ),
        ("hooks", "A completed hook batch sends a /sync; in manual mode it is applied."),
        (
            "automatic",
            "The observer sends each of these /syncs to automatic Releases too (where a /sync "
            "only starts a reconcile).",
        ),
    ),
    rule(
        "SYNC-10",
        SYNC,
        "`kubectl convoy release sync NAME` sends the /sync POST.",
        ("post", "The command writes sync-requested-at, without sync-force-requested-at."),
        (
            "context-namespace",
            "Without -n, the command acts in the namespace of the kubeconfig's current "
            "context, as kubectl does.",
        ),
    ),
    rule(
        "FORCE-1",
        FORCE,
        "POST releases/<name>/sync?force=true also stores the time in "
        "convoy.kumodo.io/sync-force-requested-at.",
        (
            "written",
            "force=true writes sync-force-requested-at with the time of "
            "sync-requested-at, in the same update.",
        ),
        (
            "not-without-force",
            "A POST without force, or with force=false, writes no sync-force-requested-at.",
        ),
    ),
    rule(
        "FORCE-2",
        FORCE,
        "The reconcile after a forced request skips the pre-apply dry run.",
        ("manual", "Manual mode: the forced reconcile applies without a dry run."),
        ("automatic", "Automatic mode: the forced reconcile applies without a dry run."),
        (
            "own-release",
            "Only the forced Release skips its dry run: a neighbour reconciled at the same time "
            "runs its own.",
        ),
    ),
    rule(
        "FORCE-3",
        FORCE,
        "With a failurePolicy, the reconcile after a forced request starts a new Progressing "
        "rollout, clearing a Failed or RolledBack one.",
        ("Failed", "A Failed rollout gives way to a new Progressing one."),
        ("RolledBack", "A RolledBack rollout gives way to a new Progressing one."),
        ("Succeeded", "A Succeeded rollout gives way to a new Progressing one too."),
        ("Progressing", "A Progressing rollout gives way to a new one, its time started anew."),
        ("no-failurePolicy", "Without a failurePolicy a forced reconcile starts no rollout."),
    ),
    rule(
        "FORCE-4",
        FORCE,
        "A forced request affects one reconcile only: the reconcile after it runs the pre-apply"
        " dry run again.",
        ("after-success", "After a successful forced reconcile the next one runs the dry run."),
        ("after-failure", "After a failed forced reconcile its retry runs the dry run."),
        ("after-wait", "After a forced reconcile that waits the next one runs the dry run."),
    ),
    rule(
        "FORCE-5",
        FORCE,
        "status.lastHandledForceSyncAt is written after the forced reconcile, also when that "
        "reconcile fails or waits.",
        (
            "success",
            "A successful forced reconcile writes lastHandledForceSyncAt: the forced "
            "request's time, to the second.",
        ),
        (
            "failure",
            "A failed forced reconcile writes it too, whether its apply or its render failed.",
        ),
        ("wait", "A forced reconcile that waits (a hold) writes it too."),
    ),
    rule(
        "FORCE-6",
        FORCE,
        "`kubectl convoy release sync NAME --force` sends the forced POST.",
        ("post", "The command writes sync-force-requested-at with sync-requested-at."),
    ),
    rule(
        "TRIG-1",
        TRIGGERS,
        "Creating a Release starts a reconcile.",
        ("automatic", "An automatic Release is applied at its creation."),
        ("manual", "A manual Release reports WaitingForSync at its creation."),
    ),
    rule(
        "TRIG-2",
        TRIGGERS,
        "A change of metadata.generation starts a reconcile, and only a change of spec changes "
        "the generation.",
        ("automatic", "A spec change of an automatic Release starts a reconcile."),
        ("manual", "A spec change of a manual Release starts a reconcile."),
        (
            "during-backoff",
            "A spec change that comes while a failure's backoff retry is scheduled starts a "
            "reconcile at once, not at the retry.",
        ),
    ),
    rule(
        "TRIG-3",
        TRIGGERS,
        "A change of the sync-requested-at annotation starts a reconcile; a change of any other"
        " annotation or of a label does not.",
        ("sync-requested-at", "A change of sync-requested-at starts a reconcile."),
        ("label", "A label added or removed starts none."),
        ("other-annotation", "An annotation outside convoy's starts none."),
        ("force-annotation", "sync-force-requested-at written alone starts none."),
        ("pin-annotation", "The pin annotation written through the main resource starts none."),
    ),
    rule(
        "TRIG-4",
        TRIGGERS,
        "The informer resync starts a reconcile; its period is 2 minutes by default and the "
        "controller flag --resync sets it.",
        ("flag", "With --resync the resync reconciles every Release once per that period."),
        ("default", "Without --resync the period is 2 minutes.", SHIPPED_PHASE),
    ),
    rule(
        "TRIG-5",
        TRIGGERS,
        "A scheduled requeue starts a reconcile when its time comes.",
        ("interval", "The periodic requeue of spec.syncPolicy.interval reconciles on time."),
    ),
    rule(
        "TRIG-6",
        TRIGGERS,
        "New health data written by the observer to the ReleaseInventory starts a reconcile.",
        ("new-health", "A change of health in the inventory starts a reconcile."),
        (
            "new-entries",
            "A change of one object's health starts one too, the render's health unchanged.",
        ),
        (
            "not-drift-or-times",
            "An inventory write without new health data (a drift check: its time, its drift "
            "list and a renewed assessedAt) starts none.",
        ),
    ),
    rule(
        "TRIG-7",
        TRIGGERS,
        "A change of the status of the Applied or Healthy condition of a Release in a lower "
        "wave on the same Cluster starts a reconcile; the same change on another Cluster or in "
        "a higher wave does not.",
        ("Healthy", "A lower wave's Healthy status change reconciles the higher wave."),
        ("Applied", "A lower wave's Applied status change reconciles the higher wave."),
        ("every-higher-wave", "Every higher wave is reconciled, not only the next one."),
        ("not-other-cluster", "A Release on another Cluster is not reconciled."),
        (
            "not-other-namespace",
            "A Release in another namespace (another Cluster) is not reconciled.",
        ),
        ("not-lower-wave", "A higher wave's change does not reconcile a lower wave."),
        ("not-same-wave", "A change does not reconcile the other Releases of its own wave."),
        (
            "not-deletion",
            "The deletion of a lower-wave Release reconciles no higher wave, whether that "
            "Release was settled or not, and whether its deletion leaves its wave settled or "
            "empty: the higher wave sees the deletion at its next reconcile.",
        ),
        (
            "to-True",
            "A status turning True reconciles the higher wave too, before the lower wave is "
            "complete.",
        ),
        (
            "unsettled",
            "A status change reconciles the higher wave too when the lower Release neither "
            "settles nor unsettles (Applied turning False while Healthy is False).",
        ),
        (
            "first-status",
            "A new lower-wave Release's first status is a change too: the higher wave is "
            "reconciled and waits for it.",
        ),
        (
            "not-reason-or-message",
            "A change of a lower wave's reason or message, its status kept, reconciles nothing.",
        ),
    ),
    rule(
        "TRIG-8",
        TRIGGERS,
        "A status write on a Release does not start a reconcile of it, so the controller's own "
        "status writes do not loop.",
        ("any-writer", "A status write by another client starts no reconcile."),
        ("own-writes", "The controller's own status writes start no reconcile."),
    ),
    rule(
        "TRIG-9",
        TRIGGERS,
        "Changing mutations or lifecycle through the main resource changes no generation and "
        "starts no reconcile; the change is used at the next periodic reconcile.",
        ("mutations", "The mutations annotation: no reconcile; used at the next periodic one."),
        ("lifecycle", "The lifecycle annotation: no reconcile; used at the next periodic one."),
    ),
    rule(
        "TRIG-10",
        TRIGGERS,
        "A write through the /mutations or /lifecycle subresource starts a reconcile at once.",
        *(
            (f"{method}-{subresource}", f"{method} /{subresource} starts a reconcile at once.")
            for method in ("PUT", "DELETE")
            for subresource in ("mutations", "lifecycle")
        ),
    ),
    rule(
        "REQ-1",
        REQUEUE,
        "SourceNotReady, ValuesNotReady, ClusterNotReady, DeployFailed and PruneFailed are "
        "transient and are retried with backoff.",
        *(
            (reason, f"{reason} is retried on the backoff ladder, neither sooner nor later.")
            for reason in TRANSIENT_REASONS
        ),
        (
            "manual",
            "A manual Release with no /sync pending retries a transient failure on the ladder "
            "too: the retry renders and reports, and applies nothing.",
        ),
    ),
    rule(
        "REQ-2",
        REQUEUE,
        "Unsupported, Unappliable, Pinned, HookFailed and the waiting reasons are not "
        "transient: there is no backoff retry, only the next periodic reconcile.",
        *(
            (
                reason,
                f"{reason} is not retried with backoff, and is checked again at the next "
                "periodic reconcile.",
            )
            for reason in NOT_TRANSIENT_REASONS
        ),
        (
            "request-pending",
            "In manual mode with a /sync pending none of them is retried with backoff either: "
            "the request stays pending for the next reconcile.",
        ),
    ),
    rule(
        "INT-1",
        INTERVAL,
        "spec.syncPolicy.interval is the period of the periodic reconcile.",
        ("period", "Reconciles come one interval apart, for intervals in several units."),
        (
            "manual",
            "A manual Release is reconciled every interval too: it renders and reports.",
        ),
        (
            "per-release",
            "Each Release keeps its own interval beside another one in the same namespace.",
        ),
        ("changed", "A changed interval is the period from the next reconcile on."),
        (
            "rolling-out",
            "A Release whose rollout is in progress (its timeout check scheduled) is "
            "reconciled every interval too.",
        ),
        (
            "after-a-failure",
            "The reconcile that ends a failure's backoff (a /sync's, a forced one's) is "
            "followed by the next periodic reconcile one interval later, not by the retry.",
        ),
    ),
    rule(
        "INT-2",
        INTERVAL,
        "The observer checks for drift on the same interval.",
        ("period", "Drift checks come one interval apart."),
        (
            "deleted",
            "An object deleted from the target is drift too: the checks list it, one interval "
            "apart.",
        ),
        ("automatic", "An automatic Release's drift is checked on its interval too."),
        ("changed", "A changed interval is the drift checks' period from then on."),
        ("no-interval", "Without an interval there are no drift checks."),
    ),
    rule(
        "INT-3",
        INTERVAL,
        "With interval unset or 0 there is no periodic reconcile; only the informer resync and "
        "events start one.",
        (
            "unset",
            "Interval unset: no periodic reconcile, also where a rollout's timeout check was "
            "scheduled once.",
        ),
        ("zero", 'Interval 0 ("0s", "0"): no periodic reconcile.'),
        ("changed-to-zero", "An interval changed to 0 stops the periodic reconcile."),
        ("removed", "An interval removed from the spec stops the periodic reconcile."),
    ),
    rule(
        "BACK-1",
        BACKOFF,
        "With retryBackoff.initial set, the delay before retry n is initial x factor^(n-1).",
        (
            "formula",
            "Retry n waits initial x factor^(n-1), for whole and fractional initials and factors.",
        ),
        (
            "with-interval",
            "A Release with an interval retries on the ladder too: the periodic reconcile "
            "does not take the retries' place.",
        ),
        (
            "per-release",
            "Each Release counts its own failures beside another failing Release "
            "in the same namespace, or of the same name in another namespace.",
        ),
    ),
    rule(
        "BACK-2",
        BACKOFF,
        "A factor below 1, or none, is taken as 2.",
        ("below-1", "A factor below 1 (0.5, 0, -1) is taken as 2."),
        ("unset", "No factor is taken as 2."),
        ("exactly-1", "A factor of exactly 1 is kept: every delay is initial."),
    ),
    rule(
        "BACK-3",
        BACKOFF,
        "The delay never exceeds max; without max the cap is 1000 seconds.",
        ("max", "The delays grow up to max and stay there."),
        ("max-below-initial", "A max below initial caps the first delay too."),
        ("default", "Without max the cap is 1000 seconds.", LONG_PHASE),
    ),
    rule(
        "BACK-4",
        BACKOFF,
        "A success or a hold resets the failure count.",
        ("success", "After a success the next failure waits the first delay again."),
        ("hold-WaitingForSync", "After a WaitingForSync hold the count starts again."),
        ("hold-Pinned", "After a Pinned hold the count starts again."),
        ("hold-WaitingForHooks", "After a WaitingForHooks hold the count starts again."),
        ("hold-WaitingForWave", "After a WaitingForWave hold the count starts again."),
        (
            "hold-WaitingForHealth",
            "After a WaitingForHealth hold (its apply went through) the count starts again.",
        ),
        (
            "nothing-else",
            "Nothing else resets it: a failure after a spec change, a /sync or a failure "
            "that is not transient (Unappliable, HookFailed) counts on.",
        ),
    ),
    rule(
        "BACK-5",
        BACKOFF,
        "A restart of the controller resets the failure count.",
        ("restart", "After a restart the next failure waits the first delay again."),
    ),
    rule(
        "BACK-6",
        BACKOFF,
        "Without retryBackoff.initial the default rate limiter applies: 5 milliseconds, "
        "doubling at each failure, up to 1000 seconds.",
        ("ladder", "The delays start at 5 ms and double."),
        (
            "without-initial",
            "A retryBackoff without initial (an empty one) is the default rate limiter too.",
        ),
        ("cap", "The doubling stops at 1000 seconds.", LONG_PHASE),
    ),
)

CLAUSES = {clause.id: clause for rule_ in RULES for clause in rule_.clauses}
BY_ID = {rule_.id: rule_ for rule_ in RULES}
SECTIONS = tuple(dict.fromkeys(rule_.section for rule_ in RULES))

#: Modules whose tests check the cluster, not a clause (they name none).
PREFLIGHT = ("test_preflight.py",)


def unknown_ids(ids: tuple[str, ...] | list[str]) -> list[str]:
    """The IDs that name no clause; a bare rule ID is one of them (name its clauses)."""
    return [i for i in ids if i not in CLAUSES]


@dataclass(frozen=True)
class Coverage:
    tests_by_clause: dict[str, list[str]]
    untagged: list[str]

    @property
    def tests_by_rule(self) -> dict[str, list[str]]:
        return {
            r.id: sorted({t for c in r.clauses for t in self.tests_by_clause[c.id]}) for r in RULES
        }

    @property
    def uncovered(self) -> list[str]:
        return [clause for clause, tests in self.tests_by_clause.items() if not tests]


class _Collector:
    """A pytest plugin that records each collected test's clause markers."""

    def __init__(self) -> None:
        self.items: list[tuple[str, list[str]]] = []

    def pytest_collection_modifyitems(self, items: list) -> None:
        self.items += [(item.nodeid, clauses_of(item)) for item in items]


def clauses_of(item: pytest.Item) -> list[str]:
    """The clause IDs a collected test names (its own and its parameter's markers)."""
    return [c for marker in item.iter_markers("clause") for c in marker.args]


def coverage(suite_dir: str) -> Coverage:
    """Collect the suite (nothing runs) and map every clause to the tests that name it."""
    import pytest

    collector = _Collector()
    code = pytest.main(
        [suite_dir, "--collect-only", "-q", "-p", "no:cacheprovider"], plugins=[collector]
    )
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise RuntimeError(f"collecting {suite_dir} failed with exit code {code}")
    tests_by_clause: dict[str, list[str]] = {clause: [] for clause in CLAUSES}
    untagged = []
    for nodeid, clauses in collector.items:
        for clause in clauses:
            tests_by_clause[clause].append(nodeid)
        if not clauses and not nodeid.split("::")[0].endswith(PREFLIGHT):
            untagged.append(nodeid)
    return Coverage(tests_by_clause, untagged)
