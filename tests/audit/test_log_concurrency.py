"""Many writers, real processes, and writers that die: records never interleave, the chain holds.

These tests spawn real processes (``tests/_support/auditwriter.py``) that share one log through
the OS file lock, and kill them with SIGKILL mid-write.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import pytest
from prunewarden import AuditLog, Engine
from prunewarden.audit import rotated_files
from prunewarden.audit._verify import verify_files

WRITER = Path(__file__).resolve().parents[1] / "_support" / "auditwriter.py"

pytestmark = pytest.mark.spawns


def eviction(segment_id: str) -> dict[str, Any]:
    return {
        "check": "eviction",
        "segment": {"id": segment_id, "kind": "turn", "tombstone_written": True},
        "score": 0.08,
        "perturbed_score": 0.1,
        "eviction_candidates": [segment_id],
    }


def writer(log: Path, session: str, count: int, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(log), session, str(count), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out


def records(*paths: Path) -> list[dict[str, Any]]:
    """Every line that is a JSON object (a torn line is not)."""
    found = []
    for path in paths:
        for line in path.read_text().splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def read_line(stream: IO[str] | None, timeout: float = 60) -> str:
    """One line from a child's stdout, or fail after ``timeout`` seconds."""
    assert stream is not None
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert got, "the writer did not report in time"
    return got[0].strip()


class TestManyWriters:
    def test_four_processes_two_thousand_decisions_each(self, tmp_path: Path) -> None:
        """4 processes x 2,000 decisions: 8,000 records, one activation, a chain that verifies."""
        log = tmp_path / "audit.jsonl"
        processes = [writer(log, f"agent-{n}", 2000) for n in range(4)]
        for process in processes:
            finish(process)
        result = verify_files([log])
        assert result.ok, [str(f) for f in result.findings]
        written = records(log)
        kinds = Counter(r["kind"] for r in written)
        assert kinds == {"decision": 8000, "policy_activated": 1}
        sessions = Counter(r["session_id"] for r in written if r["kind"] == "decision")
        assert sessions == {f"agent-{n}": 2000 for n in range(4)}
        ids = [r["subject"]["segment"]["id"] for r in written if r["kind"] == "decision"]
        assert len(set(ids)) == 8000

    def test_processes_rotating_one_log(self, tmp_path: Path) -> None:
        """Writers racing through many rotations lose nothing and leave one unbroken chain."""
        log = tmp_path / "audit.jsonl"
        processes = [writer(log, f"agent-{n}", 300, "--max-bytes", "40000") for n in range(4)]
        for process in processes:
            finish(process)
        files = rotated_files(log)
        assert len(files) > 10
        result = verify_files(files)
        assert result.ok, [str(f) for f in result.findings]
        decisions = [r for r in records(*files) if r["kind"] == "decision"]
        assert len(decisions) == 1200
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

    def test_threads_sharing_one_sink_and_two_sinks_on_one_file(self, tmp_path: Path) -> None:
        """Threads on one AuditLog, and two AuditLogs on one file, serialize their records."""
        log = tmp_path / "audit.jsonl"
        first, second = AuditLog(log), AuditLog(log)
        engines = [Engine.default(audit=first), Engine.default(audit=second)]

        def work(n: int) -> None:
            for i in range(150):
                engines[n % 2].evaluate(eviction(f"t{n}-{i}"), session_id=f"thread-{n}")

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        first.close()
        second.close()
        assert verify_files([log]).ok
        kinds = Counter(r["kind"] for r in records(log))
        assert kinds == {"decision": 900, "policy_activated": 1}


class TestKilledWriters:
    def test_kill_mid_write_loses_only_that_record(self, tmp_path: Path) -> None:
        """A writer killed halfway through a record leaves a partial line; every record before
        it verifies, and the next writer recovers and continues the chain."""
        log = tmp_path / "audit.jsonl"
        process = writer(log, "victim", 50, "--then", "stall")
        assert read_line(process.stdout) == "stalled"
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        result = verify_files([log])
        assert not result.ok
        (fatal,) = [f for f in result.findings if f.fatal]
        assert fatal.line == 52
        assert fatal.message.startswith("partial last record")
        assert result.files[0].records == 51  # the activation and 50 decisions

        finish(writer(log, "survivor", 5))
        result = verify_files([log])
        assert result.ok
        (note,) = [f for f in result.findings if not f.fatal]
        assert (note.line, "interrupted write" in note.message) == (52, True)
        sessions = Counter(r.get("session_id") for r in records(log) if "session_id" in r)
        assert sessions == {"victim": 50, "survivor": 5}

    def test_kill_at_a_random_moment(self, tmp_path: Path) -> None:
        """SIGKILL while writing flat out: at worst the last line is partial; all before it
        verifies, and the log continues cleanly."""
        log = tmp_path / "audit.jsonl"
        process = writer(log, "busy", 0, "--fsync", "never", "--then", "forever")
        deadline = time.monotonic() + 60
        while (not log.exists() or log.stat().st_size < 200_000) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
        assert log.stat().st_size >= 200_000
        result = verify_files([log])
        fatal = [f for f in result.findings if f.fatal]
        assert len(fatal) <= 1
        if fatal:
            assert fatal[0].message.startswith("partial last record")
            assert fatal[0].line == len(log.read_bytes().split(b"\n"))
        finish(writer(log, "after", 3))
        assert verify_files([log]).ok

    def test_a_failing_write_refuses_and_corrupts_nothing(self, tmp_path: Path) -> None:
        """A write cut short by the OS (file size limit) makes that decision a refusal; the
        records before it still verify and the next writer recovers."""
        log = tmp_path / "audit.jsonl"
        process = writer(log, "limited", 20, "--then", "limit")
        assert finish(process).strip() == "audit_unavailable"
        result = verify_files([log])
        assert result.files[0].records == 21
        (fatal,) = [f for f in result.findings if f.fatal]
        assert fatal.message.startswith("partial last record (40 bytes")
        finish(writer(log, "after", 2))
        assert verify_files([log]).ok
