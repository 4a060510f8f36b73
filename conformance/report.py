"""The conformance report: ConformanceReport YAML, JUnit XML (pytest's) and one HTML page.

Per rule: passed, failed, skipped, not-supported or error, with the failing message. A run
certifies only when it ran every test of every rule, unselected and unskipped, with the
controller's default flags, tolerances within their maximums, the reference mutant mechanism
unused, and the implementation named.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html
from collections import defaultdict
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance import catalog
from conformance.session import ENVIRONMENT, TIMING

API_VERSION = "conformance.convoy.kumodo.io/v1alpha1"
KIND = "ConformanceReport"
IMPLEMENTATION_FIELDS = ("organization", "project", "version", "url", "contact")
STATES = ("passed", "failed", "error", "skipped", "not-supported")
#: A skip whose reason starts with this marks a rule the implementation cannot be checked for.
NOT_SUPPORTED = "not-supported:"
#: Long tests (`-m long`) need a resync above 1000 s, which a certifying run (the document's
#: 2 minutes) does not have; skipped for that reason they leave their rule's verdict alone.
LONG = "long test"
#: The user property that carries a test's rule IDs (also into JUnit XML).
RULES_PROPERTY = "convoy_rules"


def suite_version() -> str:
    try:
        return metadata.version("convoy-conformance")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@dataclasses.dataclass
class TestResult:
    nodeid: str
    rules: list[str]
    state: str = "passed"
    message: str = ""


class ReportPlugin:
    """Collects results (also from xdist workers) and writes the report at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: dict[str, TestResult] = {}
        self.deselected = 0
        self.environment: dict[str, Any] = {}

    # -- collecting --------------------------------------------------------------------------
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Tag each test with its rules; the tag travels in reports, also from xdist workers."""
        for item in items:
            rules = [rule for marker in item.iter_markers("rule") for rule in marker.args]
            item.user_properties.append((RULES_PROPERTY, " ".join(rules)))

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        rules = dict(report.user_properties).get(RULES_PROPERTY, "").split()
        result = self.results.setdefault(report.nodeid, TestResult(report.nodeid, rules))
        state = _state(report)
        if state != "passed" and result.state == "passed":
            result.state, result.message = state, _message(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.environment.update(getattr(node, "workeroutput", {}).get("convoy_environment", {}))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.environment.update(self.config.stash.get(ENVIRONMENT, {}))
        if hasattr(self.config, "workerinput"):
            self.config.workeroutput["convoy_environment"] = self.environment  # type: ignore[attr-defined]
            return
        directory = self.config.getoption("report_dir")
        if directory and self.results:
            write(self.build(), Path(directory))

    # -- building ----------------------------------------------------------------------------
    def build(self) -> dict[str, Any]:
        timing = self.config.stash[TIMING]
        tests_by_rule: dict[str, list[TestResult]] = defaultdict(list)
        for result in self.results.values():
            for rule in result.rules:
                tests_by_rule[rule].append(result)
        rules = [_rule_entry(rule, tests_by_rule[rule.id]) for rule in catalog.RULES]
        implementation = {
            f: self.config.getoption(f"implementation_{f}") for f in IMPLEMENTATION_FIELDS
        }
        reasons = self.non_certifying(rules, implementation, timing)
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "suiteVersion": suite_version(),
            "document": {"name": catalog.DOCUMENT, "version": catalog.DOCUMENT_VERSION},
            "implementation": implementation,
            "environment": self.environment,
            "options": self.options(),
            "timing": {name: value for name, value, _ in timing.rows()},
            "certifying": not reasons,
            "nonCertifyingReasons": reasons,
            "summary": {state: sum(r["result"] == state for r in rules) for state in STATES},
            "rules": rules,
        }

    def options(self) -> dict[str, Any]:
        option = self.config.getoption
        return {
            "cluster": option("cluster"),
            "convoyInstall": option("convoy_install"),
            "convoyControllerDeployment": option("convoy_controller_deployment"),
            "keyword": option("keyword") or None,
            "markers": option("markexpr") or None,
            "args": list(self.config.invocation_params.args),
        }

    def non_certifying(self, rules: list[dict], implementation: dict, timing) -> list[str]:
        reasons = [f"timing beyond the certifying maximum: {t}" for t in timing.beyond_maximum()]
        option = self.config.getoption
        if option("keyword"):
            reasons.append(f"tests selected with -k {option('keyword')!r}")
        if option("markexpr"):
            reasons.append(f"tests selected with -m {option('markexpr')!r}")
        if self.deselected:
            reasons.append(f"{self.deselected} test(s) deselected")
        if option("convoy_mutant"):
            reasons.append(f"a mutant of the reference controller ran: {option('convoy_mutant')}")
        missing = [f for f, value in implementation.items() if not value]
        if missing:
            reasons.append(f"implementation metadata missing: {', '.join(missing)}")
        for rule in rules:
            if rule["result"] != "passed":
                reasons.append(f"{rule['id']} {rule['result']}")
        return reasons


def _state(report: pytest.TestReport) -> str:
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
        if str(reason).startswith(("Skipped: " + LONG, LONG)):
            return "long-skipped"
        return "not-supported" if NOT_SUPPORTED in str(reason) else "skipped"
    if report.failed:
        return "failed" if report.when == "call" else "error"
    return "passed"


def _message(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    crash = getattr(report.longrepr, "reprcrash", None)
    return crash.message if crash else str(report.longrepr)[-2000:]


def _rule_entry(rule: catalog.Rule, results: list[TestResult]) -> dict[str, Any]:
    states = {r.state for r in results} - {"long-skipped"}
    verdict = next(
        (s for s in ("failed", "error", "skipped", "not-supported") if s in states),
        "passed" if states else "skipped",
    )
    entry = {
        "id": rule.id,
        "section": rule.section,
        "statement": rule.statement,
        "result": verdict,
        "tests": [
            {"name": r.nodeid, "result": r.state, **({"message": r.message} if r.message else {})}
            for r in results
        ],
    }
    if not results:
        entry["message"] = "no test of this rule ran"
    return entry


def write(report: dict[str, Any], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "conformance-report.yaml").write_text(yaml.safe_dump(report, sort_keys=False))
    (directory / "conformance-report.html").write_text(render_html(report))


_COLOURS = {
    "passed": "#1a7f37",
    "failed": "#cf222e",
    "error": "#9a6700",
    "skipped": "#6e7781",
    "not-supported": "#6e7781",
}


def render_html(report: dict[str, Any]) -> str:
    """One self-contained page: the verdict first, then every rule by section."""
    e = html.escape
    verdict = "CERTIFYING RUN: all rules passed" if report["certifying"] else "NOT CERTIFYING"
    impl = report["implementation"]
    rows = []
    for section in catalog.SECTIONS:
        rows.append(f"<tr><th colspan=3>{e(section)}</th></tr>")
        for rule in (r for r in report["rules"] if r["section"] == section):
            colour = _COLOURS[rule["result"]]
            details = "".join(
                f"<li><code>{e(t['name'])}</code>: {e(t['result'])}"
                + (f"<pre>{e(t['message'])}</pre>" if t.get("message") else "")
                + "</li>"
                for t in rule["tests"]
            )
            rows.append(
                f"<tr><td><b>{e(rule['id'])}</b></td>"
                f"<td style='color:{colour};font-weight:bold'>{e(rule['result'])}</td>"
                f"<td>{e(rule['statement'])}<details><summary>{len(rule['tests'])} test(s)"
                f"</summary><ul>{details}</ul></details></td></tr>"
            )
    reasons = "".join(f"<li>{e(r)}</li>" for r in report["nonCertifyingReasons"])
    summary = ", ".join(f"{n} {s}" for s, n in report["summary"].items() if n)
    timing = "".join(f"<tr><td>{e(k)}</td><td>{v:g}</td></tr>" for k, v in report["timing"].items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>convoy conformance report</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:70em}}
table{{border-collapse:collapse;width:100%}}td,th{{border-bottom:1px solid #ddd;padding:.4em;
text-align:left;vertical-align:top}}th{{background:#f6f8fa}}pre{{white-space:pre-wrap;
background:#f6f8fa;padding:.5em}}.verdict{{font-size:1.4em;font-weight:bold;color:
{"#1a7f37" if report["certifying"] else "#cf222e"}}}</style></head><body>
<h1>convoy conformance report</h1>
<p class="verdict">{e(verdict)}</p>
<p>{e(impl.get("organization") or "?")} / {e(impl.get("project") or "?")}
{e(impl.get("version") or "")} &middot; suite {e(report["suiteVersion"])} &middot; document
{e(report["document"]["version"])} &middot; {e(report["date"])} &middot;
Kubernetes {e(str(report["environment"].get("kubernetesVersion", "?")))} on
{e(str(report["environment"].get("provider", "?")))}</p>
<p>{e(summary)}</p>
{f"<h2>Why this run does not certify</h2><ul>{reasons}</ul>" if reasons else ""}
<h2>Rules</h2><table>{"".join(rows)}</table>
<h2>Timing (seconds)</h2><table>{timing}</table>
</body></html>
"""


