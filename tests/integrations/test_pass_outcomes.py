"""What one adapter pass returns, whatever the framework: an empty window, tokens left out, a
plan the staleness gate froze, and the tombstone written back (docs/integrations.md)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from prunewarden import Engine
from prunewarden.integrations import WindowPruner, tombstone_text
from prunewarden.scoring import RecencyScorer, Scores


def window(count: int, tokens: int | None = 100) -> list[dict[str, Any]]:
    segments = []
    for i in range(count):
        segment: dict[str, Any] = {"id": f"m{i}", "kind": "turn", "text": f"message {i}"}
        if tokens is not None:
            segment["tokens"] = tokens
        segments.append(segment)
    return segments


class LeavesOut:
    """Recency scores for every segment but one, which keeps the score it had."""

    def __init__(self, left_out: str) -> None:
        self.left_out = left_out

    def score(self, segments: Sequence[Mapping[str, Any]], task: str) -> Scores:
        scored = RecencyScorer().score(segments, task)
        return Scores({k: v for k, v in scored.items() if k != self.left_out})


class TestOutcomes:
    def test_an_empty_window_is_a_quiet_pass(self, engine: Engine) -> None:
        """No segments: nothing evicted, not frozen, no reasons, no plan, nothing trimmed."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=10).run(engine.session("s"), [], "t")
        assert (outcome.evict, outcome.frozen, outcome.reasons, outcome.plan) == (
            (),
            False,
            (),
            None,
        )
        assert outcome.trimmed is False

    def test_an_evicting_pass_is_trimmed(self, engine: Engine) -> None:
        """A pass that evicts says it trimmed the window."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=300).run(
            engine.session("s"), window(6), "t"
        )
        assert outcome.evict
        assert outcome.trimmed is True

    def test_segments_without_tokens_count_none(self, engine: Engine) -> None:
        """A segment that does not say its tokens counts zero: a window of such segments is
        within any budget."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=0).run(
            engine.session("s"), window(6, tokens=None), "t"
        )
        assert (outcome.evict, outcome.frozen, outcome.plan) == ((), False, None)

    def test_a_plan_the_gate_freezes_freezes_the_pass(self, engine: Engine) -> None:
        """Over budget with a score bound to text the segment no longer holds: the plan is
        frozen, the pass evicts nothing, and says why, with the plan."""
        segments = window(6)
        stale = hashlib.sha256(b"what m3 said before").hexdigest()
        segments[3] = {**segments[3], "score": 0.5, "text_sha256": stale}
        outcome = WindowPruner(LeavesOut("m3"), budget_tokens=300).run(
            engine.session("s"), segments, "t"
        )
        assert outcome.frozen
        assert outcome.evict == ()
        assert "hash_mismatch" in outcome.reasons
        assert outcome.plan is not None
        assert outcome.plan.frozen


class TestTombstoneText:
    def test_it_names_each_removal_with_its_kind(self) -> None:
        """The marker counts the removals and names each with its kind (when known)."""
        text = tombstone_text(["m1", "m2"], {"m1": "turn"})
        assert text == (
            "[prunewarden: 2 earlier message(s) removed from this conversation; "
            "last pass: m1 (turn), m2]"
        )

    def test_a_total_counts_earlier_passes(self) -> None:
        """With a total, the marker counts every message removed so far."""
        text = tombstone_text(["m4"], {"m4": "tool_output"}, total=5)
        assert text.startswith("[prunewarden: 5 earlier message(s) removed")
        assert text.endswith("last pass: m4 (tool_output)]")
