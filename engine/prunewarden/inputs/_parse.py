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
from typing import Any

from prunewarden._json import JsonPath
from prunewarden._schemas import capped, problems_of, validator
from prunewarden._source import Parsed, locate
from prunewarden.errors import InputError, Problem, describe_value
from prunewarden.inputs._acceptor import accepts, accepts_plan, collapse_scores
from prunewarden.inputs._model import (
    Check,
    CollapseRequest,
    EvictionRequest,
    PlanRequest,
    Request,
    ScoreRange,
    Segment,
    Snapshot,
    Span,
    StalenessRequest,
    Turn,
    TurnStats,
    WindowSegment,
)
from prunewarden.limits import (
    INTEGER_CEILING,
    MAX_ENTRIES,
    MAX_IDS,
    MAX_INPUT_DEPTH,
    MAX_INTEGER_DIGITS,
    MAX_LABELS,
    MAX_METADATA_ENTRIES,
    MAX_PROBLEMS,
    MAX_SEGMENTS,
    MAX_SNAPSHOTS,
    MAX_SPANS,
    MAX_TURNS,
)

# A problem before it is located: the path, the message, and whether it belongs at the key.
_Found = tuple[JsonPath, str]


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
    found = _invalid(data, None, lambda: _semantic_problems(data, scores), filename, text)
    if not found:
        check: Check = data["check"]
        return check, _BUILDERS[check](data)
    raise found


def parse_plan(
    data: Any, scores: ScoreRange, *, filename: str = "<input>", text: str | None = None
) -> PlanRequest:
    """Validate a pruning-pass document (``$defs/plan`` of input.v1) and type it, or raise
    :class:`InputError`."""

    if accepts_plan(data, scores):
        return _plan(data)
    return parse_plan_exact(data, scores, filename=filename, text=text)


def parse_plan_exact(
    data: Any, scores: ScoreRange, *, filename: str = "<input>", text: str | None = None
) -> PlanRequest:
    """The exact path of :func:`parse_plan`: JSON Schema and the semantic checks."""

    def relations() -> Iterator[_Found]:
        yield from _non_finite(data, ())
        yield from _plan_relations(data, _score_checker(scores))

    found = _invalid(data, "plan", relations, filename, text)
    if found:
        raise found
    return _plan(data)


