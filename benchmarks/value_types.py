"""What the values of an eviction pass cost to build, by the kind of class they are.

    python -m benchmarks.value_types [--rounds 15] [--passes 20]

Per segment, a pass builds a ``Segment``, an ``EvictionRequest``, its ``Reason``s and
``Action``s, a ``Verdict`` and a ``Decision``. This builds them for the 200 segments of the
eviction workload (``benchmarks/workloads/eviction.py``: a third refused, for every reason) with
the same checks, as each kind of class:

- ``dataclass``: frozen ``slots=True`` dataclasses with an f-string message per reason, what
  the values were (the reference of the ratios);
- ``slots``: hand-written ``__slots__`` classes, frozen by ``__setattr__``, whose ``__init__``
  sets each slot through its descriptor; the reason is prunewarden's own
  (:class:`prunewarden.decision.Reason`, the same kind of class), its message formatted when read;
- ``struct``: frozen ``msgspec.Struct`` values, the message an f-string;
- ``struct+lazy``: ``msgspec.Struct`` values and prunewarden's reason (a Struct cannot define
  ``__init__``, which the reason needs to keep ``Reason(code, message, detail)`` working while it
  defers its message): what prunewarden builds.

The kinds run interleaved, each round in a rotated order, so that a machine whose speed drifts
slows them alike; a round gives each kind's time per pass and its ratio to ``dataclass`` in that
round. The table gives the median of the rounds and their spread (lowest and highest). Before
timing, every kind must build the same codes, messages and outcomes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import IO, Any

import msgspec
from prunewarden.decision import Reason

from benchmarks.workloads.eviction import PINNED_KINDS, STABILITY_DELTA, evictions

KINDS = ("dataclass", "slots", "struct", "struct+lazy")
REFERENCE = "dataclass"
EMPTY: tuple[str, ...] = ()


# --- dataclass: the values as they were ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DReason:
    code: str
    message: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DAction:
    action: str
    ids: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class DSegment:
    id: str
    kind: str
    text: str
    non_recoverable: bool
    score_dependencies: tuple[str, ...]
    tombstone_written: bool
    tokens: int | None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DRequest:
    segment: Any
    score: float
    perturbed_score: float | None
    eviction_candidates: frozenset[str]


@dataclass(slots=True)
class DVerdict:
    refused: bool
    reasons: list[Any]
    actions: list[Any] = field(default_factory=list)
    kept: tuple[str, ...] | None = None
    evicted: tuple[str, ...] | None = None
    variables: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class DDecision:
    check: str
    outcome: str
    enforced: bool
    reasons: tuple[Any, ...]
    actions: tuple[Any, ...]
    policy: Any
    decision_id: str = ""
    evaluated_at: str = ""
    engine_version: str = "0"
    kept: tuple[str, ...] | None = None
    evicted: tuple[str, ...] | None = None
    sources: tuple[Any, ...] = ()
    shadow: Any = None
    pass_id: str | None = None
    index: int | None = None
    explanation: dict[str, Any] | None = None


# --- slots: hand-written classes ---------------------------------------------------------------


class _Frozen:
    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        msg = f"cannot assign to field {name!r}"
        raise AttributeError(msg)


def _slots_class(name: str, fields: str, defaults: Mapping[str, str]) -> type:
    """A frozen slots class whose ``__init__`` sets each slot through its descriptor (what a
    hand-written one does; written out here once for the five classes)."""
    names = fields.split()
    cls = type(name, (_Frozen,), {"__slots__": tuple(names)})
    setters = {f"_set_{n}": getattr(cls, n).__set__ for n in names}
    parameters = ", ".join(f"{n}={defaults[n]}" if n in defaults else n for n in names)
    body = "\n".join(f"    _set_{n}(self, {n})" for n in names)
    namespace: dict[str, Any] = {}
    exec(f"def __init__(self, {parameters}):\n{body}\n", setters, namespace)  # noqa: S102
    cls.__init__ = namespace["__init__"]  # type: ignore[misc]
    return cls


_DECISION_DEFAULTS = {
    "decision_id": "''",
    "evaluated_at": "''",
    "engine_version": "'0'",
    "kept": "None",
    "evicted": "None",
    "sources": "()",
    "shadow": "None",
    "pass_id": "None",
    "index": "None",
    "explanation": "None",
}
SAction = _slots_class("SAction", "action ids", {"ids": "None"})
SSegment = _slots_class(
    "SSegment",
    "id kind text non_recoverable score_dependencies tombstone_written tokens metadata",
    {"metadata": "None"},
)
SRequest = _slots_class("SRequest", "segment score perturbed_score eviction_candidates", {})
SDecision = _slots_class(
    "SDecision",
    "check outcome enforced reasons actions policy decision_id evaluated_at engine_version kept "
    "evicted sources shadow pass_id index explanation",
    _DECISION_DEFAULTS,
)


class SVerdict:
    __slots__ = ("actions", "evicted", "kept", "reasons", "refused", "variables")

    def __init__(self, refused: bool, reasons: list[Any], actions: list[Any] | None = None) -> None:
        self.refused = refused
        self.reasons = reasons
        self.actions = [] if actions is None else actions
        self.kept = self.evicted = self.variables = None


# --- struct: msgspec ---------------------------------------------------------------------------


class MReason(msgspec.Struct, frozen=True):
    code: str
    message: str
    detail: dict[str, Any] = msgspec.field(default_factory=dict)


class MAction(msgspec.Struct, frozen=True):
    action: str
    ids: tuple[str, ...] | None = None


class MSegment(msgspec.Struct, frozen=True):
    id: str
    kind: str
    text: str
    non_recoverable: bool
    score_dependencies: tuple[str, ...]
    tombstone_written: bool
    tokens: int | None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class MRequest(msgspec.Struct, frozen=True):
    segment: Any
    score: float
    perturbed_score: float | None
    eviction_candidates: frozenset[str]


class MVerdict(msgspec.Struct):
    refused: bool
    reasons: list[Any]
    actions: list[Any] = msgspec.field(default_factory=list)
    kept: tuple[str, ...] | None = None
    evicted: tuple[str, ...] | None = None
    variables: dict[str, Any] | None = None


class MDecision(msgspec.Struct, frozen=True):
    check: str
    outcome: str
    enforced: bool
    reasons: tuple[Any, ...]
    actions: tuple[Any, ...]
    policy: Any
    decision_id: str = ""
    evaluated_at: str = ""
    engine_version: str = "0"
    kept: tuple[str, ...] | None = None
    evicted: tuple[str, ...] | None = None
    sources: tuple[Any, ...] = ()
    shadow: Any = None
    pass_id: str | None = None
    index: int | None = None
    explanation: dict[str, Any] | None = None


# --- the pass: the same checks and messages for every kind --------------------------------------

_PINNED = "segment {!r} is pinned ({}); score {:.2f} cannot authorize deleting a non-recoverable "
_PINNED += "disambiguator"
_UNSCOREABLE = "segment {!r} was scored against segments also slated for eviction: {}"
_MISSING = "segment {!r} has no perturbed score, so its stability is unknown"
_UNSTABLE = "segment {!r} score moved {:.2f} -> {:.2f} under perturbation, more than {}"
_NO_TOMBSTONE = "segment {!r} has no tombstone; its eviction would be undetectable"
_AUTHORIZED = "segment {!r} is scoreable, stable and tombstoned"


def _findings(t: SimpleNamespace, r: Any) -> Iterator[tuple[Any, Any]]:
    seg = r.segment
    own = (seg.id,)
    if seg.kind in PINNED_KINDS or seg.non_recoverable:
        why = f"kind {seg.kind!r}" if seg.kind in PINNED_KINDS else "non-recoverable"
        detail = {"segment": seg.id, "kind": seg.kind, "non_recoverable": seg.non_recoverable}
        yield t.reason("pinned", _PINNED, (seg.id, why, r.score), detail), t.action("pin", own)
    pending = sorted({d for d in seg.score_dependencies if d in r.eviction_candidates} - {seg.id})
    if pending:
        detail = {"segment": seg.id, "dependencies": pending}
        reason = t.reason("unscoreable", _UNSCOREABLE, (seg.id, ", ".join(pending)), detail)
        yield reason, t.action("resolve_dependencies_first", tuple(pending))
    if r.perturbed_score is None:
        reason = t.reason("perturbation_missing", _MISSING, (seg.id,), {"segment": seg.id})
        yield reason, t.action("rescore", own)
    elif abs(r.score - r.perturbed_score) > STABILITY_DELTA:
        detail = {
            "segment": seg.id,
            "score": r.score,
            "perturbed_score": r.perturbed_score,
            "delta": abs(r.score - r.perturbed_score),
            "stability_delta": STABILITY_DELTA,
        }
        values = (seg.id, r.score, r.perturbed_score, STABILITY_DELTA)
        yield t.reason("unstable_score", _UNSTABLE, values, detail), t.action("rescore", own)
    if not seg.tombstone_written:
        reason = t.reason("no_tombstone", _NO_TOMBSTONE, (seg.id,), {"segment": seg.id})
        yield reason, t.action("write_tombstone", own)


def _findings_eager(t: SimpleNamespace, r: Any) -> Iterator[tuple[Any, Any]]:
    """:func:`_findings` as the guard wrote it: each message an f-string, formatted at once."""
    seg = r.segment
    own = (seg.id,)
    if seg.kind in PINNED_KINDS or seg.non_recoverable:
        why = f"kind {seg.kind!r}" if seg.kind in PINNED_KINDS else "non-recoverable"
        message = (
            f"segment {seg.id!r} is pinned ({why}); score {r.score:.2f} cannot authorize "
            "deleting a non-recoverable disambiguator"
        )
        detail = {"segment": seg.id, "kind": seg.kind, "non_recoverable": seg.non_recoverable}
        yield t.reason("pinned", message, detail), t.action("pin", own)
    pending = sorted({d for d in seg.score_dependencies if d in r.eviction_candidates} - {seg.id})
    if pending:
        message = (
            f"segment {seg.id!r} was scored against segments also slated for eviction: "
            f"{', '.join(pending)}"
        )
        reason = t.reason("unscoreable", message, {"segment": seg.id, "dependencies": pending})
        yield reason, t.action("resolve_dependencies_first", tuple(pending))
    if r.perturbed_score is None:
        message = f"segment {seg.id!r} has no perturbed score, so its stability is unknown"
        yield (
            t.reason("perturbation_missing", message, {"segment": seg.id}),
            t.action("rescore", own),
        )
    elif abs(r.score - r.perturbed_score) > STABILITY_DELTA:
        message = (
            f"segment {seg.id!r} score moved {r.score:.2f} -> {r.perturbed_score:.2f} under "
            f"perturbation, more than {STABILITY_DELTA}"
        )
        detail = {
            "segment": seg.id,
            "score": r.score,
            "perturbed_score": r.perturbed_score,
            "delta": abs(r.score - r.perturbed_score),
            "stability_delta": STABILITY_DELTA,
        }
        yield t.reason("unstable_score", message, detail), t.action("rescore", own)
    if not seg.tombstone_written:
        message = f"segment {seg.id!r} has no tombstone; its eviction would be undetectable"
        yield (
            t.reason("no_tombstone", message, {"segment": seg.id}),
            t.action("write_tombstone", own),
        )


def decide_pass(
    t: SimpleNamespace, items: Sequence[Mapping[str, Any]], candidates: frozenset[str]
) -> list[Any]:
    """The values of one eviction pass, built as the engine builds them per segment."""
    decisions = []
    for index, item in enumerate(items):
        s = item["segment"]
        segment = t.segment(
            s["id"],
            s["kind"],
            s.get("text", ""),
            s.get("non_recoverable", False),
            tuple(s.get("score_dependencies", EMPTY)),
            s.get("tombstone_written", False),
            s.get("tokens"),
            {},
        )
        perturbed = item["perturbed_score"]
        request = t.request(segment, item["score"], perturbed, candidates)
        findings = list(t.findings(t, request))
        if findings:
            actions: list[Any] = []
            for _, action in findings:
                if action not in actions:
                    actions.append(action)
            verdict = t.verdict(True, [reason for reason, _ in findings], actions)
        else:
            detail = {"segment": segment.id, "score": request.score}
            if t.findings is _findings:
                reason = t.reason("authorized", _AUTHORIZED, (segment.id,), detail)
            else:
                message = f"segment {segment.id!r} is scoreable, stable and tombstoned"
                reason = t.reason("authorized", message, detail)
            verdict = t.verdict(False, [reason])
        decisions.append(
            t.decision(
                "eviction",
                "deny" if verdict.refused else "allow",
                True,
                tuple(verdict.reasons),
                tuple(verdict.actions),
                None,
                f"pass-{index}",
                "2026-01-01T00:00:00.000000Z",
                "0",
                None,
                None,
                (),
                None,
                "pass",
                index,
            )
        )
    return decisions


KIND_TYPES: dict[str, SimpleNamespace] = {
    "dataclass": SimpleNamespace(
        reason=DReason,
        findings=_findings_eager,
        action=DAction,
        segment=DSegment,
        request=DRequest,
        verdict=DVerdict,
        decision=DDecision,
    ),
    "slots": SimpleNamespace(
        reason=Reason.deferred,
        findings=_findings,
        action=SAction,
        segment=SSegment,
        request=SRequest,
        verdict=SVerdict,
        decision=SDecision,
    ),
    "struct": SimpleNamespace(
        reason=MReason,
        findings=_findings_eager,
        action=MAction,
        segment=MSegment,
        request=MRequest,
        verdict=MVerdict,
        decision=MDecision,
    ),
    "struct+lazy": SimpleNamespace(
        reason=Reason.deferred,
        findings=_findings,
        action=MAction,
        segment=MSegment,
        request=MRequest,
        verdict=MVerdict,
        decision=MDecision,
    ),
}


def _said(decisions: Sequence[Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    return [(d.outcome, [(r.code, r.message) for r in d.reasons]) for d in decisions]


def check_agreement(items: Sequence[Mapping[str, Any]], candidates: frozenset[str]) -> None:
    """Every kind builds the same outcomes, codes and messages (or the timing means nothing)."""
    expected = _said(decide_pass(KIND_TYPES[REFERENCE], items, candidates))
    for kind in KINDS:
        if _said(decide_pass(KIND_TYPES[kind], items, candidates)) != expected:
            msg = f"{kind}: the pass differs from the {REFERENCE} one"
            raise AssertionError(msg)


def measure(rounds: int, passes: int) -> dict[str, dict[str, list[float]]]:
    """Per kind, the seconds per pass and the ratio to the reference, one sample per round."""
    items, ids = evictions()
    candidates = frozenset(ids)
    check_agreement(items, candidates)
    seconds: dict[str, list[float]] = {kind: [] for kind in KINDS}
    ratios: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for round_number in range(rounds):
        shift = round_number % len(KINDS)
        timed: dict[str, float] = {}
        for kind in KINDS[shift:] + KINDS[:shift]:
            types = KIND_TYPES[kind]
            started = time.perf_counter()
            for _ in range(passes):
                decide_pass(types, items, candidates)
            timed[kind] = (time.perf_counter() - started) / passes
        for kind in KINDS:
            seconds[kind].append(timed[kind])
            ratios[kind].append(timed[kind] / timed[REFERENCE])
    return {"seconds": seconds, "ratio": ratios}


def report(results: Mapping[str, Mapping[str, list[float]]], segments: int, out: IO[str]) -> None:
    out.write(
        f"{'kind':<12} {'us/segment':>11} {'ratio':>7} {'lowest':>7} {'highest':>8}"
        f"   (to {REFERENCE}; median of rounds)\n"
    )
    for kind in KINDS:
        per_segment = statistics.median(results["seconds"][kind]) / segments * 1e6
        ratio = results["ratio"][kind]
        out.write(
            f"{kind:<12} {per_segment:>11.2f} {statistics.median(ratio):>6.2f}x "
            f"{min(ratio):>6.2f}x {max(ratio):>7.2f}x\n"
        )


def main(argv: Sequence[str] | None = None, out: IO[str] = sys.stdout) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--passes", type=int, default=20)
    args = parser.parse_args(argv)
    report(measure(args.rounds, args.passes), len(evictions()[0]), out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
