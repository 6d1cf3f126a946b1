"""What the guards promise to the letter: a text hash compared whole, a tombstone for every kind
of segment, spans without a score ranked last (docs/guards.md)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from prunewarden import Engine

EngineFactory = Callable[..., Engine]
TEXT = "the build uses python 3.11"
# Kinds the default policy does not pin: each one needs a tombstone to be evicted.
UNPINNED_KINDS = ["turn", "tool_output", "tool_call", "summary", "retrieval", "observation"]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def span(span_id: str, score: float | None, text_sha256: str | None = None) -> dict[str, Any]:
    return {
        "span_id": span_id,
        "text": TEXT,
        "score": score,
        "text_sha256": sha(TEXT) if text_sha256 is None else text_sha256,
    }


def last_digit_changed(digest: str) -> str:
    return digest[:-1] + ("0" if digest[-1] != "0" else "1")


class TestTextHashIsComparedWhole:
    @pytest.mark.parametrize(
        "declared",
        [
            last_digit_changed(sha(TEXT)),
            sha(TEXT)[:8] + "0" * 56,
            sha(TEXT)[:32] + sha("other")[32:],
        ],
        ids=["last-digit", "first-8-only", "first-half-only"],
    )
    def test_a_hash_agreeing_on_a_prefix_is_a_mismatch(self, engine: Engine, declared: str) -> None:
        """A declared hash equal to the text's on a prefix but not on all 64 digits is
        hash_mismatch: the score was computed on other text."""
        decision = engine.prune([span("a", 0.5, declared), span("b", 0.5)], 1)
        assert decision.codes == ("hash_mismatch",)
        assert decision.reasons[0].detail == {"spans": ["a"]}
        assert decision.evicted == ()

    def test_the_exact_hash_binds(self, engine: Engine) -> None:
        """The full SHA-256 of the text binds its score (the control of the cases above)."""
        decision = engine.prune([span("a", 0.5), span("b", 0.25)], 1)
        assert decision.codes == ("bound",)
        assert decision.evicted == ("b",)


class TestEveryKindNeedsATombstone:
    @pytest.mark.parametrize("kind", UNPINNED_KINDS)
    def test_eviction_without_a_tombstone_is_refused(self, engine: Engine, kind: str) -> None:
        """require_tombstone holds for every kind, tool outputs included."""
        segment = {"id": "s1", "kind": kind, "tombstone_written": False}
        decision = engine.authorize_eviction(segment, 0.125, 0.125)
        assert decision.outcome == "deny"
        assert decision.codes == ("no_tombstone",)

    @pytest.mark.parametrize("kind", UNPINNED_KINDS)
    def test_with_a_tombstone_it_is_authorized(self, engine: Engine, kind: str) -> None:
        """The same segment with its tombstone written is authorized."""
        segment = {"id": "s1", "kind": kind, "tombstone_written": True}
        assert engine.authorize_eviction(segment, 0.125, 0.125).codes == ("authorized",)


class TestUnscoredSpansRankLast:
    def test_a_span_without_a_score_ranks_below_a_zero_score(
        self, engine_with: EngineFactory
    ) -> None:
        """With the staleness guard off, the top-k cut keeps a span scored 0.0 over one with no
        score, whatever their order."""
        engine = engine_with(staleness={"mode": "off"})
        spans = [span("unscored", None, ""), span("zero", 0.0), span("high", 0.75)]
        decision = engine.prune(spans, 2)
        assert decision.kept == ("high", "zero")
        assert decision.evicted == ("unscored",)
