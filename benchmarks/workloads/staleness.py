"""Staleness over a prune request of 200 spans.

Each call decides three requests: every score bound (allow, the top ``keep_top_k`` kept), stale
spans of every kind after a rewrite (deny), and relevance inflating while tokens fall (deny). The
reference is the source document's ``prune`` and ``check_turn_integrity`` with the other signals
written the same way, returning the verdict instead of raising.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from prunewarden import Engine
from prunewarden.audit import DecisionContext, decision_record
from prunewarden.audit._input_digest import HASHED_TEXT_DIGEST_VERSION
from prunewarden.guards import staleness
from prunewarden.inputs._columns import staleness_columns
from prunewarden.pipeline import compile_policy

from benchmarks.common import audit_log, default_engine, log_each
from benchmarks.harness import Case, Verdict, Workload, register

SPANS = 200

# The source document's constants, which the bundled default policy carries.
MAX_REWRITES = 2
DRIFT_TOLERANCE = 0.05
DRIFT_TURNS = 2


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def reference(documents: Sequence[Mapping[str, Any]]) -> list[Verdict]:
    return [_prune(doc) for doc in documents]


def _prune(doc: Mapping[str, Any]) -> Verdict:
    spans = doc["spans"]
    codes = []
    unbound = mismatched = poisoned = False
    for s in spans:
        if s.get("rewrite_count", 0) > MAX_REWRITES:
            poisoned = True
            continue
        if s["score"] is None or s["text_sha256"] == "":
            unbound = True
        if s["text_sha256"] != "" and s["text_sha256"] != _sha(s["text"]):
            mismatched = True
    codes += ["unbound_score"] * unbound + ["hash_mismatch"] * mismatched
    codes += ["poisoned_span"] * poisoned
    live = {s["span_id"] for s in spans}
    tombstones = set(doc.get("tombstones", ()))
    if any(
        p != s["span_id"] and p not in live and p not in tombstones
        for s in spans
        for p in s.get("derived_from", ())
    ):
        codes.append("orphaned_parent")
    turn = doc.get("turn")
    if turn and turn["spans_modified"] > 0 and turn["scores_invalidated"] < turn["spans_modified"]:
        codes.append("invalidation_gap")
    turns = doc.get("turns", [])
    if len(turns) > DRIFT_TURNS and all(
        after["tokens"] < before["tokens"]
        and after["mean_relevance"] - before["mean_relevance"]
        > DRIFT_TOLERANCE * before["mean_relevance"]
        for before, after in zip(turns[-DRIFT_TURNS - 1 : -1], turns[-DRIFT_TURNS:], strict=True)
    ):
        codes.append("relevance_inflation")
    if codes:
        return ("deny", tuple(codes), None)
    ranked = sorted(spans, key=lambda s: s["score"], reverse=True)
    return ("allow", ("bound",), tuple(s["span_id"] for s in ranked[: doc["keep_top_k"]]))


def documents(count: int = SPANS) -> list[dict[str, Any]]:
    """Three prune requests of ``count`` spans each (deterministic)."""
    rng = random.Random(count)

    def spans() -> list[dict[str, Any]]:
        out = []
        for i in range(count):
            text = f"span {i}: " + " ".join(
                rng.choice(["alpha", "beta", "gamma"]) for _ in range(40)
            )
            parents = [f"span-{i - 1:04d}"] if i % 7 == 0 and i else []
            out.append(
                {
                    "span_id": f"span-{i:04d}",
                    "text": text,
                    "score": round(rng.uniform(0.0, 1.0), 4),
                    "text_sha256": _sha(text),
                    "rewrite_count": rng.choice([0, 0, 1, 2]),
                    "derived_from": parents,
                }
            )
        return out

    flat = [{"turn": t, "mean_relevance": 0.5, "tokens": 10_000 - 100 * t} for t in range(1, 6)]
    healthy: dict[str, Any] = {
        "check": "staleness",
        "spans": spans(),
        "keep_top_k": count * 3 // 4,
        "turn": {"spans_modified": 4, "scores_invalidated": 4},
        "turns": flat,
        "tombstones": ["gone-1"],
    }
    stale_spans = spans()
    stale = {
        **healthy,
        "spans": stale_spans,
        "turn": {"spans_modified": 6, "scores_invalidated": 2},
    }
    for i, span in enumerate(stale_spans):
        match i % 20:
            case 1:
                span["text"] += " (rewritten)"
            case 2:
                span["score"] = None
            case 3:
                span["rewrite_count"] = 3
            case 4:
                span["derived_from"] = ["gone-2"]
            case _:
                pass
    rising = [
        {"turn": t, "mean_relevance": 0.4 + 0.05 * t, "tokens": 10_000 - 1_000 * t}
        for t in range(1, 6)
    ]
    inflating = {**healthy, "spans": spans(), "turns": rising}
    return [healthy, stale, inflating]


def column_stages(
    engine: Engine, docs: Sequence[Mapping[str, Any]]
) -> dict[str, Callable[[], object]]:
    """``engine.evaluate`` of plain staleness documents cut into its stages, as it decides them
    (over columns): ``validation`` is the reading (the checks, each text hashed, the input
    digest of version 3), then the guard, the decision, the record and the log write."""
    policy = engine.policy
    pipeline = compile_policy(policy)["staleness"]
    reads = [staleness_columns(d, policy.spec.scores) for d in docs]
    columns = [read.columns for read in reads if read is not None]
    if len(columns) != len(docs):
        msg = "a benchmark document is not read into columns"
        raise ValueError(msg)
    verdicts = [staleness.evaluate_columns(pipeline.settings, c) for c in columns]
    decisions = [pipeline.to_decision(v) for v in verdicts]
    sink = audit_log("stages")
    sink.add_policy(policy)

    def records() -> list[dict[str, Any]]:
        return [
            decision_record(
                decision,
                DecisionContext(
                    read.input_digest,
                    {"spans": read.columns.spans.subject()},
                    None,
                    {},
                    doc,
                    tuple(t for t in read.columns.spans.texts if t),
                    input_digest_version=HASHED_TEXT_DIGEST_VERSION,
                ),
                policy,
            )
            for decision, read, doc in zip(decisions, reads, docs, strict=True)
            if read is not None
        ]

    built = records()
    return {
        "validation": lambda: [staleness_columns(d, policy.spec.scores) for d in docs],
        "guard": lambda: [staleness.evaluate_columns(pipeline.settings, c) for c in columns],
        "decision": lambda: [pipeline.to_decision(v) for v in verdicts],
        "record": records,
        "log": lambda: log_each(sink, built),
    }


def build() -> Case:
    docs = documents()
    engine = default_engine("staleness")
    return Case(
        decisions=len(docs),
        engine=lambda: [engine.evaluate(d) for d in docs],
        reference=partial(reference, docs),
        stages=column_stages(engine, docs),
    )


register(
    Workload(
        f"staleness/{SPANS}",
        build,
        target=2.0,
        description=f"3 prune requests of {SPANS} spans, engine.evaluate each",
    )
)