def verify(path: Path) -> list[str]:
    """Problems that keep a report from certifying; empty when it does."""
    try:
        report = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        return [f"cannot read {path}: {error}"]
    if not isinstance(report, dict):
        return [f"{path} is not a YAML mapping"]
    problems = []
    if (report.get("apiVersion"), report.get("kind")) != (API_VERSION, KIND):
        problems.append(f"apiVersion/kind must be {API_VERSION}/{KIND}")
    for field in (
        "date",
        "suiteVersion",
        "document",
        "implementation",
        "environment",
        "options",
        "timing",
        "certifying",
        "rules",
    ):
        if field not in report:
            problems.append(f"missing field {field}")
    implementation = report.get("implementation") or {}
    problems += [
        f"implementation.{f} is empty" for f in IMPLEMENTATION_FIELDS if not implementation.get(f)
    ]
    results = {r.get("id"): r.get("result") for r in report.get("rules") or []}
    for rule in catalog.RULES:
        if rule.id not in results:
            problems.append(f"rule {rule.id} is missing")
        elif results[rule.id] != "passed":
            problems.append(f"rule {rule.id}: {results[rule.id]}")
    if report.get("certifying") is not True:
        problems.append(
            "the run was not certifying: "
            + "; ".join(report.get("nonCertifyingReasons") or ["no reason given"])
        )
    return problems
