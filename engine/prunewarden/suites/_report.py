"""A run of policy test suites and its three renderings: a readable tree, JSON and JUnit XML.

:func:`run_files` loads every suite (an invalid one is reported and the others still run),
selects the cases, runs them and measures coverage. The renderers only format what it found.
"""

from __future__ import annotations

import json
import os
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prunewarden.engine import Engine
from prunewarden.errors import ExitCode, Problem, SuiteError
from prunewarden.suites._coverage import Coverage, measure_coverage
from prunewarden.suites._load import InvalidSuite, Suite, SuiteLoader
from prunewarden.suites._run import (
    CaseResult,
    Status,
    SuiteResult,
    quiet_engine,
    run_suite,
    select,
)


@dataclass(frozen=True, slots=True)
class Report:
    """Everything a run found: results per suite, invalid suites, coverage per policy."""

    suites: tuple[SuiteResult, ...]
    invalid: tuple[InvalidSuite, ...]
    coverage: tuple[Coverage, ...]
    coverage_threshold: float | None = None
    seconds: float = 0.0

    def count(self, status: Status) -> int:
        return sum(suite.count(status) for suite in self.suites)

    @property
    def cases(self) -> int:
        return sum(len(suite.results) for suite in self.suites)

    @property
    def below_threshold(self) -> list[Coverage]:
        if self.coverage_threshold is None:
            return []
        return [c for c in self.coverage if c.percent < self.coverage_threshold]

    @property
    def passed(self) -> bool:
        """No invalid suite, no failed or broken case, no policy below the coverage threshold."""
        return (
            not self.invalid
            and not self.count("failed")
            and not self.count("error")
            and not self.below_threshold
        )


def run_files(
    files: Sequence[str],
    *,
    patterns: Sequence[str] = (),
    coverage_threshold: float | None = None,
    base_dirs: Sequence[str | os.PathLike[str]] = (),
) -> Report:
    """Load every suite file (an invalid one is reported, the others still run), select the
    cases matching ``patterns``, run them and measure coverage."""
    start = time.perf_counter()
    loader = SuiteLoader(base_dirs)
    suites: list[Suite] = []
    invalid: list[InvalidSuite] = []
    for file in files:
        try:
            suites.append(loader.load(file))
        except SuiteError as exc:
            invalid.append(InvalidSuite(file, exc.problems))
    engines: dict[str, Engine] = {}  # one per policy digest, shared by its suites
    results = []
    for suite in select(suites, patterns):
        digest = suite.policy.digest
        if digest not in engines:
            engines[digest] = quiet_engine(suite.policy)
        results.append(run_suite(suite, engines[digest]))
    return Report(
        suites=tuple(results),
        invalid=tuple(invalid),
        coverage=tuple(measure_coverage(results)),
        coverage_threshold=coverage_threshold,
        seconds=time.perf_counter() - start,
    )


def exit_status(report: Report) -> int:
    """3 when a suite or its policy is invalid, 4 when a case failed or broke or coverage fell
    below the threshold, 0 otherwise."""
    if report.invalid:
        return ExitCode.POLICY
    return ExitCode.OK if report.passed else ExitCode.FAILED


# --------------------------------------------------------------------------------------------
# pretty: a tree of suites and cases, what differed under each failure, coverage, a summary

_LABELS: dict[Status, str] = {
    "passed": "PASS",
    "failed": "FAIL",
    "error": "ERROR",
    "skipped": "SKIP",
}


def render_pretty(report: Report) -> str:
    lines: list[str] = []
    for result in report.suites:
        suite = result.suite
        policy = suite.policy
        lines.append(
            f"{suite.file}: {suite.name} "
            f"(policy {policy.name}@{policy.version} from {suite.policy_source})"
        )
        lines += [line for case in result.results for line in _pretty_case(case)]
        lines.append("")
    for invalid in report.invalid:
        count = len(invalid.problems)
        lines.append(f"{invalid.file}: INVALID ({count} problem{'s' * (count != 1)}, on stderr)")
        lines.append("")
    if report.coverage:
        lines.append("Coverage by policy")
        lines += [line for coverage in report.coverage for line in _pretty_coverage(coverage)]
        lines.append("")
    lines.append(_summary(report))
    if report.coverage_threshold is not None:
        lines.append(_threshold_line(report))
    return "\n".join(lines) + "\n"


