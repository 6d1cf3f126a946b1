"""The GitHub Action's step (tools/github_action.py), run locally as the runner would run it: in
a git checkout of a pull request, with the GITHUB_* files and the action's inputs set."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.spawns

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "github_action.py"
TRACES = ("collapse-narrowing.jsonl", "eviction-utc-constraint.jsonl")

BASE_POLICY = """\
apiVersion: prunewarden/v1
kind: Policy
extends: builtin:default
metadata: {name: agent, version: 1.0.0}
"""
# The loosening of examples/policies/loose-candidate.yaml: it moves a halt and lifts a denial.
CANDIDATE_POLICY = """\
apiVersion: prunewarden/v1
kind: Policy
extends: builtin:default
metadata: {name: agent, version: 1.1.0}
spec:
  collapse: {spread_floor: 0.05}
  eviction: {stability_delta: 0.35}
"""
SUITE = """\
apiVersion: prunewarden/v1
kind: TestSuite
name: agent
policy: ../agent.yaml
cases:
  - name: a definition is pinned
    input:
      check: eviction
      segment: {id: def-1, kind: definition, tombstone_written: true}
      score: 0.2
      perturbed_score: 0.2
      eviction_candidates: [def-1]
    expect: {outcome: deny}
"""


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", *args],
        cwd=cwd,
        capture_output=True,
        check=True,
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A repository whose main holds the base policy, checked out on a branch proposing the
    candidate (uncommitted, as a workflow sees a pull request's merge)."""
    repository = tmp_path / "repo"
    (repository / "policies" / "tests").mkdir(parents=True)
    (repository / "traces").mkdir()
    for name in TRACES:
        shutil.copy2(ROOT / "examples" / "traces" / name, repository / "traces" / name)
    (repository / "policies" / "agent.yaml").write_text(BASE_POLICY)
    (repository / "policies" / "tests" / "agent_test.yaml").write_text(SUITE)
    git(repository, "init", "-q", "-b", "main")
    git(repository, "add", "-A")
    git(repository, "commit", "-q", "-m", "base")
    git(repository, "checkout", "-q", "-b", "loosen")
    (repository / "policies" / "agent.yaml").write_text(CANDIDATE_POLICY)
    return repository


def run_action(
    repository: Path, **inputs: str
) -> tuple[subprocess.CompletedProcess[str], str, dict[str, str]]:
    """The step's process, its job summary and its outputs."""
    summary, outputs = repository.parent / "summary.md", repository.parent / "outputs"
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(repository.parent),
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(repository),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(outputs),
        "PRUNEWARDEN_TESTS": "policies",
        "PRUNEWARDEN_JUNIT_XML": "junit.xml",
        "PRUNEWARDEN_POLICY": "policies/agent.yaml",
        "PRUNEWARDEN_TRACES": "traces/*.jsonl",
        "PRUNEWARDEN_BASE_REF": "main",
        "PRUNEWARDEN_FAIL_ON_CHANGES": "false",
    }
    env |= {f"PRUNEWARDEN_{key.upper()}": value for key, value in inputs.items()}
    done = subprocess.run(
        [sys.executable, str(SCRIPT)],
        cwd=repository,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    lines = outputs.read_text().splitlines() if outputs.exists() else []
    return done, summary.read_text(), dict(line.split("=", 1) for line in lines)


def table_rows(summary: str, header: str) -> list[list[str]]:
    """The cells of the markdown table whose header line is ``header``."""
    lines = summary.splitlines()
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


class TestActionManifest:
    def test_the_action_runs_the_script_with_every_input_it_declares(self) -> None:
        """action.yml is a composite action passing each of its inputs to the script's env."""
        action = yaml.safe_load((ROOT / "action.yml").read_text())
        assert action["runs"]["using"] == "composite"
        steps = action["runs"]["steps"]
        assert steps[-1]["run"] == 'python "$GITHUB_ACTION_PATH/tools/github_action.py"'
        passed = {
            value.removeprefix("${{ inputs.").removesuffix(" }}")
            for value in (*steps[-1]["env"].values(), *steps[-2]["env"].values())
        }
        assert passed | {"python-version"} == set(action["inputs"])
        assert set(action["outputs"]) == {"test-status", "junit-xml", "changed", "diff-json"}


class TestActionStep:
    def test_tests_and_diff_reach_the_summary_and_the_outputs(self, checkout: Path) -> None:
        """Passing tests and changed decisions: the JUnit report, both tables, exit 0."""
        done, summary, outputs = run_action(checkout)
        assert done.returncode == 0, done.stdout + done.stderr
        assert outputs["test-status"] == "0"
        assert outputs["diff-status"] == "1"
        assert int(outputs["changed"]) > 0
        junit = ET.parse(checkout / outputs["junit-xml"]).getroot()  # noqa: S314
        assert [case.get("name") for case in junit.iter("testcase")] == ["a definition is pinned"]
        assert "**passed**: 1 cases, 1 passed, 0 failed, 0 broke, 0 skipped" in summary
        identities = table_rows(summary, "| | policy | digest |")
        assert [row[:2] for row in identities] == [
            ["base", "`agent@1.0.0`"],
            ["candidate", "`agent@1.1.0`"],
        ]
        groups = table_rows(summary, "| check | change | reason | count | first |")
        assert {row[0] for row in groups} == {"collapse", "eviction", "plan"}
        assert groups[0][:4] == [
            "collapse",
            "halt moved: at cycle 12 → at cycle 14",
            "collapse_detected",
            "1",
        ]
        assert ["eviction", "deny → allow", "unstable_score", "1"] in [row[:4] for row in groups]
        assert f"**{outputs['changed']}** decisions changed over 2 traces." in summary
        report = json.loads((checkout / outputs["diff-json"]).read_text())
        assert report["changed"] == int(outputs["changed"]) == len(report["changes"])
        assert '"changes"' not in done.stdout  # the log has the count, not the whole report

    def test_changes_fail_the_step_when_asked(self, checkout: Path) -> None:
        """fail-on-changes: true turns changed decisions into exit 1."""
        done, _, outputs = run_action(checkout, fail_on_changes="true")
        assert (done.returncode, outputs["diff-status"]) == (1, "1")

    def test_a_failing_case_fails_the_step_and_is_listed(self, checkout: Path) -> None:
        """A case the policy no longer meets: exit 4, the case in the summary's table."""
        suite = checkout / "policies" / "tests" / "agent_test.yaml"
        suite.write_text(SUITE.replace("outcome: deny", "outcome: allow"))
        done, summary, outputs = run_action(checkout, policy="")
        assert (done.returncode, outputs["test-status"]) == (4, "4")
        assert "diff-status" not in outputs
        assert "**failed (exit 4)**: 1 cases, 0 passed, 1 failed" in summary
        rows = table_rows(summary, "| suite | case | problem |")
        assert [row[:2] for row in rows] == [["agent", "a definition is pinned"]]

    def test_a_base_ref_without_the_policy_is_reported_and_fails(self, checkout: Path) -> None:
        """A revision that does not hold the policy: the diff cannot compare, said in the
        summary, and the step fails with the diff's status."""
        git(checkout, "add", "-A")
        git(checkout, "commit", "-q", "-m", "candidate")
        git(checkout, "mv", "policies/agent.yaml", "policies/renamed.yaml")
        done, summary, outputs = run_action(
            checkout, tests="", policy="policies/renamed.yaml", base_ref="main"
        )
        assert (done.returncode, outputs["diff-status"]) == (3, "3")
        assert "changed" not in outputs
        assert "`prunewarden diff` could not compare (exit 3):" in summary
