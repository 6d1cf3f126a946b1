"""`prunewarden serve` stopped by a signal as soon as it says where it listens."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PRUNEWARDEN = shutil.which("prunewarden", path=str(Path(sys.executable).parent)) or "prunewarden"


@pytest.mark.spawns
def test_a_sigterm_right_after_the_listening_line_stops_it_cleanly(tmp_path: Path) -> None:
    """The listening line is written once SIGTERM stops the server cleanly: a SIGTERM sent as
    soon as it is read is exit 0 and "stopped", the audit log closed, not a kill (-15)."""
    command = [
        PRUNEWARDEN,
        "serve",
        "--policy",
        str(ROOT / "policies" / "default.yaml"),
        "--audit-log",
        str(tmp_path / "audit.jsonl"),
        "--listen",
        "127.0.0.1:0",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert "listening on http://127.0.0.1:" in process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert stdout == "prunewarden serve: stopped\n"
