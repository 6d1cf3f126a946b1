"""tools/progress.py, the Makefile's step runner: one line per step, progress, and on failure the
end of the command's output and its exit status; and make test's stages, their order and the
exit status of a failing one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRESS = str(ROOT / "tools" / "progress.py")


def step(label: str, script: str, log: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, PROGRESS, "--log", str(log), label, "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


class TestProgress:
    def test_a_step_says_what_it_runs_and_how_long_it_took(self, tmp_path: Path) -> None:
        """Off a terminal: the step's line, then done with the time; the output is in the log."""
        done = step("installing", "echo Collecting a; echo Collecting b", tmp_path / "pip.log")
        assert done.returncode == 0
        assert re.fullmatch(r"==> installing\n    done in \d+ s\n", done.stdout)
        assert (tmp_path / "pip.log").read_text() == "Collecting a\nCollecting b\n"

    def test_a_failing_step_shows_the_end_of_its_output_and_its_status(
        self, tmp_path: Path
    ) -> None:
        """The command's exit status is the step's; the last lines of its output are shown."""
        done = step(
            "installing", "echo Collecting a; echo 'no such package' >&2; exit 3", tmp_path / "l"
        )
        assert done.returncode == 3
        lines = done.stdout.splitlines()
        assert lines[0] == "==> installing"
        assert re.fullmatch(r"    failed \(exit 3\) in \d+ s", lines[1])
        assert lines[-2:] == ["    | Collecting a", "    | no such package"]

    def test_a_step_without_a_command_is_a_usage_error(self) -> None:
        """Nothing after -- is refused by the argument parser (exit 2)."""
        done = subprocess.run(
            [sys.executable, PROGRESS, "label", "--"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2
        assert "no command after --" in done.stderr


# A stand-in for every tool make test calls: it notes its call, and fails when it is $FAIL.
TOOL = """#!/bin/sh
name=$(basename "$0")
echo "$name $*" >> "$MAKE_LOG"
if [ "$name" = "$FAIL" ]; then echo "$name: failed on purpose"; exit 3; fi
"""
STAGES = {
    "ruff": "==> ruff check and ruff format --check",
    "mypy": "==> mypy --strict",
    "lint-imports": "==> import-linter",
    "npm": "==> @prunewarden/client",
    "python": "==> pytest",
}


def make_test(tmp_path: Path, fail: str = "") -> tuple[subprocess.CompletedProcess[str], str]:
    """make test on the project's Makefile, in a tree where every install is done and every
    tool is TOOL: the stages' order and exit status, nothing checked for real."""
    (tmp_path / "Makefile").write_bytes((ROOT / "Makefile").read_bytes())
    inputs = [
        "pyproject.toml",
        "clients/typescript/package-lock.json",
        "clients/typescript/package.json",
        "clients/typescript/tsconfig.json",
        "examples/clients/node/package-lock.json",
    ]
    made = [
        ".venv/.installed",
        ".venv/.installed-test",
        "clients/typescript/node_modules/.package-lock.json",
        "clients/typescript/dist/index.js",
        "examples/clients/node/node_modules/.package-lock.json",
    ]
    for index, name in enumerate(inputs + made):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")
        stamp = 1_000_000 + (0 if index < len(inputs) else 1000)  # every output newer
        os.utime(path, (stamp, stamp))
    tools = tmp_path / ".venv" / "bin"
    tools.mkdir()
    for name in ["ruff", "hadolint", "mypy", "lint-imports", "python", "npm"]:
        (tools / name).write_text(TOOL, encoding="utf-8")
        (tools / name).chmod(0o755)
    log = tmp_path / "calls.log"
    env = {
        "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
        "MAKE_LOG": str(log),
        "FAIL": fail,
    }
    done = subprocess.run(
        ["make", "--no-print-directory", "test"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return done, log.read_text(encoding="utf-8") if log.exists() else ""


class TestMakeTest:
    def test_every_stage_runs_and_pytest_last(self, tmp_path: Path) -> None:
        """Each stage's header line, each stage's tools called, pytest after all the checks."""
        done, calls = make_test(tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        for header in STAGES.values():
            assert header in done.stdout
        tools = [line.split()[0] for line in calls.splitlines()]
        assert set(tools) == {"ruff", "hadolint", "mypy", "lint-imports", "npm", "python"}
        assert tools[-1] == "python"
        assert tools.count("python") == 1
        assert calls.splitlines()[-1].startswith("python -m pytest -n 2 --dist loadgroup")

    @pytest.mark.parametrize("stage", list(STAGES))
    def test_a_failing_stage_fails_make_test(self, stage: str, tmp_path: Path) -> None:
        """Whichever stage fails, make test exits non-zero, shows that stage's output, and
        pytest does not run after a failed check."""
        done, calls = make_test(tmp_path, fail=stage)
        assert done.returncode != 0
        assert f"{stage}: failed on purpose" in done.stdout
        ran_pytest = any(line.startswith("python -m pytest") for line in calls.splitlines())
        assert ran_pytest == (stage == "python")
