"""The staleness guard: a score bound to text that a rewrite changed is stale.

Hashes are computed here with hashlib over the UTF-8 text, independently of the engine. Drift
boundaries use binary-exact relevance values under a drift_tolerance of 0.25, so a rise of exactly
25% really is at equality.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from prunewarden import Decision, Engine, InputError, RefusedError, StaleScoreError

EngineFactory = Callable[..., Engine]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def span(
    span_id: str,
    score: float | None = 0.5,
    *,
    text: str | None = None,
    bound: bool = True,
    rewrite_count: int = 0,
    derived_from: Sequence[str] = (),
    text_sha256: str | None = None,
) -> dict[str, Any]:
    """A span whose score is bound to its current text unless told otherwise."""
    text = text if text is not None else f"text of {span_id}"
    if text_sha256 is None:
        text_sha256 = sha(text) if bound else ""
    return {
        "span_id": span_id,
        "text": text,
        "score": score,
        "text_sha256": text_sha256,
        "rewrite_count": rewrite_count,
        "derived_from": list(derived_from),
    }


def row(count: int, **stale: dict[str, Any]) -> list[dict[str, Any]]:
    """Spans s0..s{count-1}, bound, with the named ones replaced by keyword."""
    return [stale.get(f"s{i}", span(f"s{i}")) for i in range(count)]


def mismatched(span_id: str, **fields: Any) -> dict[str, Any]:
    """A span scored against text it no longer holds."""
    return span(
        span_id,
        text=f"rewritten text of {span_id}",
        text_sha256=sha(f"text of {span_id}"),
        **fields,
    )


def actions(decision: Decision) -> list[dict[str, Any]]:
    return [action.to_dict() for action in decision.actions]


def ids(items: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    return tuple(item["span_id"] for item in items)


def assert_refused(decision: Decision, spans: Sequence[dict[str, Any]]) -> None:
    """A refusal prunes nothing: every span is kept and none is evicted."""
    assert decision.outcome == "deny"
    assert decision.kept == ids(spans)
    assert decision.evicted == ()


class TestTextHash:
    def test_hash_is_sha256_of_utf8_text(self, engine: Engine) -> None:
        """A score bound to sha256(utf-8 text) of non-ASCII text is bound."""
        text = "Zeitstempel immer in UTC — niemals Ortszeit ✓ 時刻は常にUTC"
        decision = engine.prune([span("a", text=text)], 1)
        assert decision.outcome == "allow"
        assert decision.codes == ("bound",)

    @pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "cp1252"])
    def test_hash_of_another_encoding_is_a_mismatch(self, engine: Engine, encoding: str) -> None:
        """Hashing the same text in another encoding does not bind the score."""
        text = "Zeitstempel immer in UTC — niemals Ortszeit"
        digest = hashlib.sha256(text.encode(encoding)).hexdigest()
        decision = engine.prune([span("a", text=text, text_sha256=digest)], 1)
        assert decision.codes == ("hash_mismatch",)

    def test_hash_is_over_the_exact_code_points(self, engine: Engine) -> None:
        """No Unicode normalization: an NFD hash does not bind NFC text."""
        text = unicodedata.normalize("NFC", "café crème")
        nfd = sha(unicodedata.normalize("NFD", text))
        assert engine.prune([span("a", text=text, text_sha256=nfd)], 1).codes == ("hash_mismatch",)

    def test_upper_case_hex_is_an_input_error(self, engine: Engine) -> None:
        """text_sha256 is lower-case hex; upper-case is malformed, not a mismatch."""
        with pytest.raises(InputError) as raised:
            engine.prune([span("a", text_sha256=sha("text of a").upper())], 1)
        assert [p.path for p in raised.value.problems] == ["$.spans[0].text_sha256"]

    def test_each_span_text_is_hashed_once_per_decision(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The guard and the record's subject share one SHA-256 of each span's text."""
        hashed: list[bytes] = []
        real = hashlib.sha256

        def counting(data: bytes = b"") -> Any:
            hashed.append(data)
            return real(data)

        records: list[dict[str, Any]] = []
        engine = Engine.default(on_decision=lambda _d, record: records.append(dict(record)))
        spans = [span("a"), span("b", text="other text", text_sha256=sha("old text"))]
        monkeypatch.setattr(hashlib, "sha256", counting)
        decision = engine.prune(spans, 1)
        monkeypatch.undo()
        assert decision.codes == ("hash_mismatch",)
        assert hashed.count(b"text of a") == 1
        assert hashed.count(b"other text") == 1
        subject = records[0]["subject"]["spans"]
        assert subject == [
            {"span_id": "a", "text_length": 9, "text_sha256": sha("text of a")},
            {"span_id": "b", "text_length": 10, "text_sha256": sha("other text")},
        ]

    def test_lone_surrogate_text_with_a_hash_fails_closed(self) -> None:
        """A declared hash over text with a lone surrogate is an internal error, refused; the
        record still names the span by its surrogate-passing hash."""
        records: list[dict[str, Any]] = []
        engine = Engine.default(on_decision=lambda _d, record: records.append(dict(record)))
        text = "x\ud800"
        decision = engine.prune([span("a", text=text, text_sha256="0" * 64)], 1)
        assert decision.outcome == "deny"
        assert decision.codes == ("internal_error",)
        assert decision.reasons[0].detail == {"error": "UnicodeEncodeError"}
        expected = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        assert records[0]["subject"]["spans"] == [
            {"span_id": "a", "text_length": 2, "text_sha256": expected}
        ]


