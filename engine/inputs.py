"""Input documents: validated against ``input.v1`` and the policy, then typed.

A malformed document is an :class:`InputError`, never a decision. Beyond the schema, the checks
here depend on the policy (the accepted score range) or on relations the schema cannot express:
finite numbers, unique ids, increasing cycles and turns.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from prunewarden.errors import InputError, Problem, describe_value
from prunewarden.fastpath import accepts, collapse_scores
from prunewarden.limits import (
    INTEGER_CEILING,
    MAX_ENTRIES,
    MAX_IDS,
    MAX_INPUT_DEPTH,
    MAX_INTEGER_DIGITS,
    MAX_PROBLEMS,
    MAX_SNAPSHOTS,
    MAX_SPANS,
    MAX_TURNS,
)
from prunewarden.policy import ScoreRange
from prunewarden.source import Parsed, Path, locate
from prunewarden.validation import capped, problems_of, validator

Check = Literal["collapse", "eviction", "staleness"]
CHECKS: tuple[Check, ...] = ("collapse", "eviction", "staleness")


@dataclass(frozen=True, slots=True)
class Snapshot:
    cycle: int
    scores: dict[str, float]
    pinned: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CollapseRequest:
    history: tuple[Snapshot, ...]
    baseline: dict[str, float] | None


@dataclass(frozen=True, slots=True)
class Segment:
    id: str
    kind: str
    text: str
    non_recoverable: bool
    score_dependencies: tuple[str, ...]
    tombstone_written: bool
    tokens: int | None
    metadata: dict[str, Any] = field(default_factory=dict)  # free-form, read only by rules


@dataclass(frozen=True, slots=True)
class EvictionRequest:
    segment: Segment
    score: float
    perturbed_score: float | None
    eviction_candidates: frozenset[str]


@dataclass(frozen=True, slots=True)
class Span:
    span_id: str
    text: str
    score: float | None
    text_sha256: str
    rewrite_count: int
    derived_from: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TurnStats:
    spans_modified: int
    scores_invalidated: int


@dataclass(frozen=True, slots=True)
class Turn:
    turn: int
    mean_relevance: float
    tokens: int


@dataclass(frozen=True, slots=True)
class StalenessRequest:
    spans: tuple[Span, ...]
    keep_top_k: int
    turn: TurnStats | None
    turns: tuple[Turn, ...]
    tombstones: frozenset[str]
    recompute_budget: int | None


Request = CollapseRequest | EvictionRequest | StalenessRequest

# A problem before it is located: the path, the message, and whether it belongs at the key.
_Found = tuple[Path, str]


def parse_request(
    data: Any, scores: ScoreRange, *, filename: str = "<input>", text: str | None = None
) -> tuple[Check, Request]:
    """Validate ``data`` and return its check and typed request, or raise :class:`InputError`.

    ``text`` is the document's source, used only to put line and column on errors.
    """
    fast = _parse_fast(data, scores)
    if fast is not None:
        return fast
    return parse_request_exact(data, scores, filename=filename, text=text)


def parse_request_exact(
    data: Any, scores: ScoreRange, *, filename: str = "<input>", text: str | None = None
) -> tuple[Check, Request]:
    """The exact path of :func:`parse_request`: JSON Schema and the semantic checks, slower,
    able to say what is wrong and where. Taken whenever the fast path is not sure."""
    refused = _unreadable(data) or _oversized(data)
    if refused:
        located = _locate(data, filename, text)
        raise InputError([located.problem(path, message) for path, message in refused])
    # One pass of the schema (a large document takes seconds), kept to locate the errors later.
    errors = list(itertools.islice(validator("input").iter_errors(data), MAX_PROBLEMS + 1))
    semantic = () if errors else _semantic_problems(data, scores)
    found = list(itertools.islice(semantic, MAX_PROBLEMS + 1))
    if not errors and not found:
        check: Check = data["check"]
        return check, _BUILDERS[check](data)
    located = _locate(data, filename, text)
    problems = problems_of(errors, located)
    problems += capped((located.problem(path, message) for path, message in found), filename)
    raise InputError(problems or [Problem(filename, 0, 0, "$", "invalid input document")])


def _locate(data: Any, filename: str, text: str | None) -> Parsed:
    located = locate(text, filename) if text is not None else Parsed(data, filename)
    located.data = data
    return located


def _parse_fast(data: Any, scores: ScoreRange) -> tuple[Check, Request] | None:
    """The fast path (:mod:`prunewarden.fastpath`): the typed request, or None when it is not
    sure the document is valid."""
    check = data.get("check") if type(data) is dict else None
    if type(check) is str and check == "collapse":
        screened = collapse_scores(data, scores.min, scores.max)
        return None if screened is None else ("collapse", _collapse(data, screened))
    if accepts(data, scores):
        valid: Check = data["check"]
        return valid, _BUILDERS[valid](data)
    return None


def _unreadable(data: Any) -> list[_Found]:
    """A value that could not even be reported on: nested deeper than
    :data:`~prunewarden.limits.MAX_INPUT_DEPTH` (reporting recurses) or an integer longer than
    :data:`~prunewarden.limits.MAX_INTEGER_DIGITS` (Python refuses to print it)."""
    stack: list[tuple[Any, Path]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, Mapping | list | tuple):
            if len(path) >= MAX_INPUT_DEPTH:
                return [(path, f"document refused: nested deeper than {MAX_INPUT_DEPTH} levels")]
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            stack.extend((item, (*path, key)) for key, item in items)
        elif isinstance(value, int) and not -INTEGER_CEILING < value < INTEGER_CEILING:
            return [(path, f"an integer of more than {MAX_INTEGER_DIGITS} digits")]
    return []


# The size limits of input.v1 (prunewarden.limits), by the path of the list or object they bound.
# They are checked before the schema runs: jsonschema would validate every item of an oversized
# list before saying that it is too long, which takes seconds at these sizes.
_SIZE_LIMITS: dict[str, tuple[tuple[tuple[str, ...], int], ...]] = {
    "collapse": ((("history",), MAX_SNAPSHOTS), (("baseline",), MAX_ENTRIES)),
    "eviction": (
        (("eviction_candidates",), MAX_IDS),
        (("segment", "score_dependencies"), MAX_IDS),
    ),
    "staleness": (
        (("spans",), MAX_SPANS),
        (("turns",), MAX_TURNS),
        (("tombstones",), MAX_IDS),
    ),
}
_ITEM_SIZE_LIMITS: dict[str, tuple[str, tuple[tuple[str, int], ...]]] = {
    "collapse": ("history", (("scores", MAX_ENTRIES), ("pinned", MAX_IDS))),
    "staleness": ("spans", (("derived_from", MAX_IDS),)),
}


def _oversized(data: Any) -> list[_Found]:
    check = data.get("check") if isinstance(data, Mapping) else None
    if not isinstance(check, str) or check not in _SIZE_LIMITS:
        return []
    found = [
        found
        for path, limit in _SIZE_LIMITS[check]
        if (found := _too_many(_at(data, path), path, limit)) is not None
    ]
    if check in _ITEM_SIZE_LIMITS and not found:
        where, fields = _ITEM_SIZE_LIMITS[check]
        items = data.get(where)
        for i, item in enumerate(items if isinstance(items, list) else ()):
            for name, limit in fields:
                value = item.get(name) if isinstance(item, Mapping) else None
                if (too_many := _too_many(value, (where, i, name), limit)) is not None:
                    found.append(too_many)
    return found


def _at(data: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = data
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _too_many(value: Any, path: Path, limit: int) -> _Found | None:
    if isinstance(value, list) and len(value) > limit:
        return path, f"{len(value)} items, more than the limit of {limit}"
    if isinstance(value, Mapping) and len(value) > limit:
        return path, f"{len(value)} entries, more than the limit of {limit}"
    return None


def _semantic_problems(data: dict[str, Any], scores: ScoreRange) -> Iterator[_Found]:
    yield from _non_finite(data, ())
    yield from _RELATIONS[data["check"]](data, _score_checker(scores))


_ScoreCheck = Callable[[Path, Any], Iterator[_Found]]


def _collapse_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[_Found]:
    cycles = [snapshot["cycle"] for snapshot in data["history"]]
    yield from _increasing(cycles, "history", "cycle")
    for i, snapshot in enumerate(data["history"]):
        for entry, value in snapshot["scores"].items():
            yield from check_score(("history", i, "scores", entry), value)
    for entry, value in (data.get("baseline") or {}).items():
        yield from check_score(("baseline", entry), value)


def _eviction_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[_Found]:
    yield from check_score(("score",), data["score"])
    if data.get("perturbed_score") is not None:
        yield from check_score(("perturbed_score",), data["perturbed_score"])


def _staleness_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[_Found]:
    first_at: dict[str, int] = {}
    for i, span in enumerate(data["spans"]):
        span_id = span["span_id"]
        if span_id in first_at:
            message = f"duplicate span id {span_id!r} (first at spans[{first_at[span_id]}])"
            yield ("spans", i, "span_id"), message
        first_at.setdefault(span_id, i)
        if span["score"] is not None:
            yield from check_score(("spans", i, "score"), span["score"])
    turns = data.get("turns", [])
    yield from _increasing([turn["turn"] for turn in turns], "turns", "turn")
    for i, turn in enumerate(turns):
        yield from check_score(("turns", i, "mean_relevance"), turn["mean_relevance"])


_RELATIONS: dict[str, Callable[[dict[str, Any], _ScoreCheck], Iterator[_Found]]] = {
    "collapse": _collapse_relations,
    "eviction": _eviction_relations,
    "staleness": _staleness_relations,
}


def _increasing(numbers: list[int], where: str, field: str) -> Iterator[_Found]:
    for i in range(1, len(numbers)):
        if numbers[i] <= numbers[i - 1]:
            message = (
                f"{numbers[i]} does not follow {field} {numbers[i - 1]}: {field}s must increase"
            )
            yield (where, i, field), message


def _score_checker(scores: ScoreRange) -> _ScoreCheck:
    low, high = scores.min, scores.max

    def check(path: Path, value: Any) -> Iterator[_Found]:
        if isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value)):
            return  # the schema or the finiteness check reports it
        if isinstance(value, int | float):
            # Compared as they are: float() would overflow on a long integer.
            if not low <= value <= high:
                yield (
                    path,
                    f"{describe_value(value)} is outside the policy's score range [{low}, {high}]",
                )
        elif isinstance(value, numbers.Number):
            yield path, f"{describe_value(value)} is not a JSON number (int or float)"

    return check


def _non_finite(value: Any, path: Path) -> Iterator[_Found]:
    if isinstance(value, float):
        if not math.isfinite(value):
            yield path, f"{describe_value(value)} is not a finite number"
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _non_finite(item, (*path, key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _non_finite(item, (*path, i))


def _int_or_none(value: Any) -> int | None:
    # JSON Schema's "integer" admits 3.0; the guards index and slice with it.
    return None if value is None else int(value)


def _floats(scores: Mapping[str, Any]) -> dict[str, float]:
    if list(map(type, scores.values())).count(float) == len(scores):
        return dict(scores)  # a C-level copy: the common case, tens of thousands of scores
    return {entry: float(value) for entry, value in scores.items()}


def _collapse(
    data: dict[str, Any],
    screened: tuple[list[dict[str, float]], dict[str, float] | None] | None = None,
) -> CollapseRequest:
    if screened is None:
        baseline = data.get("baseline")
        screened = (
            [_floats(s["scores"]) for s in data["history"]],
            _floats(baseline) if baseline is not None else None,
        )
    scores, baseline_scores = screened
    history = tuple(
        Snapshot(int(s["cycle"]), floats, tuple(s.get("pinned", ())))
        for s, floats in zip(data["history"], scores, strict=True)
    )
    return CollapseRequest(history, baseline_scores)


def _eviction(data: dict[str, Any]) -> EvictionRequest:
    return eviction_request(data, frozenset(data.get("eviction_candidates", ())))


def eviction_request(data: Mapping[str, Any], candidates: frozenset[str]) -> EvictionRequest:
    """The typed request of a valid eviction document (or item of a pass) and the ids slated
    for eviction with it."""
    seg = data["segment"]
    segment = Segment(
        id=seg["id"],
        kind=seg["kind"],
        text=seg.get("text", ""),
        non_recoverable=seg.get("non_recoverable", False),
        score_dependencies=tuple(seg.get("score_dependencies", ())),
        tombstone_written=seg.get("tombstone_written", False),
        tokens=_int_or_none(seg.get("tokens")),
        metadata=seg.get("metadata", {}),
    )
    perturbed = data.get("perturbed_score")
    return EvictionRequest(
        segment,
        float(data["score"]),
        float(perturbed) if perturbed is not None else None,
        candidates,
    )


def _staleness(data: dict[str, Any]) -> StalenessRequest:
    spans = tuple(
        Span(
            span_id=s["span_id"],
            text=s["text"],
            score=float(s["score"]) if s["score"] is not None else None,
            text_sha256=s["text_sha256"],
            rewrite_count=int(s.get("rewrite_count", 0)),
            derived_from=tuple(s.get("derived_from", ())),
        )
        for s in data["spans"]
    )
    turn = data.get("turn")
    turns = tuple(
        Turn(int(t["turn"]), float(t["mean_relevance"]), int(t["tokens"]))
        for t in data.get("turns", ())
    )
    return StalenessRequest(
        spans=spans,
        keep_top_k=int(data["keep_top_k"]),
        turn=TurnStats(int(turn["spans_modified"]), int(turn["scores_invalidated"]))
        if turn
        else None,
        turns=turns,
        tombstones=frozenset(data.get("tombstones", ())),
        recompute_budget=_int_or_none(data.get("recompute_budget")),
    )


_BUILDERS: dict[Check, Callable[[dict[str, Any]], Request]] = {
    "collapse": _collapse,
    "eviction": _eviction,
    "staleness": _staleness,
}
