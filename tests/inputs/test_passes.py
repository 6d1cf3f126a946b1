"""Engine.authorize_evictions: a whole pass, validated at once, decided and logged per segment."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest
import structlog
from _support.generators import ids, scores_in_range
from hypothesis import given, settings
from hypothesis import strategies as st
from prunewarden import Decision, Engine, InputError
from prunewarden.audit import decision_rows
from prunewarden.audit._record import input_digest
from structlog.testing import capture_logs

KINDS = ["turn", "summary", "constraint", "definition"]


@st.composite
def passes(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A pass of eviction items with unique segment ids, depending on one another."""
    segment_ids = draw(st.lists(ids, unique=True, max_size=8))
    items = []
    for segment_id in segment_ids:
        segment: dict[str, Any] = {
            "id": segment_id,
            "kind": draw(st.sampled_from(KINDS)),
            "score_dependencies": draw(
                st.lists(st.sampled_from([*segment_ids, "kept"]), unique=True, max_size=2)
            ),
            "tombstone_written": draw(st.booleans()),
        }
        if draw(st.booleans()):
            segment["non_recoverable"] = True
        item: dict[str, Any] = {"segment": segment, "score": draw(scores_in_range)}
        if draw(st.booleans()):
            item["perturbed_score"] = draw(st.none() | scores_in_range)
        items.append(item)
    return items


def summary(decision: Decision) -> tuple[Any, ...]:
    """Everything a decision says, except its id and time."""
    data = decision.to_dict()
    return tuple(data[k] for k in ("check", "outcome", "enforced", "reasons", "actions", "policy"))


@pytest.fixture(scope="module")
def engine() -> Engine:
    """Records go to the structlog logger, where capture_logs() sees them."""
    return Engine.default(logger=structlog.get_logger())


ITEM: dict[str, Any] = {
    "segment": {"id": "a", "kind": "turn", "tombstone_written": True},
    "score": 0.1,
}


class TestDecisions:
    @settings(max_examples=150, deadline=None)
    @given(items=passes())
    def test_same_as_one_document_per_segment(
        self, engine: Engine, items: list[dict[str, Any]]
    ) -> None:
        """Each decision of a pass is the one authorize_eviction gives with the pass's ids as
        candidates, in the order of the pass."""
        candidates = [item["segment"]["id"] for item in items]
        with capture_logs():
            ours = engine.authorize_evictions(items)
            theirs = [
                engine.authorize_eviction(
                    item["segment"], item["score"], item.get("perturbed_score"), candidates
                )
                for item in items
            ]
        assert [summary(d) for d in ours] == [summary(d) for d in theirs]

    def test_candidates_default_to_the_pass(self, engine: Engine) -> None:
        """A segment scored against another segment of the same pass is unscoreable."""
        items = [
            {**ITEM, "segment": {**ITEM["segment"], "id": "a", "score_dependencies": ["b"]}},
            {**ITEM, "segment": {**ITEM["segment"], "id": "b"}, "perturbed_score": 0.1},
        ]
        with capture_logs():
            first, _ = engine.authorize_evictions(items)
            explicit, _ = engine.authorize_evictions(items, eviction_candidates=["a"])
        assert first.codes == ("unscoreable", "perturbation_missing")
        assert explicit.codes == ("perturbation_missing",)

    def test_a_pass_is_one_record_listing_every_decision_in_order(self, engine: Engine) -> None:
        """One pass record, its segments and their reasons in the order of the pass; each
        decision is named by the pass id and its index."""
        items = [{**ITEM, "segment": {**ITEM["segment"], "id": f"s{i}"}} for i in range(5)]
        with capture_logs() as logs:
            decisions = engine.authorize_evictions(items)
        (record,) = logs
        assert record["event"] == "pass"
        assert record["segments"] == [f"s{i}" for i in range(5)]
        rows = decision_rows({**record, "kind": record["event"]})
        assert [[r["code"] for r in row["reasons"]] for row in rows] == [
            list(d.codes) for d in decisions
        ]
        assert [(d.pass_id, d.index) for d in decisions] == [
            (record["pass_id"], i) for i in range(5)
        ]
        assert [d.decision_id for d in decisions] == [f"{record['pass_id']}-{i}" for i in range(5)]
        assert {d.evaluated_at for d in decisions} == {record["ts"]}

    @settings(max_examples=100, deadline=None)
    @given(items=passes(), explicit=st.booleans())
    def test_the_record_digests_the_pass_document(
        self, engine: Engine, items: list[dict[str, Any]], explicit: bool
    ) -> None:
        """The pass record's input digest is that of the pass document: the items and the
        pass's candidates."""
        candidates = ["kept", *(item["segment"]["id"] for item in items)] if explicit else None
        with capture_logs() as logs:
            engine.authorize_evictions(items, candidates)
        ids = candidates if candidates is not None else [i["segment"]["id"] for i in items]
        expected = input_digest({"evictions": items, "eviction_candidates": ids})
        assert [record["input_digest"] for record in logs] == ([expected] if items else [])

    def test_empty_pass(self, engine: Engine) -> None:
        """A pass with nothing to evict decides nothing."""
        with capture_logs() as logs:
            assert engine.authorize_evictions([]) == ()
        assert logs == []

    def test_values_only_python_holds_take_the_exact_path(self, engine: Engine) -> None:
        """An item the fast path is unsure of (an OrderedDict) is still decided."""
        item = OrderedDict(segment=OrderedDict(id="a", kind="turn"), score=0.1)
        with capture_logs():
            (decision,) = engine.authorize_evictions([item])
        assert decision.codes == ("perturbation_missing", "no_tombstone")