class TestBindings:
    def test_null_score_is_unbound(self, engine: Engine) -> None:
        """A null score (absent, not zero) is unbound_score; pruning keeps everything."""
        spans = row(3, s1=span("s1", None))
        decision = engine.prune(spans, 1)
        assert decision.codes == ("unbound_score",)
        assert decision.reasons[0].detail == {"spans": ["s1"]}
        assert actions(decision) == [{"action": "recompute", "ids": ["s0", "s1", "s2"]}]
        assert_refused(decision, spans)

    def test_empty_hash_is_unbound(self, engine: Engine) -> None:
        """A score with an empty hash (seed 002's cleared binding) is unbound_score."""
        spans = row(3, s2=span("s2", bound=False))
        decision = engine.prune(spans, 1)
        assert decision.codes == ("unbound_score",)
        assert decision.reasons[0].detail == {"spans": ["s2"]}

    def test_null_score_and_empty_hash_is_one_finding(self, engine: Engine) -> None:
        """A span with neither score nor hash is reported once."""
        decision = engine.prune([span("a", None, bound=False)], 1)
        assert decision.codes == ("unbound_score",)
        assert decision.reasons[0].detail == {"spans": ["a"]}

    def test_hash_mismatch(self, engine: Engine) -> None:
        """A hash that is not the current text's is hash_mismatch."""
        spans = row(3, s1=mismatched("s1"))
        decision = engine.prune(spans, 2)
        assert decision.codes == ("hash_mismatch",)
        assert decision.reasons[0].detail == {"spans": ["s1"]}
        assert actions(decision) == [{"action": "recompute", "ids": ["s0", "s1", "s2"]}]
        assert_refused(decision, spans)

    def test_null_score_with_stale_hash_reports_both(self, engine: Engine) -> None:
        """Unbound and mismatched are separate findings, in that order."""
        spans = [{**mismatched("a"), "score": None}]
        assert engine.prune(spans, 1).codes == ("unbound_score", "hash_mismatch")

    def test_seed_nan_for_absent_is_an_input_error(self, engine: Engine) -> None:
        """Seed 002 wrote NaN for an absent score; absent is null, NaN is malformed."""
        with pytest.raises(InputError) as raised:
            engine.prune([span("a", math.nan, bound=False)], 1)
        assert [p.path for p in raised.value.problems] == ["$.spans[0].score"]


