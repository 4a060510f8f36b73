"""The rule catalog: every rule of the sync-policy document, by ID, in this project's words.

The single source of rule IDs. Each conformance test names its rules with
`@pytest.mark.rule("ID", ...)`; the plugin rejects unknown IDs, and the project's tests fail when
a rule has no test or a test names no rule. `convoy-conformance rules --json` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

DOCUMENT = "sync-policy.txt"
DOCUMENT_VERSION = "2026-11"


@dataclass(frozen=True)
class Rule:
    id: str
    section: str
    statement: str


MODE = "Automatic and manual mode"
SYNC = "The /sync request"
FORCE = "Forced sync"
TRIGGERS = "What starts a reconcile"
REQUEUE = "Requeue rules"
INTERVAL = "interval"
BACKOFF = "retryBackoff"

RULES: tuple[Rule, ...] = (
    Rule(
        "MODE-1",
        MODE,
        "spec.syncPolicy.automatic chooses the mode; when it is not set the "
        "Release behaves as automatic: false, that is in manual mode.",
    ),
    Rule(
        "AUTO-1",
        MODE,
        "In automatic mode every reconcile applies the whole render, even when "
        "neither the render nor the target changed.",
    ),
    Rule(
        "AUTO-2",
        MODE,
        "In automatic mode each periodic reconcile repairs drift: a rendered "
        "object changed or deleted in the target is restored as rendered.",
    ),
    Rule(
        "MAN-1",
        MODE,
        "Manual mode with no pending /sync and a render equal to "
        "status.lastSuccessful.renderRef: Applied is True with reason Applied, and its message "
        "says the Release is in sync and that apply waits for /sync.",
    ),
    Rule(
        "MAN-2",
        MODE,
        "Manual mode with no pending /sync and a render that differs from "
        "status.lastSuccessful.renderRef, or none applied yet: Applied is False with reason "
        "WaitingForSync.",
    ),
    Rule(
        "MAN-3",
        MODE,
        "In manual mode without a pending /sync nothing is applied (drift stays) "
        "and the pre-apply dry run does not run.",
    ),
    Rule(
        "SYNC-1",
        SYNC,
        "POST releases/<name>/sync stores the current time in the annotation "
        "convoy.kumodo.io/sync-requested-at.",
    ),
    Rule("SYNC-2", SYNC, "A change of the sync-requested-at annotation starts a reconcile."),
    Rule(
        "SYNC-3",
        SYNC,
        "In manual mode a request is pending while the annotation time is later "
        "than status.lastHandledSyncAt, and a pending request is applied.",
    ),
    Rule(
        "SYNC-4",
        SYNC,
        "The pending check compares whole seconds: an annotation within the "
        "same second as lastHandledSyncAt is not pending, one a second later is.",
    ),
    Rule("SYNC-5", SYNC, "status.lastHandledSyncAt is written only after a successful apply."),
    Rule(
        "SYNC-6",
        SYNC,
        "When the apply fails or waits, the request stays pending and the next "
        "reconcile tries the apply again.",
    ),
    Rule(
        "SYNC-7",
        SYNC,
        "Automatic mode does not use status.lastHandledSyncAt: a /sync only starts a reconcile.",
    ),
    Rule(
        "SYNC-8",
        SYNC,
        "Writes to the /pin, /mutations and /lifecycle subresources also set "
        "sync-requested-at, and each counts as a /sync request in manual mode.",
    ),
    Rule(
        "SYNC-9",
        SYNC,
        "The observer sends a /sync when a sync wave completes, when health "
        "assessment reaches a new render, and when a batch of lifecycle hooks completes; in "
        "manual mode each counts as a request.",
    ),
    Rule("SYNC-10", SYNC, "`kubectl convoy release sync NAME` sends the /sync POST."),
    Rule(
        "FORCE-1",
        FORCE,
        "POST releases/<name>/sync?force=true also stores the time in "
        "convoy.kumodo.io/sync-force-requested-at.",
    ),
    Rule("FORCE-2", FORCE, "The reconcile after a forced request skips the pre-apply dry run."),
    Rule(
        "FORCE-3",
        FORCE,
        "With a failurePolicy, the reconcile after a forced request starts a "
        "new Progressing rollout, clearing a Failed or RolledBack one.",
    ),
    Rule(
        "FORCE-4",
        FORCE,
        "A forced request affects one reconcile only: the reconcile after it "
        "runs the pre-apply dry run again.",
    ),
    Rule(
        "FORCE-5",
        FORCE,
        "status.lastHandledForceSyncAt is written after the forced reconcile, "
        "also when that reconcile fails or waits.",
    ),
    Rule("FORCE-6", FORCE, "`kubectl convoy release sync NAME --force` sends the forced POST."),
    Rule("TRIG-1", TRIGGERS, "Creating a Release starts a reconcile."),
    Rule(
        "TRIG-2",
        TRIGGERS,
        "A change of metadata.generation starts a reconcile, and only a "
        "change of spec changes the generation.",
    ),
    Rule(
        "TRIG-3",
        TRIGGERS,
        "A change of the sync-requested-at annotation starts a reconcile; "
        "a change of any other annotation or of a label does not.",
    ),
    Rule(
        "TRIG-4",
        TRIGGERS,
        "The informer resync starts a reconcile; its period is 2 minutes by "
        "default and the controller flag --resync sets it.",
    ),
    Rule("TRIG-5", TRIGGERS, "A scheduled requeue starts a reconcile when its time comes."),
    Rule(
        "TRIG-6",
        TRIGGERS,
        "New health data written by the observer to the ReleaseInventory starts a reconcile.",
    ),
    Rule(
        "TRIG-7",
        TRIGGERS,
        "A change of the status of the Applied or Healthy condition of a "
        "Release in a lower wave on the same Cluster starts a reconcile; the same change on "
        "another Cluster or in a higher wave does not.",
    ),
    Rule(
        "TRIG-8",
        TRIGGERS,
        "A status write on a Release does not start a reconcile of it, so "
        "the controller's own status writes do not loop.",
    ),
    Rule(
        "TRIG-9",
        TRIGGERS,
        "Changing mutations or lifecycle through the main resource changes "
        "no generation and starts no reconcile; the change is used at the next periodic "
        "reconcile.",
    ),
    Rule(
        "TRIG-10",
        TRIGGERS,
        "A write through the /mutations or /lifecycle subresource starts a reconcile at once.",
    ),
    Rule(
        "REQ-1",
        REQUEUE,
        "SourceNotReady, ValuesNotReady, ClusterNotReady, DeployFailed and "
        "PruneFailed are transient and are retried with backoff.",
    ),
    Rule(
        "REQ-2",
        REQUEUE,
        "Unsupported, Unappliable, Pinned, HookFailed and the waiting reasons "
        "are not transient: there is no backoff retry, only the next periodic reconcile.",
    ),
    Rule("INT-1", INTERVAL, "spec.syncPolicy.interval is the period of the periodic reconcile."),
    Rule("INT-2", INTERVAL, "The observer checks for drift on the same interval."),
    Rule(
        "INT-3",
        INTERVAL,
        "With interval unset or 0 there is no periodic reconcile; only the "
        "informer resync and events start one.",
    ),
    Rule(
        "BACK-1",
        BACKOFF,
        "With retryBackoff.initial set, the delay before retry n is initial x factor^(n-1).",
    ),
    Rule("BACK-2", BACKOFF, "A factor below 1, or none, is taken as 2."),
    Rule("BACK-3", BACKOFF, "The delay never exceeds max; without max the cap is 1000 seconds."),
    Rule("BACK-4", BACKOFF, "A success or a hold resets the failure count."),
    Rule("BACK-5", BACKOFF, "A restart of the controller resets the failure count."),
    Rule(
        "BACK-6",
        BACKOFF,
        "Without retryBackoff.initial the default rate limiter applies: 5 "
        "milliseconds, doubling at each failure, up to 1000 seconds.",
    ),
)

BY_ID = {rule.id: rule for rule in RULES}
SECTIONS = tuple(dict.fromkeys(rule.section for rule in RULES))

#: Modules whose tests check the cluster, not a rule (they name none).
PREFLIGHT = ("test_preflight.py",)


@dataclass(frozen=True)
class Coverage:
    tests_by_rule: dict[str, list[str]]
    untagged: list[str]

    @property
    def uncovered(self) -> list[str]:
        return [rule.id for rule in RULES if not self.tests_by_rule[rule.id]]


class _Collector:
    """A pytest plugin that records each collected test's rule markers."""

    def __init__(self) -> None:
        self.items: list[tuple[str, list[str]]] = []

    def pytest_collection_modifyitems(self, items: list) -> None:
        for item in items:
            rules = [rule for marker in item.iter_markers("rule") for rule in marker.args]
            self.items.append((item.nodeid, rules))


def coverage(suite_dir: str) -> Coverage:
    """Collect the suite (nothing runs) and map every rule to the tests that name it."""
    import pytest

    collector = _Collector()
    code = pytest.main(
        [suite_dir, "--collect-only", "-q", "-p", "no:cacheprovider"], plugins=[collector]
    )
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise RuntimeError(f"collecting {suite_dir} failed with exit code {code}")
    tests_by_rule: dict[str, list[str]] = {rule.id: [] for rule in RULES}
    untagged = []
    for nodeid, rules in collector.items:
        for rule in rules:
            tests_by_rule[rule].append(nodeid)
        if not rules and not nodeid.split("::")[0].endswith(PREFLIGHT):
            untagged.append(nodeid)
    return Coverage(tests_by_rule, untagged)
