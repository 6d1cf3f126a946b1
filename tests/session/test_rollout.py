"""Rollouts: a session of a ReloadingEngine follows reloads and keeps its history."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from prunewarden import AuditLog, ReloadingEngine, SqliteSessionStore
from prunewarden._resources import schema
from prunewarden.cli._main import run

RECORD = Draft202012Validator(schema("audit-record"))
SEGMENT = {"id": "t3", "kind": "turn", "tombstone_written": True}


def policy(version: str, *, consecutive_cycles: int = 2, stability_delta: float = 0.25) -> str:
    return (
        "apiVersion: prunewarden/v1\nkind: Policy\n"
        f"metadata: {{name: agent, version: {version}}}\n"
        "spec:\n"
        f"  collapse: {{consecutive_cycles: {consecutive_cycles}}}\n"
        f"  eviction: {{stability_delta: {stability_delta}}}\n"
    )


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    """Seed 000: spread narrows to the midpoint; the canary drifts 0.9 -> 0.6."""
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores


def write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def records(log: Path, kind: str) -> list[dict[str, Any]]:
    lines = log.read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Path, Path, ReloadingEngine]]:
    path, log = tmp_path / "agent.yaml", tmp_path / "audit.jsonl"
    write(path, policy("1.0.0"))
    audit = AuditLog(log, fsync="never")
    with ReloadingEngine(path, interval=0, audit=audit) as engine:
        yield path, log, engine
    audit.close()


class TestReloadDuringSession:
    def test_the_next_decision_names_the_new_policy_and_keeps_the_history(
        self, setup: tuple[Path, Path, ReloadingEngine]
    ) -> None:
        """After a reload, the session's next decision is made under the new policy, with the
        history kept under the old one (no insufficient_history); one session_rebound record
        names both policies and what was kept, and the log verifies."""
        path, log, engine = setup
        session = engine.session("agent-1", {"team": "core"})
        codes = [session.observe_cycle(narrowing(c), ["task"]).codes[0] for c in (1, 2, 3)]
        assert codes == ["insufficient_history", "insufficient_history", "spread_healthy"]
        write(path, policy("1.1.0", stability_delta=0.2))
        assert engine.reload().changed

        decision = session.observe_cycle(narrowing(4), ["task"])
        assert (decision.policy.version, decision.codes) == ("1.1.0", ("spread_healthy",))
        assert session.observe_cycle(narrowing(5), ["task"]).codes == ("collapse_detected",)

        (rebound,) = records(log, "session_rebound")
        assert (rebound["session_id"], rebound["labels"]) == ("agent-1", {"team": "core"})
        assert rebound["previous_policy"]["version"] == "1.0.0"
        assert rebound["policy"]["version"] == "1.1.0"
        assert rebound["kept"] == ["snapshots", "baseline", "early_spreads", "turns", "halt"]
        assert rebound["dropped"] == {}
        versions = [r["policy"]["version"] for r in records(log, "decision")]
        assert versions == ["1.0.0"] * 3 + ["1.1.0"] * 2
        lines = log.read_text(encoding="utf-8").splitlines()
        assert [list(RECORD.iter_errors(json.loads(line))) for line in lines] == [[]] * len(lines)
        out, err = io.StringIO(), io.StringIO()
        assert run(["audit", "verify", str(log)], out, err) == 0, err.getvalue()

    def test_a_halt_carries_over_a_reload(self, setup: tuple[Path, Path, ReloadingEngine]) -> None:
        """A session halted under the old policy stays halted under the new one."""
        path, log, engine = setup
        session = engine.session("agent-1")
        for cycle in range(1, 6):
            session.observe_cycle(narrowing(cycle), ["task"])
        write(path, policy("1.1.0", consecutive_cycles=1))
        engine.reload()
        decision = session.authorize(SEGMENT, 0.1, 0.1)
        assert (decision.codes, decision.policy.version) == (("pruning_halted",), "1.1.0")
        (rebound,) = records(log, "session_rebound")
        assert "halt" in rebound["kept"]
        assert [s["cycle"] for s in session.state()["snapshots"]] == [4, 5]

    def test_no_reload_no_record(self, setup: tuple[Path, Path, ReloadingEngine]) -> None:
        """A session whose policy never changes writes no session_rebound record."""
        _, log, engine = setup
        session = engine.session("agent-1")
        for cycle in range(1, 4):
            session.observe_cycle(narrowing(cycle), ["task"])
        engine.reload()
        session.observe_cycle(narrowing(4), ["task"])
        assert records(log, "session_rebound") == []


class TestReloadWithAStore:
    def test_the_stored_state_follows_the_reload(self, tmp_path: Path) -> None:
        """A ReloadingEngine's store= is every snapshot's store: after a reload the saved
        state names the new policy, and a restarted engine restores it without a rebound."""
        path = tmp_path / "agent.yaml"
        write(path, policy("1.0.0"))
        with (
            SqliteSessionStore(tmp_path / "s.db") as store,
            ReloadingEngine(path, interval=0, store=store) as engine,
        ):
            session = engine.session("agent-1")
            session.observe_cycle(narrowing(1), ["task"])
            write(path, policy("1.1.0", stability_delta=0.2))
            engine.reload()
            session.observe_cycle(narrowing(2), ["task"])
            saved = store.load("agent-1")
            assert saved is not None
            assert saved["policy"]["version"] == "1.1.0"
            assert saved["cycles_seen"] == 2
        with (
            SqliteSessionStore(tmp_path / "s.db") as store,
            ReloadingEngine(path, interval=0, store=store) as again,
        ):
            restored = again.session("agent-1")
            assert restored.observe_cycle(narrowing(3), ["task"]).codes == ("spread_healthy",)
