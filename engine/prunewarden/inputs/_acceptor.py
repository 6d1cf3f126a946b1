"""The fast path of input validation: one pass that accepts exactly the valid documents.

jsonschema walks a document through keyword functions, reference resolution and generators of
errors: the right tool to report every problem with its location, and a hundred times slower than
the guards it feeds. :func:`accepts` answers only "is this document valid?" -- under ``input.v1``
*and* the checks of :mod:`prunewarden.inputs` that depend on the policy (finite numbers within the
score range, unique span ids, increasing cycles and turns) -- with plain type tests and C-level
passes over scores and ids.

It says yes exactly when the exact path would. For a value JSON cannot produce (a tuple, a
``Decimal``, a ``str`` subclass, an ``OrderedDict``) it may say no where the exact path says yes;
:func:`prunewarden.inputs.parse_request` then asks the exact path, which accepts or reports, so a
"no" never loses a valid document. ``tests/test_fastpath.py`` proves both paths agree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from prunewarden.inputs._model import ScoreRange
from prunewarden.limits import (
    INTEGER_CEILING,
    MAX_ENTRIES,
    MAX_ID_CHARS,
    MAX_IDS,
    MAX_INPUT_DEPTH,
    MAX_KIND_CHARS,
    MAX_LABELS,
    MAX_METADATA_ENTRIES,
    MAX_SEGMENTS,
    MAX_SNAPSHOTS,
    MAX_SPANS,
    MAX_TURNS,
)

# input.v1: $defs.span.properties.text_sha256.pattern, applied as jsonschema does (re.search).
TEXT_SHA256 = re.compile(r"^([0-9a-f]{64})?$")

_STR = frozenset({str})
_NUMBER = frozenset({int, float})  # exact types: bool, a subclass of int, is not a JSON number

_COLLAPSE_KEYS = frozenset({"check", "history", "baseline"})
_SNAPSHOT_KEYS = frozenset({"cycle", "scores", "pinned"})
_EVICTION_KEYS = frozenset({"check", "segment", "score", "perturbed_score", "eviction_candidates"})
_SEGMENT_KEYS = frozenset(
    {
        "id",
        "kind",
        "text",
        "non_recoverable",
        "score_dependencies",
        "tombstone_written",
        "tokens",
        "metadata",
    }
)
_STALENESS_KEYS = frozenset(
    {"check", "spans", "keep_top_k", "turn", "turns", "tombstones", "recompute_budget"}
)
_SPAN_KEYS = frozenset({"span_id", "text", "score", "text_sha256", "rewrite_count", "derived_from"})
_SPAN_REQUIRED = frozenset({"span_id", "text", "score", "text_sha256"})
_TURN_STATS_KEYS = frozenset({"spans_modified", "scores_invalidated"})
_PLAN_KEYS = frozenset(
    {
        "session_id",
        "labels",
        "segments",
        "free_tokens",
        "keep_top_k",
        "history",
        "baseline",
        "turn",
        "turns",
        "tombstones",
        "recompute_budget",
    }
)
_WINDOW_ONLY_KEYS = frozenset(
    {"score", "perturbed_score", "text_sha256", "rewrite_count", "derived_from", "group"}
)
_TURN_KEYS = frozenset({"turn", "mean_relevance", "tokens"})


def accepts(data: Any, scores: ScoreRange) -> bool:
    """True only if ``data`` is a valid input document under the policy's score range."""
    if type(data) is not dict:
        return False
    check = data.get("check")
    screen = _SCREENS.get(check) if type(check) is str else None
    return screen is not None and screen(data, scores.min, scores.max)


def accepts_ids(value: Any) -> bool:
    """An ``input.v1`` ``ids`` list: unique ids, at most :data:`MAX_IDS` of them."""
    if type(value) is not list:
        return False
    if not value:
        return True
    return (
        len(value) <= MAX_IDS
        and set(map(type, value)) <= _STR
        and len(set(value)) == len(value)
        and min(map(len, value)) >= 1
        and max(map(len, value)) <= MAX_ID_CHARS
    )


def accepts_eviction(item: Any, low: float, high: float) -> bool:
    """An eviction document, whatever its ``check`` (a pass's items carry none)."""
    if type(item) is not dict or not item.keys() <= _EVICTION_KEYS:
        return False
    if "segment" not in item or not _segment(item["segment"]):
        return False
    if "score" not in item or not _score(item["score"], low, high):
        return False
    perturbed = item.get("perturbed_score")
    if perturbed is not None and not _score(perturbed, low, high):
        return False
    return "eviction_candidates" not in item or accepts_ids(item["eviction_candidates"])


def _id(value: Any) -> bool:
    return type(value) is str and 1 <= len(value) <= MAX_ID_CHARS


def _count(value: Any) -> bool:
    """A JSON Schema integer with ``minimum: 0``: an int, or a float with an integral value."""
    kind = type(value)
    if kind is int:
        return bool(0 <= value < INTEGER_CEILING)
    return kind is float and value.is_integer() and value >= 0