class TestPoisoned:
    def test_rewrites_at_the_limit_are_not_poisoned(self, engine: Engine) -> None:
        """rewrite_count equal to max_rewrites_without_recompute (2) is fine when bound."""
        assert engine.prune([span("a", rewrite_count=2)], 1).codes == ("bound",)

    def test_rewrites_beyond_the_limit_are_dropped(self, engine: Engine) -> None:
        """rewrite_count > max_rewrites_without_recompute is poisoned_span with action drop."""
        spans = row(3, s1=span("s1", rewrite_count=3))
        decision = engine.prune(spans, 1)
        assert decision.codes == ("poisoned_span",)
        assert decision.reasons[0].detail == {"spans": ["s1"], "max_rewrites_without_recompute": 2}
        assert actions(decision) == [{"action": "drop", "ids": ["s1"]}]
        assert_refused(decision, spans)

    def test_policy_limit_changes_the_decision(self, engine_with: EngineFactory) -> None:
        """max_rewrites_without_recompute: 1 poisons a span rewritten twice."""
        strict = engine_with(staleness={"max_rewrites_without_recompute": 1})
        decision = strict.prune([span("a", rewrite_count=2)], 1)
        assert decision.codes == ("poisoned_span",)
        assert actions(decision) == [{"action": "drop", "ids": ["a"]}]

    def test_poisoned_neighbour_is_dropped_not_recomputed(self, engine: Engine) -> None:
        """A poisoned span inside a recompute neighbourhood is dropped, not recomputed."""
        spans = row(4, s1=mismatched("s1"), s2=span("s2", rewrite_count=5))
        decision = engine.prune(spans, 1)
        assert decision.codes == ("hash_mismatch", "poisoned_span")
        assert actions(decision) == [
            {"action": "recompute", "ids": ["s0", "s1"]},
            {"action": "drop", "ids": ["s2"]},
        ]


class TestOrphans:
    def test_missing_parent_is_orphaned(self, engine: Engine) -> None:
        """A derived_from id that is neither live nor tombstoned is orphaned_parent."""
        spans = row(4, s2=span("s2", derived_from=["gone-1", "s0", "gone-2"]))
        decision = engine.prune(spans, 1)
        assert decision.codes == ("orphaned_parent",)
        assert decision.reasons[0].detail == {"spans": {"s2": ["gone-1", "gone-2"]}}
        # The stale span, its neighbours and its live parent s0.
        assert actions(decision) == [{"action": "recompute", "ids": ["s0", "s1", "s2", "s3"]}]
        assert_refused(decision, spans)

    def test_tombstoned_parent_is_not_orphaned(self, engine: Engine) -> None:
        """A parent evicted with a tombstone is accounted for."""
        spans = row(2, s1=span("s1", derived_from=["gone"]))
        assert engine.prune(spans, 1, tombstones=["gone"]).codes == ("bound",)

    def test_live_parent_is_not_orphaned(self, engine: Engine) -> None:
        """A parent still among the spans is fine."""
        assert engine.prune(row(2, s1=span("s1", derived_from=["s0"])), 1).codes == ("bound",)

    def test_own_id_is_not_orphaned(self, engine: Engine) -> None:
        """Seed 002's rewrite appended the span's own id to derived_from; that is no orphan."""
        assert engine.prune([span("a", derived_from=["a"])], 1).codes == ("bound",)


class TestInvalidationGap:
    def test_fewer_invalidated_than_modified_recomputes_everything(self, engine: Engine) -> None:
        """scores_invalidated < spans_modified is invalidation_gap; every span is recomputed."""
        spans = row(5)
        decision = engine.prune(spans, 2, turn={"spans_modified": 3, "scores_invalidated": 2})
        assert decision.codes == ("invalidation_gap",)
        assert decision.reasons[0].detail == {"spans_modified": 3, "scores_invalidated": 2}
        assert actions(decision) == [{"action": "recompute", "ids": list(ids(spans))}]
        assert_refused(decision, spans)

    @pytest.mark.parametrize(("modified", "invalidated"), [(3, 3), (3, 4), (0, 0)])
    def test_complete_invalidation_is_fine(
        self, engine: Engine, modified: int, invalidated: int
    ) -> None:
        """Every modified span invalidated (or nothing modified) is no gap."""
        turn = {"spans_modified": modified, "scores_invalidated": invalidated}
        assert engine.prune(row(3), 1, turn=turn).codes == ("bound",)

    def test_poisoned_spans_are_excluded_from_recompute_all(self, engine: Engine) -> None:
        """A global recompute still drops the poisoned span instead of recomputing it."""
        spans = row(4, s2=span("s2", rewrite_count=3))
        decision = engine.prune(spans, 1, turn={"spans_modified": 1, "scores_invalidated": 0})
        assert decision.codes == ("poisoned_span", "invalidation_gap")
        assert actions(decision) == [
            {"action": "recompute", "ids": ["s0", "s1", "s3"]},
            {"action": "drop", "ids": ["s2"]},
        ]


def turns(*points: tuple[float, int]) -> list[dict[str, Any]]:
    return [
        {"turn": i, "mean_relevance": mean, "tokens": tokens}
        for i, (mean, tokens) in enumerate(points, start=1)
    ]


