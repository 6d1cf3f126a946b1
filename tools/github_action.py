"""The step of the prunewarden GitHub Action (action.yml): policy tests, then a policy diff.

Runs ``prunewarden test`` with a JUnit XML report, and, when the action is given a policy and
traces, ``prunewarden diff --base-ref`` against the base branch. Both end up as markdown in the
job summary ($GITHUB_STEP_SUMMARY) and as step outputs ($GITHUB_OUTPUT). Standard library only:
it runs with whatever Python installed prunewarden, and a test runs it locally with the GITHUB_*
variables set.

Its inputs come as PRUNEWARDEN_* environment variables (action.yml maps the action's inputs):
TESTS (paths, space-separated; empty: skip), JUNIT_XML (the report's path), POLICY and TRACES
(the diff's candidate and trace globs; either empty: no diff), BASE_REF (a git revision),
DIFF_JSON (where the diff's whole JSON report goes), FAIL_ON_CHANGES (true: changed decisions
fail the step).

Exit status: the test command's when it failed, else 1 when decisions changed and
FAIL_ON_CHANGES is true, else 2 or 3 when the diff could not compare; otherwise 0.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DIFF_CHANGED = 1  # prunewarden diff: some decision changed (listed)
MAX_ROWS = 50  # a job summary is for reading: the full list is in the step's log


@dataclass(frozen=True)
class Outcome:
    """What one prunewarden command did: its exit status and what it printed."""

    status: int
    stdout: str
    stderr: str


def prunewarden(arguments: Sequence[str], *, echo: bool = True) -> Outcome:
    """Run ``prunewarden ARGUMENTS``, echoing the command line and its errors to the log, and
    its output unless ``echo`` is false."""
    command = ["prunewarden", *arguments]
    sys.stdout.write(f"$ {shlex.join(command)}\n")
    sys.stdout.flush()
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    if echo:
        sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return Outcome(done.returncode, done.stdout, done.stderr)


def expand(patterns: Sequence[str]) -> list[str]:
    """Local globs expanded as a shell would (sorted), since the step runs no shell; URLs and
    patterns matching nothing are passed on for prunewarden to read or report."""
    paths: list[str] = []
    for pattern in patterns:
        # glob.glob, not Path.glob: a pattern may be absolute, as a shell's may.
        matched = [] if "://" in pattern else sorted(glob.glob(pattern, recursive=True))  # noqa: PTH207
        paths += matched or [pattern]
    return paths


def ensure_revision(ref: str) -> None:
    """Fetch ``ref`` from its remote when a shallow checkout does not have it."""
    verify = ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"]
    if subprocess.run(verify, capture_output=True, check=False).returncode == 0:  # noqa: S603
        return
    remote, _, branch = ref.partition("/")
    if branch:
        fetch = ["git", "fetch", "--no-tags", "--depth=1", remote, f"{branch}:refs/remotes/{ref}"]
        subprocess.run(fetch, check=False)  # noqa: S603


def suite_summary(outcome: Outcome, junit: Path) -> list[str]:
    """The policy tests in markdown: the counts of the JUnit report, then each failed case."""
    lines = ["### Policy tests", ""]
    if not junit.is_file():
        return [
            *lines,
            f"`prunewarden test` wrote no report (exit {outcome.status}):",
            "",
            _block(outcome.stderr),
        ]
    # The report was written by prunewarden test in this job, not taken from outside.
    root = ET.parse(junit).getroot()  # noqa: S314
    counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    failed: list[tuple[str, str, str]] = []
    for suite in root.iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, "0"))
        for case in suite.iter("testcase"):
            problem = case.find("failure")
            if problem is None:
                problem = case.find("error")
            if problem is not None:
                failed.append(
                    (suite.get("name", ""), case.get("name", ""), problem.get("message", ""))
                )
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    verdict = "passed" if outcome.status == 0 else f"failed (exit {outcome.status})"
    lines.append(
        f"**{verdict}**: {counts['tests']} cases, {passed} passed, {counts['failures']} failed, "
        f"{counts['errors']} broke, {counts['skipped']} skipped"
    )
    if failed:
        lines += ["", "| suite | case | problem |", "|---|---|---|"]
        lines += [f"| {_cell(s)} | {_cell(c)} | {_cell(m)} |" for s, c, m in failed[:MAX_ROWS]]
    return lines


def diff_summary(outcome: Outcome, ref: str, policy: str) -> list[str]:
    """The policy diff in markdown: both identities, the count, one row per group of changes."""
    lines = [f"### Decisions changed by `{policy}` against `{ref}`", ""]
    if outcome.status not in (0, DIFF_CHANGED):
        return [
            *lines,
            f"`prunewarden diff` could not compare (exit {outcome.status}):",
            "",
            _block(outcome.stderr),
        ]
    report = json.loads(outcome.stdout)
    traces = len(report["traces"])
    lines += [
        "| | policy | digest |",
        "|---|---|---|",
        _identity_row("base", report["base"]),
        _identity_row("candidate", report["candidate"]),
        "",
        f"**{report['changed']}** decisions changed over {traces} traces.",
    ]
    if report["groups"]:
        lines += ["", "| check | change | reason | count | first |", "|---|---|---|---|---|"]
        for group in report["groups"][:MAX_ROWS]:
            first = group["first"]
            change = group["kind"]
            if group["from"] or group["to"]:
                moved = "halt moved: " if group["kind"] == "halt moved" else ""
                change = f"{moved}{group['from']} → {group['to']}"
            where = f"{first['trace']}:{first['line']}"
            lines.append(
                f"| {group['check']} | {_cell(change)} | {_cell(group['reason'])} | "
                f"{group['count']} | `{_cell(where)}` {_cell(first['summary'])} |"
            )
    return lines


def _identity_row(role: str, identity: Mapping[str, Any]) -> str:
    return f"| {role} | `{identity['name']}@{identity['version']}` | `{identity['digest'][:19]}` |"


def _cell(text: str) -> str:
    """Text safe inside one markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _block(text: str) -> str:
    return "```\n" + (text.strip() or "(no output)") + "\n```"


