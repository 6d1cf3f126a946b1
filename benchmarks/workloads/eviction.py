"""An eviction pass over 200 segments, no rules.

A pruning pass asks, for every segment slated for eviction, whether its score may authorize the
deletion; every segment of the pass is an eviction candidate. About a third of the segments are
refused, for each of the five reasons. The reference is the source document's
``authorize_eviction`` in a bare loop, collecting every failed condition instead of raising at the
first.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from prunewarden.audit import input_digest, pass_record
from prunewarden.inputs import parse_request_encoded
from prunewarden.inputs._passes import parse_evictions
from prunewarden.pipeline._compile import compile_policy
from prunewarden.planner import PassLog

from benchmarks.common import audit_log, default_engine, document_stages
from benchmarks.harness import Case, Verdict, Workload, decision_verdicts, register

SEGMENTS = 200

# The source document's constants, which the bundled default policy carries.
PINNED_KINDS = {"constraint", "definition", "negation"}
STABILITY_DELTA = 0.25


def reference(
    items: Sequence[Mapping[str, Any]], eviction_candidates: Sequence[str]
) -> list[Verdict]:
    candidates = set(eviction_candidates)
    verdicts: list[Verdict] = []
    for item in items:
        seg = item["segment"]
        reasons = []
        if seg["kind"] in PINNED_KINDS or seg.get("non_recoverable", False):
            reasons.append("pinned")
        if any(d in candidates and d != seg["id"] for d in seg.get("score_dependencies", ())):
            reasons.append("unscoreable")
        perturbed = item.get("perturbed_score")
        if perturbed is None:
            reasons.append("perturbation_missing")
        elif abs(item["score"] - perturbed) > STABILITY_DELTA:
            reasons.append("unstable_score")
        if not seg.get("tombstone_written", False):
            reasons.append("no_tombstone")
        verdicts.append(
            ("deny", tuple(reasons), None) if reasons else ("allow", ("authorized",), None)
        )
    return verdicts


def evictions(count: int = SEGMENTS) -> tuple[list[dict[str, Any]], list[str]]:
    """``count`` eviction requests of one pass and the pass's candidate ids (deterministic)."""
    rng = random.Random(count)
    ids = [f"seg-{i:04d}" for i in range(count)]
    retained = [f"kept-{i:04d}" for i in range(50)]
    items = []
    for i, seg_id in enumerate(ids):
        score = round(rng.uniform(0.02, 0.3), 3)
        segment: dict[str, Any] = {
            "id": seg_id,
            "kind": rng.choice(["turn", "turn", "turn", "summary", "tool_output"]),
            "text": f"turn {i}: " + "lorem ipsum " * rng.randint(2, 20),
            "score_dependencies": rng.sample(retained, 3),
            "tombstone_written": True,
            "tokens": rng.randint(20, 400),
        }
        item: dict[str, Any] = {
            "segment": segment,
            "score": score,
            "perturbed_score": round(max(score + rng.uniform(-0.1, 0.1), 0.0), 3),
        }
        match i % 15:
            case 1:
                segment["kind"] = rng.choice(sorted(PINNED_KINDS))
            case 2:
                segment["non_recoverable"] = True
            case 3:
                segment["score_dependencies"] = [*segment["score_dependencies"], ids[i - 1]]
            case 4:
                item["perturbed_score"] = None
            case 5:
                item["perturbed_score"] = round(min(score + 0.4, 1.0), 3)
            case 6:
                segment["tombstone_written"] = False
            case _:
                pass
        items.append(item)
    return items, ids


def build_per_document() -> Case:
    items, candidates = evictions()
    docs = [{"check": "eviction", **item, "eviction_candidates": candidates} for item in items]
    engine = default_engine("per-document")
    return Case(
        decisions=len(docs),
        engine=lambda: [engine.evaluate(d) for d in docs],
        reference=partial(reference, items, candidates),
        stages=document_stages(engine, docs),
    )


def build_pass() -> Case:
    items, candidates = evictions()
    engine = default_engine("pass")
    policy = engine.policy
    pipeline = compile_policy(policy)["eviction"]
    parsed = parse_evictions(items, candidates, policy.spec.scores)
    sink = audit_log("pass-stages")
    sink.add_policy(policy)

    def decide() -> PassLog:
        log = PassLog()
        for item in parsed.items:
            log.add(pipeline.decide(item.request, log.next_stamp()), item.request)
        return log

    decided = decide()

    def record() -> dict[str, Any]:
        digest = input_digest(parsed.document)
        return pass_record(
            "evictions",
            decided.decisions,
            decided.requests,
            input_digest=digest,
            policy=policy,
            session_id=None,
            labels={},
        )

    built = record()
    return Case(
        decisions=len(items),
        engine=lambda: engine.authorize_evictions(items, candidates),
        reference=partial(reference, items, candidates),
        stages={
            "validation": lambda: parse_evictions(items, candidates, policy.spec.scores),
            "decision": decide,
            "record": record,
            "log": lambda: sink.write(dict(built)),
        },
    )


register(
    Workload(
        f"eviction/pass-{SEGMENTS}",
        build_pass,
        target=5.0,
        description=(
            f"{SEGMENTS} segments, engine.authorize_evictions on the whole pass, one record to "
            "a chained audit file (fsync batch)"
        ),
    )
)
register(
    Workload(
        f"eviction/pass-{SEGMENTS}/per-document",
        build_per_document,
        description=f"{SEGMENTS} segments, engine.evaluate on one document per segment",
    )
)


def build_explained() -> Case:
    """The per-document workload explained (``explain=True``), against the same documents
    decided plainly: what an explanation costs (the would_allow of every refusing reason; this
    policy has no rules to trace)."""
    items, candidates = evictions()
    docs = [{"check": "eviction", **item, "eviction_candidates": candidates} for item in items]
    plain, explaining = default_engine("plain"), default_engine("explained")
    pipeline = compile_policy(explaining.policy)["eviction"]
    scores = explaining.policy.spec.scores
    requests = [parse_request_encoded(dict(d), scores)[1] for d in docs]
    return Case(
        decisions=len(docs),
        engine=lambda: [explaining.evaluate(d, explain=True) for d in docs],
        reference=lambda: [plain.evaluate(d) for d in docs],
        reference_verdicts=decision_verdicts,
        stages={
            **document_stages(explaining, docs),
            "explained decision": lambda: [pipeline.decide(r, explain=True) for r in requests],
        },
    )


register(
    Workload(
        f"eviction/pass-{SEGMENTS}/explained",
        build_explained,
        description=f"{SEGMENTS} segments, engine.evaluate(explain=True) on each document, "
        "against the same without",
    )
)
