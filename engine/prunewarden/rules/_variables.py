"""The variables a rule reads, built from a request only as far as its expressions read them.

A rule reads the variables documented for its check (``schemas/rule-variables.v1.schema.json``).
Rules run on every request, so only the variables an expression reads are built and converted to
CEL, and only the fields it reads of them when it reads fields, each at most once per request.
The same values, digested, key the result cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from prunewarden import _resources as resources
from prunewarden._schemas import inline_refs
from prunewarden._stats import median, pstdev
from prunewarden.rules._expression import Shape
from prunewarden.rules._model import PER_ITEM
from prunewarden.rules._values import to_cel

if TYPE_CHECKING:
    from prunewarden.inputs import (
        CollapseRequest,
        EvictionRequest,
        Request,
        StalenessRequest,
        TransitionRequest,
    )


@cache
def variable_shapes(check: str) -> dict[str, Shape]:
    """The variables of ``check`` with their JSON Schema, references resolved."""
    root = resources.schema("rule-variables")
    resolved = inline_refs(root["$defs"][check], root)
    return dict(resolved["properties"])


def _segment(r: EvictionRequest) -> dict[str, Any]:
    s = r.segment
    return {
        "id": s.id,
        "kind": s.kind,
        "text": s.text,
        "non_recoverable": s.non_recoverable,
        "score_dependencies": list(s.score_dependencies),
        "tombstone_written": s.tombstone_written,
        "tokens": s.tokens,
        "metadata": s.metadata,
    }


def _last_scores(r: CollapseRequest) -> dict[str, float]:
    return dict(r.history[-1].scores) if r.history else {}


def _baseline(r: CollapseRequest) -> dict[str, float]:
    if r.baseline is not None:
        return dict(r.baseline)
    return dict(r.history[0].scores) if r.history else {}


def _median(r: CollapseRequest) -> float | None:
    if not r.history:
        return None
    last = r.history[-1]
    pinned = set(last.pinned)
    live = [score for entry, score in last.scores.items() if entry not in pinned]
    return median(live or list(last.scores.values()))


def _span(span: Any, position: int) -> dict[str, Any]:
    return {
        "span_id": span.span_id,
        "text": span.text,
        "score": span.score,
        "text_sha256": span.text_sha256,
        "rewrite_count": span.rewrite_count,
        "derived_from": list(span.derived_from),
        "position": position,
    }


def _turn(r: StalenessRequest) -> dict[str, int] | None:
    if r.turn is None:
        return None
    return {
        "spans_modified": r.turn.spans_modified,
        "scores_invalidated": r.turn.scores_invalidated,
    }


def _transition(r: TransitionRequest) -> dict[str, Any]:
    edit = r.edit
    return {
        "kept": list(edit.kept),
        "rewritten": list(edit.rewritten),
        "folded": list(edit.folded),
        "removed": list(edit.removed),
        "summaries": list(edit.summaries),
        "added": list(edit.added),
        "tombstoned": sorted(edit.tombstoned),
        "before_count": len(r.before),
        "after_count": len(r.after),
        "applied_by": r.applied_by,
    }


def _transition_segments(r: TransitionRequest, window: str) -> list[dict[str, Any]]:
    return [
        {
            "id": s.id,
            "kind": s.segment.kind,
            "text": s.segment.text,
            "tokens": s.segment.tokens,
            "score": s.score,
            "metadata": s.segment.metadata,
        }
        for s in getattr(r, window)
    ]


_Builder = Callable[[Any], Any]

NO_FIDELITY: dict[str, Any] = {"lost": [], "kept_share": 1.0, "checked": [], "refused": []}

BUILDERS: dict[str, dict[str, _Builder]] = {
    "eviction": {
        "segment": _segment,
        "score": lambda r: r.score,
        "perturbed_score": lambda r: r.perturbed_score,
        "candidates": lambda r: sorted(r.eviction_candidates),
    },
    "collapse": {
        "cycle": lambda r: r.history[-1].cycle if r.history else None,
        "cycles": lambda r: len(r.history),
        "scores": _last_scores,
        "pinned": lambda r: list(r.history[-1].pinned) if r.history else [],
        "baseline": _baseline,
        "spread": lambda r: pstdev(r.history[-1].scores.values()) if r.history else None,
        "spreads": lambda r: [pstdev(s.scores.values()) for s in r.history],
        "median": _median,
    },
    "staleness": {
        "spans": lambda r: [_span(s, i) for i, s in enumerate(r.spans)],
        "turn": _turn,
        "turns": lambda r: [
            {"turn": t.turn, "mean_relevance": t.mean_relevance, "tokens": t.tokens}
            for t in r.turns
        ],
        "tombstones": lambda r: sorted(r.tombstones),
        "keep_top_k": lambda r: r.keep_top_k,
        "recompute_budget": lambda r: r.recompute_budget,
    },
    "transition": {
        "transition": _transition,
        "applied_by": lambda r: r.applied_by,
        "before": lambda r: _transition_segments(r, "before"),
        "after": lambda r: _transition_segments(r, "after"),
        # What the guard found (Verdict.variables); this is the value with nothing checked.
        "fidelity": lambda _: dict(NO_FIDELITY),
    },
}


def _canaries(r: CollapseRequest) -> list[tuple[str, dict[str, Any]]]:
    if not r.history:
        return []
    last, baseline = r.history[-1], _baseline(r)
    return [
        (c, {"id": c, "score": last.scores.get(c), "baseline": baseline.get(c)})
        for c in last.pinned
    ]


ITEMS: dict[str, Callable[[Any], list[tuple[str, dict[str, Any]]]]] = {
    "collapse": _canaries,
    "staleness": lambda r: [(s.span_id, _span(s, i)) for i, s in enumerate(r.spans)],
}


def build_variables(check: str, request: Request) -> dict[str, Any]:
    """Every variable of ``check`` as plain JSON-like values (the per-item variable holds the
    first item, when there is one); what ``rule-variables.v1`` describes."""
    values = {name: build(request) for name, build in BUILDERS[check].items()}
    if check in ITEMS:
        items = ITEMS[check](request)
        if items:
            values[PER_ITEM[check]] = items[0][1]
    return values


def _project(value: Any, fields: frozenset[str] | None) -> Any:
    if fields is None or not isinstance(value, Mapping):
        return value
    return {name: value[name] for name in sorted(fields) if name in value}


def _digest(value: Any) -> bytes:
    # repr is exact for the JSON-like values built here (floats repr round-trip) and cheaper
    # than canonical JSON; the digest bounds what the cache keeps per entry.
    return hashlib.blake2b(repr(value).encode("utf-8", "surrogatepass"), digest_size=16).digest()


# What a request says about its own subject: a rule reading nothing else (params aside) is keyed
# by one digest of all of it, computed once per request and shared by every such rule.
SUBJECT_VARIABLES: dict[str, frozenset[str]] = {
    "eviction": frozenset({"segment", "score", "perturbed_score", "params"}),
}


class Variables:
    """The variables of one request, built, converted and digested at most once each.

    The cache key of a rule that reads only the request's subject (an eviction's segment and
    scores) is one digest of all of it, shared by every such rule: a pass of n segments under r
    rules digests n times, not n times r. Such a key changes with any field of the segment, read
    or not, which in a pass is what changes anyway (a rewritten segment). Other rules (those
    reading the candidates, or a per-item variable) are keyed by exactly what they read.
    """

    def __init__(
        self, check: str, request: Request, params: Any, computed: dict[str, Any] | None = None
    ) -> None:
        self.check = check
        self.request = request
        self.params = params
        # Variables the guard computed (a transition's fidelity) stand in for their builders.
        self._values: dict[str, Any] = dict(computed or {})
        self._cel: dict[tuple[str, frozenset[str] | None], Any] = {}
        self._digests: dict[tuple[str, frozenset[str] | None], bytes] = {}
        self._items: list[tuple[str, dict[str, Any]]] | None = None
        self._subject: bytes | None = None

    def shared_digest(
        self, reads: Mapping[str, frozenset[str] | None], item: int | None
    ) -> bytes | None:
        """The digest shared by every rule that reads only the request's subject (and params);
        None for any other rule."""
        subject = SUBJECT_VARIABLES.get(self.check)
        if item is None and subject is not None and reads.keys() <= subject:
            if self._subject is None:
                self._subject = _digest(
                    [self._value(name) for name in sorted(subject) if name != "params"]
                )
            return self._subject
        return None

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        if self._items is None:
            self._items = ITEMS[self.check](self.request)
        return self._items

    def _value(self, name: str) -> Any:
        if name not in self._values:
            self._values[name] = BUILDERS[self.check][name](self.request)
        return self._values[name]

    def digest(
        self, reads: Mapping[str, frozenset[str] | None], item: int | None
    ) -> tuple[Any, ...]:
        """What the cache key needs: a digest per variable read (params are constants)."""
        parts: list[Any] = []
        per_item = PER_ITEM.get(self.check, "")
        for name in sorted(reads):
            fields = reads[name]
            if name == "params":
                continue
            if name == per_item and item is not None:
                parts.append(_digest(_project(self.items()[item][1], fields)))
                continue
            key = (name, fields)
            if key not in self._digests:
                self._digests[key] = _digest(_project(self._value(name), fields))
            parts.append(self._digests[key])
        return tuple(parts)

    def cel(self, reads: Mapping[str, frozenset[str] | None], item: int | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        per_item = PER_ITEM.get(self.check, "")
        for name, fields in reads.items():
            if name == "params":
                out[name] = self.params
            elif name == per_item and item is not None:
                out[name] = to_cel(_project(self.items()[item][1], fields))
            else:
                key = (name, fields)
                if key not in self._cel:
                    self._cel[key] = to_cel(_project(self._value(name), fields))
                out[name] = self._cel[key]
        return out