def _invalid(
    data: Any,
    definition: str | None,
    relations: Callable[[], Iterator[_Found]],
    filename: str,
    text: str | None,
) -> InputError | None:
    """None when ``data`` is valid; else the error listing its problems (at most
    :data:`~prunewarden.limits.MAX_PROBLEMS`), located in ``text``.

    What could not even be reported on, and lists over their limit, are refused first. The
    schema runs once (a large document takes seconds); positions are only computed for a
    failure.
    """
    refused = _unreadable(data) or _oversized(data, definition)
    if refused:
        located = _locate(data, filename, text)
        return InputError([located.problem(path, message) for path, message in refused])
    errors = list(
        itertools.islice(validator("input", definition).iter_errors(data), MAX_PROBLEMS + 1)
    )
    found = [] if errors else list(itertools.islice(relations(), MAX_PROBLEMS + 1))
    if not errors and not found:
        return None
    located = _locate(data, filename, text)
    problems = problems_of(errors, located)
    problems += capped((located.problem(path, message) for path, message in found), filename)
    return InputError(problems or [Problem(filename, 0, 0, "$", "invalid input document")])


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
    :data:`~prunewarden.limits.MAX_INPUT_DEPTH` (reporting recurses), an integer longer than
    :data:`~prunewarden.limits.MAX_INTEGER_DIGITS` (Python refuses to print it), or a number
    JSON cannot hold (a ``Decimal``, a ``complex``)."""
    stack: list[tuple[Any, JsonPath]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, Mapping | list | tuple):
            if len(path) >= MAX_INPUT_DEPTH:
                return [(path, f"document refused: nested deeper than {MAX_INPUT_DEPTH} levels")]
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            stack.extend((item, (*path, key)) for key, item in items)
        elif isinstance(value, int) and not -INTEGER_CEILING < value < INTEGER_CEILING:
            return [(path, f"an integer of more than {MAX_INTEGER_DIGITS} digits")]
        elif isinstance(value, numbers.Number) and not isinstance(value, int | float):
            # jsonschema compares any number with its bounds: a Decimal NaN raises there.
            return [(path, f"{describe_value(value)} is not a JSON number (int or float)")]
    return []


# The size limits of input.v1 (prunewarden.limits), by document kind and the path of the list or
# object they bound, then for the items of a list. They are checked before the schema runs:
# jsonschema would validate every item of an oversized list before saying that it is too long,
# which takes seconds at these sizes.
_Limits = tuple[tuple[tuple[str, ...], int], ...]
_SIZE_LIMITS: dict[str, _Limits] = {
    "collapse": ((("history",), MAX_SNAPSHOTS), (("baseline",), MAX_ENTRIES)),
    "eviction": (
        (("eviction_candidates",), MAX_IDS),
        (("segment", "score_dependencies"), MAX_IDS),
        (("segment", "metadata"), MAX_METADATA_ENTRIES),
    ),
    "staleness": (
        (("spans",), MAX_SPANS),
        (("turns",), MAX_TURNS),
        (("tombstones",), MAX_IDS),
    ),
    "plan": (
        (("segments",), MAX_SEGMENTS),
        (("history",), MAX_SNAPSHOTS),
        (("baseline",), MAX_ENTRIES),
        (("turns",), MAX_TURNS),
        (("tombstones",), MAX_IDS),
        (("labels",), MAX_LABELS),
    ),
}
_SNAPSHOT_LIMITS: _Limits = ((("scores",), MAX_ENTRIES), (("pinned",), MAX_IDS))
_ITEM_SIZE_LIMITS: dict[str, tuple[tuple[str, _Limits], ...]] = {
    "collapse": (("history", _SNAPSHOT_LIMITS),),
    "staleness": (("spans", ((("derived_from",), MAX_IDS),)),),
    "plan": (
        ("history", _SNAPSHOT_LIMITS),
        (
            "segments",
            (
                (("score_dependencies",), MAX_IDS),
                (("derived_from",), MAX_IDS),
                (("metadata",), MAX_METADATA_ENTRIES),
            ),
        ),
    ),
}


def _oversized(data: Any, definition: str | None) -> list[_Found]:
    if not isinstance(data, Mapping):
        return []
    kind = definition if definition is not None else data.get("check")
    if not isinstance(kind, str) or kind not in _SIZE_LIMITS:
        return []
    found = _over(data, (), _SIZE_LIMITS[kind])
    for where, limits in _ITEM_SIZE_LIMITS.get(kind, ()) if not found else ():
        items = data.get(where)
        for i, item in enumerate(items if isinstance(items, list) else ()):
            if isinstance(item, Mapping):
                found += _over(item, (where, i), limits)
    return found


def _over(data: Mapping[str, Any], at: JsonPath, limits: _Limits) -> list[_Found]:
    found = []
    for path, limit in limits:
        value: Any = data
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, list | Mapping) and len(value) > limit:
            noun = "items" if isinstance(value, list) else "entries"
            found.append(((*at, *path), f"{len(value)} {noun}, more than the limit of {limit}"))
    return found


def _semantic_problems(data: dict[str, Any], scores: ScoreRange) -> Iterator[_Found]:
    yield from _non_finite(data, ())
    yield from _RELATIONS[data["check"]](data, _score_checker(scores))


_ScoreCheck = Callable[[JsonPath, Any], Iterator[_Found]]


def _collapse_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[_Found]:
    cycles = [snapshot["cycle"] for snapshot in data["history"]]
    yield from _increasing(cycles, "history", "cycle")
    for i, snapshot in enumerate(data["history"]):
        for entry, value in snapshot["scores"].items():
            yield from check_score(("history", i, "scores", entry), value)
    for entry, value in (data.get("baseline") or {}).items():
        yield from check_score(("baseline", entry), value)


def _eviction_relations(
    data: dict[str, Any], check_score: _ScoreCheck, at: JsonPath = ()
) -> Iterator[_Found]:
    yield from check_score((*at, "score"), data["score"])
    if data.get("perturbed_score") is not None:
        yield from check_score((*at, "perturbed_score"), data["perturbed_score"])


def _staleness_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[_Found]:
    spans = data["spans"]
    yield from _unique_ids([span["span_id"] for span in spans], "spans", "span_id", "span")
    for i, span in enumerate(spans):
        if span["score"] is not None:
            yield from check_score(("spans", i, "score"), span["score"])
    yield from _turn_relations(data, check_score)


def _turn_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[_Found]:
    turns = data.get("turns", [])
    yield from _increasing([turn["turn"] for turn in turns], "turns", "turn")
    for i, turn in enumerate(turns):
        yield from check_score(("turns", i, "mean_relevance"), turn["mean_relevance"])


def _plan_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[_Found]:
    if "history" in data:
        yield from _collapse_relations(data, check_score)
    segments = data["segments"]
    yield from _unique_ids([segment["id"] for segment in segments], "segments", "id", "segment")
    for i, segment in enumerate(segments):
        yield from _eviction_relations(segment, check_score, ("segments", i))
    yield from _turn_relations(data, check_score)


def _unique_ids(ids: list[str], where: str, field: str, noun: str) -> Iterator[_Found]:
    first_at: dict[str, int] = {}
    for i, item_id in enumerate(ids):
        if item_id in first_at:
            message = f"duplicate {noun} id {item_id!r} (first at {where}[{first_at[item_id]}])"
            yield (where, i, field), message
        first_at.setdefault(item_id, i)


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

    def check(path: JsonPath, value: Any) -> Iterator[_Found]:
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


def _non_finite(value: Any, path: JsonPath) -> Iterator[_Found]:
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


def _snapshots(
    data: dict[str, Any], scores: list[dict[str, float]] | None = None
) -> tuple[Snapshot, ...]:
    """The history's snapshots; ``scores`` are their scores as floats when already known."""
    history = data["history"]
    floats = scores if scores is not None else [_floats(s["scores"]) for s in history]
    return tuple(
        Snapshot(int(s["cycle"]), converted, tuple(s.get("pinned", ())))
        for s, converted in zip(history, floats, strict=True)
    )


