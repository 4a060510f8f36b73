"""The conformance report: ConformanceReport YAML, JUnit XML (pytest's) and one HTML page.

Per rule: passed, failed, skipped, not-supported or error, with the failing message. A run
certifies only when it ran every test of every rule, unselected and unskipped, with the
controller's default flags, tolerances within their maximums, the reference mutant mechanism
unused, and the implementation named.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import html
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.certification import charts, measurements, provenance, verdicts
from conformance.document import catalog
from conformance.document.model_profiles import CERTIFYING_PROFILE, profile_name
from conformance.harness.stash import ENVIRONMENT, TIMING
from conformance.timing import Timing

API_VERSION = "conformance.convoy.kumodo.io/v1alpha1"
KIND = "ConformanceReport"
IMPLEMENTATION_FIELDS = ("organization", "project", "version", "url", "contact")
#: Verdicts of a test, a clause and a rule. "not-in-profile": the run's profile cannot check it
#: (a development run, or the other phase of a certifying run); it is no verdict about the
#: controller, and a certifying report has none left.
STATES = ("passed", "failed", "error", "skipped", "not-supported", "not-in-profile")
#: The user property that carries a test's clause IDs (also into JUnit XML).
CLAUSES_PROPERTY = "convoy_clauses"
#: The user property that carries the model-based run's profile, seed and counts (JSON).
MODEL_RUN_PROPERTY = "convoy_model_run"
#: The phases of a certifying run (`convoy-conformance certify`), in order, with the marker
#: expression that selects each one's tests.
PHASES = {"shipped": "not long", "long": "long"}
#: The implementation a report of the suite's own reference controller names: a run of it
#: (--convoy-install=reference) certifies nobody else's controller.
REFERENCE_IMPLEMENTATION = {"organization": "convoy-conformance", "project": "reference"}
#: What every phase of a certifying run must share: the cluster's provider and Kubernetes
#: version, and the controller under test (its images and the digests its pods ran).
PHASE_IDENTITY = ("provider", "kubernetesVersion", "controller")


@dataclasses.dataclass
class TestResult:
    nodeid: str
    clauses: list[str]
    state: str = "passed"
    message: str = ""
    phase: str | None = None
    #: what the test measured against the document's delays and periods
    #: (conformance.certification.measurements)
    measurements: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: the model-based run's profile, seed, sequences and steps (conformance.harness.model_based)
    model_run: dict[str, Any] = dataclasses.field(default_factory=dict)

    def entry(self) -> dict[str, Any]:
        """As the report lists it, so that a later phase can carry it on."""
        return {
            "name": self.nodeid,
            "clauses": self.clauses,
            "result": self.state,
            "phase": self.phase,
            **({"message": self.message} if self.message else {}),
            **({"measurements": self.measurements} if self.measurements else {}),
            **({"modelBasedRun": self.model_run} if self.model_run else {}),
        }


class ReportPlugin:
    """Collects results (also from xdist workers) and writes the report at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: dict[str, TestResult] = {}
        self.deselected = 0
        self.environment: dict[str, Any] = {}
        #: the report this process wrote, and where (None on xdist workers, or none written)
        self.written: tuple[dict[str, Any], Path] | None = None
        self.phase: str | None = config.getoption("certify_phase", None)
        #: The report of the phase before this one, whose results this report carries on.
        self.previous: dict[str, Any] | None = None
        previous = config.getoption("previous_phase", None)
        if previous:
            self.previous = yaml.safe_load(Path(previous).read_text())
            for test in self.previous.get("tests") or []:
                self.results[test["name"]] = TestResult(
                    test["name"],
                    test["clauses"],
                    test["result"],
                    test.get("message", ""),
                    test.get("phase"),
                    test.get("measurements") or [],
                    test.get("modelBasedRun") or {},
                )

    # -- collecting --------------------------------------------------------------------------
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Tag each test with its clauses; the tag travels in reports, also from xdist workers."""
        for item in items:
            item.user_properties.append((CLAUSES_PROPERTY, " ".join(catalog.clauses_of(item))))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        """What the test measures goes into its call report (and so from xdist workers too)."""
        with measurements.recording() as recorded:
            try:
                return (yield)
            finally:
                if recorded:
                    item.user_properties.append(measurements.as_property(recorded))

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        clauses = str(dict(report.user_properties).get(CLAUSES_PROPERTY, "")).split()
        result = self.results.get(report.nodeid)
        if result is None or result.phase != self.phase:  # a test the previous phase skipped
            result = TestResult(report.nodeid, clauses, phase=self.phase)
            self.results[report.nodeid] = result
        if report.when == "call":
            result.measurements = measurements.from_properties(report.user_properties)
            model_run = dict(report.user_properties).get(MODEL_RUN_PROPERTY)
            result.model_run = json.loads(str(model_run)) if model_run else {}
        state = _state(report)
        if state != "passed" and result.state == "passed":
            result.state, result.message = state, _message(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.environment.update(getattr(node, "workeroutput", {}).get("convoy_environment", {}))

    @pytest.hookimpl(trylast=True)  # after pytest's junitxml has written the JUnit file
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        environment: dict[str, Any] = self.config.stash.get(ENVIRONMENT, {})
        self.environment.update(environment)
        if hasattr(self.config, "workerinput"):
            output = self.config.workeroutput  # type: ignore[attr-defined]  # set by xdist
            output["convoy_environment"] = self.environment
            return
        directory = self.config.getoption("report_dir")
        if directory and self.results:
            junit = Path(self.config.option.xmlpath) if self.config.option.xmlpath else None
            self.written = (seal(self.build(), junit), Path(directory))
            write(*self.written)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The run's verdict, why it does not certify, and where the report is."""
        if self.written is not None:
            for line in verdict_lines(*self.written):
                terminalreporter.write_line(line)

    # -- building ----------------------------------------------------------------------------
    def build(self) -> dict[str, Any]:
        timing = self.config.stash[TIMING]
        results = list(self.results.values())
        rules = [_rule_entry(rule, results) for rule in catalog.RULES]
        implementation = {
            f: self.config.getoption(f"implementation_{f}") for f in IMPLEMENTATION_FIELDS
        }
        reasons = self.non_certifying(rules, implementation, timing)
        phases = [*((self.previous or {}).get("phases") or []), self.phase_entry(timing)]
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "suiteVersion": provenance.suite_version(),
            "provenance": provenance.provenance(),
            "document": {"name": catalog.DOCUMENT, "version": catalog.DOCUMENT_VERSION},
            "implementation": implementation,
            "environment": self.environment,
            "options": self.options(),
            "timing": {name: value for name, value, _ in timing.rows()},
            "phases": phases,
            "certifying": not reasons,
            "nonCertifyingReasons": reasons,
            "summary": {state: sum(r["result"] == state for r in rules) for state in STATES},
            "clauseSummary": {
                state: sum(c["result"] == state for r in rules for c in r["clauses"])
                for state in STATES
            },
            "rules": rules,
            "tests": [r.entry() for r in results],
        }

    def phase_entry(self, timing: Timing) -> dict[str, Any]:
        return {
            "name": self.phase or "single",
            "markers": self.config.getoption("markexpr") or None,
            "controllerResync": timing.controller_resync,
            "tests": sum(r.phase == self.phase for r in self.results.values()),
            "provider": self.environment.get("provider"),
            "kubernetesVersion": self.environment.get("kubernetesVersion"),
            "controller": controller_identity(self.environment.get("controllerUnderTest")),
            "nonCertifyingReasons": self.run_reasons(timing),
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

    def non_certifying(self, rules: list[dict], implementation: dict, timing: Timing) -> list[str]:
        """Why the report does not certify: what each earlier phase's run did, this run's,
        and every clause that did not pass."""
        reasons = [
            f"phase {phase['name']}: {reason}"
            for phase in (self.previous or {}).get("phases") or []
            for reason in phase.get("nonCertifyingReasons") or []
        ]
        reasons += self.run_reasons(timing)
        missing = [f for f, value in implementation.items() if not value]
        if missing:
            reasons.append(f"implementation metadata missing: {', '.join(missing)}")
        elif found := reference_named_otherwise(self.options(), implementation):
            reasons.append(found)
        reasons += self.phase_problems()
        for rule in rules:
            for clause in rule["clauses"]:
                if clause["result"] != "passed":
                    note = f" ({clause['notInProfile']})" if clause.get("notInProfile") else ""
                    reasons.append(f"{clause['id']} {clause['result']}{note}")
        return reasons

    def run_reasons(self, timing: Timing) -> list[str]:
        """What this pytest run did that a certifying one must not."""
        option = self.config.getoption
        reasons = [
            f"timing beyond the certifying maximum: {t}"
            for t in timing.beyond_maximum(long_phase=self.phase == "long")
        ]
        if option("keyword"):
            reasons.append(f"tests selected with -k {option('keyword')!r}")
        markers = option("markexpr")
        if markers and markers != PHASES.get(self.phase or ""):
            reasons.append(f"tests selected with -m {markers!r}")
        if self.deselected and not self.phase:
            reasons.append(f"{self.deselected} test(s) deselected")
        if option("rerun_failed"):
            reasons.append(f"a rerun of the tests {option('rerun_failed')} lists as failed")
        if option("keep_namespaces") != "never":
            reasons.append(f"--keep-namespaces={option('keep_namespaces')}: namespaces left")
        reasons += self.model_run_problems()
        if option("convoy_mutant"):
            reasons.append(f"a mutant of the reference controller ran: {option('convoy_mutant')}")
        return reasons

    def model_run_problems(self) -> list[str]:
        """A certifying run's model-based run draws the long profile from a new seed: a seed
        chosen could be one known to pass."""
        option = self.config.getoption
        profile = profile_name(option("model_profile"), certifying=self.phase is not None)
        found = []
        if profile != CERTIFYING_PROFILE:
            found.append(
                f"the model-based run drew the {profile} profile, not {CERTIFYING_PROFILE}"
            )
        if option("model_seed") is not None:
            found.append(f"the model-based run replayed seed {option('model_seed')}")
        return found

    def phase_problems(self) -> list[str]:
        """A certifying run is both phases in order, the second carrying on the first."""
        if self.phase is None:
            return []
        order = list(PHASES)
        done = [p["name"] for p in (self.previous or {}).get("phases") or []]
        before = order[: order.index(self.phase)]
        if done != before:
            return [f"phase {self.phase} must follow the phases {before}, not {done}"]
        if self.phase != order[-1]:
            return [f"only the {self.phase} phase of the certifying run ran so far"]
        return []


def controller_identity(described: dict[str, Any] | None) -> list[str]:
    """What names the controller under test across phases: each container's name, image and
    the digest its pods ran (not its args: the long phase changes --resync), or the host
    process of the suite's own reference controller."""
    described = described or {}
    if "hostProcess" in described:
        return [str(described["hostProcess"])]
    return [
        f"{c.get('name')}={c.get('image')}@{c.get('imageID')}"
        for c in described.get("containers") or []
    ]


def reference_named_otherwise(options: dict[str, Any], implementation: dict[str, Any]) -> str:
    """A run of the suite's own reference controller names the reference, nobody else: the
    reason it does not certify, or ""."""
    named = {f: implementation.get(f) for f in REFERENCE_IMPLEMENTATION}
    if options.get("convoyInstall") != "reference" or named == REFERENCE_IMPLEMENTATION:
        return ""
    return (
        f"the suite ran its own reference controller (--convoy-install=reference), not "
        f"{named['organization']}'s {named['project']}: a report of it names "
        f"organization {REFERENCE_IMPLEMENTATION['organization']!r} and project "
        f"{REFERENCE_IMPLEMENTATION['project']!r}"
    )


#: The report's field that seals it: digests of its content and of its JUnit file.
INTEGRITY = "integrity"


def content_digest(report: dict[str, Any]) -> str:
    """sha256 of the report's content as JSON, without its own digest (what a YAML round trip
    keeps: the report holds strings, numbers, booleans, lists and mappings only)."""
    content = {k: v for k, v in report.items() if k != INTEGRITY}
    content[INTEGRITY] = {k: v for k, v in (report.get(INTEGRITY) or {}).items() if k != "report"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def seal(report: dict[str, Any], junit: Path | None) -> dict[str, Any]:
    """The report with its integrity field: a digest of the JUnit file the run wrote beside
    it, and of the report's own content, so that an edit of either after the run shows. No
    signature: whoever has the kit can seal a report again; verify-report checks the seal."""
    report[INTEGRITY] = {
        "algorithm": "sha256",
        **({"junit": file_digest(junit)} if junit is not None and junit.exists() else {}),
    }
    report[INTEGRITY]["report"] = content_digest(report)
    return report


def _state(report: pytest.TestReport) -> str:
    if report.skipped:
        return str(dict(report.user_properties).get(verdicts.PROPERTY) or "skipped")
    if report.failed:
        return "failed" if report.when == "call" else "error"
    return "passed"


def _message(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    crash = getattr(report.longrepr, "reprcrash", None)
    return crash.message if crash else str(report.longrepr)[-2000:]


#: The worst first: a verdict is the first of these that one of its parts has.
_WORST_FIRST = ("failed", "error", "skipped", "not-supported", "passed", "not-in-profile")


def _verdict(states: set[str]) -> str:
    return next((s for s in _WORST_FIRST if s in states), "skipped")


def _clause_entry(clause: catalog.Clause, results: list[TestResult]) -> dict[str, Any]:
    mine = [r for r in results if clause.id in r.clauses]
    verdict = _verdict({r.state for r in mine})
    entry: dict[str, Any] = {
        "id": clause.id,
        "statement": clause.statement,
        "result": verdict,
        "tests": [
            {"name": r.nodeid, "result": r.state, **({"message": r.message} if r.message else {})}
            for r in mine
        ],
    }
    if not mine:
        entry["message"] = "no test of this clause ran"
    if verdict == "not-in-profile":
        entry["notInProfile"] = clause.certifying_only or "skipped in this profile"
    return entry


def _rule_entry(rule: catalog.Rule, results: list[TestResult]) -> dict[str, Any]:
    clauses = [_clause_entry(clause, results) for clause in rule.clauses]
    return {
        "id": rule.id,
        "section": rule.section,
        "statement": rule.statement,
        "result": _verdict({c["result"] for c in clauses}),
        "clauses": clauses,
    }


#: How many non-certifying reasons the terminal shows (the report has them all).
REASONS_SHOWN = 15


def verdict_lines(report: dict[str, Any], directory: Path) -> list[str]:
    clauses = report["clauseSummary"]
    counted = ", ".join(f"{n} {state}" for state, n in clauses.items() if n)
    verdict = "CERTIFYING" if report["certifying"] else "NOT CERTIFYING"
    lines = [f"convoy conformance: {verdict} ({sum(clauses.values())} clauses: {counted})"]
    reasons = report["nonCertifyingReasons"]
    lines += [f"  - {reason}" for reason in reasons[:REASONS_SHOWN]]
    if len(reasons) > REASONS_SHOWN:
        lines.append(f"  ... and {len(reasons) - REASONS_SHOWN} more in the report")
    files = ", ".join(str(directory / name) for name in REPORT_FILES)
    return [*lines, f"  report: {files}"]


#: What `write` puts in the report directory (the JUnit file comes from pytest).
REPORT_FILES = ("conformance-report.yaml", "conformance-report.html", "junit.xml")


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
    "not-in-profile": "#6e7781",
}


def _tests_html(tests: list[dict[str, Any]]) -> str:
    e = html.escape
    return "".join(
        f"<li><code>{e(t['name'])}</code>: {e(t['result'])}"
        + (f"<pre>{e(t['message'])}</pre>" if t.get("message") else "")
        + "</li>"
        for t in tests
    )


def _clause_html(clause: dict[str, Any]) -> str:
    e = html.escape
    colour = _COLOURS[clause["result"]]
    note = f" <i>{e(clause['notInProfile'])}</i>" if clause.get("notInProfile") else ""
    return (
        f"<li><code>{e(clause['id'])}</code> "
        f"<b style='color:{colour}'>{e(clause['result'])}</b>: {e(clause['statement'])}{note}"
        f"<details><summary>{len(clause['tests'])} test(s)</summary>"
        f"<ul>{_tests_html(clause['tests'])}</ul></details></li>"
    )


def _charts_html(report: dict[str, Any]) -> str:
    """Per rule, each of its tests that measured delays or periods, charted."""
    e = html.escape
    measured = {t["name"]: t["measurements"] for t in report["tests"] if t.get("measurements")}
    sections = []
    for rule in report["rules"]:
        names = dict.fromkeys(
            t["name"] for c in rule["clauses"] for t in c["tests"] if t["name"] in measured
        )
        figures = "".join(
            f"<figure><figcaption><code>{e(name)}</code></figcaption>"
            + "".join(charts.chart_svg(m) for m in measured[name])
            + "</figure>"
            for name in names
        )
        if figures:
            sections.append(
                f"<section class='timing-rule' id='chart-{e(rule['id'])}'>"
                f"<h3>{e(rule['id'])}: {e(rule['statement'])}</h3>{figures}</section>"
            )
    if not sections:
        return ""
    return (
        "<h2>Measured timing</h2><p>Each delay or period the suite measured, against the "
        "document's value and the band the run's tolerances accept.</p>"
        + charts.legend_svg()
        + "".join(sections)
    )


def _model_runs_html(report: dict[str, Any]) -> str:
    """The model-based run's sequences: the profile and seed that drew them, and how many."""
    e = html.escape
    runs = [t for t in report["tests"] if t.get("modelBasedRun")]
    items = "".join(
        f"<li><code>{e(t['name'])}</code>: {e(t['result'])}, profile "
        f"{e(str(r['profile']))}, seed {e(str(r['seed']))}: {e(str(r['sequences']))} sequences, "
        f"{e(str(r['steps']))} steps{'' if r['restarts'] else ', no restarts drawn'}. "
        f"Replay: <code>{e(str(r['replay']))}</code></li>"
        for t in runs
        for r in [t["modelBasedRun"]]
    )
    goals = _goals_html([t["modelBasedRun"] for t in runs])
    return f"<h2>Model-based run</h2><ul>{items}</ul>{goals}" if items else ""


def _goals_html(runs: list[dict[str, Any]]) -> str:
    """How many of the cases the generator aims for (conformance.document.model_goals) the shards'
    sequences reached together, and those none reached."""
    every = {g for r in runs for g in (*r.get("goalsReached", ()), *r.get("goalsMissed", ()))}
    reached = {g for r in runs for g in r.get("goalsReached", ())}
    if not every:
        return ""
    missed = sorted(every - reached)
    text = f"<p>The sequences reached {len(reached)} of the {len(every)} cases they aim for"
    return text + (f"; none reached: {html.escape('; '.join(missed))}.</p>" if missed else ".</p>")


def render_html(report: dict[str, Any]) -> str:
    """One self-contained page: the verdict first, then every rule and clause by section."""
    e = html.escape
    verdict = "CERTIFYING RUN: all clauses passed" if report["certifying"] else "NOT CERTIFYING"
    impl = report["implementation"]
    rows = []
    for section in catalog.SECTIONS:
        rows.append(f"<tr><th colspan=3>{e(section)}</th></tr>")
        for rule in (r for r in report["rules"] if r["section"] == section):
            colour = _COLOURS[rule["result"]]
            clauses = "".join(_clause_html(c) for c in rule["clauses"])
            rows.append(
                f"<tr><td><b>{e(rule['id'])}</b></td>"
                f"<td style='color:{colour};font-weight:bold'>{e(rule['result'])}</td>"
                f"<td>{e(rule['statement'])}<ul>{clauses}</ul></td></tr>"
            )
    reasons = "".join(f"<li>{e(r)}</li>" for r in report["nonCertifyingReasons"])
    summary = ", ".join(f"{n} {s}" for s, n in report["summary"].items() if n)
    clause_summary = ", ".join(f"{n} {s}" for s, n in report["clauseSummary"].items() if n)
    phases = ", ".join(
        f"{p['name']} (resync {p['controllerResync']:g} s, {p['tests']} tests)"
        for p in report.get("phases") or []
    )
    timing = "".join(f"<tr><td>{e(k)}</td><td>{v:g}</td></tr>" for k, v in report["timing"].items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>convoy conformance report</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:70em}}
table{{border-collapse:collapse;width:100%}}td,th{{border-bottom:1px solid #ddd;padding:.4em;
text-align:left;vertical-align:top}}th{{background:#f6f8fa}}pre{{white-space:pre-wrap;
background:#f6f8fa;padding:.5em}}figure{{margin:1em 0}}figcaption{{font-size:.85em}}
.verdict{{font-size:1.4em;font-weight:bold;color:
{"#1a7f37" if report["certifying"] else "#cf222e"}}}</style></head><body>
<h1>convoy conformance report</h1>
<p class="verdict">{e(verdict)}</p>
<p>{e(impl.get("organization") or "?")} / {e(impl.get("project") or "?")}
{e(impl.get("version") or "")} &middot; suite {e(report["suiteVersion"])} &middot; document
{e(report["document"]["version"])} &middot; {e(report["date"])} &middot;
Kubernetes {e(str(report["environment"].get("kubernetesVersion", "?")))} on
{e(str(report["environment"].get("provider", "?")))}</p>
<p>Rules: {e(summary)}. Clauses: {e(clause_summary)}. Phases: {e(phases)}.</p>
{f"<h2>Why this run does not certify</h2><ul>{reasons}</ul>" if reasons else ""}
<h2>Rules and their clauses</h2><table>{"".join(rows)}</table>
{_model_runs_html(report)}
{_charts_html(report)}
<h2>Timing (seconds)</h2><table>{timing}</table>
</body></html>
"""