def _pretty_case(result: CaseResult) -> list[str]:
    case = result.case
    head = f"  {_LABELS[result.status]:<5} {case.name}"
    if result.status == "passed":
        return [head]
    if result.status == "skipped":
        return [f"{head}  (skipped: {case.skip})"]
    lines = [f"{head}  ({case.file}:{case.line})"]
    if result.status == "error":
        return [*lines, f"          {result.error}"]
    lines += [f"          {mismatch}" for mismatch in result.mismatches]
    if result.decision is not None:
        lines.append(f"          decision: {_decision_line(result)}")
    return lines


def _decision_line(result: CaseResult) -> str:
    decision = result.decision
    if decision is None:
        return "-"
    binding = "enforced" if decision.enforced else "not enforced"
    reasons = json.dumps(list(decision.codes))
    actions = json.dumps([action.to_dict() for action in decision.actions])
    return f"{decision.outcome} ({binding}), reasons {reasons}, actions {actions}"


def _pretty_coverage(coverage: Coverage) -> list[str]:
    policy = coverage.policy
    reasons = coverage.reasons
    done = sum(1 for count in reasons.values() if count)
    lines = [
        f"  {policy.name}@{policy.version} ({', '.join(coverage.sources)}): "
        f"{coverage.percent:.1f}% - reason codes {done} of {len(reasons)}"
        + (
            f", rules {len(coverage.rules) - len(coverage.rules_never_exercised)} of "
            f"{len(coverage.rules)}"
            if coverage.rules
            else ""
        )
    ]
    never = coverage.never_exercised
    lines.append(f"    never exercised: {', '.join(never) if never else 'none'}")
    if coverage.rules_never_exercised:
        lines.append(f"    rules never exercised: {', '.join(coverage.rules_never_exercised)}")
    skipped = [f"{code} ({why})" for code, why in coverage.not_applicable.items()]
    if skipped:
        lines.append(f"    not applicable: {'; '.join(skipped)}")
    return lines


_SUMMARY: tuple[tuple[Status, str], ...] = (
    ("passed", "passed"),
    ("failed", "failed"),
    ("error", "errors"),
    ("skipped", "skipped"),
)


def _summary(report: Report) -> str:
    counts = ", ".join(f"{report.count(status)} {word}" for status, word in _SUMMARY)
    suites = len(report.suites)
    cases = report.cases
    text = f"{suites} suite{'s' * (suites != 1)}, {cases} case{'s' * (cases != 1)}: {counts}"
    if report.invalid:
        text += f"; {len(report.invalid)} invalid suite file(s)"
    return f"{text} in {report.seconds:.2f}s"


def _threshold_line(report: Report) -> str:
    below = report.below_threshold
    if not below:
        return f"coverage threshold {report.coverage_threshold:g}%: met"
    names = ", ".join(f"{c.policy.name}@{c.policy.version} at {c.percent:.1f}%" for c in below)
    return f"coverage threshold {report.coverage_threshold:g}%: NOT met ({names})"


# --------------------------------------------------------------------------------------------
# json


