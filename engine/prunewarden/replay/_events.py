"""The lines of a trace: the header and the events, and the checks of one line beyond the schema.

An event carries the arguments of one :class:`~prunewarden.session.Session` call, so beyond the
schema it is checked as the input document the session builds from it, by the same parsers and
against the policy's score range, rather than by rules of its own that could drift from the
session's. Each problem found in that document is mapped back to where the line wrote the value,
its line number counted in the trace, not in the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Literal

from prunewarden import _resources as resources
from prunewarden._json import JsonPath, paths
from prunewarden._source import Parsed, json_path, locate
from prunewarden.errors import InputError, Problem
from prunewarden.inputs import ScoreRange, parse_plan, parse_request, refused_unchecked
from prunewarden.limits import MAX_LABELS

EventType = Literal["cycle", "turn", "eviction", "prune", "pass", "transition"]
EVENT_TYPES: tuple[EventType, ...] = ("cycle", "turn", "eviction", "prune", "pass", "transition")

# A pass gives exactly one of them.
TARGETS = ("free_tokens", "keep_top_k")


@dataclass(frozen=True, slots=True)
class TraceHeader:
    """The first line: whose session this is."""

    session_id: str
    labels: dict[str, str]
    line: int


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One event line, checked.

    ``index`` counts events from 1 (the header is not one); ``cycle`` is a cycle event's number
    (given, or the previous one + 1) and, for any other event, the latest cycle before it (None
    before the first); ``turn`` likewise.
    """

    index: int
    line: int
    type: EventType
    fields: dict[str, Any]
    cycle: int | None
    turn: int | None
    text: str = field(repr=False, compare=False)

    def arguments(self) -> dict[str, Any]:
        """The event's fields without ``type`` and ``note``: the session call's arguments."""
        return {key: value for key, value in self.fields.items() if key not in ("type", "note")}


class TraceLine(Parsed):
    """One line's data with the position of each value, line numbers counted in the trace.

    Positions are computed only when a problem asks for them. A line too large to index points
    at its first column.
    """

    def __init__(self, data: Any, filename: str, text: str, line: int) -> None:
        super().__init__(data, filename, built=True)
        self.text = text
        self.line = line
        self._located = False

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        if not self._located:
            located = locate(self.text, self.filename)
            self.values, self.keys = located.values, located.keys
            self._located = True
        found = super().problem(path, message, at_key=at_key)
        if found.line:
            return replace(found, line=found.line + self.line - 1)
        return replace(found, line=self.line, column=1)


def in_trace(problem: Problem, line: int) -> Problem:
    """A problem found in one line's text, with its line counted in the trace."""
    if not problem.line:
        return replace(problem, line=line, column=1)
    message = _FIRST_AT.sub(
        lambda m: f"(first defined at line {int(m[1]) + line - 1})", problem.message
    )
    return replace(problem, line=problem.line + line - 1, message=message)


_FIRST_AT = re.compile(r"\(first defined at line (\d+)\)")


@cache
def line_shapes() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Per line type, the fields allowed and those required (from the schema)."""
    defs = resources.schema("trace")["$defs"]
    return {
        kind: (frozenset(defs[kind]["properties"]), frozenset(defs[kind]["required"]))
        for kind in ("session", *EVENT_TYPES)
    }


def about_targets(problem: Problem) -> bool:
    # The schema's oneOf over free_tokens / keep_top_k: replaced by one plain message.
    return problem.path == "$" and any(target in problem.message for target in TARGETS)


def target_problems(data: dict[str, Any], at: TraceLine) -> list[Problem]:
    given = [target for target in TARGETS if target in data]
    if len(given) == 1:
        return []
    if given:
        return [at.problem(("keep_top_k",), "give one target: free_tokens or keep_top_k, not both")]
    return [at.problem((), "a pass needs a target: free_tokens or keep_top_k")]


def semantic_problems(data: dict[str, Any], scores: ScoreRange, at: TraceLine) -> list[Problem]:
    """Beyond the schema: scores within the policy's range, unique ids, finite numbers. The
    event is checked as the input document the session builds from it, and each problem is
    mapped back to the line."""
    document, prefix = _as_document(data)
    try:
        check_as_document(data, scores)
    except InputError as exc:
        located = {json_path(path): path for path in paths(document)}
        found = []
        for problem in exc.problems:
            path = located.get(problem.path, ())
            inside = path[len(prefix) :] if path[: len(prefix)] == prefix else ()
            found.append(at.problem(inside, problem.message))
        return found
    return []


def size_problems(data: dict[str, Any], at: TraceLine, *, header: bool) -> list[Problem]:
    """Lists and objects over their limit, and values that cannot be reported on, found before
    the schema runs, as for an input document: the schema would check every item of a list of
    a million before saying that it is too long."""
    if header:
        labels = data.get("labels")
        if isinstance(labels, dict) and len(labels) > MAX_LABELS:
            message = f"{len(labels)} entries, more than the limit of {MAX_LABELS}"
            return [at.problem(("labels",), message)]
        return []
    if data.get("type") not in EVENT_TYPES:
        return []  # the schema says what is wrong with it
    document, prefix = _as_document(data)
    refused = refused_unchecked(document, "plan" if data.get("type") == "pass" else None)
    return [
        at.problem(path[len(prefix) :] if path[: len(prefix)] == prefix else (), message)
        for path, message in refused
    ]


def check_as_document(data: dict[str, Any], scores: ScoreRange) -> None:
    """Check an event as the input document it stands for; raise :class:`InputError`."""
    document, _ = _as_document(data)
    if data["type"] == "pass":
        parse_plan(document, scores)
    else:
        parse_request(document, scores)


def _as_document(data: dict[str, Any]) -> tuple[dict[str, Any], JsonPath]:
    """The input document an event stands for (a pass: the plan document), and where the
    event's fields sit in it."""
    fields = {key: value for key, value in data.items() if key not in ("type", "note")}
    kind = data["type"]
    if kind == "cycle":
        snapshot = {"cycle": fields.pop("cycle", 1), **fields}
        return {"check": "collapse", "history": [snapshot]}, ("history", 0)
    if kind == "turn":
        turn = {"turn": fields.pop("turn", 1), **fields}
        return {"check": "staleness", "spans": [], "keep_top_k": 0, "turns": [turn]}, ("turns", 0)
    if kind == "pass":
        return fields, ()
    if kind == "transition":
        return {"check": "transition", **fields}, ()
    check = "eviction" if kind == "eviction" else "staleness"
    return {"check": check, **fields}, ()
