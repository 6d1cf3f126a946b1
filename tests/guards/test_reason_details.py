"""What a refusal says, as docs/guards.md shows it: the reason's message names why a segment is
pinned and lists at most five span ids, and a relative floor's reasons carry how the floor was
made."""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Callable
from typing import Any

import pytest
from prunewarden import Engine

EngineFactory = Callable[..., Engine]


def unbound(span_id: str) -> dict[str, Any]:
    return {"span_id": span_id, "text": f"text of {span_id}", "score": None, "text_sha256": ""}


def bound(span_id: str) -> dict[str, Any]:
    text = f"text of {span_id}"
    sha = hashlib.sha256(text.encode()).hexdigest()
    return {"span_id": span_id, "text": text, "score": 0.5, "text_sha256": sha}


class TestPinnedMessage:
    def test_a_pinned_kind_is_named(self, engine: Engine) -> None:
        """A segment pinned by its kind says which kind."""
        segment = {"id": "n1", "kind": "negation", "tombstone_written": True}
        reason = engine.authorize_eviction(segment, 0.125, 0.125).reasons[0]
        assert reason.code == "pinned"
        assert "is pinned (kind 'negation')" in reason.message

    def test_a_non_recoverable_segment_says_so(self, engine: Engine) -> None:
        """A segment pinned for being non-recoverable says that, not a kind."""
        segment = {"id": "t1", "kind": "turn", "non_recoverable": True, "tombstone_written": True}
        reason = engine.authorize_eviction(segment, 0.125, 0.125).reasons[0]
        assert "is pinned (non-recoverable)" in reason.message
        assert reason.detail == {"segment": "t1", "kind": "turn", "non_recoverable": True}


class TestSpanLists:
    @pytest.mark.parametrize(
        ("count", "listed"),
        [
            (5, "u0, u1, u2, u3, u4"),
            (6, "u0, u1, u2, u3, u4 and 1 more"),
            (8, "u0, u1, u2, u3, u4 and 3 more"),
        ],
    )
    def test_a_message_lists_five_ids_then_counts(
        self, engine: Engine, count: int, listed: str
    ) -> None:
        """Up to five span ids are named; the rest are counted (the detail keeps them all)."""
        spans = [unbound(f"u{i}") for i in range(count)] + [bound("b")]
        reason = engine.prune(spans, 1).reasons[0]
        assert reason.code == "unbound_score"
        assert reason.message.endswith(f"carry no score bound to a text hash: {listed}")
        assert reason.detail == {"spans": [f"u{i}" for i in range(count)]}


class TestRelativeFloorDetail:
    def test_the_reason_says_how_the_floor_was_made(self, engine_with: EngineFactory) -> None:
        """With a relative floor, the reason carries the mode, the relative factor, the early
        spread and how many cycles it came from, and the floor it made."""
        engine = engine_with(
            collapse={
                "spread_floor": 0.5,
                "spread_floor_mode": "relative",
                "relative_to": {"first_cycles": 1},
            }
        )
        wide = {"a": 0.25, "b": 0.75, "c": 0.5}
        history: list[dict[str, Any]] = [
            {"cycle": n, "scores": wide, "pinned": []} for n in (1, 2, 3)
        ]
        reason = engine.detect_collapse(history).reasons[0]
        early = statistics.pstdev(wide.values())
        assert reason.code == "spread_healthy"
        assert reason.detail["spread_floor_mode"] == "relative"
        assert reason.detail["relative_floor"] == 0.5
        assert math.isclose(reason.detail["early_spread"], early)
        assert reason.detail["early_cycles"] == 1
        assert math.isclose(reason.detail["spread_floor"], 0.5 * early)


def cycles(entries: int) -> list[dict[str, Any]]:
    """Two cycles of six entries, then a last one of ``entries``: only the last one counts."""

    def scores(count: int) -> dict[str, float]:
        return {f"e{i}": 0.25 + 0.5 * (i % 2) for i in range(count)}

    return [{"cycle": n, "scores": scores(6), "pinned": []} for n in (1, 2)] + [
        {"cycle": 3, "scores": scores(entries), "pinned": []}
    ]


class TestTooFewEntries:
    @pytest.mark.parametrize(("on", "outcome"), [("halt", "halt"), ("allow", "allow")])
    def test_below_min_live_entries_is_decided_by_the_policy(
        self, engine_with: EngineFactory, on: str, outcome: str
    ) -> None:
        """Fewer entries than min_live_entries in the last cycle: too_few_entries, halting or
        allowing as on_too_few_entries says."""
        engine = engine_with(collapse={"min_live_entries": 4, "on_too_few_entries": on})
        decision = engine.detect_collapse(cycles(3))
        assert (decision.outcome, decision.codes) == (outcome, ("too_few_entries",))
        assert decision.reasons[0].detail == {"entries": 3, "required": 4}

    def test_exactly_min_live_entries_is_judged(self, engine_with: EngineFactory) -> None:
        """With exactly min_live_entries entries the spread is judged."""
        engine = engine_with(collapse={"min_live_entries": 4, "on_too_few_entries": "halt"})
        assert engine.detect_collapse(cycles(4)).codes == ("spread_healthy",)
