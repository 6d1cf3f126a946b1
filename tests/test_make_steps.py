"""tools/progress.py, the Makefile's step runner: one line per step, progress, and on failure the
end of the command's output and its exit status."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