class TestRelevanceInflation:
    RISING = turns((0.25, 400), (0.375, 300), (0.5, 200))  # +50%, then +33%

    @pytest.fixture
    def tolerant(self, engine_with: EngineFactory) -> Engine:
        return engine_with(staleness={"drift_tolerance": 0.25})

    def test_rise_beyond_tolerance_while_tokens_fall(self, tolerant: Engine) -> None:
        """Relevance up by more than drift_tolerance with tokens down, twice: inflation."""
        spans = row(3)
        decision = tolerant.prune(spans, 1, turns=self.RISING)
        assert decision.codes == ("relevance_inflation",)
        assert decision.reasons[0].detail == {"turns": self.RISING, "drift_tolerance": 0.25}
        assert actions(decision) == [{"action": "recompute", "ids": ["s0", "s1", "s2"]}]
        assert_refused(decision, spans)

    def test_rise_equal_to_tolerance_is_not_inflation(self, tolerant: Engine) -> None:
        """The drift test is strict: 0.375 -> 0.46875 is exactly +25%."""
        history = turns((0.25, 400), (0.375, 300), (0.46875, 200))
        assert tolerant.prune(row(2), 1, turns=history).codes == ("bound",)

    def test_tolerance_comes_from_the_policy(self, engine_with: EngineFactory) -> None:
        """drift_tolerance 0.5 accepts the +50%/+33% rise that 0.25 flags."""
        loose = engine_with(staleness={"drift_tolerance": 0.5})
        assert loose.prune(row(2), 1, turns=self.RISING).codes == ("bound",)

    @pytest.mark.parametrize("tokens", [200, 300, 350])
    def test_tokens_must_fall(self, tolerant: Engine, tokens: int) -> None:
        """A rise while tokens held or grew is not a compression artifact."""
        history = turns((0.25, 400), (0.375, 300), (0.5, tokens))
        expected = ("relevance_inflation",) if tokens < 300 else ("bound",)
        assert tolerant.prune(row(2), 1, turns=history).codes == expected

    def test_needs_consecutive_turns_plus_one(self, tolerant: Engine) -> None:
        """Two turns give one comparison; drift_consecutive_turns 2 needs three turns."""
        assert tolerant.prune(row(2), 1, turns=self.RISING[1:]).codes == ("bound",)

    def test_only_the_last_turns_count(self, tolerant: Engine) -> None:
        """An earlier run of inflation followed by a flat turn is not flagged."""
        history = turns((0.25, 400), (0.375, 300), (0.5, 200), (0.5, 100))
        assert tolerant.prune(row(2), 1, turns=history).codes == ("bound",)

    def test_consecutive_turns_from_the_policy(self, engine_with: EngineFactory) -> None:
        """drift_consecutive_turns: 1 flags one turn; 3 needs three in a row."""
        one = engine_with(staleness={"drift_tolerance": 0.25, "drift_consecutive_turns": 1})
        assert one.prune(row(2), 1, turns=self.RISING[1:]).codes == ("relevance_inflation",)
        three = engine_with(staleness={"drift_tolerance": 0.25, "drift_consecutive_turns": 3})
        assert three.prune(row(2), 1, turns=self.RISING).codes == ("bound",)
        longer = turns((0.125, 500), (0.25, 400), (0.375, 300), (0.5, 200))
        assert three.prune(row(2), 1, turns=longer).codes == ("relevance_inflation",)

    def test_flat_negative_relevance_is_not_inflation(self, engine_with: EngineFactory) -> None:
        """With a policy range below zero, relevance that did not rise is not inflation."""
        signed = engine_with(scores={"min": -1.0, "max": 1.0})
        history = turns((-0.5, 300), (-0.5, 200), (-0.5, 100))
        assert signed.prune(row(2), 1, turns=history).codes == ("bound",)


