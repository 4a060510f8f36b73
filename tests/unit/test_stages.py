"""`make test`'s table of stages: each stage's wall time, how busy the cores were, its result,
for stages that passed, failed or did not finish."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks import stages

SCRIPT = Path(stages.__file__)


def stage(record: Path, name: str, *command: str) -> int:
    """A top stage, also when these tests run inside `make test`'s own stages."""
    argv = [sys.executable, "-P", str(SCRIPT), "run", str(record), name, "--", *command]
    top = {key: value for key, value in os.environ.items() if key != stages.DEPTH}
    return subprocess.run(argv, env=top, check=False).returncode


def test_the_table_names_each_stage_with_its_wall_time_cores_and_result(tmp_path: Path) -> None:
    record = tmp_path / "stages.jsonl"
    stages.begin(record)
    assert stage(record, "computes", sys.executable, "-c", "sum(range(3_000_000))") == 0
    assert stage(record, "fails", sys.executable, "-c", "raise SystemExit(3)") == 3

    rows = {row["name"]: row for row in stages.rows(record)}
    assert 0 <= rows["computes"]["coresBusy"] <= 1, rows["computes"]
    lines = stages.table(record).splitlines()
    assert "cores busy" in lines[0]
    assert lines[1].startswith("computes") and lines[1].endswith("ok"), lines[1]
    assert "%" in lines[1], lines[1]
    assert lines[2].startswith("fails") and lines[2].endswith("FAILED (3)"), lines[2]


def test_a_stage_that_did_not_finish_is_in_the_table(tmp_path: Path) -> None:
    record = tmp_path / "stages.jsonl"
    record.write_text('{"name": "kill run", "depth": 0, "started": 1.0}\n')
    assert stages.table(record).splitlines()[1].endswith("did not finish")


def test_busy_is_unknown_without_proc_stat() -> None:
    assert stages.busy_between(None, (1, 2)) is None
    assert stages.busy_between((10, 100), (40, 200)) == 0.3
