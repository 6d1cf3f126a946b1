"""The checks of an input document beyond its JSON Schema.

Some run before the schema: a document too deep, a number too long to print or not a JSON number
could not even be reported on, and jsonschema would validate every item of an oversized list
before saying that it is too long. The others run after it, on a document of the right shape, for
what the schema cannot express: the policy's score range, finite numbers, unique ids, increasing
cycles and turns.

A check gives each problem as a path and a message; the parser puts a line and column on them, and
only when there is something to report.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prunewarden._json import JsonPath
from prunewarden.errors import InputError, Problem, describe_value
from prunewarden.inputs._edits import TOMBSTONE_KIND, derivation_cycle
from prunewarden.inputs._model import ScoreRange
from prunewarden.limits import (
    INTEGER_CEILING,
    MAX_ENTRIES,
    MAX_IDS,
    MAX_INPUT_DEPTH,
    MAX_INTEGER_DIGITS,
    MAX_LABELS,
    MAX_METADATA_ENTRIES,
    MAX_SEGMENTS,
    MAX_SNAPSHOTS,
    MAX_SPANS,
    MAX_TURNS,
)

# A problem before it is located: the path and the message.
Found = tuple[JsonPath, str]


def unreadable(data: Any) -> list[Found]:
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
    "collapse": (
        (("history",), MAX_SNAPSHOTS),
        (("baseline",), MAX_ENTRIES),
        (("labels",), MAX_LABELS),
    ),
    "eviction": (
        (("eviction_candidates",), MAX_IDS),
        (("segment", "score_dependencies"), MAX_IDS),
        (("segment", "metadata"), MAX_METADATA_ENTRIES),
        (("labels",), MAX_LABELS),
    ),
    "staleness": (
        (("spans",), MAX_SPANS),
        (("turns",), MAX_TURNS),
        (("tombstones",), MAX_IDS),
        (("labels",), MAX_LABELS),
    ),
    "plan": (
        (("segments",), MAX_SEGMENTS),
        (("history",), MAX_SNAPSHOTS),
        (("baseline",), MAX_ENTRIES),
        (("turns",), MAX_TURNS),
        (("tombstones",), MAX_IDS),
        (("labels",), MAX_LABELS),
    ),
    "transition": (
        (("before",), MAX_SEGMENTS),
        (("after",), MAX_SEGMENTS),
        (("tombstones",), MAX_IDS),
        (("canaries",), MAX_IDS),
        (("labels",), MAX_LABELS),
    ),
}
_SNAPSHOT_LIMITS: _Limits = ((("scores",), MAX_ENTRIES), (("pinned",), MAX_IDS))
_TRANSITION_SEGMENT_LIMITS: _Limits = (
    (("score_dependencies",), MAX_IDS),
    (("derived_from",), MAX_IDS),
    (("tombstone_for",), MAX_IDS),
    (("metadata",), MAX_METADATA_ENTRIES),
)
_ITEM_SIZE_LIMITS: dict[str, tuple[tuple[str, _Limits], ...]] = {
    "transition": (("before", _TRANSITION_SEGMENT_LIMITS), ("after", _TRANSITION_SEGMENT_LIMITS)),
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


def oversized(data: Any, definition: str | None) -> list[Found]:
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


def _over(data: Mapping[str, Any], at: JsonPath, limits: _Limits) -> list[Found]:
    found = []
    for path, limit in limits:
        value: Any = data
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, list | Mapping) and len(value) > limit:
            noun = "items" if isinstance(value, list) else "entries"
            found.append(((*at, *path), f"{len(value)} {noun}, more than the limit of {limit}"))
    return found


def request_problems(data: dict[str, Any], scores: ScoreRange) -> Iterator[Found]:
    yield from _non_finite(data, ())
    yield from _RELATIONS[data["check"]](data, _score_checker(scores))


def plan_problems(data: dict[str, Any], scores: ScoreRange) -> Iterator[Found]:
    yield from _non_finite(data, ())
    yield from _plan_relations(data, _score_checker(scores))


_ScoreCheck = Callable[[JsonPath, Any], Iterator[Found]]


def _collapse_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[Found]:
    cycles = [snapshot["cycle"] for snapshot in data["history"]]
    yield from _increasing(cycles, "history", "cycle")
    for i, snapshot in enumerate(data["history"]):
        for entry, value in snapshot["scores"].items():
            yield from check_score(("history", i, "scores", entry), value)
    for entry, value in (data.get("baseline") or {}).items():
        yield from check_score(("baseline", entry), value)


def _eviction_relations(
    data: dict[str, Any], check_score: _ScoreCheck, at: JsonPath = ()
) -> Iterator[Found]:
    yield from check_score((*at, "score"), data["score"])
    if data.get("perturbed_score") is not None:
        yield from check_score((*at, "perturbed_score"), data["perturbed_score"])


def _staleness_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[Found]:
    spans = data["spans"]
    yield from _unique_ids([span["span_id"] for span in spans], "spans", "span_id", "span")
    for i, span in enumerate(spans):
        if span["score"] is not None:
            yield from check_score(("spans", i, "score"), span["score"])
    yield from _turn_relations(data, check_score)


def _turn_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[Found]:
    turns = data.get("turns", [])
    yield from _increasing([turn["turn"] for turn in turns], "turns", "turn")
    for i, turn in enumerate(turns):
        yield from check_score(("turns", i, "mean_relevance"), turn["mean_relevance"])


def _plan_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[Found]:
    if "history" in data:
        yield from _collapse_relations(data, check_score)
    segments = data["segments"]
    yield from _unique_ids([segment["id"] for segment in segments], "segments", "id", "segment")
    for i, segment in enumerate(segments):
        yield from _eviction_relations(segment, check_score, ("segments", i))
    yield from _turn_relations(data, check_score)


def _unique_ids(ids: list[str], where: str, field: str, noun: str) -> Iterator[Found]:
    first_at: dict[str, int] = {}
    for i, item_id in enumerate(ids):
        if item_id in first_at:
            message = f"duplicate {noun} id {item_id!r} (first at {where}[{first_at[item_id]}])"
            yield (where, i, field), message
        first_at.setdefault(item_id, i)


def _transition_relations(data: dict[str, Any], check_score: _ScoreCheck) -> Iterator[Found]:
    """Unique ids in each window, scores in range, ``tombstone_for`` only on a tombstone and
    only naming ids of ``before``, no ``derived_from`` cycle in either window."""
    before_ids = {segment["id"] for segment in data["before"]}
    for where in ("before", "after"):
        segments = data[where]
        yield from _unique_ids([s["id"] for s in segments], where, "id", "segment")
        for i, segment in enumerate(segments):
            for field in ("score", "perturbed_score"):
                if segment.get(field) is not None:
                    yield from check_score((where, i, field), segment[field])
            yield from _tombstone_for(segment, (where, i), before_ids, in_after=where == "after")
        found = derivation_cycle([(s["id"], s.get("derived_from", [])) for s in segments])
        if found is not None:
            at, cycle = found
            message = f"derived_from cycle: {' -> '.join(cycle)}"
            yield (where, at, "derived_from"), message


def _tombstone_for(
    segment: dict[str, Any], at: JsonPath, before_ids: set[str], *, in_after: bool
) -> Iterator[Found]:
    named = segment.get("tombstone_for")
    if named is None:
        return
    if not in_after or segment["kind"] != TOMBSTONE_KIND:
        message = f"tombstone_for belongs on a segment of kind {TOMBSTONE_KIND!r} in after"
        yield (*at, "tombstone_for"), message
        return
    for j, removed in enumerate(named):
        if removed not in before_ids:
            message = f"{removed!r} was never in before: a tombstone records removed segments"
            yield (*at, "tombstone_for", j), message


_RELATIONS: dict[str, Callable[[dict[str, Any], _ScoreCheck], Iterator[Found]]] = {
    "collapse": _collapse_relations,
    "eviction": _eviction_relations,
    "staleness": _staleness_relations,
    "transition": _transition_relations,
}


def _increasing(numbers: list[int], where: str, field: str) -> Iterator[Found]:
    for i in range(1, len(numbers)):
        if numbers[i] <= numbers[i - 1]:
            message = (
                f"{numbers[i]} does not follow {field} {numbers[i - 1]}: {field}s must increase"
            )
            yield (where, i, field), message


def _score_checker(scores: ScoreRange) -> _ScoreCheck:
    low, high = scores.min, scores.max

    def check(path: JsonPath, value: Any) -> Iterator[Found]:
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


def _non_finite(value: Any, path: JsonPath) -> Iterator[Found]:
    if isinstance(value, float):
        if not math.isfinite(value):
            yield path, f"{describe_value(value)} is not a finite number"
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _non_finite(item, (*path, key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _non_finite(item, (*path, i))


def check_caller_fields(session_id: Any, labels: Any) -> None:
    """The session id and labels a caller passes with a document: a string (or None), and a
    mapping of strings; raise :class:`InputError` otherwise."""
    problems = []
    if session_id is not None and not isinstance(session_id, str):
        problems.append(Problem("<arguments>", 0, 0, "$.session_id", "must be a string or None"))
    if labels is not None:
        if not isinstance(labels, Mapping):
            problems.append(Problem("<arguments>", 0, 0, "$.labels", "must be a mapping"))
        else:
            problems += [
                Problem("<arguments>", 0, 0, f"$.labels.{key}", "keys and values must be strings")
                for key, value in labels.items()
                if not isinstance(key, str) or not isinstance(value, str)
            ]
    if problems:
        raise InputError(problems)