class TestRecomputeNeighbourhood:
    def test_one_hop_by_default(self, engine: Engine) -> None:
        """The stale span and every span within recompute_hops (1) positions are recomputed."""
        decision = engine.prune(row(7, s3=mismatched("s3")), 1)
        assert actions(decision) == [{"action": "recompute", "ids": ["s2", "s3", "s4"]}]

    def test_neighbourhood_is_clipped_at_the_ends(self, engine: Engine) -> None:
        """A stale first or last span has one neighbour."""
        decision = engine.prune(row(5, s0=mismatched("s0"), s4=mismatched("s4")), 1)
        assert actions(decision) == [{"action": "recompute", "ids": ["s0", "s1", "s3", "s4"]}]

    @pytest.mark.parametrize(
        ("hops", "expected"),
        [
            (0, ["s3"]),
            (2, ["s1", "s2", "s3", "s4", "s5"]),
            (9, [f"s{i}" for i in range(7)]),
        ],
    )
    def test_hops_come_from_the_policy(
        self, engine_with: EngineFactory, hops: int, expected: list[str]
    ) -> None:
        """recompute_hops widens or narrows the neighbourhood."""
        guarded = engine_with(staleness={"recompute_hops": hops})
        decision = guarded.prune(row(7, s3=mismatched("s3")), 1)
        assert actions(decision) == [{"action": "recompute", "ids": expected}]

    def test_live_parents_of_a_stale_span_are_recomputed(self, engine: Engine) -> None:
        """A stale span's derived_from parents join the recompute set, in input order."""
        spans = row(7, s5=mismatched("s5", derived_from=["s0", "s5"]))
        decision = engine.prune(spans, 1)
        assert actions(decision) == [{"action": "recompute", "ids": ["s0", "s4", "s5", "s6"]}]

    def test_overlapping_neighbourhoods_are_merged(self, engine: Engine) -> None:
        """Each id is recomputed once, in input order."""
        spans = row(6, s3=span("s3", None), s1=mismatched("s1"))
        decision = engine.prune(spans, 1)
        assert decision.codes == ("unbound_score", "hash_mismatch")
        assert actions(decision) == [
            {"action": "recompute", "ids": ["s0", "s1", "s2", "s3", "s4"]},
        ]

    def test_integral_float_hops_behave_like_the_integer(self, engine_with: EngineFactory) -> None:
        """recompute_hops: 1.0 (an integer to JSON Schema) recomputes like 1."""
        guarded = engine_with(staleness={"recompute_hops": 1.0})
        decision = guarded.prune(row(7, s3=mismatched("s3")), 1)
        assert actions(decision) == [{"action": "recompute", "ids": ["s2", "s3", "s4"]}]


class TestRecomputeBudget:
    def test_recompute_within_budget(self, engine: Engine) -> None:
        """A recompute set equal to recompute_budget is recomputed."""
        decision = engine.prune(row(5, s2=mismatched("s2")), 1, recompute_budget=3)
        assert actions(decision) == [{"action": "recompute", "ids": ["s1", "s2", "s3"]}]

    def test_recompute_over_budget_freezes(self, engine: Engine) -> None:
        """A recompute set larger than recompute_budget freezes pruning instead."""
        spans = row(5, s2=mismatched("s2"))
        decision = engine.prune(spans, 1, recompute_budget=2)
        assert decision.codes == ("hash_mismatch",)
        assert actions(decision) == [{"action": "freeze"}]
        assert_refused(decision, spans)

    def test_global_recompute_over_budget_freezes(self, engine: Engine) -> None:
        """An invalidation gap over a budget smaller than the context freezes."""
        decision = engine.prune(
            row(5), 1, turn={"spans_modified": 2, "scores_invalidated": 0}, recompute_budget=4
        )
        assert actions(decision) == [{"action": "freeze"}]

    def test_only_poisoned_spans_do_not_freeze(self, engine: Engine) -> None:
        """Dropping poisoned spans recomputes nothing, so a zero budget does not freeze."""
        decision = engine.prune(row(3, s1=span("s1", rewrite_count=3)), 1, recompute_budget=0)
        assert actions(decision) == [{"action": "drop", "ids": ["s1"]}]

    def test_no_budget_means_unlimited(self, engine: Engine) -> None:
        """Without recompute_budget the whole context may be recomputed."""
        decision = engine.prune(row(50), 1, turn={"spans_modified": 50, "scores_invalidated": 0})
        assert actions(decision) == [{"action": "recompute", "ids": [f"s{i}" for i in range(50)]}]


