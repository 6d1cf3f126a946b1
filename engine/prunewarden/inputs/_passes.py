"""A whole eviction pass, validated at once: the input of :meth:`Engine.authorize_evictions`;
and the growing candidate list of a planned pass (:class:`PassCandidates`).

A pass is one decision event with one audit record, which digests the pass document once
(:attr:`Parsed.document`): no item is digested on its own.

A pruning pass asks about every segment it is about to evict, and every one of them is a candidate
of the same pass. Asked one document at a time, the engine validates the shared candidate list
again for every segment, which makes a pass quadratic in its size; here the list is validated once
and the items together through the compiled schema. A malformed pass is refused as a whole, before
anything is decided, with every problem located under ``$.evictions[i]`` or
``$.eviction_candidates``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from itertools import islice
from typing import Any

import msgspec

from prunewarden._source import json_path
from prunewarden.errors import InputError, Problem, describe_value
from prunewarden.inputs._model import EvictionRequest, ScoreRange
from prunewarden.inputs._parse import eviction_request, parse_request
from prunewarden.inputs._validation import (
    PASS_ITEM_FIELDS,
    accepts_ids,
    accepts_pass_items,
    encoded_pass,
)
from prunewarden.limits import MAX_SEGMENTS

#: The fields of one item of a pass: an eviction document without ``check`` and candidates.
ITEM_FIELDS = PASS_ITEM_FIELDS
_ITEM_KEYS = frozenset(ITEM_FIELDS)
_FILENAME = "<input>"


class PassItem(msgspec.Struct, frozen=True):
    """One item of a pass: its typed request and the eviction document it stands for (the item
    with ``check`` and the candidates)."""

    request: EvictionRequest
    document: dict[str, Any]


class Parsed(msgspec.Struct, frozen=True):
    """A valid pass: its items, and the pass document its one audit record digests."""

    items: list[PassItem]
    document: dict[str, Any]


def pass_lists(
    evictions: Iterable[Mapping[str, Any]], eviction_candidates: Iterable[str] | None
) -> tuple[list[Any], list[Any] | None]:
    """A pass's items and candidates as lists; :class:`InputError` for what is not a list, or
    a pass over more than ``MAX_SEGMENTS`` segments."""
    items = _as_list(evictions, "evictions", "eviction requests")
    candidates = (
        None
        if eviction_candidates is None
        else _as_list(eviction_candidates, "eviction_candidates", "ids")
    )
    if len(items) > MAX_SEGMENTS:
        message = f"{len(items)} segments in one pass, more than the limit of {MAX_SEGMENTS}"
        raise InputError([Problem(_FILENAME, 0, 0, "$.evictions", message)])
    return items, candidates


class WellFormedPass(msgspec.Struct, frozen=True):
    """A pass the schema accepts: its candidates (the ids of its own segments when the caller
    named none), the pass document its record digests, and that document as the input digest
    reads it (``encoded``, :func:`prunewarden.audit.input_digest`)."""

    candidates: list[str]
    document: dict[str, Any]
    encoded: bytes


def well_formed_pass(items: list[Any], candidates: list[Any] | None) -> WellFormedPass | None:
    """The pass, when the schema accepts its items and candidates; None when it does not, or
    when the pass is empty. The range and uniqueness checks are the caller's (a pass decided
    over columns makes them as it decides); a pass that fails them takes
    :func:`parse_evictions`."""
    if not items:
        return None
    if candidates is None:
        try:
            candidates = [item["segment"]["id"] for item in items]
        except (KeyError, TypeError):
            return None  # the exact path says what is missing, and where
    encoded = encoded_pass(items, candidates)
    if encoded is None:
        return None
    return WellFormedPass(
        candidates, {"evictions": items, "eviction_candidates": candidates}, encoded
    )


def parse_evictions(
    evictions: Iterable[Mapping[str, Any]],
    eviction_candidates: Iterable[str] | None,
    scores: ScoreRange,
) -> Parsed:
    """The typed request of each item of a pass, with the eviction document it stands for (the
    item with ``check`` and the candidates), or :class:`InputError` listing every problem.

    ``eviction_candidates`` defaults to the ids of the pass's own segments.
    """
    items, candidates = pass_lists(evictions, eviction_candidates)
    if (candidates is None or accepts_ids(candidates)) and accepts_pass_items(items, scores):
        ids = [item["segment"]["id"] for item in items]
        return _with_documents(items, ids if candidates is None else candidates)
    return _parse_exact(items, candidates, scores)


def _with_documents(items: list[Any], candidates: list[str]) -> Parsed:
    shared = frozenset(candidates)
    parsed = [
        PassItem(
            eviction_request(item, shared),
            {"check": "eviction", **item, "eviction_candidates": candidates},
        )
        for item in items
    ]
    return Parsed(parsed, {"evictions": items, "eviction_candidates": candidates})


def _as_list(values: Any, name: str, what: str) -> list[Any]:
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        message = f"{describe_value(values)} is not a list of {what}"
        raise InputError([Problem(_FILENAME, 0, 0, f"$.{name}", message)])
    return list(values)


def _parse_exact(items: list[Any], candidates: list[Any] | None, scores: ScoreRange) -> Parsed:
    """The exact path: slower, and able to say what is wrong and where."""
    problems: list[Problem] = []
    valid: list[dict[str, Any]] = []
    first_at: dict[str, int] = {}
    for i, item in enumerate(items):
        where = ("evictions", i)
        if not isinstance(item, Mapping):
            message = f"{describe_value(item)} is not an object with {', '.join(ITEM_FIELDS)}"
            problems.append(_problem(where, message))
            continue
        names = ", ".join(ITEM_FIELDS)
        problems += [
            _problem((*where, key), f"unknown field {key!r} (expected one of: {names})")
            for key in item
            if key not in _ITEM_KEYS
        ]
        document = {"check": "eviction", **{k: v for k, v in item.items() if k in _ITEM_KEYS}}
        try:
            _, request = parse_request(document, scores)
        except InputError as exc:
            prefix = json_path(where)
            problems += [dataclasses.replace(p, path=prefix + p.path[1:]) for p in exc.problems]
            continue
        assert isinstance(request, EvictionRequest)  # noqa: S101 - the check said so
        segment_id = request.segment.id
        if segment_id in first_at:
            message = (
                f"duplicate segment id {segment_id!r} (first at evictions[{first_at[segment_id]}])"
            )
            problems.append(_problem((*where, "segment", "id"), message))
        first_at.setdefault(segment_id, i)
        valid.append({k: v for k, v in item.items() if k in _ITEM_KEYS})
    if candidates is not None:
        # The candidates are checked as the eviction document would check them.
        document = {
            "check": "eviction",
            "segment": {"id": "-", "kind": "-"},
            "score": scores.min,
            "eviction_candidates": candidates,
        }
        try:
            parse_request(document, scores)
        except InputError as exc:
            problems += exc.problems
    if problems:
        raise InputError(problems)
    return _with_documents(valid, list(first_at) if candidates is None else candidates)


def _problem(path: tuple[str | int, ...], message: str) -> Problem:
    return Problem(_FILENAME, 0, 0, json_path(path), message)


class PassCandidates:
    """The candidates of a planned pass, pick by pick: the segments chosen so far and the one
    offered now, in the order the pass chose them.

    A pass of n picks would build n growing sets (quadratic); here an offer costs the same
    whatever was chosen before. :meth:`offer` returns the candidates as a fixed set view, and
    :attr:`ids` is the eviction document's candidate list: valid until the next :meth:`keep` or
    :meth:`withdraw`, which is all a decision needs (it is checked before the pass moves on).
    """

    def __init__(self) -> None:
        self.ids: list[str] = []
        self._positions: dict[str, int] = {}
        self._offered: str | None = None

    def offer(self, segment_id: str) -> AbstractSet[str]:
        """The candidates of a decision on ``segment_id``: the chosen segments and itself."""
        self._offered = segment_id
        self.ids.append(segment_id)
        return CandidateView(self.ids, self._positions, len(self._positions), segment_id)

    def keep(self) -> None:
        """The offered segment is chosen: a candidate of every later decision."""
        own, self._offered = self._offered, None
        if own is not None:
            self._positions[own] = len(self._positions)

    def withdraw(self) -> None:
        """The offered segment is not chosen."""
        if self._offered is not None:
            self.ids.pop()
            self._offered = None

    def mark(self) -> int:
        """Where the chosen segments stand now: :meth:`rollback` returns here (an eviction
        group whose members were kept one by one, then refused as a whole)."""
        self.withdraw()
        return len(self.ids)

    def rollback(self, mark: int) -> None:
        """Un-choose every segment kept since ``mark``."""
        self.withdraw()
        for own in self.ids[mark:]:
            del self._positions[own]
        del self.ids[mark:]


class CandidateView(AbstractSet[str]):
    """One decision's candidates: the first ``count`` chosen ids and its own; later picks only
    append to the shared list, so the view never changes."""

    __slots__ = ("_count", "_ids", "_own", "_positions")

    def __init__(self, ids: list[str], positions: Mapping[str, int], count: int, own: str) -> None:
        self._ids = ids
        self._positions = positions
        self._count = count
        self._own = own

    def __contains__(self, value: object) -> bool:
        if value == self._own:
            return True
        position = self._positions.get(value) if isinstance(value, str) else None
        return position is not None and position < self._count

    def __iter__(self) -> Iterator[str]:
        yield from islice(self._ids, self._count)
        yield self._own

    def __len__(self) -> int:
        return self._count + 1

    def __hash__(self) -> int:
        return self._hash()

    def __repr__(self) -> str:
        return f"CandidateView({sorted(self)!r})"
