"""Redaction: how segment and span text is kept out of audit records.

A record names segments and spans by id, length and hash; their text reaches a log only where a
team opted in. It could still slip in two ways, and both are closed here, so that they can be
reviewed together: an input document logged on request is copied with the paths its masks point
at erased (JSON pointers; by default every field that holds text, as the input schema declares
it), and a rule's message, which may quote text, is withheld or has the text in it replaced.

The default masks are derived from ``input.v1`` rather than listed, so that a text field added to
a document type is erased from the day it is added: a hand-kept list once missed the plan's
``/segments/*/text`` and logged every window segment's text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prunewarden._resources import schema
from prunewarden.decision import Reason
from prunewarden.errors import AuditError
from prunewarden.rules import Rule

# The keywords that bound a string to a name, a hash or a choice: anything else is text.
_STRING_BOUNDS = ("maxLength", "pattern", "enum", "const", "format")


def text_pointers(input_schema: Mapping[str, Any]) -> tuple[str, ...]:
    """Where the document types of ``input_schema`` (each check, and the plan) hold text, as
    JSON pointers with ``*`` for every element or member: every string without a bound (no
    ``maxLength``, ``pattern``, ``enum``, ``const`` or ``format``) and every free-form object
    (``metadata``: it may carry anything)."""
    definitions = input_schema.get("$defs", {})
    roots = [branch["then"] for branch in input_schema.get("allOf", ()) if "then" in branch]
    roots.append({"$ref": "#/$defs/plan"})
    found: set[str] = set()
    for root in roots:
        _collect_text(root, definitions, (), found)
    return tuple(sorted(found))


def _collect_text(
    node: Any, definitions: Mapping[str, Any], path: tuple[str, ...], found: set[str]
) -> None:
    if not isinstance(node, Mapping):
        return
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        _collect_text(definitions[ref.removeprefix("#/$defs/")], definitions, path, found)
    for keyword in ("anyOf", "oneOf", "allOf"):
        for branch in node.get(keyword, ()):
            _collect_text(branch, definitions, path, found)
    kind = node.get("type")
    if kind == "string" and not any(bound in node for bound in _STRING_BOUNDS):
        found.add(_pointer(path))
    properties = node.get("properties", {})
    members = node.get("additionalProperties")
    if kind == "object" and not properties and not isinstance(members, Mapping):
        found.add(_pointer(path))  # free-form: no declared fields, any value
    for name, child in properties.items():
        _collect_text(child, definitions, (*path, name), found)
    if isinstance(members, Mapping):
        _collect_text(members, definitions, (*path, "*"), found)
    if "items" in node:
        _collect_text(node["items"], definitions, (*path, "*"), found)


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
    scrubbed: list[str] | None = None  # sorted once, when a rule's reason is logged
    logged = []
    for reason in reasons:
        item = reason.to_dict()
        if reason.code.startswith("rule"):
            if scrubbed is None:
                scrubbed = sorted(
                    {t for t in texts if len(t) >= MIN_SCRUBBED_TEXT}, key=len, reverse=True
                )
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


# Where text sits in an input document: erased unless a team opts in to more.
DEFAULT_MASKS = text_pointers(schema("input"))


def masks_setting(inputs: bool | Iterable[str] | None) -> tuple[str, ...] | None:
    """The masks of ``AuditLog(inputs=...)``: None logs no input, True the default masks, a
    list of JSON pointers exactly those."""
    if inputs is None or inputs is False:
        return None
    if inputs is True:
        return DEFAULT_MASKS
    if isinstance(inputs, str):
        msg = "inputs takes a list of JSON pointers, not one string"
        raise AuditError(msg)
    return parse_masks(inputs)
