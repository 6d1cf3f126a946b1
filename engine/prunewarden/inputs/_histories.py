"""A collapse document checked and typed in one pass.

A collapse document is a few snapshots of hundreds of scores each. The compiled schema walks
every score as a node of the document, and the policy's checks (scores within range, cycles
increasing) then walk them again; here each snapshot's scores are checked with whole-dict
operations that run in C (key and value types by ``set(map(type, ...))``, id lengths and score
bounds by ``min`` and ``max``), and the typed request is built on the way.

As with :mod:`prunewarden.inputs._columns`, the answer is a typed request or None, and None
sends the document to the general path, which accepts or reports every problem located: what is
read here may refuse what the exact path accepts (an integral float for a cycle), never the
reverse.
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson

from prunewarden._json import ORJSON_CANONICAL
from prunewarden.inputs._columns import (
    all_of_type,
    are_scores,
    is_count,
    valid_ids,
)
from prunewarden.inputs._model import CollapseRequest, ScoreRange, Snapshot

_DOCUMENT_KEYS = frozenset(("check", "history", "baseline"))
_SNAPSHOT_KEYS = frozenset(("cycle", "scores", "pinned"))
_MAX_SNAPSHOTS = 10_000
_NO_PINS: tuple[str, ...] = ()


def read_collapse(data: Any, scores: ScoreRange) -> tuple[CollapseRequest, bytes] | None:
    """The typed request of a valid collapse document under the policy's score range, and
    orjson's bytes of it under :data:`ORJSON_CANONICAL` (for the input digest); None when the
    document is not valid or not plainly so."""
    if type(data) is not dict or data.get("check") != "collapse":
        return None
    if not _DOCUMENT_KEYS.issuperset(data):
        return None
    try:
        return _read(data, scores.min, scores.max)
    except (KeyError, TypeError, ValueError):
        return None  # a required member missing, or a value of the wrong shape


def _read(data: dict[str, Any], low: float, high: float) -> tuple[CollapseRequest, bytes] | None:
    history = data["history"]
    if type(history) is not list or len(history) > _MAX_SNAPSHOTS or not all_of_type(history, dict):
        return None
    snapshots = []
    for snapshot in history:
        typed = _snapshot(snapshot, low, high)
        if typed is None:
            return None
        snapshots.append(typed)
    if not all(a.cycle < b.cycle for a, b in itertools.pairwise(snapshots)):
        return None
    baseline = None
    if "baseline" in data:  # absent, or scores: null is not a value input.v1 allows here
        baseline = _scores(data["baseline"], low, high)
        if baseline is None:
            return None
    # orjson refuses what JSON text cannot hold (subclasses, integers beyond 2**53): the screen
    # of what the checks above did not look at, and the bytes the input digest is made of.
    encoded = orjson.dumps(data, option=ORJSON_CANONICAL)
    return CollapseRequest(tuple(snapshots), baseline), encoded


def _snapshot(snapshot: dict[str, Any], low: float, high: float) -> Snapshot | None:
    if not _SNAPSHOT_KEYS.issuperset(snapshot):
        return None
    cycle = snapshot["cycle"]
    scores = _scores(snapshot["scores"], low, high)
    pinned = snapshot.get("pinned", _NO_PINS)
    if scores is None or not scores or not is_count(cycle):
        return None  # minProperties 1
    if pinned is not _NO_PINS and (
        type(pinned) is not list or not valid_ids(pinned) or len(set(pinned)) != len(pinned)
    ):
        return None
    return Snapshot(cycle, scores, tuple(pinned))


def _scores(value: Any, low: float, high: float) -> dict[str, float] | None:
    """``$defs/scores``: ids to numbers within the policy's range, as the typed request holds
    them (a copy, every value a float)."""
    if type(value) is not dict or not value:
        return {} if type(value) is dict else None
    values = list(value.values())
    if not (valid_ids(list(value)) and are_scores(values, low, high)):
        return None
    if all_of_type(values, float):
        return dict(value)  # a C-level copy: the common case
    return {entry: float(number) for entry, number in value.items()}
