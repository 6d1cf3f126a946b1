"""A long-lived writer whose writes the OS refuses partway (a full disk, a file size limit): the
decisions are refused, and once space is back the writer ends the torn bytes, accounts for
them and goes on, so the whole file verifies.

Each scenario runs in a process of its own (``tests/_support/diskwriter.py``) whose file size
limit (RLIMIT_FSIZE) makes the kernel cut a write exactly where the test says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prunewarden import AuditLog, Engine
from prunewarden.audit import verify_files

WRITER = Path(__file__).resolve().parents[1] / "_support" / "diskwriter.py"
KEY = "k" * 32
OTHER_KEY = "o" * 32
REFUSED = ["audit_unavailable"]
ALLOWED = ["authorized"]

pytestmark = pytest.mark.spawns


def run_writer(
    log: Path, *steps: str, fsync: str = "batch", key: str | None = None, max_bytes: int = 0
) -> list[Any]:
    """Run the steps in one writer process; the outcome of each step that has one."""
    options = ["--max-bytes", str(max_bytes)] if max_bytes else []
    command = [sys.executable, str(WRITER), str(log), fsync, *options, *steps]
    env = None
    if key is not None:
        command[4:4] = ["--key-env", "PRUNEWARDEN_TEST_KEY"]
        env = {**os.environ, "PRUNEWARDEN_TEST_KEY": key}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    outcomes: list[Any] = json.loads(done.stdout)
    return outcomes


def kinds(log: Path) -> list[str]:
    """The kind of each line of the log; ``torn`` for a line that is not a record."""
    found = []
    for line in log.read_bytes().split(b"\n")[:-1]:
        try:
            found.append(json.loads(line)["kind"])
        except ValueError:
            found.append("torn")
    return found


def verified(log: Path, key: str | None = None) -> list[str]:
    """Verify the whole log (it must pass); its notes."""
    result = verify_files([log], key=None if key is None else key.encode())
    assert result.ok, [str(f) for f in result.findings]
    return [f.message for f in result.findings]


class TestWritesRefusedPartway:
    @pytest.mark.parametrize(
        ("refusals", "fsync"), [(1, "batch"), (3, "always"), (3, "batch"), (3, "never")]
    )
    def test_decisions_resume_on_a_log_that_verifies(
        self, tmp_path: Path, fsync: str, refusals: int
    ) -> None:
        """A decision cut after 40 bytes is refused (and so are the next ones while the disk is
        full); once space is back the next decision is allowed, written after a newline and a
        write_recovered record, and the whole log verifies."""
        log = tmp_path / "audit.jsonl"
        steps = ["decide", "room:40", *["decide"] * refusals, "unlimited", "decide", "decide"]
        outcomes = run_writer(log, *steps, fsync=fsync)
        assert outcomes == [ALLOWED, *[REFUSED] * refusals, ALLOWED, ALLOWED]
        assert kinds(log) == [
            "policy_activated",
            "decision",
            "torn",
            "write_recovered",
            "decision",
            "decision",
        ]
        (note,) = verified(log)
        assert note.startswith("line 3: 40 bytes of an interrupted write")

    def test_a_cut_pass_record(self, tmp_path: Path) -> None:
        """A pass record cut partway refuses every decision of the pass; the next pass is
        allowed and the log verifies."""
        log = tmp_path / "audit.jsonl"
        outcomes = run_writer(log, "decide", "room:300", "pass", "unlimited", "pass")
        assert outcomes == [ALLOWED, REFUSED, ALLOWED]
        assert kinds(log)[2:] == ["torn", "write_recovered", "pass"]
        (note,) = verified(log)
        assert note.startswith("line 3: 300 bytes")

    def test_a_cut_write_recovered_record(self, tmp_path: Path) -> None:
        """The recovery itself is cut (its newline written, its write_recovered record only
        partly): the next write accounts for both torn lines in one record."""
        log = tmp_path / "audit.jsonl"
        steps = ["decide", "room:40", "decide", "room:30", "decide", "unlimited", "decide"]
        assert run_writer(log, *steps) == [ALLOWED, REFUSED, REFUSED, ALLOWED]
        assert kinds(log)[2:] == ["torn", "torn", "write_recovered", "decision"]
        recovered = json.loads(log.read_bytes().split(b"\n")[4])
        assert [torn["bytes"] for torn in recovered["torn"]] == [40, 29]
        (note,) = verified(log)
        assert note.startswith("lines 3-4: 69 bytes")

    def test_a_keyed_log(self, tmp_path: Path) -> None:
        """The same on a keyed log: the recovery and the decisions after it are keyed and
        verify with the key."""
        log = tmp_path / "audit.jsonl"
        steps = ["decide", "room:40", "decide", "decide", "unlimited", "decide"]
        assert run_writer(log, *steps, key=KEY) == [ALLOWED, REFUSED, REFUSED, ALLOWED]
        assert kinds(log)[2:] == ["torn", "write_recovered", "decision"]
        assert len(verified(log, KEY)) == 1

    def test_recovers_the_tail_as_a_fresh_process_does(self, tmp_path: Path) -> None:
        """The write_recovered record of the writer whose write failed names the same torn
        lines as the one a fresh process writes on a copy of the file."""
        log, copy = tmp_path / "audit.jsonl", tmp_path / "copy.jsonl"
        steps = ["decide", "room:40", "decide", "room:30", "decide", "unlimited"]
        run_writer(log, *steps, f"copy:{copy}", "decide")
        with AuditLog(copy) as fresh:
            Engine.default(audit=fresh).evaluate(
                {
                    "check": "eviction",
                    "segment": {"id": "fresh", "kind": "turn", "tombstone_written": True},
                    "score": 0.08,
                    "perturbed_score": 0.1,
                }
            )
        ours, theirs = (json.loads(path.read_bytes().split(b"\n")[4]) for path in (log, copy))
        assert ours["kind"] == theirs["kind"] == "write_recovered"
        assert ours["torn"] == theirs["torn"]
        assert ours["prev_hash"] == theirs["prev_hash"]


class TestRotationOnAFullDisk:
    def test_a_header_that_cannot_be_written_leaves_the_log_as_it_was(self, tmp_path: Path) -> None:
        """A rotation whose new file cannot take its log_rotated header (cut after 100 bytes)
        is undone: no archive, no new file; the decision is refused, and the next one rotates
        and both files verify."""
        log = tmp_path / "audit.jsonl"
        steps = ["decide", "limit:100", "decide", "unlimited", "decide"]
        outcomes = run_writer(log, *steps, max_bytes=3000)
        assert outcomes == [ALLOWED, REFUSED, ALLOWED]
        archived = tmp_path / "audit.jsonl.000001"
        assert sorted(path.name for path in tmp_path.iterdir()) == [log.name, archived.name]
        assert kinds(archived) == ["policy_activated", "decision"]
        assert kinds(log) == ["log_rotated", "policy_activated", "decision"]
        result = verify_files([archived, log])
        assert result.ok, [str(f) for f in result.findings]


class TestOpenAfterAFailedWrite:
    def test_open_fails_until_the_tail_can_be_recovered(self, tmp_path: Path) -> None:
        """``open()`` (what readiness asks) fails while the torn tail cannot be ended, and
        succeeds once it has been: the recovery is then already in the file."""
        log = tmp_path / "audit.jsonl"
        steps = ["decide", "room:40", "decide", "open", "unlimited", "open", "decide"]
        outcomes = run_writer(log, *steps)
        assert outcomes[:2] == [ALLOWED, REFUSED]
        assert outcomes[2].startswith(f"cannot write audit log {log}: File too large")
        assert outcomes[3:] == ["ok", ALLOWED]
        assert kinds(log)[2:] == ["torn", "write_recovered", "decision"]
        verified(log)

    def test_a_write_refused_whole_leaves_open_failing_until_writes_succeed(
        self, tmp_path: Path
    ) -> None:
        """A record refused whole leaves nothing to recover: ``open()`` then tries a scratch
        write, and fails while the OS refuses it; the log has no torn line."""
        log = tmp_path / "audit.jsonl"
        steps = ["decide", "room:0", "decide", "open", "unlimited", "open", "decide"]
        outcomes = run_writer(log, *steps)
        assert outcomes[:2] == [ALLOWED, REFUSED]
        assert outcomes[2].startswith(f"cannot write audit log {log}: File too large")
        assert outcomes[3:] == ["ok", ALLOWED]
        assert kinds(log) == ["policy_activated", "decision", "decision"]
        assert verified(log) == []
