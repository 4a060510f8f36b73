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


#: The model-based test runs as this many shards, each its own sequences (drawn from the run's
#: seed and the shard's number) on its own worker: time is real, and mostly waited.
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


@dataclass(frozen=True)
class Profile:
    name: str
    seed: int
    shard: int = 0

    @classmethod
    def chosen(
        cls, name: str | None, drawn: int | None, *, certifying: bool, shard: int = 0
    ) -> Profile:
        """The named profile (the run's default without one) and its seed: the given one,
        the fixed one of the CI sequences, or a new one for the long profile (each shard its
        own: the report records each)."""
        name = profile_name(name, certifying=certifying)
        if drawn is None:
            drawn = random.getrandbits(32) if name == "long" else CI_SEED
        return cls(name, drawn, shard)

    @property
    def size(self) -> Size:
        return PROFILES[self.name]

    @property
    def shard_seed(self) -> str:
        """What hypothesis draws this shard's sequences from."""
        return f"{self.seed}/{self.shard}"

    @property
    def replay(self) -> str:
        return (
            f"convoy-conformance run --model-profile={self.name} --model-seed={self.seed} "
            f"-k '{TEST_NAME}[{self.shard}]' "
            "(and the run's other options)"
        )