def _collapse(
    data: dict[str, Any],
    screened: tuple[list[dict[str, float]], dict[str, float] | None] | None = None,
) -> CollapseRequest:
    """``screened``: the scores as the fast path converted them (snapshots', then baseline's)."""
    if screened is not None:
        return CollapseRequest(_snapshots(data, screened[0]), screened[1])
    baseline = data.get("baseline")
    return CollapseRequest(_snapshots(data), _floats(baseline) if baseline is not None else None)


def _segment(seg: dict[str, Any]) -> Segment:
    return Segment(
        id=seg["id"],
        kind=seg["kind"],
        text=seg.get("text", ""),
        non_recoverable=seg.get("non_recoverable", False),
        score_dependencies=tuple(seg.get("score_dependencies", ())),
        tombstone_written=seg.get("tombstone_written", False),
        tokens=_int_or_none(seg.get("tokens")),
        metadata=seg.get("metadata", {}),
    )


def _eviction(data: dict[str, Any]) -> EvictionRequest:
    return eviction_request(data, frozenset(data.get("eviction_candidates", ())))


def eviction_request(data: Mapping[str, Any], candidates: frozenset[str]) -> EvictionRequest:
    """The typed request of a valid eviction document (or item of a pass) and the ids slated
    for eviction with it."""
    perturbed = data.get("perturbed_score")
    return EvictionRequest(
        _segment(data["segment"]),
        float(data["score"]),
        float(perturbed) if perturbed is not None else None,
        candidates,
    )


def _span(s: dict[str, Any], span_id: str) -> Span:
    return Span(
        span_id=span_id,
        text=s.get("text", ""),
        score=float(s["score"]) if s["score"] is not None else None,
        text_sha256=s.get("text_sha256", ""),
        rewrite_count=int(s.get("rewrite_count", 0)),
        derived_from=tuple(s.get("derived_from", ())),
    )


def _turn_stats(data: dict[str, Any]) -> TurnStats | None:
    turn = data.get("turn")
    if turn is None:
        return None
    return TurnStats(int(turn["spans_modified"]), int(turn["scores_invalidated"]))


def _turns(data: dict[str, Any]) -> tuple[Turn, ...]:
    return tuple(
        Turn(int(t["turn"]), float(t["mean_relevance"]), int(t["tokens"]))
        for t in data.get("turns", ())
    )


def _staleness(data: dict[str, Any]) -> StalenessRequest:
    return StalenessRequest(
        spans=tuple(_span(s, s["span_id"]) for s in data["spans"]),
        keep_top_k=int(data["keep_top_k"]),
        turn=_turn_stats(data),
        turns=_turns(data),
        tombstones=frozenset(data.get("tombstones", ())),
        recompute_budget=_int_or_none(data.get("recompute_budget")),
    )


def _plan(data: dict[str, Any]) -> PlanRequest:
    segments = tuple(
        WindowSegment(
            _segment(s),
            float(s["score"]),
            float(s["perturbed_score"]) if s.get("perturbed_score") is not None else None,
            _span(s, s["id"]),
        )
        for s in data["segments"]
    )
    baseline = data.get("baseline")
    return PlanRequest(
        segments=segments,
        free_tokens=_int_or_none(data.get("free_tokens")),
        keep_top_k=_int_or_none(data.get("keep_top_k")),
        history=_snapshots(data) if "history" in data else None,
        baseline=_floats(baseline) if baseline is not None else None,
        turn=_turn_stats(data),
        turns=_turns(data),
        tombstones=frozenset(data.get("tombstones", ())),
        recompute_budget=_int_or_none(data.get("recompute_budget")),
        session_id=data.get("session_id"),
        labels=dict(data.get("labels", {})),
    )


_BUILDERS: dict[Check, Callable[[dict[str, Any]], Request]] = {
    "collapse": _collapse,
    "eviction": _eviction,
    "staleness": _staleness,
}
