"""The hooks of .pre-commit-hooks.yaml, run by the real pre-commit in a scratch repository that
names this project as its hook repository, offline.

pre-commit clones the hook repository at the pinned rev and pip-installs it into an environment
of its own. Offline, pip reaches no index: the hook's package is built from the clone without
build isolation or dependencies, and its dependencies come from this test environment
(PYTHONPATH). Everything else is pre-commit's own: the manifest, file selection, the install and
the hook's exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from _support.wheels import copy_project

# The wheel and the pre-commit tests each build the project from a copy of its source tree
# (_support.wheels.copy_project), never in the checkout; one worker runs both (docs/dev/testing.md).
pytestmark = [pytest.mark.spawns, pytest.mark.xdist_group("source-tree")]

ROOT = Path(__file__).resolve().parents[2]

POLICY = """\
# yaml-language-server: $schema=https://prunewarden.dev/schemas/policy.v1.schema.json
apiVersion: prunewarden/v1
kind: Policy
extends: builtin:default
metadata: {name: agent, version: 1.0.0}
spec:
  eviction: {pinned_kinds: [constraint, definition, negation, plan]}
"""

SUITE = """\
apiVersion: prunewarden/v1
kind: TestSuite
name: agent
policy: ../agent.yaml
cases:
  - name: a plan is pinned
    input:
      check: eviction
      segment: {id: plan-1, kind: plan, tombstone_written: true}
      score: 0.2
      perturbed_score: 0.2
      eviction_candidates: [plan-1]
    expect: {outcome: deny}
"""


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def hook_repository(target: Path) -> str:
    """A git repository holding the project's installable files; returns its commit."""
    copy_project(target, (".pre-commit-hooks.yaml",))
    git(target, "init", "-q")
    git(target, "add", "-A")
    git(target, "commit", "-q", "-m", "hooks")
    return git(target, "rev-parse", "HEAD")