def _score(value: Any, low: float, high: float) -> bool:
    kind = type(value)
    # A NaN fails both comparisons; an infinity fails one, since the range is finite.
    return (kind is float or kind is int) and low <= value <= high


def _scores(  # noqa: PLR0911 - a screen: one early "no" per rule
    value: Any, low: float, high: float, least: int, known: Any = None
) -> dict[str, float] | None:
    """A ``scores`` object, returned with its numbers as floats (itself, if they already are),
    or None. ``known`` is the keys of one already accepted: a history repeats the same entries,
    and comparing two key sets is cheaper than checking every key again."""
    if type(value) is not dict or not least <= len(value) <= MAX_ENTRIES:
        return None
    if not value:
        return value
    if known is None or value.keys() != known:
        if "" in value:
            return None
        try:
            "".join(value)  # every key is a string, as jsonschema's "string" type means it
        except TypeError:
            return None
        if max(map(len, value)) > MAX_ID_CHARS:
            return None
    numbers = value.values()
    floats = list(map(type, numbers)).count(float) == len(value)
    if not floats and not set(map(type, numbers)) <= _NUMBER:
        return None
    # min() and max() may step over a NaN; the sum of numbers within a finite range is NaN only
    # if one of them is.
    if not (low <= min(numbers) and max(numbers) <= high and not math.isnan(sum(numbers))):
        return None
    return value if floats else {entry: float(number) for entry, number in value.items()}


def collapse_scores(  # noqa: PLR0911 - a screen: one early "no" per rule
    data: dict[str, Any], low: float, high: float
) -> tuple[list[dict[str, float]], dict[str, float] | None] | None:
    """Screen a collapse document. If it is valid, return the scores of each snapshot and of the
    baseline (None when absent) as floats, so that they need not be converted again; the
    dictionaries may be the document's own."""
    if not data.keys() <= _COLLAPSE_KEYS:
        return None
    history = data.get("history")
    if type(history) is not list or len(history) > MAX_SNAPSHOTS:
        return None
    converted: list[dict[str, float]] = []
    previous: Any = None
    known = None
    for snapshot in history:
        if type(snapshot) is not dict or not snapshot.keys() <= _SNAPSHOT_KEYS:
            return None
        cycle = snapshot.get("cycle")
        if not _count(cycle) or (previous is not None and cycle <= previous):
            return None
        previous = cycle
        scores = _scores(snapshot.get("scores"), low, high, 1, known)
        if scores is None:
            return None
        converted.append(scores)
        known = scores.keys()
        if "pinned" in snapshot and not accepts_ids(snapshot["pinned"]):
            return None
    if "baseline" not in data:
        return converted, None
    baseline = _scores(data["baseline"], low, high, 0)
    return None if baseline is None else (converted, baseline)


def _collapse(data: dict[str, Any], low: float, high: float) -> bool:
    return collapse_scores(data, low, high) is not None


def _segment(segment: Any) -> bool:
    if type(segment) is not dict or not segment.keys() <= _SEGMENT_KEYS:
        return False
    if not _id(segment.get("id")):
        return False
    kind = segment.get("kind")
    if type(kind) is not str or not 1 <= len(kind) <= MAX_KIND_CHARS:
        return False
    return (
        type(segment.get("text", "")) is str
        and type(segment.get("non_recoverable", False)) is bool
        and type(segment.get("tombstone_written", False)) is bool
        and ("score_dependencies" not in segment or accepts_ids(segment["score_dependencies"]))
        and ("tokens" not in segment or _count(segment["tokens"]))
        and ("metadata" not in segment or _metadata(segment["metadata"]))
    )


