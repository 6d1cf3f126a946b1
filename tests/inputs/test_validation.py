"""The compiled validation of inputs agrees with JSON Schema and the semantic checks, with
jsonschema-rs and with the pure-Python fallback alike."""

from __future__ import annotations

from collections import OrderedDict
from decimal import Decimal
from typing import Any

import pytest
from _support.backends import BACKENDS, compiled_backend
from _support.generators import (
    edge_values,
    json_values,
    mutated,
    non_finite,
    plan_documents,
    python_values,
    valid_documents,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from prunewarden import InputError
from prunewarden.audit import input_digest
from prunewarden.inputs._columns import staleness_columns
from prunewarden.inputs._model import PlanRequest, ScoreRange
from prunewarden.inputs._parse import (
    parse_plan,
    parse_plan_exact,
    parse_request,
    parse_request_encoded,
    parse_request_exact,
)
from prunewarden.inputs._validation import accepts

RANGES = [ScoreRange(0.0, 1.0), ScoreRange(-1.0, 2.0), ScoreRange(0.25, 0.75)]
ranges = st.sampled_from(RANGES)


def exact(document: Any, scores: ScoreRange) -> tuple[str, Any] | None:
    """What the exact path makes of a document: its check and request, or None if refused."""
    try:
        return parse_request_exact(document, scores)
    except InputError:
        return None


def fast(document: Any, scores: ScoreRange) -> tuple[str, Any] | None:
    """What parse_request makes of a document, with each backend of the compiled validator
    (they must agree); None if refused. A compiled "yes" the exact path would refuse shows as a
    request where ``exact`` gives None."""
    results: list[tuple[str, Any] | None] = []
    for backend in BACKENDS:
        with compiled_backend(backend):
            try:
                results.append(parse_request(document, scores))
            except InputError:
                results.append(None)
    assert results.count(results[0]) == len(results)
    return results[0]


def columns(document: Any, scores: ScoreRange) -> tuple[str, Any] | None:
    """What reading a staleness document into columns makes of it, typed; None if declined
    (the engine then takes the general path)."""
    read = staleness_columns(document, scores)
    return None if read is None else ("staleness", read.columns.request())


def assert_columns_agree(document: Any, scores: ScoreRange) -> None:
    """The columns never accept what the exact path refuses, and type what they accept alike."""
    read = columns(document, scores)
    if read is not None:
        assert read == exact(document, scores)


# The agreement properties: 100 examples each in make test (30 for windows, ten times the cost
# of a document); their slow twins (TestAgreementAtFullBudget) draw 600, under make fuzz.
AGREE = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
AGREE_PLANS = settings(AGREE, max_examples=30)
AGREE_FULL = settings(AGREE, max_examples=600)


def exact_plan(document: Any, scores: ScoreRange) -> PlanRequest | None:
    try:
        return parse_plan_exact(document, scores)
    except InputError:
        return None


def fast_plan(document: Any, scores: ScoreRange) -> PlanRequest | None:
    results: list[PlanRequest | None] = []
    for backend in BACKENDS:
        with compiled_backend(backend):
            try:
                results.append(parse_plan(document, scores))
            except InputError:
                results.append(None)
    assert results.count(results[0]) == len(results)
    return results[0]


class TestPlanAgreement:
    @AGREE_PLANS
    @given(document=plan_documents(), scores=ranges)
    def test_valid_plans(self, document: dict[str, Any], scores: ScoreRange) -> None:
        """On generated windows, both paths accept or refuse alike and build equal requests."""
        assert fast_plan(document, scores) == exact_plan(document, scores)

    @AGREE_PLANS
    @given(document=mutated(json_values | edge_values, plan_documents()), scores=ranges)
    def test_mutated_plans(self, document: Any, scores: ScoreRange) -> None:
        """With one value, key or item of a window changed, both paths still agree exactly."""
        assert fast_plan(document, scores) == exact_plan(document, scores)

    @AGREE_PLANS
    @given(document=mutated(non_finite, plan_documents()), scores=ranges)
    def test_non_finite_numbers_in_plans(self, document: Any, scores: ScoreRange) -> None:
        """NaN and infinities in a window are refused by both paths."""
        assert fast_plan(document, scores) == exact_plan(document, scores)


class TestAgreement:
    @AGREE
    @given(document=valid_documents, scores=ranges)
    def test_valid_documents(self, document: dict[str, Any], scores: ScoreRange) -> None:
        """On generated documents, both paths accept or refuse alike and build equal requests."""
        assert fast(document, scores) == exact(document, scores)

    @AGREE
    @given(document=mutated(json_values | edge_values), scores=ranges)
    def test_mutated_documents(self, document: Any, scores: ScoreRange) -> None:
        """With one value, key or item changed, both paths still agree exactly."""
        assert fast(document, scores) == exact(document, scores)

    @AGREE
    @given(document=valid_documents | mutated(json_values | edge_values), scores=ranges)
    def test_columns_agree(self, document: Any, scores: ScoreRange) -> None:
        """A staleness document read into columns is one the exact path accepts, typed alike."""
        assert_columns_agree(document, scores)

    @settings(max_examples=150, deadline=None)
    @given(document=mutated(non_finite) | mutated(python_values), scores=ranges)
    def test_columns_refuse_what_json_cannot_hold(self, document: Any, scores: ScoreRange) -> None:
        """Non-finite numbers and Python-only values are never read into columns unless the
        exact path accepts them too."""
        assert_columns_agree(document, scores)

    @settings(max_examples=150, deadline=None)
    @given(document=mutated(non_finite), scores=ranges)
    def test_non_finite_numbers(self, document: Any, scores: ScoreRange) -> None:
        """NaN and infinities (which strict JSON text cannot carry) are refused by both."""
        assert fast(document, scores) == exact(document, scores)

    @settings(max_examples=150, deadline=None)
    @given(document=mutated(python_values), scores=ranges)
    def test_python_values_decided_as_the_exact_path_decides(
        self, document: Any, scores: ScoreRange
    ) -> None:
        """Values only Python can hold (tuples, Decimals, huge integers) are accepted or refused
        as the exact path says: the compiled validator never accepts one the exact path refuses."""
        assert fast(document, scores) == exact(document, scores)

    @pytest.mark.parametrize(
        "document",
        [
            {"check": "collapse", "history": [{"cycle": 1.0, "scores": {"a": 1}}]},
            {"check": "staleness", "spans": [], "keep_top_k": 2.0},
            {"check": "eviction", "segment": {"id": "s", "kind": "k"}, "score": 1},
        ],
        ids=["integral-float-cycle", "integral-float-count", "integer-score"],
    )
    def test_json_schema_numbers(self, document: dict[str, Any]) -> None:
        """Integral floats are integers and integers are numbers, as JSON Schema says."""
        assert fast(document, RANGES[0]) is not None
        assert fast(document, RANGES[0]) == exact(document, RANGES[0])

    # No deadline: a case of a few milliseconds must not fail because a busy machine stalled
    # it past the default 200 ms.
    @settings(deadline=None)
    @example("0" * 64 + "\n")
    @given(digest=st.text(alphabet="0123456789abcdefABCDEF\n", max_size=66))
    def test_hash_pattern_as_the_schema_applies_it(self, digest: str) -> None:
        """text_sha256 is accepted or refused as python-jsonschema applies its pattern
        (re.search: a trailing newline passes), whatever the compiled regex engine says."""
        spans = [{"span_id": "a", "text": "", "score": None, "text_sha256": digest}]
        document = {"check": "staleness", "spans": spans, "keep_top_k": 1}
        assert fast(document, RANGES[0]) == exact(document, RANGES[0])


@pytest.mark.slow
class TestAgreementAtFullBudget:
    """The agreement properties above at their full budgets: 600 examples each, 150 for
    non-finite numbers in windows (make fuzz)."""

    @AGREE_FULL
    @given(document=plan_documents(), scores=ranges)
    def test_valid_plans(self, document: dict[str, Any], scores: ScoreRange) -> None:
        assert fast_plan(document, scores) == exact_plan(document, scores)

    @AGREE_FULL
    @given(document=mutated(json_values | edge_values, plan_documents()), scores=ranges)
    def test_mutated_plans(self, document: Any, scores: ScoreRange) -> None:
        assert fast_plan(document, scores) == exact_plan(document, scores)

    @settings(max_examples=150, deadline=None)
    @given(document=mutated(non_finite, plan_documents()), scores=ranges)
    def test_non_finite_numbers_in_plans(self, document: Any, scores: ScoreRange) -> None:
        assert fast_plan(document, scores) == exact_plan(document, scores)

    @AGREE_FULL
    @given(document=valid_documents, scores=ranges)
    def test_valid_documents(self, document: dict[str, Any], scores: ScoreRange) -> None:
        assert fast(document, scores) == exact(document, scores)

    @AGREE_FULL
    @given(document=mutated(json_values | edge_values), scores=ranges)
    def test_mutated_documents(self, document: Any, scores: ScoreRange) -> None:
        assert fast(document, scores) == exact(document, scores)

    @AGREE_FULL
    @given(document=valid_documents | mutated(json_values | edge_values), scores=ranges)
    def test_columns_agree(self, document: Any, scores: ScoreRange) -> None:
        assert_columns_agree(document, scores)


DELETE = object()
HEX = "ab" * 32
COLLAPSE: dict[str, Any] = {
    "check": "collapse",
    "history": [
        {"cycle": 1, "scores": {"a": 0.5, "b": 0.25}, "pinned": ["a"]},
        {"cycle": 2, "scores": {"a": 0.5, "b": 0.25}},
    ],
    "baseline": {"a": 0.5},
}
EVICTION: dict[str, Any] = {
    "check": "eviction",
    "segment": {
        "id": "s",
        "kind": "turn",
        "text": "t",
        "non_recoverable": False,
        "score_dependencies": ["x"],
        "tombstone_written": True,
        "tokens": 3,
    },
    "score": 0.5,
    "perturbed_score": 0.5,
    "eviction_candidates": ["s"],
}
STALENESS: dict[str, Any] = {
    "check": "staleness",
    "spans": [
        {"span_id": "a", "text": "t", "score": 0.5, "text_sha256": HEX, "rewrite_count": 0},
        {"span_id": "b", "text": "t", "score": None, "text_sha256": "", "derived_from": ["a"]},
    ],
    "keep_top_k": 1,
    "turn": {"spans_modified": 1, "scores_invalidated": 1},
    "turns": [{"turn": 1, "mean_relevance": 0.5, "tokens": 9}],
    "tombstones": ["z"],
    "recompute_budget": 2,
}
LONG, TOO_LONG = "i" * 256, "i" * 257
TRAILING_NEWLINE = frozenset({"sha-trailing-newline", "sha-newline"})


def NESTED(levels: int) -> dict[str, Any]:  # noqa: N802 - reads as a constant in the table
    """An object holding ``levels`` nested lists."""
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return {"a": value}


# (base document, path, new value or DELETE, accepted?)
EDGES: dict[str, tuple[dict[str, Any], tuple[Any, ...], Any, bool]] = {
    "collapse-valid": (COLLAPSE, (), COLLAPSE, True),
    "collapse-unknown-field": (COLLAPSE, ("extra",), 1, False),
    "collapse-history-not-list": (COLLAPSE, ("history",), {}, False),
    "collapse-history-empty": (COLLAPSE, ("history",), [], True),
    "snapshot-not-object": (COLLAPSE, ("history", 0), [], False),
    "snapshot-unknown-field": (COLLAPSE, ("history", 0, "extra"), 1, False),
    "cycle-missing": (COLLAPSE, ("history", 0, "cycle"), DELETE, False),
    "cycle-negative": (COLLAPSE, ("history", 0, "cycle"), -1, False),
    "cycle-fraction": (COLLAPSE, ("history", 0, "cycle"), 0.5, False),
    "cycle-integral-float": (COLLAPSE, ("history", 0, "cycle"), 1.0, True),
    "cycle-bool": (COLLAPSE, ("history", 0, "cycle"), True, False),
    "cycle-repeated": (COLLAPSE, ("history", 1, "cycle"), 1, False),
    "cycle-decreasing": (COLLAPSE, ("history", 1, "cycle"), 0, False),
    "scores-missing": (COLLAPSE, ("history", 0, "scores"), DELETE, False),
    "scores-empty": (COLLAPSE, ("history", 0, "scores"), {}, False),
    "scores-not-object": (COLLAPSE, ("history", 0, "scores"), [0.5], False),
    "scores-key-empty": (COLLAPSE, ("history", 0, "scores"), {"": 0.5}, False),
    "scores-key-256": (COLLAPSE, ("history", 0, "scores"), {LONG: 0.5}, True),
    "scores-key-257": (COLLAPSE, ("history", 0, "scores"), {TOO_LONG: 0.5}, False),
    "scores-key-not-string": (COLLAPSE, ("history", 0, "scores"), {1: 0.5}, False),
    "later-scores-key-empty": (COLLAPSE, ("history", 1, "scores"), {"a": 0.5, "": 0.1}, False),
    "later-scores-key-257": (COLLAPSE, ("history", 1, "scores"), {TOO_LONG: 0.1}, False),
    "later-scores-other-keys": (COLLAPSE, ("history", 1, "scores"), {"c": 0.1}, True),
    "score-bool": (COLLAPSE, ("history", 0, "scores", "a"), True, False),
    "score-string": (COLLAPSE, ("history", 0, "scores", "a"), "0.5", False),
    "score-null": (COLLAPSE, ("history", 0, "scores", "a"), None, False),
    "score-nan": (COLLAPSE, ("history", 1, "scores", "b"), float("nan"), False),
    "score-first-nan": (COLLAPSE, ("history", 1, "scores", "a"), float("nan"), False),
    "score-infinite": (COLLAPSE, ("history", 0, "scores", "a"), float("inf"), False),
    "score-above-range": (COLLAPSE, ("history", 0, "scores", "a"), 1.0000000000000002, False),
    "score-below-range": (COLLAPSE, ("history", 0, "scores", "a"), -1e-300, False),
    "score-at-max": (COLLAPSE, ("history", 0, "scores", "a"), 1.0, True),
    "score-at-min": (COLLAPSE, ("history", 0, "scores", "a"), 0, True),
    "score-long-integer": (COLLAPSE, ("history", 0, "scores", "a"), 10**400, False),
    "pinned-not-list": (COLLAPSE, ("history", 0, "pinned"), "a", False),
    "pinned-duplicate": (COLLAPSE, ("history", 0, "pinned"), ["a", "a"], False),
    "pinned-empty-id": (COLLAPSE, ("history", 0, "pinned"), [""], False),
    "pinned-id-257": (COLLAPSE, ("history", 0, "pinned"), [TOO_LONG], False),
    "pinned-not-string": (COLLAPSE, ("history", 0, "pinned"), [1], False),
    "pinned-empty": (COLLAPSE, ("history", 0, "pinned"), [], True),
    "baseline-empty": (COLLAPSE, ("baseline",), {}, True),
    "baseline-null": (COLLAPSE, ("baseline",), None, False),
    "baseline-out-of-range": (COLLAPSE, ("baseline", "a"), 2, False),
    "eviction-valid": (EVICTION, (), EVICTION, True),
    "eviction-unknown-field": (EVICTION, ("extra",), 1, False),
    "segment-missing": (EVICTION, ("segment",), DELETE, False),
    "segment-unknown-field": (EVICTION, ("segment", "extra"), 1, False),
    "segment-id-missing": (EVICTION, ("segment", "id"), DELETE, False),
    "segment-id-empty": (EVICTION, ("segment", "id"), "", False),
    "segment-id-256": (EVICTION, ("segment", "id"), LONG, True),
    "segment-id-257": (EVICTION, ("segment", "id"), TOO_LONG, False),
    "kind-missing": (EVICTION, ("segment", "kind"), DELETE, False),
    "kind-empty": (EVICTION, ("segment", "kind"), "", False),
    "kind-64": (EVICTION, ("segment", "kind"), "k" * 64, True),
    "kind-65": (EVICTION, ("segment", "kind"), "k" * 65, False),
    "text-not-string": (EVICTION, ("segment", "text"), 1, False),
    "non-recoverable-integer": (EVICTION, ("segment", "non_recoverable"), 1, False),
    "tombstone-string": (EVICTION, ("segment", "tombstone_written"), "yes", False),
    "dependencies-duplicate": (EVICTION, ("segment", "score_dependencies"), ["x", "x"], False),
    "tokens-negative": (EVICTION, ("segment", "tokens"), -1, False),
    "tokens-integral-float": (EVICTION, ("segment", "tokens"), 2.0, True),
    "tokens-bool": (EVICTION, ("segment", "tokens"), False, False),
    "metadata-free-form": (EVICTION, ("segment", "metadata"), {"a": [1, {"b": None}]}, True),
    "metadata-not-object": (EVICTION, ("segment", "metadata"), [], False),
    "metadata-256": (EVICTION, ("segment", "metadata"), dict.fromkeys(map(str, range(256))), True),
    "metadata-257": (EVICTION, ("segment", "metadata"), dict.fromkeys(map(str, range(257))), False),
    "metadata-nan": (EVICTION, ("segment", "metadata"), {"a": [float("nan")]}, False),
    "metadata-long-integer": (EVICTION, ("segment", "metadata"), {"a": 10**5000}, False),
    "metadata-at-depth-limit": (EVICTION, ("segment", "metadata"), NESTED(29), True),
    "metadata-too-deep": (EVICTION, ("segment", "metadata"), NESTED(30), False),
    "score-missing": (EVICTION, ("score",), DELETE, False),
    "eviction-score-bool": (EVICTION, ("score",), False, False),
    "perturbed-null": (EVICTION, ("perturbed_score",), None, True),
    "perturbed-out-of-range": (EVICTION, ("perturbed_score",), -0.5, False),
    "perturbed-nan": (EVICTION, ("perturbed_score",), float("nan"), False),
    "candidates-not-list": (EVICTION, ("eviction_candidates",), "s", False),
    "candidates-duplicate": (EVICTION, ("eviction_candidates",), ["s", "s"], False),
    "candidates-empty-id": (EVICTION, ("eviction_candidates",), [""], False),
    "staleness-valid": (STALENESS, (), STALENESS, True),
    "staleness-unknown-field": (STALENESS, ("extra",), 1, False),
    "spans-not-list": (STALENESS, ("spans",), {}, False),
    "span-not-object": (STALENESS, ("spans", 0), "a", False),
    "span-required-missing": (STALENESS, ("spans", 0, "text_sha256"), DELETE, False),
    "span-unknown-field": (STALENESS, ("spans", 0, "extra"), 1, False),
    "span-id-duplicate": (STALENESS, ("spans", 1, "span_id"), "a", False),
    "span-id-257": (STALENESS, ("spans", 1, "span_id"), TOO_LONG, False),
    "span-id-empty": (STALENESS, ("spans", 1, "span_id"), "", False),
    "span-score-out-of-range": (STALENESS, ("spans", 0, "score"), 1.5, False),
    "span-text-null": (STALENESS, ("spans", 0, "text"), None, False),
    "sha-upper-case": (STALENESS, ("spans", 0, "text_sha256"), HEX.upper(), False),
    "sha-short": (STALENESS, ("spans", 0, "text_sha256"), HEX[:-1], False),
    "sha-trailing-newline": (STALENESS, ("spans", 0, "text_sha256"), HEX + "\n", True),
    "sha-newline": (STALENESS, ("spans", 0, "text_sha256"), "\n", True),
    "rewrite-count-negative": (STALENESS, ("spans", 0, "rewrite_count"), -1, False),
    "rewrite-count-integral-float": (STALENESS, ("spans", 0, "rewrite_count"), 2.0, True),
    "derived-from-duplicate": (STALENESS, ("spans", 1, "derived_from"), ["a", "a"], False),
    "derived-from-empty": (STALENESS, ("spans", 1, "derived_from"), [], True),
    "derived-from-not-list": (STALENESS, ("spans", 1, "derived_from"), "a", False),
    "keep-top-k-missing": (STALENESS, ("keep_top_k",), DELETE, False),
    "keep-top-k-negative": (STALENESS, ("keep_top_k",), -1, False),
    "turn-field-missing": (STALENESS, ("turn", "scores_invalidated"), DELETE, False),
    "turn-unknown-field": (STALENESS, ("turn", "extra"), 1, False),
    "turn-negative": (STALENESS, ("turn", "spans_modified"), -1, False),
    "turns-not-list": (STALENESS, ("turns",), {}, False),
    "turns-repeated": (STALENESS, ("turns",), [STALENESS["turns"][0]] * 2, False),
    "turns-relevance-out-of-range": (STALENESS, ("turns", 0, "mean_relevance"), 2, False),
    "turns-unknown-field": (STALENESS, ("turns", 0, "extra"), 1, False),
    "turns-tokens-negative": (STALENESS, ("turns", 0, "tokens"), -1, False),
    "tombstones-duplicate": (STALENESS, ("tombstones",), ["z", "z"], False),
    "budget-negative": (STALENESS, ("recompute_budget",), -1, False),
    "budget-zero": (STALENESS, ("recompute_budget",), 0, True),
    "check-unknown": (COLLAPSE, ("check",), "other", False),
    "check-missing": (COLLAPSE, ("check",), DELETE, False),
    "check-not-string": (COLLAPSE, ("check",), ["collapse"], False),
    "document-not-object": (COLLAPSE, (), [COLLAPSE], False),
}


def _edit(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, *rest = path
    copy = dict(document) if isinstance(document, dict) else list(document)
    if not rest and value is DELETE:
        del copy[head]
    else:
        inner = document.get(head) if isinstance(document, dict) else document[head]
        copy[head] = _edit(inner, tuple(rest), value)
    return copy


class TestEdges:
    @pytest.mark.parametrize("name", list(EDGES))
    def test_edge(self, name: str) -> None:
        """Each rule of the fast path at its edge: both paths accept or refuse as the schema
        and the semantic checks say."""
        base, path, value, accepted = EDGES[name]
        document = _edit(base, path, value)
        assert (exact(document, RANGES[0]) is not None) == accepted
        assert fast(document, RANGES[0]) == exact(document, RANGES[0])
        assert_columns_agree(document, RANGES[0])

    @pytest.mark.parametrize("backend", BACKENDS)
    @pytest.mark.parametrize("name", [name for name, edge in EDGES.items() if edge[3]])
    def test_valid_edges_take_the_compiled_path(self, name: str, backend: str) -> None:
        """Every valid edge document is accepted by the compiled validator itself, not only by
        the exact path after it (a hash with a trailing newline aside: Rust's ``$`` is strict)."""
        base, path, value, _ = EDGES[name]
        document = _edit(base, path, value)
        expected = backend == "jsonschema" or name not in TRAILING_NEWLINE
        with compiled_backend(backend):
            assert accepts(document, RANGES[0]) == expected

    @pytest.mark.parametrize(
        ("path", "value"),
        [
            (("segment", "metadata"), {1: "a"}),
            (("segment",), OrderedDict(id="s", kind="turn")),
            (("score",), Decimal("0.5")),
            (("segment", "tokens"), 2**64),
        ],
        ids=["integer-key", "ordered-dict", "decimal", "integer-beyond-64-bits"],
    )
    def test_python_only_values_take_the_exact_path(
        self, path: tuple[str, ...], value: Any
    ) -> None:
        """What JSON text cannot hold, the fast path leaves to the exact path, which decides."""
        document = _edit(EVICTION, path, value)
        assert not accepts(document, RANGES[0])
        assert fast(document, RANGES[0]) == exact(document, RANGES[0])

    def test_a_tuple_is_an_array_on_both_paths(self) -> None:
        """A tuple where a list belongs is a JSON array, as json.dumps writes it."""
        document = _edit(EVICTION, ("segment", "score_dependencies"), ("a",))
        assert accepts(document, RANGES[0])
        request = fast(document, RANGES[0])
        assert request == exact(document, RANGES[0])
        assert request is not None
        assert request[1].segment.score_dependencies == ("a",)


def staleness_with(**fields: Any) -> dict[str, Any]:
    """A valid staleness document of one span, its fields replaced by keyword."""
    span = {"span_id": "a", "text": "text", "score": 0.5, "text_sha256": "", **fields}
    return {"check": "staleness", "spans": [span], "keep_top_k": 1}


class TestEncodedDigest:
    @pytest.mark.parametrize(
        "document",
        [
            staleness_with(),
            staleness_with(score=1.0),
            staleness_with(score=-0.0),
            staleness_with(score=5e-06),
            staleness_with(text="beyond the plane \U0001f600, and a + sign"),
            {"check": "collapse", "history": [{"cycle": 1, "scores": {"\U0001f600": 1.0}}]},
        ],
        ids=["plain", "integral-float", "negative-zero", "small-exponent", "astral", "astral-key"],
    )
    def test_the_screened_bytes_give_the_same_digest(self, document: dict[str, Any]) -> None:
        """The input digest finished from the fast path's bytes equals the digest of the
        document serialized anew, where orjson and RFC 8785 write a number or key differently."""
        _, _, encoded = parse_request_encoded(document, RANGES[0])
        assert encoded is not None
        assert input_digest(document, encoded) == input_digest(document)

    @AGREE
    @given(document=valid_documents, scores=ranges)
    def test_generated_documents_digest_alike(
        self, document: dict[str, Any], scores: ScoreRange
    ) -> None:
        """On generated documents, the digest is the same with or without the screened bytes."""
        try:
            _, _, encoded = parse_request_encoded(document, scores)
        except InputError:
            return
        assert input_digest(document, encoded) == input_digest(document)

    def test_an_integer_beyond_2_to_the_53_takes_the_exact_path(self) -> None:
        """An integer JSON numbers cannot hold exactly is accepted by the exact path, as before,
        and leaves no screened bytes (the digest writes it out exactly)."""
        document = {**staleness_with(), "turns": [{"turn": 1, "mean_relevance": 0.5}]}
        document["turns"][0]["tokens"] = 2**60
        check, request, encoded = parse_request_encoded(document, RANGES[0])
        assert encoded is None
        assert (check, request) == exact(document, RANGES[0])
        assert input_digest(document).startswith("sha256:")


@pytest.mark.slow
class TestDigestsAtFullBudget:
    """The digest property of TestEncodedDigest at 600 examples (make fuzz)."""

    @AGREE_FULL
    @given(document=valid_documents, scores=ranges)
    def test_generated_documents_digest_alike(
        self, document: dict[str, Any], scores: ScoreRange
    ) -> None:
        try:
            _, _, encoded = parse_request_encoded(document, scores)
        except InputError:
            return
        assert input_digest(document, encoded) == input_digest(document)
