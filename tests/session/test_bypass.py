"""No bypass: a stateless call naming a halted session is refused like the session's own."""

from __future__ import annotations

import gc
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest
import structlog
from prunewarden import Engine, SessionStoreError, SqliteSessionStore, UntrustedEvictionError

SEGMENT = {"id": "t3", "kind": "turn", "tombstone_written": True}
EVICTION = {"check": "eviction", "segment": SEGMENT, "score": 0.1, "perturbed_score": 0.1}
SPANS = [{"span_id": "a", "text": "a", "score": 0.5, "text_sha256": sha256(b"a").hexdigest()}]


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    """Seed 000: spread narrows to the midpoint; the canary drifts 0.9 -> 0.6."""
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores


def halt(session: Any) -> Any:
    for cycle in range(1, 6):
        session.observe_cycle(narrowing(cycle), ["task"])
    assert session.halted
    return session


@pytest.fixture
def logger() -> Any:
    return structlog.testing.CapturingLogger()


@pytest.fixture
def engine(logger: Any) -> Engine:
    return Engine.default(logger=logger)


class TestLiveSession:
    def test_enforce_with_a_halted_session_id_raises(self, engine: Engine) -> None:
        """engine.enforce(..., session_id=halted) raises with pruning_halted, as the session
        would refuse."""
        session = halt(engine.session("s"))
        with pytest.raises(UntrustedEvictionError) as raised:
            engine.enforce(EVICTION, session_id="s")
        assert raised.value.decision.codes == ("pruning_halted",)
        assert session.authorize(SEGMENT, 0.1, 0.1).codes == ("pruning_halted",)

    def test_every_stateless_pruning_call_is_refused(self, engine: Engine) -> None:
        """authorize_eviction, authorize_evictions, prune and plan naming the halted session
        are refused; the same calls for another session id are not."""
        halt(engine.session("s"))
        item = {"segment": SEGMENT, "score": 0.1, "perturbed_score": 0.1}
        assert engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s").codes == (
            "pruning_halted",
        )
        assert [d.codes for d in engine.authorize_evictions([item], session_id="s")] == [
            ("pruning_halted",)
        ]
        assert engine.prune(SPANS, 1, session_id="s").codes == ("pruning_halted",)
        plan = engine.plan(
            {"segments": [{**SEGMENT, "score": 0.1}], "keep_top_k": 0}, session_id="s"
        )
        assert plan.frozen
        assert plan.decisions[0].codes == ("pruning_halted",)
        assert engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="t").codes == ("authorized",)

    def test_records_say_whether_a_session_decided(self, engine: Engine, logger: Any) -> None:
        """from_session is true for the session's decisions, false for the stateless call
        naming its id; both carry the session id."""
        session = halt(engine.session("s"))
        before = len(logger.calls)
        session.authorize(SEGMENT, 0.1, 0.1)
        engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s")
        records = [call.kwargs for call in logger.calls[before:]]
        assert [(r["session_id"], r["from_session"]) for r in records] == [
            ("s", True),
            ("s", False),
        ]
        assert [r["reasons"][0]["code"] for r in records] == ["pruning_halted"] * 2

    def test_the_halt_outlives_the_session_object(self, engine: Engine) -> None:
        """A halted session nobody holds any more still refuses stateless calls for its id."""
        halt(engine.session("s"))
        gc.collect()
        assert engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s").codes == (
            "pruning_halted",
        )

    def test_a_lifted_halt_lifts_both_paths(self, engine: Engine) -> None:
        """Once a later cycle passes the guard, stateless calls are decided again."""
        session = halt(engine.session("s"))
        session.observe_cycle({"task": 0.9, "a": 0.1, "b": 0.5, "c": 0.9}, ["task"])
        assert not session.halted
        assert engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s").codes == ("authorized",)


