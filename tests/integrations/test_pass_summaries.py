"""A pass that writes a summary through the summarizer hook: judged for fidelity first, the
originals kept when it is refused."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from prunewarden import AuditLog, Engine, Policy
from prunewarden.integrations import WindowPruner
from prunewarden.integrations._pass import SUMMARIZER
from prunewarden.scoring import RecencyScorer

UTC = "All timestamps must be UTC; never emit local time."
EngineFactory = Callable[..., Engine]
PolicyFactory = Callable[..., Policy]


def window() -> list[dict[str, Any]]:
    """Six turns of 100 tokens, the task first (a canary), the UTC constraint the oldest turn:
    a 300-token budget evicts m1, m2 and m3 (RecencyScorer scores the oldest lowest)."""
    texts = ["Port the exporter.", UTC, "Read the exporter.", "Ran the tests.", "ok", "next"]
    return [
        {
            "id": f"m{i}",
            "kind": "turn",
            "text": text,
            "tokens": 100,
            "non_recoverable": i == 0,
            "metadata": {"canary": i == 0},
        }
        for i, text in enumerate(texts)
    ]


def summarizer(text: str) -> Callable[[Sequence[Mapping[str, Any]]], dict[str, Any]]:
    """A summarizer that always answers ``text`` (20 tokens), recording what it was given."""

    def summarize(segments: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        summarize.given = [s["id"] for s in segments]  # type: ignore[attr-defined]
        return {"text": text, "tokens": 20}

    return summarize


def _room(evicted: Sequence[str]) -> int:
    """The room an adapter prices for what it writes after a pass: 20 tokens of summary."""
    return 20 if evicted else 0


def _run(engine: Engine, text: str) -> Any:
    pruner = WindowPruner(RecencyScorer(), budget_tokens=400, summarizer=summarizer(text))
    return pruner.run(engine.session("s"), window(), "task", tombstone_tokens=_room)


class TestPassSummaries:
    def test_an_allowed_summary_is_written_in_place(self, engine: Engine) -> None:
        """The summary derives from the evicted ids and its tokens are counted."""
        outcome = _run(engine, "Timestamps are UTC, never local time; exporter read, tests ran.")
        assert outcome.evict == ("m1", "m2", "m3")
        assert outcome.summary["derived_from"] == ["m1", "m2", "m3"]
        assert outcome.summary["id"] == "summary:m1"
        assert (outcome.tokens, outcome.over_budget) == (300 + 20 + 20, False)

    def test_the_seed_constraint_without_its_negation_is_refused(
        self, engine_with: EngineFactory
    ) -> None:
        """With fidelity over every parent, a lossy summary freezes the pass: nothing evicted,
        no summary, the reason said."""
        engine = engine_with(fidelity={"scope": "all"})
        outcome = _run(engine, "Timestamps are UTC; emit local time. Exporter read, tests ran.")
        assert (outcome.evict, outcome.frozen, outcome.summary) == ((), True, None)
        assert outcome.reasons == ("negation_lost",)

    def test_a_faithful_summary_passes_the_same_policy(self, engine_with: EngineFactory) -> None:
        """The same policy allows a summary that keeps the negation."""
        engine = engine_with(fidelity={"scope": "all"})
        outcome = _run(engine, "Timestamps: UTC, local time never emitted. Tests ran.")
        assert outcome.evict == ("m1", "m2", "m3")
        assert not outcome.frozen

    def test_an_error_as_summary_is_refused_whatever_the_scope(
        self, engine_with: EngineFactory
    ) -> None:
        """A refusal stored as the summary freezes the pass under the default scope."""
        outcome = _run(engine_with(fidelity={}), "I'm sorry, but I can't help with that.")
        assert (outcome.evict, outcome.frozen) == ((), True)
        assert set(outcome.reasons) == {"summary_is_error"}

    def test_a_failing_summarizer_keeps_the_originals(
        self, engine: Engine, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Fail closed: a summarizer that raises freezes the pass, and it is logged."""

        def broken(segments: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
            del segments
            message = "summarizer model gone"
            raise RuntimeError(message)

        pruner = WindowPruner(RecencyScorer(), budget_tokens=400, summarizer=broken)
        outcome = pruner.run(engine.session("s"), window(), "task", tombstone_tokens=_room)
        assert (outcome.evict, outcome.frozen, outcome.reasons) == (
            (),
            True,
            ("summarizer_failed",),
        )
        assert "the summarizer failed" in caplog.text

    def test_the_summary_is_one_transition_record(
        self, make_policy: PolicyFactory, tmp_path: Path
    ) -> None:
        """The summary is judged as the session's transition, applied_by the summarizer."""
        log_path = tmp_path / "audit.jsonl"
        with AuditLog(log_path) as audit:
            engine = Engine(make_policy(fidelity={"scope": "all"}), audit=audit)
            pruner = WindowPruner(
                RecencyScorer(), budget_tokens=400, summarizer=summarizer("UTC; emit local time.")
            )
            pruner.run(engine.session("s"), window(), "task", tombstone_tokens=_room)
        records = [json.loads(line) for line in log_path.read_text(encoding="utf-8").splitlines()]
        (record,) = [r for r in records if r.get("check") == "transition"]
        assert record["subject"]["transition"]["applied_by"] == SUMMARIZER
        assert [r["code"] for r in record["reasons"]] == ["negation_lost"]


class TestTheSummaryWritten:
    FAITHFUL = "Timestamps are UTC, never local time; exporter read, tests ran."

    def test_the_summarizer_is_given_what_the_pass_evicts(self, engine: Engine) -> None:
        """The summarizer is given the evicted segments alone, in window order, and its
        summary is named after the first of them, of kind summary."""
        summarize = summarizer(self.FAITHFUL)
        pruner = WindowPruner(RecencyScorer(), budget_tokens=400, summarizer=summarize)
        outcome = pruner.run(engine.session("s"), window(), "task", tombstone_tokens=_room)
        assert summarize.given == ["m1", "m2", "m3"]  # type: ignore[attr-defined]
        assert outcome.summary == {
            "id": "summary:m1",
            "kind": "summary",
            "text": self.FAITHFUL,
            "tokens": 20,
            "derived_from": ["m1", "m2", "m3"],
        }

    def test_the_summarizer_may_name_its_summary(self, engine: Engine) -> None:
        """A summary that gives its own id and kind keeps them."""

        def named(segments: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
            del segments
            return {"id": "digest-1", "kind": "note", "text": self.FAITHFUL, "tokens": 20}

        pruner = WindowPruner(RecencyScorer(), budget_tokens=400, summarizer=named)
        outcome = pruner.run(engine.session("s"), window(), "task", tombstone_tokens=_room)
        assert outcome.summary is not None
        assert (outcome.summary["id"], outcome.summary["kind"]) == ("digest-1", "note")

    def test_one_evicted_segment_is_summarized(self, engine: Engine) -> None:
        """A pass that evicts a single segment writes its summary in that segment's place."""
        pruner = WindowPruner(
            RecencyScorer(), budget_tokens=520, summarizer=summarizer(self.FAITHFUL)
        )
        outcome = pruner.run(engine.session("s"), window(), "task", tombstone_tokens=_room)
        assert (outcome.evict, outcome.frozen) == (("m1",), False)
        assert outcome.summary is not None
        assert (outcome.summary["id"], outcome.summary["derived_from"]) == ("summary:m1", ["m1"])

    def test_the_allowed_summary_is_judged_in_the_evicted_place(
        self, make_policy: PolicyFactory, tmp_path: Path
    ) -> None:
        """The transition judged holds the summary once, instead of the evicted segments."""
        log_path = tmp_path / "audit.jsonl"
        with AuditLog(log_path) as audit:
            engine = Engine(make_policy(), audit=audit)
            pruner = WindowPruner(
                RecencyScorer(), budget_tokens=400, summarizer=summarizer(self.FAITHFUL)
            )
            pruner.run(engine.session("s"), window(), "task", tombstone_tokens=_room)
        records = [json.loads(line) for line in log_path.read_text(encoding="utf-8").splitlines()]
        (record,) = [r for r in records if r.get("check") == "transition"]
        assert record["subject"]["transition"] == {
            "added": [],
            "after": 4,
            "applied_by": SUMMARIZER,
            "before": 6,
            "folded": ["m1", "m2", "m3"],
            "kept": 3,
            "removed": [],
            "rewritten": [],
            "summaries": ["summary:m1"],
            "tombstoned": ["m1", "m2", "m3"],
        }
        assert record["outcome"] == "allow"
