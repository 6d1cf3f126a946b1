"""The fast yes or no of input validation: the compiled schema, then the checks of the policy.

Every decision validates its input, so the common case -- a valid document -- must cost little.
:func:`accepts` answers only "is this document valid?": under ``input.v1``, compiled by
jsonschema-rs from the bundled schema (the single source of truth), *and* under the checks of
:mod:`prunewarden.inputs._checks` that depend on the policy or that a schema cannot say (scores
within the policy's range, unique ids, increasing cycles and turns), written here as whole-list
operations. A "no" is never an answer to the caller: :func:`prunewarden.inputs.parse_request` then
asks the exact path, which accepts or reports every problem located.

So the fast path may refuse what the exact path accepts, never the reverse. Values JSON text
cannot hold are screened first (orjson refuses a ``Decimal``, a subclass of a JSON type, an
integer beyond 64 bits), as is free-form ``metadata``, which no schema bounds in depth or
finiteness. ``tests/inputs/test_validation.py`` checks both paths agree, with either backend of
:func:`prunewarden._schemas.compile_schema`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from functools import cache
from typing import Any

import orjson

from prunewarden import _schemas
from prunewarden._json import ORJSON_CANONICAL
from prunewarden._schemas import IsValid, compile_schema, schema_of
from prunewarden.inputs._edits import TOMBSTONE_KIND, derivation_cycle
from prunewarden.inputs._model import ScoreRange
from prunewarden.limits import INTEGER_CEILING, MAX_INPUT_DEPTH

# Only what JSON text parses into: orjson refuses subclasses, Decimals, dataclasses, datetimes.
_JSON_TYPES_ONLY = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
# The fields of one item of an eviction pass: an eviction document without ``check`` and the
# candidates, which the pass shares.
PASS_ITEM_FIELDS = ("perturbed_score", "score", "segment")


@cache
def _compiled(definition: str | None, backend: str) -> IsValid:
    return compile_schema(schema_of("input", definition), backend)


@cache
def _compiled_pass(backend: str) -> IsValid:
    """A list of pass items, each as ``$defs/eviction`` says less its ``check`` and candidates."""
    schema = schema_of("input")
    eviction = schema["$defs"]["eviction"]
    item = {
        **eviction,
        "required": [key for key in eviction["required"] if key in PASS_ITEM_FIELDS],
        "properties": {
            key: value for key, value in eviction["properties"].items() if key in PASS_ITEM_FIELDS
        },
    }
    return compile_schema({"$defs": schema["$defs"], "type": "array", "items": item}, backend)


def _is_valid(data: Any, definition: str | None = None) -> bool:
    return _json_only(data) and _compiled(definition, _schemas.COMPILED_BACKEND)(data)


def _json_encoded(data: Any) -> bytes | None:
    """The screen of :func:`_json_only`, written as the input digest needs it: sorted keys and
    integers within 2**53 (a larger one takes the exact path, which accepts it), so that the
    record reuses these bytes (:func:`prunewarden._json.canonical_from`) and the document is
    serialized once per decision. None for what the screen refuses."""
    try:
        return orjson.dumps(data, option=ORJSON_CANONICAL)
    except TypeError:  # orjson.JSONEncodeError
        return None


def _json_only(data: Any) -> bool:
    try:
        orjson.dumps(data, option=_JSON_TYPES_ONLY)
    except TypeError:  # orjson.JSONEncodeError
        return False
    return True


def accepts(data: Any, scores: ScoreRange) -> bool:
    """True only if ``data`` is a valid input document under the policy's score range."""
    return accepts_encoded(data, scores) is not None


def accepts_encoded(data: Any, scores: ScoreRange) -> bytes | None:
    """:func:`accepts`, answering with orjson's canonical-option bytes of an accepted ``data``
    (for its input digest), None for a "no"."""
    if type(data) is not dict:
        return None
    check = data.get("check")
    relations = _RELATIONS.get(check) if type(check) is str else None
    if relations is None:
        return None
    encoded = _json_encoded(data)
    if encoded is None or not _compiled(None, _schemas.COMPILED_BACKEND)(data):
        return None
    return encoded if relations(data, scores.min, scores.max) else None


def accepts_plan(data: Any, scores: ScoreRange) -> bool:
    """True only if ``data`` is a valid pruning-pass document (``$defs/plan``)."""
    return (
        type(data) is dict
        and _is_valid(data, "plan")
        and _plan_relations(data, scores.min, scores.max)
    )


def accepts_ids(value: Any) -> bool:
    """An ``input.v1`` ``ids`` list: unique ids of the allowed length, not too many."""
    return type(value) is list and _is_valid(value, "ids")


def encoded_pass(items: list[Any], candidates: list[Any]) -> bytes | None:
    """The pass document ``{"evictions", "eviction_candidates"}`` as the input digest needs it
    (:func:`_json_encoded`), when its items and candidates are valid under the schema; None
    otherwise. The checks that depend on the policy (score range) and on the whole pass
    (unique ids) are the caller's: a pass decided over columns makes them in its one loop. The
    one serialization is the screen of values JSON cannot hold and the digest's bytes."""
    encoded = _json_encoded({"evictions": items, "eviction_candidates": candidates})
    if encoded is None or type(candidates) is not list:
        return None
    backend = _schemas.COMPILED_BACKEND
    if not (_compiled_pass(backend)(items) and _compiled("ids", backend)(candidates)):
        return None
    return encoded


