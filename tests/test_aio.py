"""prunewarden.aio: the engine's calls awaited under a running loop, never blocking it."""

from __future__ import annotations

import asyncio
import fcntl
import os
from pathlib import Path

import pytest
from prunewarden import AuditLog, Engine, UntrustedEvictionError
from prunewarden.aio import AsyncEngine

SEGMENT = {"id": "t3", "kind": "turn", "tombstone_written": True}
EVICTION = {"check": "eviction", "segment": SEGMENT, "score": 0.1, "perturbed_score": 0.1}


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    """Seed 000: spread narrows to the midpoint; the canary drifts 0.9 -> 0.6."""
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores


class TestUnderARunningLoop:
    def test_a_locked_audit_log_does_not_block_the_loop(self, tmp_path: Path) -> None:
        """While another writer holds the audit log's lock, an awaited decision waits in a
        worker thread and other tasks of the loop keep running; it completes once the lock
        is released."""
        log = tmp_path / "audit.jsonl"
        engine = AsyncEngine(Engine.default(audit=AuditLog(log, fsync="always")))

        async def scenario() -> tuple[int, bool, str]:
            holder = os.open(log, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(holder, fcntl.LOCK_EX)  # another writer, mid-append
            try:
                pending = asyncio.create_task(engine.evaluate(EVICTION))
                ticks = 0
                for _ in range(50):  # the loop runs other work meanwhile
                    await asyncio.sleep(0)
                    ticks += 1
                waiting = not pending.done()
            finally:
                fcntl.flock(holder, fcntl.LOCK_UN)
                os.close(holder)
            decision = await pending
            return ticks, waiting, decision.outcome

        ticks, waiting, outcome = asyncio.run(scenario())
        assert (ticks, waiting, outcome) == (50, True, "allow")
        assert '"kind":"decision"' in log.read_text(encoding="utf-8")

    def test_an_async_session_halts_and_enforces(self) -> None:
        """An awaited session observes cycles, holds its halt, and enforce raises."""
        engine = AsyncEngine.default()

        async def scenario() -> tuple[bool, tuple[str, ...]]:
            session = await engine.session("s")
            for cycle in range(1, 6):
                await session.observe_cycle(narrowing(cycle), ["task"])
            refused = await session.authorize(SEGMENT, 0.1, 0.1)
            with pytest.raises(UntrustedEvictionError):
                await session.enforce(EVICTION)
            with pytest.raises(UntrustedEvictionError):
                await engine.enforce(EVICTION, session_id="s")
            return session.halted, refused.codes

        assert asyncio.run(scenario()) == (True, ("pruning_halted",))

    def test_an_async_session_verifies_a_transition(self) -> None:
        """AsyncSession.verify judges an edit with the session's halt; evaluate takes the
        document too."""
        engine = AsyncEngine.default()
        before = [
            {"id": "a", "kind": "turn", "text": "a"},
            {"id": "b", "kind": "turn", "text": "b"},
        ]
        document = {"check": "transition", "before": before, "after": before[1:]}

        async def scenario() -> tuple[tuple[str, ...], tuple[str, ...]]:
            session = await engine.session("v")
            for cycle in range(1, 6):
                await session.observe_cycle(narrowing(cycle), ["task"])
            halted = await session.verify(before, before[1:], tombstones=["a"])
            plain = await engine.evaluate(document)
            return halted.codes, plain.codes

        assert asyncio.run(scenario()) == (("pruning_halted",), ("no_tombstone",))

    def test_concurrent_tasks_share_one_engine(self) -> None:
        """Many tasks decide at once; each gets its own decision."""
        engine = AsyncEngine.default()

        async def scenario() -> set[str]:
            decisions = await asyncio.gather(
                *(engine.authorize_eviction(SEGMENT, 0.1, 0.1) for _ in range(20))
            )
            return {d.decision_id for d in decisions}

        assert len(asyncio.run(scenario())) == 20
