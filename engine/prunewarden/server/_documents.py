"""Request bodies to validated documents, with the CLI's located problems.

Every body is parsed as strict JSON under the file name ``<request>``, so a problem reads
``<request>:3:14: $.segment.kind: ...`` as it would for ``prunewarden evaluate`` on a file. The
session endpoints take the parts of the input schema a session is fed one at a time (a
``snapshot``, a ``turn``) or the whole documents the CLI takes (``eviction``, ``staleness``,
``plan``); what a session supplies itself (its turns, its history) is refused in a body rather
than silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from prunewarden._schemas import schema_problems
from prunewarden._source import Parsed, locate, parse_json
from prunewarden.errors import InputError, Problem

REQUEST_FILE = "<request>"

# Fields of a document that a session supplies from what it observed.
SESSION_SUPPLIED = {
    "eviction": ("labels",),
    "staleness": ("turns", "labels"),
    "plan": ("session_id", "labels", "history", "baseline", "turns"),
    "transition": ("session_id", "labels"),
}


def read_body(body: bytes) -> tuple[Any, str]:
    """The JSON value of a request body and its text; :class:`InputError` when it is not UTF-8
    JSON."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"the body is not UTF-8 text (byte {exc.start})"
        raise InputError([Problem(REQUEST_FILE, 0, 0, "$", message)]) from None
    parsed, problems = parse_json(text, REQUEST_FILE)
    if problems:
        raise InputError(problems)
    return parsed.data, text


def check_definition(data: Any, text: str, definition: str) -> None:
    """Validate ``data`` against ``$defs/<definition>`` of the input schema."""
    problems = schema_problems("input", Parsed(data, REQUEST_FILE), definition)
    if problems:
        raise InputError(_relocated(problems, text))


def check_object(data: Any) -> None:
    if not isinstance(data, dict):
        raise InputError([Problem(REQUEST_FILE, 0, 0, "$", "must be a JSON object")])


def refuse_supplied(data: dict[str, Any], kind: str, text: str) -> None:
    """Refuse the fields a session supplies itself, each at its key."""
    present = [name for name in SESSION_SUPPLIED[kind] if name in data]
    if not present:
        return
    located = locate(text, REQUEST_FILE)
    message = "the session supplies this from what it observed; leave it out"
    raise InputError([located.problem((name,), message, at_key=True) for name in present])


def rebased(error: InputError, prefix: str, text: str) -> InputError:
    """An error about a document a session built around the body (``$.history[0].scores.a``)
    as an error about the body (``<request>:2:8: $.scores.a``)."""
    pattern = re.compile(re.escape(prefix) + r"(?=[.\[]|$)")
    moved = [
        Problem(REQUEST_FILE, 0, 0, "$" + pattern.sub("", p.path, count=1), p.message)
        if p.path.startswith(prefix)
        else p
        for p in error.problems
    ]
    return error.__class__(_relocated(moved, text))


def _relocated(problems: Iterable[Problem], text: str) -> list[Problem]:
    """Put line and column (found in ``text``) on problems that have none."""
    problems = list(problems)
    if all(p.line for p in problems):
        return problems
    located = locate(text, REQUEST_FILE)
    out = []
    for problem in problems:
        if problem.line:
            out.append(problem)
            continue
        found = located.problem(_path_tuple(problem.path), problem.message)
        out.append(Problem(REQUEST_FILE, found.line, found.column, problem.path, problem.message))
    return out


_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _path_tuple(path: str) -> tuple[str | int, ...]:
    """``$.a[0].b`` as ``("a", 0, "b")``."""
    return tuple(name or int(index) for name, index in _PART.findall(path.removeprefix("$")))
