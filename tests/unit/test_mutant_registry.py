"""The mutant registry: a broken controller for every clause, and the benign variants the
document allows, each in the combined variant or registered apart with its reason. Checked with
the project's tests, so that a new clause without its mutant fails before the kill run."""

from __future__ import annotations

from conformance.document import catalog
from mutants import COMBINED, load, parts_of_combined


def test_every_clause_has_a_mutant_and_every_mutant_names_known_clauses() -> None:
    entries = load().values()
    named = {clause for entry in entries for clause in entry.clauses}
    assert named <= set(catalog.CLAUSES), sorted(named - set(catalog.CLAUSES))
    assert sorted(set(catalog.CLAUSES) - named) == []
    assert all(entry.description for entry in entries)
    assert {entry.phase for entry in entries} <= {None, "shipped", "long"}


def test_the_variants_the_document_allows_are_there() -> None:
    variants = {entry.name for entry in load().values() if entry.benign}
    assert variants >= {
        "one-worker",
        "slower-reconcile",
        "other-field-manager",
        "other-messages",
        "extra-labels",
        "slower-observer",
        # shaped like the controllers vendors write
        "status-in-two-patches",
        "reconciling-condition",
        "status-at-every-reconcile",
        "finalizer",
        "ready-and-stalled-summary",
        "last-applied-render-annotation",
        "controller-runtime-rate-limiter",
        "leader-election",
        # around the reconcile: how status and Events are written, what /metrics says
        "status-server-side-apply",
        "status-patch-of-changes",
        "event-broadcaster",
        "controller-runtime-metrics",
        # an adversarial round's, each on its own
        "conditions-in-place-with-synced",
        "interval-from-reconcile-start",
        COMBINED,
    }
    # every other benign difference is in the combined variant; one left out says why where
    # it is registered
    outside = variants - {part.name for part in parts_of_combined()} - {COMBINED}
    assert outside == {
        "status-server-side-apply",
        "conditions-in-place-with-synced",
        "interval-from-reconcile-start",
    }
