"""The model-based run's profiles and seeds (conformance.harness.model_based runs them).

Apart from the run itself, so that the plugin's options, the report and the kill run read them
without importing hypothesis before pytest has registered its plugin.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: The CI sequences' seed: one whose draws reach every case the generator aims for
#: (conformance.document.model_goals), as a rehearsal on the model shows
#: (tests/unit/test_model_goals.py).
CI_SEED = 1175


@dataclass(frozen=True)
class Size:
    sequences: int
    steps: int
    #: shrink a failure to a minimal sequence (minutes more; the kill table goes without)
    shrink: bool = True


#: The model-based run's sequences come from this many shards, each drawn from the run's seed
#: and the shard's number. Each sequence is a test of its own (Profile.sequence): time is
#: real and mostly waited, and a shard's sequences one after another were the longest test of
#: a whole-suite run by a minute and more.
SHARDS = 4
#: Per shard, by name: `ci` the same sequences at every run (its seed is fixed), `long` new ones
#: each run, `kill` the CI ones without shrinking.
PROFILES = {
    "ci": Size(4, 10),
    "long": Size(10, 12),
    "kill": Size(4, 10, shrink=False),
}
#: The profile of a run that names none: a certifying run's is the long one.
DEV_PROFILE, CERTIFYING_PROFILE = "ci", "long"
#: The suite's model-based test, as a replay command and the kill run name it.
TEST_NAME = "test_generated_event_sequences_match_the_sync_policy_model"


def profile_name(name: str | None, *, certifying: bool) -> str:
    """The profile a run draws: the one it names, else its kind of run's default."""
    return name or (CERTIFYING_PROFILE if certifying else DEV_PROFILE)


def run_seed(name: str | None, drawn: int | None, *, certifying: bool) -> int:
    """The run's seed: the given one, the fixed one of the CI sequences, or a new one for the
    long profile. One for the whole run, its xdist workers too: a sequence's test draws the
    sequences of its shard before its own."""
    if drawn is not None:
        return drawn
    long = profile_name(name, certifying=certifying) == "long"
    return random.getrandbits(32) if long else CI_SEED


def sequences_per_shard(name: str | None, *, certifying: bool) -> int:
    return PROFILES[profile_name(name, certifying=certifying)].sequences


@dataclass(frozen=True)
class Profile:
    name: str
    seed: int
    shard: int = 0
    #: which of the shard's sequences runs on the cluster (the others on the model alone);
    #: None: all of them
    sequence: int | None = None

    @classmethod
    def chosen(
        cls, name: str | None, seed: int, *, certifying: bool, shard: int, sequence: int
    ) -> Profile:
        """One sequence's test of the named profile (the run's default without one), drawn from
        the run's seed (run_seed)."""
        return cls(profile_name(name, certifying=certifying), seed, shard, sequence)

    @property
    def size(self) -> Size:
        return PROFILES[self.name]

    @property
    def shard_seed(self) -> str:
        """What hypothesis draws this shard's sequences from."""
        return f"{self.seed}/{self.shard}"

    @property
    def tests(self) -> str:
        """A -k expression of its test: its sequence's, or all of its shard's."""
        sequence = "" if self.sequence is None else f"{self.sequence}]"
        return f"{TEST_NAME}[{self.shard}-{sequence}"

    @property
    def replay(self) -> str:
        return (
            f"convoy-conformance run --model-profile={self.name} --model-seed={self.seed} "
            f"-k '{self.tests}' "
            "(and the run's other options)"
        )
