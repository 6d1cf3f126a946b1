"""AuditLog.sync: a background sync that does not hold the writers back."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from prunewarden import AuditLog, Engine
from prunewarden.audit import _log

EVICTION = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "tool_output", "tombstone_written": True},
    "score": 0.1,
    "perturbed_score": 0.12,
}


class TestSync:
    def test_writers_go_on_while_a_sync_runs(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A decision is logged while sync() is inside its fdatasync (outside the lock)."""
        audit = AuditLog(tmp_path / "audit.jsonl", fsync="never")
        engine = Engine.default(audit=audit)
        engine.evaluate(EVICTION)
        inside, release = threading.Event(), threading.Event()

        def slow_sync(fd: int) -> None:
            inside.set()
            release.wait(30)

        monkeypatch.setattr(_log, "sync_file", slow_sync)
        syncer = threading.Thread(target=audit.sync)
        syncer.start()
        assert inside.wait(30)
        decision = engine.evaluate(EVICTION)  # would wait for the sync if it held the lock
        release.set()
        syncer.join(30)
        audit.close()
        logged = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
        assert decision.decision_id in logged

    def test_sync_counts_what_it_synced(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """After sync(), batch's next write does not sync inline; with nothing pending, sync()
        syncs nothing."""
        calls: list[int] = []
        monkeypatch.setattr(_log, "BATCH_RECORDS", 3)
        monkeypatch.setattr(_log, "sync_file", calls.append)
        audit = AuditLog(tmp_path / "audit.jsonl", fsync="batch")
        engine = Engine.default(audit=audit)
        engine.evaluate(EVICTION)  # policy_activated + decision: 2 records unsynced
        audit.sync()
        audit.sync()
        engine.evaluate(EVICTION)  # 1 unsynced: under the batch of 3
        assert len(calls) == 1
        audit.close()