def append(variable: str, text: str) -> None:
    """Append to the file a GITHUB_* variable names (the summary, the outputs), if it is set."""
    path = os.environ.get(variable)
    if path:
        with Path(path).open("a", encoding="utf-8") as out:
            out.write(text)


def main() -> int:
    env = os.environ
    junit = Path(env.get("PRUNEWARDEN_JUNIT_XML") or "prunewarden-junit.xml")
    tests = shlex.split(env.get("PRUNEWARDEN_TESTS", "."))
    policy = env.get("PRUNEWARDEN_POLICY", "")
    traces = expand(shlex.split(env.get("PRUNEWARDEN_TRACES", "")))
    ref = env.get("PRUNEWARDEN_BASE_REF", "")
    fail_on_changes = env.get("PRUNEWARDEN_FAIL_ON_CHANGES", "false").lower() == "true"
    summary = ["## prunewarden", ""]
    outputs: dict[str, str] = {}
    test_status = 0
    if tests:
        junit.unlink(missing_ok=True)
        tested = prunewarden(["test", *tests, "--junit-xml", str(junit)])
        test_status = tested.status
        summary += [*suite_summary(tested, junit), ""]
        outputs |= {"test-status": str(tested.status), "junit-xml": str(junit)}
    diff_status = 0
    if policy and traces and ref:
        ensure_revision(ref)
        diffed = prunewarden(
            ["diff", *traces, "--candidate", policy, "--base-ref", ref, "--format", "json"],
            echo=False,  # every change, as JSON: kept as a file, summarized below
        )
        diff_status = diffed.status
        summary += [*diff_summary(diffed, ref, policy), ""]
        outputs["diff-status"] = str(diffed.status)
        if diffed.status in (0, DIFF_CHANGED):
            report = Path(env.get("PRUNEWARDEN_DIFF_JSON") or "prunewarden-diff.json")
            report.write_text(diffed.stdout, encoding="utf-8")
            changed = json.loads(diffed.stdout)["changed"]
            outputs |= {"changed": str(changed), "diff-json": str(report)}
            sys.stdout.write(f"{changed} decisions changed: the whole report is in {report}\n")
    append("GITHUB_STEP_SUMMARY", "\n".join(summary) + "\n")
    append("GITHUB_OUTPUT", "".join(f"{key}={value}\n" for key, value in outputs.items()))
    if test_status:
        return test_status
    if diff_status == DIFF_CHANGED:
        return DIFF_CHANGED if fail_on_changes else 0
    return diff_status


if __name__ == "__main__":
    sys.exit(main())