def accepts_pass_items(items: list[Any], scores: ScoreRange) -> bool:
    """Every item of an eviction pass valid, and the segment ids unique."""
    if not (_json_only(items) and _compiled_pass(_schemas.COMPILED_BACKEND)(items)):
        return False
    low, high = scores.min, scores.max
    if not all(_eviction_relations(item, low, high, 2) for item in items):
        return False
    return _unique([item["segment"]["id"] for item in items])


# --- the checks beyond the schema, on a document the schema accepted ---------------------------


def _within(numbers: list[Any], low: float, high: float) -> bool:
    # min() and max() may step over a NaN (jsonschema-rs refuses one; python-jsonschema does
    # not); the sum of numbers within a finite range is NaN only if one of them is.
    return not numbers or (
        low <= min(numbers) and max(numbers) <= high and not math.isnan(sum(numbers))
    )


def _increasing(numbers: list[Any]) -> bool:
    return all(earlier < later for earlier, later in itertools.pairwise(numbers))


def _unique(ids: list[str]) -> bool:
    return len(set(ids)) == len(ids)


def _collapse_relations(data: dict[str, Any], low: float, high: float) -> bool:
    history = data["history"]
    if not _increasing([snapshot["cycle"] for snapshot in history]):
        return False
    if not all(_within(list(s["scores"].values()), low, high) for s in history):
        return False
    return _within(list((data.get("baseline") or {}).values()), low, high)


def _eviction_relations(data: dict[str, Any], low: float, high: float, depth: int = 2) -> bool:
    perturbed = data.get("perturbed_score")
    if not low <= data["score"] <= high:
        return False
    if perturbed is not None and not low <= perturbed <= high:
        return False
    metadata = data["segment"].get("metadata")
    return not metadata or _plain_metadata(metadata, depth)


def _staleness_relations(data: dict[str, Any], low: float, high: float) -> bool:
    spans = data["spans"]
    if not _unique([span["span_id"] for span in spans]):
        return False
    if not _within([s["score"] for s in spans if s["score"] is not None], low, high):
        return False
    return _turn_relations(data, low, high)


def _turn_relations(data: dict[str, Any], low: float, high: float) -> bool:
    turns = data.get("turns", ())
    return _increasing([turn["turn"] for turn in turns]) and _within(
        [turn["mean_relevance"] for turn in turns], low, high
    )


def _plan_relations(data: dict[str, Any], low: float, high: float) -> bool:
    if "history" in data and not _collapse_relations(data, low, high):
        return False
    segments = data["segments"]
    if not _unique([segment["id"] for segment in segments]):
        return False
    scores = [segment["score"] for segment in segments]
    scores += [s["perturbed_score"] for s in segments if s.get("perturbed_score") is not None]
    if not _within(scores, low, high):
        return False
    metadata = [s["metadata"] for s in segments if s.get("metadata")]
    return all(_plain_metadata(m, 3) for m in metadata) and _turn_relations(data, low, high)


def _plain_metadata(value: dict[str, Any], depth: int) -> bool:
    """``segment.metadata`` (``depth`` levels down the document): nested within
    :data:`MAX_INPUT_DEPTH`, every number finite and printable, as the exact path requires."""
    stack: list[tuple[Any, int]] = [(value, depth)]
    while stack:
        item, level = stack.pop()
        kind = type(item)
        if kind is dict or kind is list or kind is tuple:
            if level >= MAX_INPUT_DEPTH:
                return False
            stack.extend((child, level + 1) for child in (item.values() if kind is dict else item))
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif kind is int and not -INTEGER_CEILING < item < INTEGER_CEILING:
            return False
    return True


def _transition_relations(data: dict[str, Any], low: float, high: float) -> bool:
    before, after = data["before"], data["after"]
    if not (_unique([s["id"] for s in before]) and _unique([s["id"] for s in after])):
        return False
    segments = [*before, *after]
    scores = [s["score"] for s in segments if s.get("score") is not None]
    scores += [s["perturbed_score"] for s in segments if s.get("perturbed_score") is not None]
    if not _within(scores, low, high):
        return False
    if any("tombstone_for" in s for s in before):
        return False
    before_ids = {s["id"] for s in before}
    for segment in after:
        named = segment.get("tombstone_for")
        if named is not None and (
            segment["kind"] != TOMBSTONE_KIND or not before_ids.issuperset(named)
        ):
            return False
    for window in (before, after):
        if any(s.get("derived_from") for s in window) and derivation_cycle(
            [(s["id"], s.get("derived_from", [])) for s in window]
        ):
            return False
    metadata = [s["metadata"] for s in segments if s.get("metadata")]
    return all(_plain_metadata(m, 3) for m in metadata)


_RELATIONS: dict[str, Callable[[dict[str, Any], float, float], bool]] = {
    "collapse": _collapse_relations,
    "eviction": _eviction_relations,
    "staleness": _staleness_relations,
    "transition": _transition_relations,
}
