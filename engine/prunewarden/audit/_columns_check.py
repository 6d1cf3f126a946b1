"""Whether a ``record_version`` 3 pass record says one thing: its columns agree with each other
and with the code table of the guard that wrote them.

A sealed record proves who wrote it (with a key) or that nobody changed it since (without one),
not that it means anything: a writer that holds the chain, or the token of a collector, can seal
a record that says a segment was allowed for a reason that refuses it. ``audit verify`` reads
each version 3 pass as the decisions it rebuilds from the columns (:mod:`._columns`), so it
refuses one whose columns contradict themselves:

- the code table is the eviction guard's, in its order, with its actions (or the one-code table
  of a pass refused because it could not be logged): the first set bit is the primary reason,
  so a reordered table changes every decision's primary reason;
- ``segments``, ``reasons`` and ``allowed`` are parallel (one entry each per segment), ids once;
- every mask has a bit, and none past the table;
- a segment is allowed exactly when its only reason is the allowing code (``authorized``), and a
  refused one has a refusing reason;
- ``dependencies`` names exactly the segments whose reasons ask to resolve dependencies first;
- a plan's ``verdict_indices`` are parallel to its ``verdicts``, each a distinct place of the
  pass, and what the plan evicts is what the pass allowed.

The Node verifier (``examples/verify/jcs_verify.mjs``) checks the same, so both refuse the same
records. The tables are the guard's (``prunewarden.guards.eviction.CODES``, ``CODE_ACTIONS``),
written down here because the audit package does not import the guards; a test holds them
equal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeGuard

EVICTION_CODES: Final = (
    "authorized",
    "pinned",
    "unscoreable",
    "perturbation_missing",
    "unstable_score",
    "no_tombstone",
)
EVICTION_ACTIONS: Final = (
    None,
    "pin",
    "resolve_dependencies_first",
    "rescore",
    "rescore",
    "write_tombstone",
)
UNAVAILABLE_CODES: Final = ("audit_unavailable",)
# Each code table a version 3 pass carries: its actions, and the mask of an allowed segment
# (0: none is allowed).
TABLES: Final[dict[tuple[str, ...], tuple[tuple[str | None, ...], int]]] = {
    EVICTION_CODES: (EVICTION_ACTIONS, 1 << EVICTION_CODES.index("authorized")),
    UNAVAILABLE_CODES: ((None,), 0),
}
DEPENDENCY_ACTION: Final = "resolve_dependencies_first"
_INDEX = re.compile(r"^(0|[1-9][0-9]*)$")
_SHOWN = 3  # ids named in a message


def columns_problem(record: Mapping[str, Any]) -> str | None:
    """What a version 3 pass record says that contradicts itself, or None."""
    segments, codes, masks, allowed = (
        record.get("segments"),
        record.get("codes"),
        record.get("reasons"),
        record.get("allowed"),
    )
    if not _strings(segments) or not _strings(codes):
        return "segments and codes must be lists of strings"
    if not _masks(masks):
        return "reasons must be a list of integer masks"
    if not isinstance(allowed, str) or allowed.strip("01"):
        return "allowed must be a string of 0 and 1"
    if record.get("check") != "eviction" or record.get("refusal") not in ("deny", "halt"):
        return "check must be eviction and refusal deny or halt"
    found = _table(codes, record.get("code_actions"))
    if found is None:
        found = _counts(segments, masks, allowed)
    if found is None:
        found = _segments(record, segments, codes, masks, allowed)
    if found is None:
        found = _dependencies(record.get("dependencies"), segments, codes, masks)
    if found is None and ("verdicts" in record or "verdict_indices" in record):
        found = _plan(record, segments, allowed)
    return found


def _strings(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _masks(value: Any) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(_integer(item) for item in value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _table(codes: list[str], actions: Any) -> str | None:
    table = tuple(codes)
    if table not in TABLES:
        known = next((t for t in TABLES if sorted(t) == sorted(table)), None)
        if known is not None:
            return f"codes out of table order: {codes} (the guard's order: {list(known)})"
        return f"codes {codes} are no code table this verifier knows"
    expected = list(TABLES[table][0])
    if actions != expected:
        return f"code_actions {actions} are not the actions of the code table ({expected})"
    return None


def _counts(segments: list[str], masks: list[int], allowed: str) -> str | None:
    if not len(segments) == len(masks) == len(allowed):
        return (
            f"{len(segments)} segments, {len(masks)} reason masks and {len(allowed)} outcomes: "
            "the columns disagree"
        )
    if len(set(segments)) < len(segments):
        twice = next(s for i, s in enumerate(segments) if s in segments[:i])
        return f"segment {twice!r} is decided twice"
    return None


def _segments(
    record: Mapping[str, Any],
    segments: list[str],
    codes: list[str],
    masks: list[int],
    allowed: str,
) -> str | None:
    allowing = TABLES[tuple(codes)][1]
    for index, (segment, mask, outcome) in enumerate(zip(segments, masks, allowed, strict=True)):
        where = f"segment {index} ({segment!r})"
        if mask <= 0:
            return f"{where} has no reason (mask {mask})"
        if mask >> len(codes):
            return f"{where}: mask {mask} has bits past the code table of {len(codes)} codes"
        named = [codes[bit] for bit in range(len(codes)) if mask >> bit & 1]
        if outcome == "1" and mask != allowing:
            return f"{where} is allowed yet its reasons are {named}"
        if outcome == "0" and mask & allowing:
            return f"{where} is refused ({record.get('refusal')}) yet its reasons are {named}"
    return None


def _dependencies(
    dependencies: Any, segments: list[str], codes: list[str], masks: list[int]
) -> str | None:
    if not isinstance(dependencies, dict):
        return "dependencies must be an object"
    actions = TABLES[tuple(codes)][0]
    asking = {
        index
        for index, mask in enumerate(masks)
        if any(mask >> bit & 1 and actions[bit] == DEPENDENCY_ACTION for bit in range(len(codes)))
    }
    named: set[int] = set()
    for key, ids in dependencies.items():
        if not _INDEX.match(key) or int(key) >= len(segments):
            return f"dependencies name segment {key!r}, not one of the {len(segments)} segments"
        if not _strings(ids):
            return f"dependencies of segment {key} must be a list of ids"
        named.add(int(key))
    if named != asking:
        index = min(named ^ asking)
        missing = "has no" if index in asking else "has"
        return (
            f"segment {index} ({segments[index]!r}) {missing} dependencies although its reasons "
            f"{'ask' if index in asking else 'do not ask'} to resolve them first"
        )
    return None


def _plan(record: Mapping[str, Any], segments: list[str], allowed: str) -> str | None:
    verdicts, places = record.get("verdicts"), record.get("verdict_indices")
    if record.get("pass") != "plan":
        return "verdicts and verdict_indices belong to a plan"
    if not isinstance(verdicts, list) or not isinstance(places, list):
        return "a plan's verdicts and verdict_indices must be lists"
    found = _places(verdicts, places, len(segments) + len(verdicts))
    if found is not None:
        return found
    granted = {s for s, outcome in zip(segments, allowed, strict=True) if outcome == "1"}
    granted |= {
        str(v.get("segment"))
        for v in verdicts
        if isinstance(v, dict) and v.get("check") == "eviction" and v.get("outcome") == "allow"
    }
    plan = record.get("plan")
    evicted = plan.get("evict", []) if isinstance(plan, dict) else []
    if not _strings(evicted):
        return "the plan's evict must be a list of ids"
    refused = [s for s in evicted if s not in granted]
    if refused:
        return f"the plan evicts {_names(refused)}, which the pass did not allow"
    return None


def _places(verdicts: list[Any], places: list[Any], total: int) -> str | None:
    if len(verdicts) != len(places):
        return f"{len(verdicts)} verdicts and {len(places)} verdict_indices: they disagree"
    if not all(_integer(p) and 0 <= p < total for p in places) or len(set(places)) < len(places):
        return f"verdict_indices {places} are not distinct places of a pass of {total} decisions"
    return None


def _names(ids: Sequence[Any]) -> str:
    shown = ", ".join(repr(i) for i in ids[:_SHOWN])
    return shown + (f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else "")
