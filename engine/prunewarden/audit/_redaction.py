"""Redaction: how segment and span text is kept out of audit records.

A record names segments and spans by id, length and hash; their text reaches a log only where a
team opted in. It could still slip in two ways, and both are closed here, so that they can be
reviewed together: an input document logged on request is copied with the paths its masks point
at erased (JSON pointers; by default every segment and span text), and a rule's message, which may
quote text, is withheld or has the text in it replaced.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prunewarden.decision import Reason
from prunewarden.errors import AuditError
from prunewarden.rules import Rule

# Where segment and span text sits in an input document: erased unless a team opts in to more.
DEFAULT_MASKS = ("/segment/text", "/spans/*/text")

# A text shorter than this is not searched for in rule messages (it would match inside words).
MIN_SCRUBBED_TEXT = 4
TEXT_PLACEHOLDER = "[text]"
_TEXT_VARIABLES = ("segment", "span", "spans")


# --- rule messages ----------------------------------------------------------------------------


def logged_reasons(
    reasons: Iterable[Reason], rules: tuple[Rule, ...], texts: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Reasons as logged. The guards never put text in a reason, but a rule's
    ``message_expression`` may: such a message is withheld when the expression reads a text
    field, and any segment or span text found in a rule's message or detail is replaced."""
    withheld = {
        f"rule:{rule.name}"
        for rule in rules
        if rule.message_expression is not None and _reads_text(rule.message_expression.reads)
    }
    scrubbed = sorted({t for t in texts if len(t) >= MIN_SCRUBBED_TEXT}, key=len, reverse=True)
    logged = []
    for reason in reasons:
        item = reason.to_dict()
        if reason.code.startswith("rule"):
            if reason.code in withheld:
                name = reason.code.removeprefix("rule:")
                item["message"] = (
                    f"rule {name!r} matched (its message reads text, which is not logged)"
                )
            item = _scrub(item, scrubbed)
        logged.append(item)
    return logged


def _reads_text(reads: Mapping[str, frozenset[str] | None]) -> bool:
    for variable in _TEXT_VARIABLES:
        if variable in reads:
            fields = reads[variable]
            if fields is None or "text" in fields:
                return True
    return False


def _scrub(value: Any, texts: list[str]) -> Any:
    if isinstance(value, str):
        for text in texts:
            value = value.replace(text, TEXT_PLACEHOLDER)
        return value
    if isinstance(value, dict):
        return {key: _scrub(item, texts) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrub(item, texts) for item in value]
    return value


# --- masks ------------------------------------------------------------------------------------


def parse_masks(pointers: Iterable[str]) -> tuple[str, ...]:
    """Validate JSON pointers (RFC 6901, plus ``*`` for every member or element)."""
    masks = tuple(pointers)
    for pointer in masks:
        if not isinstance(pointer, str) or not pointer.startswith("/"):
            msg = f"input mask {pointer!r} is not a JSON pointer (it must start with '/')"
            raise AuditError(msg)
    return masks


def _tokens(pointer: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]


def _pointer(path: Iterable[str | int]) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def erase(document: Any, masks: Iterable[str]) -> tuple[Any, list[str]]:
    """A copy of ``document`` without the values the masks point at, and the concrete pointers
    erased (like OPA's decision-log ``erased`` list)."""
    copy = json.loads(json.dumps(document))
    erased: list[str] = []
    for mask in masks:
        for path in list(_matches(copy, _tokens(mask), ())):
            parent = copy
            for part in path[:-1]:
                parent = parent[part]
            del parent[path[-1]]
            erased.append(_pointer(path))
    return copy, sorted(erased)


def _matches(value: Any, tokens: list[str], path: tuple[str | int, ...]) -> Iterator[Any]:
    if not tokens:
        yield path
        return
    head, rest = tokens[0], tokens[1:]
    if isinstance(value, dict):
        keys = list(value) if head == "*" else [head] if head in value else []
        for key in keys:
            yield from _matches(value[key], rest, (*path, key))
    elif isinstance(value, list):
        if head == "*":
            indices: Iterable[int] = range(len(value))
        else:
            indices = [int(head)] if head.isdigit() and int(head) < len(value) else []
        # Deleting from a list shifts what follows: erase from the end.
        for index in sorted(indices, reverse=True):
            yield from _matches(value[index], rest, (*path, index))
