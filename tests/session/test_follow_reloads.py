"""Every call of a session follows a reload: the first one after it, whatever it is, decides
under the new policy and writes the one session_rebound record."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prunewarden import AuditLog, ReloadingEngine, SqliteSessionStore
from prunewarden.session import Session

SEGMENT = {"id": "t3", "kind": "turn", "tombstone_written": True}
WINDOW_SEGMENT = {"id": "a", "kind": "turn", "text": "text a", "tokens": 10}


def policy(version: str, drift_turns: int) -> str:
    return (
        "apiVersion: prunewarden/v1\nkind: Policy\n"
        f"metadata: {{name: agent, version: {version}}}\n"
        "spec:\n"
        f"  staleness: {{drift_consecutive_turns: {drift_turns}}}\n"
    )


def write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def span(span_id: str, score: float) -> dict[str, Any]:
    text = f"text of {span_id}"
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return {"span_id": span_id, "text": text, "score": score, "text_sha256": sha}


CALLS: dict[str, Callable[[Session], object]] = {
    "observe_turn": lambda s: s.observe_turn(0.5, 100),
    "authorize": lambda s: s.authorize(SEGMENT, 0.1, 0.1),
    "prune": lambda s: s.prune([span("a", 0.9), span("b", 0.1)], 1),
    "verify": lambda s: s.verify([WINDOW_SEGMENT], [WINDOW_SEGMENT]),
}


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Path, Path, ReloadingEngine]]:
    path, log = tmp_path / "agent.yaml", tmp_path / "audit.jsonl"
    write(path, policy("1.0.0", 4))
    audit = AuditLog(log, fsync="never")
    with ReloadingEngine(path, interval=0, audit=audit) as engine:
        yield path, log, engine
    audit.close()


class TestEveryCallFollows:
    @pytest.mark.parametrize("call", sorted(CALLS))
    def test_the_first_call_after_a_reload_rebinds(
        self, setup: tuple[Path, Path, ReloadingEngine], call: str
    ) -> None:
        """Whichever call comes first after a reload carries the history over to the new
        policy and writes the session_rebound record."""
        path, log, engine = setup
        session = engine.session("agent-1")
        for _ in range(4):
            session.observe_turn(0.5, 100)
        write(path, policy("1.1.0", 1))
        assert engine.reload().changed
        CALLS[call](session)
        lines = log.read_text(encoding="utf-8").splitlines()
        rebound = [r for r in map(json.loads, lines) if r["kind"] == "session_rebound"]
        assert [r["policy"]["version"] for r in rebound] == ["1.1.0"]
        assert session.policy.version == "1.1.0"
        assert len(session.state()["turns"]) <= 2

    def test_the_carried_over_state_is_saved(self, tmp_path: Path) -> None:
        """With a store, the history carried over to the new policy is saved by the call that
        followed the reload, even one that changes nothing else."""
        path = tmp_path / "agent.yaml"
        write(path, policy("1.0.0", 4))
        with (
            SqliteSessionStore(tmp_path / "s.db") as store,
            ReloadingEngine(path, interval=0, store=store) as engine,
        ):
            session = engine.session("agent-1")
            session.observe_turn(0.5, 100)
            write(path, policy("1.1.0", 1))
            assert engine.reload().changed
            session.authorize(SEGMENT, 0.1, 0.1)
            saved = store.load("agent-1")
            assert saved is not None
            assert saved["policy"]["version"] == "1.1.0"


def scaled_policy(version: str, top: float) -> str:
    return (
        "apiVersion: prunewarden/v1\nkind: Policy\n"
        f"metadata: {{name: agent, version: {version}}}\n"
        f"spec:\n  scores: {{min: 0.0, max: {top}}}\n"
    )


class TestEvaluateFollows:
    def test_the_first_document_after_a_reload_is_read_on_the_new_score_scale(
        self, tmp_path: Path
    ) -> None:
        """Session.evaluate reads its document under the policy in force: a score of 50 that
        the old 0..1 scale refuses is read on the reloaded 0..100 scale and decided."""
        path = tmp_path / "agent.yaml"
        write(path, scaled_policy("1.0.0", 1.0))
        document = {
            "check": "eviction",
            "segment": SEGMENT,
            "score": 50.0,
            "perturbed_score": 50.0,
        }
        with ReloadingEngine(path, interval=0) as engine:
            session = engine.session("agent-1")
            session.observe_turn(0.5, 100)  # bound to 1.0.0
            write(path, scaled_policy("1.1.0", 100.0))
            assert engine.reload().changed
            decision = session.evaluate(document)
        assert decision.policy.version == "1.1.0"
        assert decision.check == "eviction"