class TestSessionHelpers:
    def test_session_enforce_raises_while_halted(self, engine: Engine) -> None:
        """Session.enforce raises the check's refusal error carrying the decision."""
        session = halt(engine.session("s"))
        with pytest.raises(UntrustedEvictionError) as raised:
            session.enforce(EVICTION)
        assert raised.value.decision.codes == ("pruning_halted",)

    def test_session_evaluate_observes_a_collapse_document(self, engine: Engine) -> None:
        """A collapse document's snapshots are observed in order; the last decision returns."""
        session = engine.session("s")
        history = [{"cycle": c, "scores": narrowing(c), "pinned": ["task"]} for c in range(1, 6)]
        decision = session.evaluate({"check": "collapse", "history": history})
        assert decision.codes == ("collapse_detected",)
        assert session.halted


class TestStoredSession:
    def test_a_halt_held_by_the_store_refuses_stateless_calls(self, tmp_path: Path) -> None:
        """An engine with a store refuses a stateless eviction for a session the store holds
        halted, though no live session of that id exists in this process."""
        with SqliteSessionStore(tmp_path / "s.db") as store:
            halt(Engine.default(store=store).session("s"))
            fresh = Engine.default(store=store)
            assert fresh.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s").codes == (
                "pruning_halted",
            )
            assert fresh.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="u").codes == (
                "authorized",
            )

    def test_a_store_that_cannot_be_read_refuses(self) -> None:
        """A store that raises on load refuses the stateless call (fail closed)."""

        class Broken:
            def load(self, session_id: str) -> None:  # noqa: ARG002 - the protocol's signature
                msg = "database is locked"
                raise OSError(msg)

            def save(self, session_id: str, state: Any) -> None:
                pass

        engine = Engine.default(store=Broken())
        decision = engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s")
        assert (decision.outcome, decision.codes) == ("deny", ("session_state_unavailable",))

    def test_a_halt_lifted_on_another_replica_is_lifted_here(self, tmp_path: Path) -> None:
        """Two engines on one store (two replicas): once the other lifts the halt, this one's
        stateless calls are decided again; its memory does not keep the halt alive."""
        with SqliteSessionStore(tmp_path / "s.db") as store:
            here = Engine.default(store=store)
            halt(here.session("s"))
            there = Engine.default(store=store).session("s")
            there.observe_cycle({"task": 0.9, "a": 0.1, "b": 0.5, "c": 0.9}, ["task"])
            assert not there.halted
            decision = here.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s")
            assert decision.codes == ("authorized",)

    def test_a_session_deleted_from_the_store_no_longer_halts(self, tmp_path: Path) -> None:
        """A halted session deleted from the store (another replica's DELETE, a TTL) no longer
        refuses this engine's stateless calls."""
        with SqliteSessionStore(tmp_path / "s.db") as store:
            engine = Engine.default(store=store)
            halt(engine.session("s"))
            store.delete("s")
            decision = engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s")
            assert decision.codes == ("authorized",)

    def test_a_session_on_a_store_of_its_own_still_gates(self, tmp_path: Path) -> None:
        """A session saved to a store the engine does not read is remembered in memory: the
        engine's stateless calls for its id are refused."""
        engine = Engine.default()
        with SqliteSessionStore(tmp_path / "own.db") as own:
            halt(engine.session("s", store=own))
            decision = engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s")
        assert decision.codes == ("pruning_halted",)

    def test_a_halt_that_could_not_be_saved_is_remembered(self, tmp_path: Path) -> None:
        """While the halt is not in the store (its save failed), the engine remembers it, so a
        stateless call is refused although the store holds no halt."""

        class ReadOnly(SqliteSessionStore):
            def save(self, session_id: str, state: Any) -> None:
                if state["halt"] is not None:
                    msg = "disk full"
                    raise OSError(msg)
                super().save(session_id, state)

        with ReadOnly(tmp_path / "s.db") as store:
            engine = Engine.default(store=store)
            session = engine.session("s")
            unsaved = []
            for cycle in range(1, 6):
                try:
                    session.observe_cycle(narrowing(cycle), ["task"])
                except SessionStoreError as exc:  # the halting cycle is not saved
                    unsaved.append(exc)
            assert [exc.error for exc in unsaved[:1]] == ["OSError: disk full"]
            assert session.halted
            assert store.load("s")["halt"] is None  # type: ignore[index]
            decision = engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s")
        assert decision.codes == ("pruning_halted",)
