"""How the long-phase test on a vendor's Deployment reads its probes' outcomes from pytest's
`-rA` summary, whatever the terminal's width (CI's is wide: a FAILED line then ends with the
failure's message, not with the test's ID)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kindhost.test_long_phase_on_a_vendor_deployment import outcomes

PROBES = """
import pytest

def test_fails():
    pytest.fail("on purpose: the Deployment must be restored whatever failed")

def test_passes():
    pass
"""


@pytest.mark.parametrize("columns", ["40", "250"])
def test_each_summary_line_is_read_by_its_test_id(tmp_path: Path, columns: str) -> None:
    (tmp_path / "test_probes.py").write_text(PROBES)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "test_probes.py"]
    env = {**os.environ, "COLUMNS": columns}
    ran = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert outcomes(ran.stdout, "test_fails") == ["FAILED"], ran.stdout
    assert outcomes(ran.stdout, "test_passes") == ["PASSED"], ran.stdout