class TestKeepTopK:
    SPANS = (span("a", 0.5), span("b", 0.75), span("c", 0.5), span("d", 0.25), span("e", 0.5))

    def test_kept_by_score_ties_in_input_order(self, engine: Engine) -> None:
        """kept is best first with ties in input order; evicted is the rest in input order."""
        decision = engine.prune(self.SPANS, 3)
        assert decision.outcome == "allow"
        assert decision.codes == ("bound",)
        assert decision.actions == ()
        assert decision.kept == ("b", "a", "c")
        assert decision.evicted == ("d", "e")
        assert decision.reasons[0].detail == {"kept": 3, "evicted": 2}

    @pytest.mark.parametrize(
        ("k", "kept", "evicted"),
        [
            (0, (), ("a", "b", "c", "d", "e")),
            (1, ("b",), ("a", "c", "d", "e")),
            (5, ("b", "a", "c", "e", "d"), ()),
            (9, ("b", "a", "c", "e", "d"), ()),
        ],
    )
    def test_keep_top_k_sizes(
        self, engine: Engine, k: int, kept: tuple[str, ...], evicted: tuple[str, ...]
    ) -> None:
        """keep_top_k from none to more than the spans."""
        decision = engine.prune(self.SPANS, k)
        assert (decision.kept, decision.evicted) == (kept, evicted)

    def test_empty_request(self, engine: Engine) -> None:
        """No spans: nothing to keep or evict."""
        decision = engine.prune([], 3)
        assert (decision.outcome, decision.kept, decision.evicted) == ("allow", (), ())

    def test_integral_float_keep_top_k_behaves_like_the_integer(self, engine: Engine) -> None:
        """keep_top_k: 3.0 (an integer to JSON Schema) keeps three spans, no internal_error."""
        document = {"check": "staleness", "spans": list(self.SPANS), "keep_top_k": 3.0}
        decision = engine.evaluate(document)
        assert decision.codes == ("bound",)
        assert decision.kept == ("b", "a", "c")


class TestModes:
    def test_enforce_raises_with_the_decision(self, engine: Engine) -> None:
        """enforce() raises StaleScoreError carrying the deny decision."""
        document = {"check": "staleness", "spans": [span("a", bound=False)], "keep_top_k": 1}
        with pytest.raises(StaleScoreError) as raised:
            engine.enforce(document)
        assert isinstance(raised.value, RefusedError)
        assert raised.value.decision.codes == ("unbound_score",)
        assert raised.value.decision.kept == ("a",)

    def test_audit_reports_the_verdict_without_enforcing(self, engine_with: EngineFactory) -> None:
        """audit keeps the deny verdict and its remedies; enforce() does not raise."""
        audited = engine_with(staleness={"mode": "audit"})
        spans = row(3, s1=mismatched("s1"))
        decision = audited.enforce({"check": "staleness", "spans": spans, "keep_top_k": 1})
        assert decision.enforced is False
        assert decision.codes == ("hash_mismatch",)
        assert actions(decision) == [{"action": "recompute", "ids": ["s0", "s1", "s2"]}]
        assert_refused(decision, spans)

    def test_off_allows_with_check_disabled(self, engine_with: EngineFactory) -> None:
        """off allows a stale request with reason check_disabled."""
        disabled = engine_with(staleness={"mode": "off"})
        decision = disabled.prune([span("a", None, bound=False)], 1)
        assert decision.outcome == "allow"
        assert decision.enforced is False
        assert decision.codes == ("check_disabled",)

    def test_off_still_answers_what_to_keep(self, engine_with: EngineFactory) -> None:
        """off gives the plain top-k cut; spans without a score rank last."""
        disabled = engine_with(staleness={"mode": "off"})
        spans = [span("a", None, bound=False), span("b", 0.25), span("c", 0.75)]
        decision = disabled.prune(spans, 2)
        assert (decision.kept, decision.evicted) == (("c", "b"), ("a",))


# Seed 002, "What Was Observed": a 40-message transcript summarized into 12 messages; only the
# summary was re-scored; three original messages folded into it were pruned.
SUMMARY_TEXT = "Summary of messages 1-28: schema migrated, UTC required, buf is pre-compaction."
FOLDED = ["msg-17", "msg-18", "msg-19"]


def seed_002_context() -> list[dict[str, Any]]:
    summary = span("summary", 0.875, text=SUMMARY_TEXT, derived_from=FOLDED)
    return [summary, *(span(f"msg-{i}", 0.25 + (i - 29) / 64) for i in range(29, 40))]


