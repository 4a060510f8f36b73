"""The kit as vendors meet it: the built wheel, installed into a fresh venv outside the checkout,
runs suite tests on the local provider and checks its own report.

The venv has nothing of the checkout: no editable install, no PYTHONPATH, a working directory of
its own. What the suite reads at run time must come from the wheel (conformance.resources).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("conformance", "convoy", "convoyapi", "mutants")
#: Two quick tests that need the whole kit: the CRDs and test-only CRDs applied, the reference
#: controller started from the wheel (python -m convoy), and kubectl-convoy's /sync through the
#: subresource API it serves.
TESTS = (
    "test_automatic_true_applies_on_creation",
    "test_post_sync_writes_the_current_time_on_the_named_release",
)
_REPORT = "conformance-report.yaml"
_PRINT_DIGEST = (
    "from conformance.certification.provenance import suite_digest; print(suite_digest())"
)


def run(argv: list[str | Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run outside the checkout, with an environment that does not point into it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def checked(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"`{' '.join(proc.args)}` failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


#: What a build of the checkout reads besides the packages: the project file and its readme.
BUILD_FILES = ("pyproject.toml", "README.md")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of what the build reads: setuptools writes build/ and the egg-info
    into the tree it builds, and two xdist workers building the checkout at once collide."""
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    dist = tmp_path_factory.mktemp("dist")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", dist, source]
    checked(run(pip_wheel, dist))
    (built,) = dist.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def kit(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin directory of a fresh venv with the wheel (and its dependencies) installed."""
    venv = tmp_path_factory.mktemp("venv")
    checked(run([sys.executable, "-m", "venv", venv], venv))
    checked(run([venv / "bin/python", "-m", "pip", "install", "--quiet", wheel], venv))
    return venv / "bin"


def package_files() -> set[str]:
    """Every file of the packages in the checkout, as the wheel names them."""
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                found.add(path.relative_to(ROOT).as_posix())
    return found


def test_the_wheel_carries_every_file_of_the_kit(wheel: Path) -> None:
    carried = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(package_files() - carried)
    print(f"{wheel.name}: {len(carried)} files")
    assert not missing, f"the wheel lacks: {missing}"


def test_the_installed_kit_runs_suite_tests_and_checks_their_report(
    kit: Path, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    run_suite = [
        kit / "convoy-conformance",
        "run",
        "--cluster=local",
        *("--timing", "controller_resync=30s"),
        f"--report-dir={reports}",
        *("-k", " or ".join(TESTS)),
    ]
    out = checked(run(run_suite, tmp_path))
    assert "2 passed" in out, out

    report = yaml.safe_load((reports / "conformance-report.yaml").read_text())
    installed_digest = checked(run([kit / "python", "-c", _PRINT_DIGEST], tmp_path)).strip()
    assert report["provenance"]["suiteDigest"] == installed_digest
    assert "gitCommit" not in report["provenance"], "an installed kit is no checkout"

    passed = [c["id"] for r in report["rules"] for c in r["clauses"] if c["result"] == "passed"]
    print(f"clauses passed: {passed}")
    assert passed

    # The installed kit's verifier accepts what its suite made (version, digest, JUnit) and
    # refuses only what two tests cannot show: the clauses they do not check, the tests not run.
    verify = run(
        [kit / "convoy-conformance", "verify-report", "--results-only", reports / _REPORT], tmp_path
    )
    problems = [line for line in verify.stdout.splitlines() if line.startswith("not passed: ")]
    print(f"verify-report: {len(problems)} problems, the first: {problems[:1]}")
    assert verify.returncode == 1 and problems, verify.stdout + verify.stderr
    assert all(f"{_REPORT}: rules[" in line for line in problems), [
        line for line in problems if f"{_REPORT}: rules[" not in line
    ]
