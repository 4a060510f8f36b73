"""Generated event sequences against the sync-policy model (conformance.harness.model_based).

Where the example tests check the situations their authors thought of, this test draws
sequences of events (requests at chosen seconds, forced or not, new renders, mode switches,
retryBackoff edits and their ladders, refused applies, crashes and withdrawn requests between a
refusal and its retry, removed requests, new renders under an interval that is then taken off,
new renders that turn Healthy after their apply and again later, other annotations, restarts)
and checks every reconcile against an executable model of the document: what is applied or
dry-run, in order, each retry's delay, the Applied condition, the handled times and the applied
render; it aims at the cases conformance.document.model_goals names.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from conformance.certification.report import MODEL_RUN_PROPERTY
from conformance.document.model_profiles import SHARDS, Profile
from conformance.harness.model_based import SequenceFailed, World, run_sequences
from conformance.install.base import ControllerUnderTest
from conformance.observe.releases import Releases
from conformance.observe.resync import ResyncClock
from conformance.timing import Timing

#: What the drawn events exercise in every run and its own kill table (`mutants --run
#: --tests` this module) showed it tells apart. Not yet: a forced request's second unlike its
#: reconcile's; restarts, and so BACK-5, only where drawn.
CLAUSES = (
    "MODE-1.false",
    "MODE-1.true",
    "MODE-1.changed",
    "AUTO-1.unchanged",
    "MAN-1.in-sync",
    "MAN-2.never-applied",
    "MAN-2.different",
    "MAN-3.in-sync",
    "MAN-3.different",
    "MAN-3.never-applied",
    "SYNC-2.later",
    "SYNC-2.earlier",
    "SYNC-2.removed",
    "SYNC-3.later",
    "SYNC-3.not-later",
    "SYNC-4.same-second",
    "SYNC-4.next-second",
    "SYNC-5.after-success",
    "SYNC-5.not-on-failure",
    "SYNC-5.not-while-waiting",
    "SYNC-6.transient-failure",
    "SYNC-7.not-read",
    "SYNC-7.not-written",
    "SYNC-9.new-render",
    "SYNC-9.new-render-once",
    "SYNC-9.automatic",
    "SYNC-9.hooks",
    "FORCE-2.manual",
    "FORCE-2.automatic",
    "FORCE-4.after-success",
    "FORCE-4.after-failure",
    "FORCE-4.after-wait",
    "FORCE-5.failure",
    "FORCE-5.wait",
    "TRIG-1.automatic",
    "TRIG-1.manual",
    "TRIG-2.automatic",
    "TRIG-2.manual",
    "TRIG-3.sync-requested-at",
    "TRIG-3.other-annotation",
    "TRIG-4.flag",
    "TRIG-5.interval",
    "TRIG-6.new-health",
    "INT-1.changed",
    "INT-3.unset",
    "INT-3.zero",
    "INT-3.changed-to-zero",
    "INT-3.removed",
    "REQ-1.DeployFailed",
    "BACK-1.formula",
    "BACK-2.unset",
    "BACK-2.below-1",
    "BACK-2.exactly-1",
    "BACK-3.max",
    "BACK-3.max-below-initial",
    "BACK-4.success",
    "BACK-4.hold-WaitingForSync",
    "BACK-6.ladder",
)


@pytest.mark.clause(*CLAUSES)
@pytest.mark.starts_first
@pytest.mark.timeout(3600)  # a shard of the long profile: 10 sequences of 12 steps
@pytest.mark.parametrize("shard", range(SHARDS))
def test_generated_event_sequences_match_the_sync_policy_model(
    shard: int,
    releases: Releases,
    controller: ControllerUnderTest | None,
    resync_clock: ResyncClock,
    timing: Timing,
    pytestconfig: pytest.Config,
    record_property: Callable[[str, object], None],
) -> None:
    profile = Profile.chosen(
        pytestconfig.getoption("model_profile"),
        pytestconfig.getoption("model_seed"),
        certifying=pytestconfig.getoption("certify_phase") is not None,
        shard=shard,
    )
    # A shared controller (kind, a vendor's) is restarted only by a test that has it alone.
    own = controller if controller is not None and controller.per_worker else None
    world = World(releases, resync_clock, timing, restartable=own)
    print(f"model-based: profile {profile.name}, seed {profile.seed}; replay: {profile.replay}")
    try:
        run_sequences(world, profile)
    except SequenceFailed as failed:
        pytest.fail(str(failed), pytrace=False)
    finally:
        record_property(MODEL_RUN_PROPERTY, json.dumps(world.summary(profile)))
    print(f"model-based: {world.sequences} sequences, {world.steps} steps")