class TestSeed002Narrative:
    def test_summary_over_pruned_originals_is_refused(self, engine: Engine) -> None:
        """12 spans, 12 modified, 1 re-scored, 3 folded parents gone: orphan and gap."""
        context = seed_002_context()
        assert len(context) == 12
        decision = engine.prune(context, 6, turn={"spans_modified": 12, "scores_invalidated": 1})
        assert decision.outcome == "deny"
        assert decision.codes == ("orphaned_parent", "invalidation_gap")
        assert decision.reasons[0].detail == {"spans": {"summary": FOLDED}}
        assert actions(decision) == [{"action": "recompute", "ids": list(ids(context))}]
        assert_refused(decision, context)
        with pytest.raises(StaleScoreError):
            engine.enforce(
                {
                    "check": "staleness",
                    "spans": context,
                    "keep_top_k": 6,
                    "turn": {"spans_modified": 12, "scores_invalidated": 1},
                }
            )

    def test_recomputing_the_whole_summary_context_over_budget_freezes(
        self, engine: Engine
    ) -> None:
        """If the caller can recompute only four spans, the turn freezes instead."""
        decision = engine.prune(
            seed_002_context(),
            6,
            recompute_budget=4,
            turn={"spans_modified": 12, "scores_invalidated": 1},
        )
        assert actions(decision) == [{"action": "freeze"}]

    def test_orphans_alone_recompute_the_summary_neighbourhood(self, engine: Engine) -> None:
        """With the invalidation complete, the orphaned summary and its neighbour recompute."""
        decision = engine.prune(
            seed_002_context(), 6, turn={"spans_modified": 12, "scores_invalidated": 12}
        )
        assert decision.codes == ("orphaned_parent",)
        assert actions(decision) == [{"action": "recompute", "ids": ["summary", "msg-29"]}]

    def test_tombstoned_and_fully_invalidated_summary_prunes(self, engine: Engine) -> None:
        """Healthy counterpart: tombstones for the folded originals and full invalidation."""
        decision = engine.prune(
            seed_002_context(),
            3,
            tombstones=FOLDED,
            turn={"spans_modified": 12, "scores_invalidated": 12},
        )
        assert decision.outcome == "allow"
        assert decision.codes == ("bound",)
        assert decision.kept == ("summary", "msg-39", "msg-38")
        assert decision.evicted == tuple(f"msg-{i}" for i in range(29, 38))

    # Four turns of paraphrase of a paraphrase: tokens halve, mean relevance drifts upward.
    PARAPHRASE = turns((0.5, 4000), (0.5625, 2000), (0.625, 1000), (0.75, 500))

    def test_paraphrase_of_paraphrase_inflates_relevance(self, engine: Engine) -> None:
        """Relevance rising (+11%, +20%) as tokens fall, two turns running: inflation."""
        context = seed_002_context()
        decision = engine.prune(context, 6, tombstones=FOLDED, turns=self.PARAPHRASE)
        assert decision.codes == ("relevance_inflation",)
        assert [t["turn"] for t in decision.reasons[0].detail["turns"]] == [2, 3, 4]
        assert actions(decision) == [{"action": "recompute", "ids": list(ids(context))}]

    def test_paraphrased_summary_rewritten_thrice_is_poisoned(self, engine: Engine) -> None:
        """The summary re-summarized past the limit is dropped; the rest is recomputed."""
        context = seed_002_context()
        context[0] = {**context[0], "rewrite_count": 3}
        decision = engine.prune(context, 6, tombstones=FOLDED, turns=self.PARAPHRASE)
        assert decision.codes == ("poisoned_span", "relevance_inflation")
        assert actions(decision) == [
            {"action": "recompute", "ids": list(ids(context[1:]))},
            {"action": "drop", "ids": ["summary"]},
        ]

    def test_healthy_compression_holds_relevance_flat(self, engine: Engine) -> None:
        """Healthy counterpart: tokens fall, relevance within 5% turn over turn."""
        flat = turns((0.5, 4000), (0.515625, 2000), (0.53125, 1000))
        decision = engine.prune(
            seed_002_context(),
            6,
            tombstones=FOLDED,
            turns=flat,
            turn={"spans_modified": 12, "scores_invalidated": 12},
        )
        assert decision.codes == ("bound",)

    def test_seed_rewrite_output_is_unbound_not_orphaned(self, engine: Engine) -> None:
        """Seed 002's apply_rewrite (hash cleared, own id appended) is unbound_score only."""
        rewritten = span(
            "msg-30",
            None,
            text="shorter paraphrase",
            bound=False,
            rewrite_count=1,
            derived_from=["msg-30"],
        )
        decision = engine.prune([span("msg-29"), rewritten, span("msg-31")], 2)
        assert decision.codes == ("unbound_score",)
        assert actions(decision) == [
            {"action": "recompute", "ids": ["msg-29", "msg-30", "msg-31"]},
        ]

    def test_second_rewrite_is_not_yet_poisoned(self, engine: Engine) -> None:
        """Seed 002 refused a third rewrite at count 2; only more than two rewrites poison."""
        decision = engine.prune([span("a", rewrite_count=2), span("b", rewrite_count=3)], 1)
        assert decision.codes == ("poisoned_span",)
        assert decision.reasons[0].detail["spans"] == ["b"]


