"""A staleness document decided over its columns: the same decisions and records as the typed
path, the input digest of version 3, and nothing accepted that the exact path refuses."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from prunewarden import AuditLog, Engine, InputError, load_builtin_policy
from prunewarden._json import canonical_digest, encode_canonical, written_alike
from prunewarden.audit._input_digest import HASHED_TEXT_DIGEST_VERSION, staleness_digest
from prunewarden.inputs import ScoreRange, StalenessRequest, parse_request
from prunewarden.inputs._columns import hashed_text_document, staleness_columns
from prunewarden.pipeline import compile_policy

from benchmarks.workloads import staleness as workload

CASES = Path(__file__).parents[1] / "cases" / "staleness"
SCORES = ScoreRange(0.0, 1.0)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def span(span_id: str, text: str = "some text", score: float | None = 0.5) -> dict[str, Any]:
    return {"span_id": span_id, "text": text, "score": score, "text_sha256": sha(text)}


def document(**fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "check": "staleness",
        "spans": [span("a", "alpha"), span("b", "beta", 0.25), span("c", "gamma", None)],
        "keep_top_k": 2,
    }
    doc.update(fields)
    return doc


def corpus() -> list[dict[str, Any]]:
    """The golden staleness cases under the default policy, and the benchmark's documents."""
    docs = []
    for path in sorted(CASES.glob("*.yaml")):
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        if "policy" not in case:
            docs.append(case["input"])
    return [*docs, *workload.documents(40)]


def comparable(decision: Any) -> dict[str, Any]:
    fields: dict[str, Any] = decision.to_dict()
    for key in ("decision_id", "evaluated_at"):
        fields.pop(key, None)
    return fields


class TestSameDecisions:
    @pytest.mark.parametrize("doc", corpus(), ids=lambda d: str(len(d["spans"])))
    def test_columns_decide_as_the_typed_request(self, doc: dict[str, Any]) -> None:
        """Every corpus document is read into columns and decided field by field as the typed
        request is."""
        policy = load_builtin_policy("default")
        pipeline = compile_policy(policy)["staleness"]
        read = staleness_columns(doc, policy.spec.scores)
        assert read is not None
        _, request = parse_request(doc, policy.spec.scores)
        assert read.columns.request() == request
        assert comparable(pipeline.decide_staleness(read.columns)) == comparable(
            pipeline.decide(request)
        )

    def test_off_guard_ranks_as_the_typed_request(self, engine_with: Any) -> None:
        """With the guard off the columns give the same plain top-k cut."""
        engine = engine_with(staleness={"mode": "off"})
        pipeline = compile_policy(engine.policy)["staleness"]
        doc = document()
        read = staleness_columns(doc, SCORES)
        assert read is not None
        _, request = parse_request(doc, SCORES)
        decision = pipeline.decide_staleness(read.columns)
        assert comparable(decision) == comparable(pipeline.decide(request))
        assert decision.kept == ("a", "b")

    def test_a_failing_guard_refuses(self) -> None:
        """An error inside the guard over columns is an internal_error refusal, as on the typed
        path."""
        pipeline = compile_policy(load_builtin_policy("default"))["staleness"]
        read = staleness_columns(document(), SCORES)
        assert read is not None
        # Columns of different lengths: the guard's zip(strict=True) raises.
        spans = dataclasses.replace(read.columns.spans, scores=[0.5])
        broken = dataclasses.replace(read.columns, spans=spans)
        decision = pipeline.decide_staleness(broken)
        assert (decision.outcome, decision.codes) == ("deny", ("internal_error",))


class TestRecords:
    def _records(self, engine: Engine, path: Path, doc: dict[str, Any]) -> dict[str, Any]:
        engine.evaluate(doc)
        lines = path.read_text(encoding="utf-8").splitlines()
        record: dict[str, Any] = json.loads(lines[-1])
        return record

    def test_record_names_digest_version_3(self, tmp_path: Path) -> None:
        """The record's input digest is over the document with its texts hashed, and says so;
        its subject is the typed path's."""
        log = tmp_path / "audit.jsonl"
        engine = Engine.default(audit=AuditLog(log))
        doc = document(turns=[{"turn": 1, "mean_relevance": 0.5, "tokens": 10}])
        record = self._records(engine, log, doc)
        hashed = hashed_text_document(doc, "spans", [sha(s["text"]) for s in doc["spans"]])
        assert record["input_digest_version"] == HASHED_TEXT_DIGEST_VERSION
        assert record["input_digest"] == canonical_digest(hashed)
        assert hashed["spans"][0]["text"] == {"sha256": sha("alpha")}
        assert record["subject"]["spans"][0] == {
            "span_id": "a",
            "text_length": 5,
            "text_sha256": sha("alpha"),
        }

    @pytest.mark.parametrize(
        "changes",
        [
            {"keep_top_k": 2.0},  # an integral float: the exact path accepts it
            {"spans": [span("a", "x", 1.0), span("b", "y", 0.0)]},  # floats orjson writes apart
            {"spans": [span("a", "x", 5e-6), span("b", "y", 1)]},
        ],
        ids=["integral-float-field", "integral-scores", "exponent-and-int-scores"],
    )
    def test_both_paths_digest_alike(self, tmp_path: Path, changes: dict[str, Any]) -> None:
        """A document the columns decline is digested by version 3 on the typed path too, and
        the digest is RFC 8785's whichever path wrote it."""
        log = tmp_path / "audit.jsonl"
        engine = Engine.default(audit=AuditLog(log))
        doc = document(**changes)
        record = self._records(engine, log, doc)
        _, request = parse_request(doc, SCORES)
        assert isinstance(request, StalenessRequest)
        assert (record["input_digest"], record["input_digest_version"]) == staleness_digest(
            doc, request
        )
        digests = [sha(s["text"]) for s in doc["spans"]]
        assert record["input_digest"] == canonical_digest(
            hashed_text_document(doc, "spans", digests)
        )

    def test_lone_surrogate_text_keeps_the_document_digest(self, tmp_path: Path) -> None:
        """A text without UTF-8 bytes has no hash: the document as given is digested, and the
        record names no digest version."""
        log = tmp_path / "audit.jsonl"
        engine = Engine.default(audit=AuditLog(log))
        doc = document(spans=[{"span_id": "a", "text": "\ud800", "score": 0.5, "text_sha256": ""}])
        assert staleness_columns(doc, SCORES) is None
        record = self._records(engine, log, doc)
        assert "input_digest_version" not in record
        assert record["input_digest"] == canonical_digest(doc)