class TestMalformedPass:
    def test_every_problem_located_and_nothing_decided(self, engine: Engine) -> None:
        """A malformed pass raises InputError listing each problem under $.evictions[i], and
        no decision is logged, not even for the valid items."""
        items: list[Any] = [
            ITEM,
            {**ITEM, "score": 2},
            {**ITEM, "segment": {"id": "c", "kind": "turn"}, "check": "eviction"},
            "not an item",
        ]
        with capture_logs() as logs, pytest.raises(InputError) as info:
            engine.authorize_evictions(items, eviction_candidates=["a", "a"])
        assert logs == []
        assert [(p.path, p.message) for p in info.value.problems] == [
            ("$.eviction_candidates", "'a' is listed more than once"),
            ("$.evictions[1].score", "2 is outside the policy's score range [0.0, 1.0]"),
            (
                "$.evictions[2].check",
                "unknown field 'check' (expected one of: perturbed_score, score, segment)",
            ),
            (
                "$.evictions[3]",
                "'not an item' is not an object with perturbed_score, score, segment",
            ),
        ]

    def test_duplicate_segment(self, engine: Engine) -> None:
        """A segment asked about twice in one pass is an input error at the second."""
        with pytest.raises(InputError) as info:
            engine.authorize_evictions([ITEM, ITEM])
        (problem,) = info.value.problems
        assert (problem.path, problem.message) == (
            "$.evictions[1].segment.id",
            "duplicate segment id 'a' (first at evictions[0])",
        )

    @pytest.mark.parametrize(
        ("evictions", "candidates", "path"),
        [
            ("abc", None, "$.evictions"),
            ({"segment": {}}, None, "$.evictions"),
            (5, None, "$.evictions"),
            ([ITEM], "a", "$.eviction_candidates"),
        ],
        ids=["string", "mapping", "number", "string-candidates"],
    )
    def test_not_a_list(self, engine: Engine, evictions: Any, candidates: Any, path: str) -> None:
        """A pass or a candidate list that is not a list is an input error, not a traceback."""
        with pytest.raises(InputError) as info:
            engine.authorize_evictions(evictions, candidates)
        assert info.value.problems[0].path == path