class TestInputErrors:
    def paths(self, raised: pytest.ExceptionInfo[InputError]) -> list[str]:
        return [problem.path for problem in raised.value.problems]

    def test_duplicate_span_ids(self, engine: Engine) -> None:
        """A repeated span id is an input error at the repeat."""
        with pytest.raises(InputError) as raised:
            engine.prune([span("a"), span("b"), span("a")], 1)
        assert self.paths(raised) == ["$.spans[2].span_id"]

    @pytest.mark.parametrize("value", [1.5, -0.25])
    def test_score_outside_range(self, engine: Engine, value: float) -> None:
        """A span score outside spec.scores is an input error."""
        with pytest.raises(InputError) as raised:
            engine.prune([span("a"), span("b", value)], 1)
        assert self.paths(raised) == ["$.spans[1].score"]

    @pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
    def test_non_finite_score(self, engine: Engine, value: float) -> None:
        """NaN and infinite span scores are input errors."""
        with pytest.raises(InputError) as raised:
            engine.prune([span("a", value)], 1)
        assert self.paths(raised) == ["$.spans[0].score"]

    def test_huge_integer_score(self, engine: Engine) -> None:
        """An integer too large for a float is an input error, not an OverflowError."""
        with pytest.raises(InputError) as raised:
            engine.prune([span("a", 10**400)], 1)
        assert self.paths(raised) == ["$.spans[0].score"]

    def test_boolean_score_and_count(self, engine: Engine) -> None:
        """Booleans are neither scores nor counts."""
        with pytest.raises(InputError) as raised:
            engine.evaluate({"check": "staleness", "spans": [span("a", True)], "keep_top_k": True})
        assert self.paths(raised) == ["$.keep_top_k", "$.spans[0].score"]

    def test_mean_relevance_outside_range(self, engine: Engine) -> None:
        """A turn's mean relevance is a score and must lie in spec.scores."""
        with pytest.raises(InputError) as raised:
            engine.prune([span("a")], 1, turns=turns((0.5, 10), (1.5, 5)))
        assert self.paths(raised) == ["$.turns[1].mean_relevance"]

    @pytest.mark.parametrize("second", [1, 0])
    def test_turns_must_increase(self, engine: Engine, second: int) -> None:
        """A repeated or decreasing turn number is an input error."""
        history = [
            {"turn": 1, "mean_relevance": 0.5, "tokens": 10},
            {"turn": second, "mean_relevance": 0.5, "tokens": 9},
        ]
        with pytest.raises(InputError) as raised:
            engine.prune([span("a")], 1, turns=history)
        assert self.paths(raised) == ["$.turns[1].turn"]

    def test_negative_counts(self, engine: Engine) -> None:
        """keep_top_k, rewrite_count and turn counters are non-negative integers."""
        with pytest.raises(InputError) as raised:
            engine.prune(
                [span("a", rewrite_count=-1)],
                -1,
                turn={"spans_modified": -1, "scores_invalidated": 0},
            )
        assert self.paths(raised) == [
            "$.keep_top_k",
            "$.spans[0].rewrite_count",
            "$.turn.spans_modified",
        ]

    def test_unknown_span_field(self, engine: Engine) -> None:
        """An unknown span field is an input error at that field."""
        with pytest.raises(InputError) as raised:
            engine.prune([{**span("a"), "weight": 1}], 1)
        assert self.paths(raised) == ["$.spans[0].weight"]

    def test_missing_required_span_field(self, engine: Engine) -> None:
        """score is required (null when absent), not optional."""
        without_score = {k: v for k, v in span("a").items() if k != "score"}
        with pytest.raises(InputError) as raised:
            engine.prune([without_score], 1)
        assert self.paths(raised) == ["$.spans[0]"]
