"""An eviction pass over 200 segments, no rules.

A pruning pass asks, for every segment slated for eviction, whether its score may authorize the
deletion; every segment of the pass is an eviction candidate. About a third of the segments are
refused, for each of the five reasons. The engine decides the pass over columns
(``Engine.authorize_pass``: every segment's codes, a decision built only when read) and writes
its one record. Two references: the source document's ``authorize_eviction`` in a bare loop,
collecting every failed condition instead of raising at the first (``reference``); and a leaner
loop that stops at the first failed condition, as a caller who needs only a yes or no would
write it (``first_failure``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from prunewarden import PassResult
from prunewarden.audit import columns_record, input_digest
from prunewarden.guards.eviction import CODE_ACTIONS, CODES, PassCheck
from prunewarden.inputs import parse_request_encoded, pass_lists, well_formed_pass
from prunewarden.pipeline._compile import compile_policy

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


def first_failure(
    items: Sequence[Mapping[str, Any]], eviction_candidates: Sequence[str]
) -> list[Verdict]:
    """Each segment's verdict at its first failed condition, in the guard's order: what a
    caller needing only a yes or no writes, with the pinned kinds a frozenset and the dict
    lookups bound once."""
    candidates = frozenset(eviction_candidates)
    pinned, delta = frozenset(PINNED_KINDS), STABILITY_DELTA
    allowed: Verdict = ("allow", ("authorized",), None)
    verdicts: list[Verdict] = []
    append = verdicts.append
    for item in items:
        seg = item["segment"]
        own = seg["id"]
        perturbed = item.get("perturbed_score")
        if seg["kind"] in pinned or seg.get("non_recoverable", False):
            append(("deny", ("pinned",), None))
        elif any(d in candidates and d != own for d in seg.get("score_dependencies", ())):
            append(("deny", ("unscoreable",), None))
        elif perturbed is None:
            append(("deny", ("perturbation_missing",), None))
        elif abs(item["score"] - perturbed) > delta:
            append(("deny", ("unstable_score",), None))
        elif not seg.get("tombstone_written", False):
            append(("deny", ("no_tombstone",), None))
        else:
            append(allowed)
    return verdicts


def column_verdicts(result: PassResult) -> list[Verdict]:
    """A pass's verdicts read from its columns (no decision built)."""
    return [
        ("allow" if ok else "deny", codes, None)
        for ok, codes in zip(result.allowed, result.codes, strict=True)
    ]


def first_verdicts(result: PassResult) -> list[Verdict]:
    """The columns' verdicts at their primary reason: what the first-failure loop finds."""
    return [(outcome, codes[:1], kept) for outcome, codes, kept in column_verdicts(result)]


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


def pass_stages(items: list[dict[str, Any]], candidates: list[str]) -> dict[str, Any]:
    """The columnar pass's stages on prepared inputs: the schema's check of the items and the
    document's one serialization, the fused loop (range and uniqueness checks, every
    condition), the record with the input digest, its write."""
    engine = default_engine("pass-stages")
    policy = engine.policy
    check = PassCheck.bind(policy.spec.eviction, policy.spec.scores)
    shared = frozenset(candidates)
    sink = audit_log("pass-stages")
    sink.add_policy(policy)
    columns = check.decide(items, shared)
    assert columns is not None  # noqa: S101 - the workload's pass is valid
    formed = well_formed_pass(items, candidates)
    assert formed is not None  # noqa: S101 - the workload's pass is valid

    def record() -> dict[str, Any]:
        return columns_record(
            "evictions",
            pass_id="0" * 32,
            ts="2026-01-01T00:00:00.000000Z",
            check="eviction",
            refusal="deny",
            enforced=True,
            segment_ids=columns.segment_ids,
            codes=CODES,
            code_actions=CODE_ACTIONS,
            masks=columns.masks,
            allowed=[mask == 1 for mask in columns.masks],
            dependencies=columns.dependencies,
            # The digest over the bytes validation serialized, as the engine takes it.
            input_digest=input_digest(formed.document, formed.encoded),
            policy=policy,
            session_id=None,
            labels={},
        )

    built = record()
    return {
        "validation": lambda: well_formed_pass(*pass_lists(items, candidates)),
        "decision": lambda: check.decide(items, shared),
        "record": record,
        "log": lambda: sink.write(dict(built)),
    }


def build_pass() -> Case:
    items, candidates = evictions()
    engine = default_engine("pass")
    return Case(
        decisions=len(items),
        engine=lambda: engine.authorize_pass(items, candidates),
        reference=partial(reference, items, candidates),
        verdicts=column_verdicts,
        stages=pass_stages(items, candidates),
    )


def build_first_failure() -> Case:
    items, candidates = evictions()
    engine = default_engine("pass-first-failure")
    return Case(
        decisions=len(items),
        engine=lambda: engine.authorize_pass(items, candidates),
        reference=partial(first_failure, items, candidates),
        verdicts=first_verdicts,
        stages=pass_stages(items, candidates),
    )


def build_pass_decisions() -> Case:
    """The pass through authorize_evictions: every decision built, as before columns."""
    items, candidates = evictions()
    engine = default_engine("pass-decisions")
    columns = default_engine("pass-columns").authorize_pass(items, candidates)
    return Case(
        decisions=len(items),
        engine=lambda: engine.authorize_evictions(items, candidates),
        reference=partial(reference, items, candidates),
        stages={
            **pass_stages(items, candidates),
            "decisions built": lambda: [columns._build(i) for i in range(len(columns))],  # noqa: SLF001
        },
    )


register(
    Workload(
        f"eviction/pass-{SEGMENTS}",
        build_pass,
        target=4.0,
        description=(
            f"{SEGMENTS} segments, engine.authorize_pass on the whole pass, one record to a "
            "chained audit file (fsync batch), against the seeds' loop"
        ),
    )
)
register(
    Workload(
        f"eviction/pass-{SEGMENTS}/first-failure",
        build_first_failure,
        target=5.0,
        description=(
            f"{SEGMENTS} segments, engine.authorize_pass as above, against a loop stopping at "
            "each segment's first failed condition"
        ),
    )
)
register(
    Workload(
        f"eviction/pass-{SEGMENTS}/decisions",
        build_pass_decisions,
        description=(
            f"{SEGMENTS} segments, engine.authorize_evictions: every decision of the pass built"
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