def render_json(report: Report) -> str:
    document = {
        "summary": {
            "suites": len(report.suites),
            "cases": report.cases,
            "passed": report.count("passed"),
            "failed": report.count("failed"),
            "errors": report.count("error"),
            "skipped": report.count("skipped"),
            "invalid_suites": len(report.invalid),
            "seconds": round(report.seconds, 6),
            "coverage_threshold": report.coverage_threshold,
            "exit_status": exit_status(report),
        },
        "suites": [_json_suite(result) for result in report.suites],
        "invalid": [
            {"file": invalid.file, "problems": [_json_problem(p) for p in invalid.problems]}
            for invalid in report.invalid
        ],
        "coverage": [_json_coverage(coverage) for coverage in report.coverage],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _json_suite(result: SuiteResult) -> dict[str, Any]:
    suite = result.suite
    return {
        "name": suite.name,
        "file": suite.file,
        "policy": {**suite.policy.identity.to_dict(), "source": suite.policy_source},
        "cases": [_json_case(case) for case in result.results],
    }


def _json_case(result: CaseResult) -> dict[str, Any]:
    case = result.case
    out: dict[str, Any] = {
        "name": case.name,
        "status": result.status,
        "seconds": round(result.seconds, 6),
        "file": case.file,
        "line": case.line,
    }
    if case.parameters is not None:
        out["parameters"] = case.parameters
    if result.status == "skipped":
        out["skip_reason"] = case.skip
    if result.mismatches:
        out["mismatches"] = [mismatch.to_dict() for mismatch in result.mismatches]
    if result.error:
        out["error"] = result.error
    if result.decision is not None:
        decision = result.decision.to_dict()
        out["decision"] = {
            key: decision[key]
            for key in ("outcome", "enforced", "actions", "kept", "evicted")
            if key in decision
        }
        out["decision"]["reasons"] = list(result.decision.codes)
    return out


def _json_problem(problem: Problem) -> dict[str, Any]:
    return {
        "file": problem.file,
        "line": problem.line,
        "column": problem.column,
        "path": problem.path,
        "message": problem.message,
        "text": str(problem),
    }


def _json_coverage(coverage: Coverage) -> dict[str, Any]:
    return {
        "policy": coverage.policy.identity.to_dict(),
        "sources": list(coverage.sources),
        "percent": round(coverage.percent, 2),
        "reasons": coverage.reasons,
        "never_exercised": coverage.never_exercised,
        "not_applicable": coverage.not_applicable,
        "rules": coverage.rules,
        "rules_never_exercised": coverage.rules_never_exercised,
    }


# --------------------------------------------------------------------------------------------
# junit: the XML CI systems read (testsuites / testsuite / testcase / failure, error, skipped)

# Characters XML 1.0 cannot carry at all, even escaped.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: object) -> str:
    return _NOT_XML.sub("\ufffd", str(text))


def _element(parent: ET.Element, tag: str, text: str = "", /, **attributes: object) -> ET.Element:
    element = ET.SubElement(parent, tag, {key: _xml(value) for key, value in attributes.items()})
    if text:
        element.text = _xml(text)
    return element


def render_junit(report: Report) -> str:
    root = ET.Element("testsuites")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for result in report.suites:
        counts = _junit_suite(root, result)
        for key, value in counts.items():
            totals[key] += value
    for invalid in report.invalid:
        suite = _element(
            root, "testsuite", name=invalid.file, tests=1, failures=0, errors=1, skipped=0, time="0"
        )
        case = _element(suite, "testcase", name="load suite", classname=invalid.file, time="0")
        text = "\n".join(str(problem) for problem in invalid.problems)
        _element(case, "error", text, message="invalid suite or policy file", type="SuiteError")
        totals["tests"] += 1
        totals["errors"] += 1
    if report.coverage_threshold is not None and report.coverage:
        failures = _junit_coverage(root, report)
        totals["tests"] += len(report.coverage)
        totals["failures"] += failures
    root.attrib.update({"name": "prunewarden test", "time": f"{report.seconds:.3f}"})
    root.attrib.update({key: str(value) for key, value in totals.items()})
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _junit_suite(root: ET.Element, result: SuiteResult) -> dict[str, int]:
    suite = result.suite
    counts = {
        "tests": len(result.results),
        "failures": result.count("failed"),
        "errors": result.count("error"),
        "skipped": result.count("skipped"),
    }
    element = _element(
        root, "testsuite", name=suite.name, time=f"{result.seconds:.3f}", file=suite.file, **counts
    )
    properties = _element(element, "properties")
    policy = suite.policy
    for name, value in (
        ("policy", f"{policy.name}@{policy.version}"),
        ("policy_digest", policy.digest),
        ("policy_source", suite.policy_source),
    ):
        _element(properties, "property", name=name, value=value)
    for case_result in result.results:
        case = case_result.case
        testcase = _element(
            element,
            "testcase",
            name=case.name,
            classname=suite.name,
            time=f"{case_result.seconds:.3f}",
            file=case.file,
            line=case.line,
        )
        if case_result.status == "failed":
            text = "\n".join(str(m) for m in case_result.mismatches)
            text += f"\ndecision: {_decision_line(case_result)}\nat {case.file}:{case.line}"
            _element(
                testcase, "failure", text, message=case_result.message, type="ExpectationMismatch"
            )
        elif case_result.status == "error":
            _element(testcase, "error", case_result.error, message=case_result.error, type="Error")
        elif case_result.status == "skipped":
            _element(testcase, "skipped", message=case.skip or "")
    return counts


def _junit_coverage(root: ET.Element, report: Report) -> int:
    threshold = report.coverage_threshold
    below = {id(c) for c in report.below_threshold}
    suite = _element(
        root,
        "testsuite",
        name="coverage",
        tests=len(report.coverage),
        failures=len(below),
        errors=0,
        skipped=0,
        time="0",
    )
    for coverage in report.coverage:
        name = f"{coverage.policy.name}@{coverage.policy.version} reason coverage"
        case = _element(suite, "testcase", name=name, classname="coverage", time="0")
        if id(coverage) in below:
            never = ", ".join(coverage.never_exercised + coverage.rules_never_exercised)
            message = f"{coverage.percent:.1f}% is below the threshold of {threshold:g}%"
            _element(case, "failure", f"never exercised: {never}", message=message, type="Coverage")
    return len(below)