def scratch_repository(target: Path, hooks: Path, rev: str) -> None:
    """A repository keeping a policy and its suite, using the hooks of ``hooks`` at ``rev``."""
    (target / "policies" / "tests").mkdir(parents=True)
    (target / "policies" / "agent.yaml").write_text(POLICY)
    (target / "policies" / "tests" / "agent_test.yaml").write_text(SUITE)
    config = {
        "repos": [
            {
                "repo": str(hooks),
                "rev": rev,
                "hooks": [
                    {"id": "prunewarden-validate"},
                    {"id": "prunewarden-test"},
                    # Offline, z3 comes from this test environment like every other dependency.
                    {"id": "prunewarden-policy-check", "additional_dependencies": []},
                ],
            }
        ]
    }
    (target / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    git(target, "init", "-q")
    git(target, "add", "-A")


def run_hooks(repository: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "PRE_COMMIT_HOME": str(home / "pre-commit"),
        "PIP_NO_INDEX": "1",
        "PIP_NO_DEPS": "1",
        # pip reads a --no-X option's variable as the value of X: "0" turns build isolation off.
        "PIP_NO_BUILD_ISOLATION": "0",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "VIRTUALENV_NO_PERIODIC_UPDATE": "1",
        "PYTHONPATH": sysconfig.get_paths()["purelib"],
    }
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
        cwd=repository,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@pytest.fixture(scope="module")
def hooked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A scratch repository with its hooks installed by one first run (the slow part)."""
    base = tmp_path_factory.mktemp("precommit")
    rev = hook_repository(base / "hooks")
    scratch_repository(base / "scratch", base / "hooks", rev)
    first = run_hooks(base / "scratch", base)
    assert first.returncode == 0, first.stdout + first.stderr
    return base / "scratch", base


def hook_lines(output: str) -> dict[str, str]:
    """Each hook's status as pre-commit prints it: ``prunewarden validate....Passed``."""
    lines = {}
    for line in output.splitlines():
        name, dots, status = line.partition("...")
        if dots and name.startswith("prunewarden "):
            lines[name] = status.strip(".")
    return lines


class TestManifest:
    def test_each_hook_runs_a_prunewarden_command_installed_by_pip(self) -> None:
        """The manifest's hooks are python hooks running validate, test and policy check."""
        hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
        assert [(hook["id"], hook["entry"], hook["language"]) for hook in hooks] == [
            ("prunewarden-validate", "prunewarden validate", "python"),
            ("prunewarden-test", "prunewarden test", "python"),
            ("prunewarden-policy-check", "prunewarden policy check", "python"),
        ]

    def test_pre_commit_accepts_the_manifest(self) -> None:
        """pre-commit's own validate-manifest finds nothing wrong with it."""
        done = subprocess.run(
            [sys.executable, "-m", "pre_commit", "validate-manifest", ".pre-commit-hooks.yaml"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, "")


class TestHooksInAScratchRepository:
    def test_a_valid_policy_and_a_passing_suite_pass(self, hooked: tuple[Path, Path]) -> None:
        """Every hook passes on a valid policy whose suite passes."""
        repository, home = hooked
        done = run_hooks(repository, home)
        assert done.returncode == 0, done.stdout + done.stderr
        assert hook_lines(done.stdout) == {
            "prunewarden validate": "Passed",
            "prunewarden test": "Passed",
            "prunewarden policy check": "Passed",
        }

    def test_an_invalid_policy_fails_validate_with_its_located_error(
        self, hooked: tuple[Path, Path]
    ) -> None:
        """A policy out of schema fails the validate hook, which prints the located problem."""
        repository, home = hooked
        policy = repository / "policies" / "agent.yaml"
        try:
            policy.write_text(POLICY + "  collapse: {spread_floor: 2}\n")
            done = run_hooks(repository, home)
        finally:
            policy.write_text(POLICY)
        assert done.returncode == 1
        assert hook_lines(done.stdout)["prunewarden validate"] == "Failed"
        assert "- exit code: 3" in done.stdout
        assert (
            "policies/agent.yaml:8:28: $.spec.collapse.spread_floor: 2 is greater than the "
            "maximum of 1"
        ) in done.stdout

    def test_a_failing_case_fails_the_test_hook(self, hooked: tuple[Path, Path]) -> None:
        """A policy change that breaks its suite fails the test hook with exit code 4."""
        repository, home = hooked
        policy = repository / "policies" / "agent.yaml"
        try:
            policy.write_text(POLICY.replace("negation, plan", "negation"))
            done = run_hooks(repository, home)
        finally:
            policy.write_text(POLICY)
        assert done.returncode == 1
        assert hook_lines(done.stdout) == {
            "prunewarden validate": "Passed",
            "prunewarden test": "Failed",
            "prunewarden policy check": "Passed",
        }
        assert "- exit code: 4" in done.stdout

    def test_a_production_policy_with_a_guard_in_audit_fails_policy_check(
        self, hooked: tuple[Path, Path]
    ) -> None:
        """policy check fails a policy labelled production whose eviction guard only audits,
        naming the finding and the file:line of the field; the suite still passes."""
        repository, home = hooked
        policy = repository / "policies" / "agent.yaml"
        production = POLICY.replace(
            "version: 1.0.0}", "version: 1.0.0, labels: {environment: production}}"
        ).replace("eviction: {pinned_kinds", "eviction: {mode: audit, pinned_kinds")
        try:
            policy.write_text(production)
            done = run_hooks(repository, home)
        finally:
            policy.write_text(POLICY)
        assert done.returncode == 1
        assert hook_lines(done.stdout) == {
            "prunewarden validate": "Passed",
            "prunewarden test": "Passed",
            "prunewarden policy check": "Failed",
        }
        assert "- exit code: 1" in done.stdout
        assert "policies/agent.yaml:7: error production-not-enforced:" in done.stdout