def _mutations() -> list[tuple[str, Any]]:
    """Documents the exact path refuses, one problem each."""

    def with_span(at: int = 0, **fields: Any) -> dict[str, Any]:
        doc = document()
        doc["spans"][at].update(fields)
        return doc

    def without(key: str) -> dict[str, Any]:
        doc = document()
        del doc["spans"][0][key]
        return doc

    return [
        ("unknown-member", document(extra=1)),
        ("span-unknown-member", with_span(note="x")),
        ("missing-text", without("text")),
        ("missing-score", without("score")),
        ("empty-id", with_span(span_id="")),
        ("long-id", with_span(span_id="x" * 257)),
        ("duplicate-id", with_span(span_id="b")),
        ("score-out-of-range", with_span(score=1.5)),
        ("score-nan", with_span(score=float("nan"))),
        # min() and max() step over a NaN that is not first: the range alone does not see it.
        ("later-score-nan", with_span(at=1, score=float("nan"))),
        ("score-bool", with_span(score=True)),
        ("score-string", with_span(score="0.5")),
        ("hash-upper-case", with_span(text_sha256=sha("alpha").upper())),
        ("hash-short", with_span(text_sha256="abc")),
        ("text-not-string", with_span(text=5)),
        ("negative-rewrites", with_span(rewrite_count=-1)),
        ("duplicate-parents", with_span(derived_from=["b", "b"])),
        ("parent-not-id", with_span(derived_from=[""])),
        ("negative-keep", document(keep_top_k=-1)),
        ("turn-extra", document(turn={"spans_modified": 1, "scores_invalidated": 1, "x": 1})),
        ("turn-negative", document(turn={"spans_modified": -1, "scores_invalidated": 1})),
        (
            "turns-decreasing",
            document(
                turns=[
                    {"turn": 2, "mean_relevance": 0.5, "tokens": 1},
                    {"turn": 1, "mean_relevance": 0.5, "tokens": 1},
                ]
            ),
        ),
        ("turns-mean-out", document(turns=[{"turn": 1, "mean_relevance": 2.0, "tokens": 1}])),
        (
            "later-turn-mean-nan",
            document(
                turns=[
                    {"turn": 1, "mean_relevance": 0.5, "tokens": 1},
                    {"turn": 2, "mean_relevance": float("nan"), "tokens": 1},
                ]
            ),
        ),
        ("tombstones-duplicate", document(tombstones=["x", "x"])),
        ("budget-negative", document(recompute_budget=-1)),
        ("spans-not-list", document(spans={"a": 1})),
    ]


class TestRefusals:
    @pytest.mark.parametrize(("name", "doc"), _mutations(), ids=[n for n, _ in _mutations()])
    def test_invalid_documents_take_the_exact_path(self, name: str, doc: dict[str, Any]) -> None:
        """What input.v1 or the policy refuses is never read into columns; the engine reports
        it located, as before."""
        assert staleness_columns(copy.deepcopy(doc), SCORES) is None, name
        with pytest.raises(InputError) as raised:
            Engine.default().evaluate(doc)
        assert raised.value.problems[0].path.startswith("$")


class _Untruthful:
    """A value whose truth cannot be told."""

    def __bool__(self) -> bool:
        msg = "no truth here"
        raise RuntimeError(msg)


class TestForeignValues:
    def test_a_value_that_raises_is_left_to_the_exact_path(self) -> None:
        """A Python value whose truth raises is not read into columns; the exact path refuses
        it as a located input error, never a traceback."""
        doc = document()
        doc["spans"][0]["derived_from"] = _Untruthful()
        assert staleness_columns(doc, SCORES) is None
        with pytest.raises(InputError) as raised:
            Engine.default().evaluate(doc)
        assert raised.value.problems[0].path == "$.spans[0].derived_from"


finite = st.floats(allow_nan=False, allow_infinity=False)


class TestWrittenAlike:
    @given(st.lists(finite, max_size=20))
    def test_alike_floats_are_already_canonical(self, floats: list[float]) -> None:
        """Floats judged written alike are written by orjson byte for byte as RFC 8785 does."""
        if written_alike(floats):
            assert orjson.dumps(floats) == encode_canonical(floats)

    def test_the_differing_spellings_are_caught(self) -> None:
        """Integral floats and the exponents ECMAScript writes out are not alike."""
        assert written_alike([0.5, 1e-5, 123.25])
        for value in (1.0, 0.0, 5e-6, 1e16, 2.5e20):
            assert not written_alike([0.5, value])