def _metadata(value: Any) -> bool:
    """``segment.metadata``: an object of at most :data:`MAX_METADATA_ENTRIES` free-form JSON
    values, nested within :data:`MAX_INPUT_DEPTH` (it sits two deep), every number finite and
    every integer printable."""
    if type(value) is not dict or len(value) > MAX_METADATA_ENTRIES:
        return False
    stack: list[tuple[Any, int]] = [(value, 2)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if depth >= MAX_INPUT_DEPTH or (kind is dict and not set(map(type, item)) <= _STR):
                return False
            stack.extend((child, depth + 1) for child in (item.values() if kind is dict else item))
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif kind is int:
            if not -INTEGER_CEILING < item < INTEGER_CEILING:
                return False
        elif not (kind is str or kind is bool or item is None):
            return False
    return True


def _eviction(data: dict[str, Any], low: float, high: float) -> bool:
    return accepts_eviction(data, low, high)


def accepts_plan(data: Any, scores: ScoreRange) -> bool:  # noqa: C901, PLR0911
    """True only if ``data`` is a valid pruning-pass document (``$defs/plan``)."""
    low, high = scores.min, scores.max
    if type(data) is not dict or not data.keys() <= _PLAN_KEYS:
        return False
    if ("free_tokens" in data) == ("keep_top_k" in data):
        return False
    if not _count(data["free_tokens"] if "free_tokens" in data else data["keep_top_k"]):
        return False
    if "session_id" in data:
        session_id = data["session_id"]
        if type(session_id) is not str or len(session_id) > MAX_ID_CHARS:
            return False
    if "labels" in data and not _labels(data["labels"]):
        return False
    segments = data.get("segments")
    if type(segments) is not list or len(segments) > MAX_SEGMENTS:
        return False
    if not all(_window_segment(segment, low, high) for segment in segments):
        return False
    if len({segment["id"] for segment in segments}) != len(segments):
        return False
    if "history" in data:
        gates = {key: data[key] for key in ("history", "baseline") if key in data}
        if collapse_scores(gates, low, high) is None:
            return False
    elif "baseline" in data and _scores(data["baseline"], low, high, 0) is None:
        return False
    rest = {
        key: data[key] for key in ("turn", "turns", "tombstones", "recompute_budget") if key in data
    }
    return _staleness({**rest, "spans": [], "keep_top_k": 0}, low, high)


def _labels(value: Any) -> bool:
    return (
        type(value) is dict
        and len(value) <= MAX_LABELS
        and set(map(type, value)) <= _STR
        and set(map(type, value.values())) <= _STR
    )


def _window_segment(segment: Any, low: float, high: float) -> bool:  # noqa: PLR0911
    if type(segment) is not dict or "score" not in segment:
        return False
    if not _score(segment["score"], low, high):
        return False
    perturbed = segment.get("perturbed_score")
    if perturbed is not None and not _score(perturbed, low, high):
        return False
    digest = segment.get("text_sha256", "")
    if type(digest) is not str or not TEXT_SHA256.search(digest):
        return False
    if "rewrite_count" in segment and not _count(segment["rewrite_count"]):
        return False
    if "derived_from" in segment and not accepts_ids(segment["derived_from"]):
        return False
    if "group" in segment and not accepts_ids([segment["group"]]):
        return False
    return _segment({k: v for k, v in segment.items() if k not in _WINDOW_ONLY_KEYS})


def _staleness(data: dict[str, Any], low: float, high: float) -> bool:  # noqa: PLR0911
    if not data.keys() <= _STALENESS_KEYS or not _count(data.get("keep_top_k")):
        return False
    spans = data.get("spans")
    if type(spans) is not list or len(spans) > MAX_SPANS or not _spans(spans, low, high):
        return False
    if "turn" in data:
        turn = data["turn"]
        if type(turn) is not dict or turn.keys() != _TURN_STATS_KEYS:
            return False
        if not (_count(turn["spans_modified"]) and _count(turn["scores_invalidated"])):
            return False
    if "turns" in data and not _turns(data["turns"], low, high):
        return False
    if "tombstones" in data and not accepts_ids(data["tombstones"]):
        return False
    return "recompute_budget" not in data or _count(data["recompute_budget"])


def _spans(spans: list[Any], low: float, high: float) -> bool:  # noqa: C901, PLR0911
    # The checks of _id, _score and _count written out: this loop runs once per span.
    seen: set[str] = set()
    search = TEXT_SHA256.search
    for span in spans:
        if type(span) is not dict:
            return False
        keys = span.keys()
        if not _SPAN_REQUIRED <= keys <= _SPAN_KEYS:
            return False
        span_id = span["span_id"]
        if type(span_id) is not str or not 0 < len(span_id) <= MAX_ID_CHARS or span_id in seen:
            return False
        seen.add(span_id)
        score = span["score"]
        if score is not None:
            kind = type(score)
            if not ((kind is float or kind is int) and low <= score <= high):
                return False
        digest = span["text_sha256"]
        if type(span["text"]) is not str or type(digest) is not str or not search(digest):
            return False
        if len(keys) > len(_SPAN_REQUIRED):
            if "rewrite_count" in span and not _count(span["rewrite_count"]):
                return False
            parents = span.get("derived_from", _NO_IDS)
            skip = parents is _NO_IDS or (type(parents) is list and not parents)
            if not skip and not accepts_ids(parents):
                return False
    return True


_NO_IDS: list[str] = []


def _turns(turns: Any, low: float, high: float) -> bool:
    if type(turns) is not list or len(turns) > MAX_TURNS:
        return False
    previous: Any = None
    for turn in turns:
        if type(turn) is not dict or turn.keys() != _TURN_KEYS:
            return False
        number = turn["turn"]
        if not _count(number) or (previous is not None and number <= previous):
            return False
        previous = number
        if not (_score(turn["mean_relevance"], low, high) and _count(turn["tokens"])):
            return False
    return True


_SCREENS: dict[str, Callable[[dict[str, Any], float, float], bool]] = {
    "collapse": _collapse,
    "eviction": _eviction,
    "staleness": _staleness,
}
