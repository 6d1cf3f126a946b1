"""``spec.compaction``: what a coding agent's compaction hook blocks, and what it does after an
error of its own; and why an absent section keeps every digest a policy had before it existed.

The section holds ``block_manual`` (implicit value: false), ``block_when`` (a CEL condition,
compiled when the policy loads, so that CEL loads only for a policy that has one),
``block_message`` and ``on_error: {auto, manual}`` (implicit values: warn and block). As with
``spec.classify``, the canonical document keeps only what differs from the implicit values and
drops the section when nothing does; guardrails and ``policy diff`` read the effective document
(:func:`effective_document`), with the section filled in, so that a lock on
``/spec/compaction/on_error`` holds and a validator may read ``spec.compaction.block_manual``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from prunewarden import rules
from prunewarden.errors import Problem
from prunewarden.policy import _classify as classify
from prunewarden.policy._model import CompactionSettings
from prunewarden.rules._expression import Expression, Shape

SECTION = "compaction"
IMPLICIT: dict[str, Any] = {"block_manual": False, "on_error": {"auto": "warn", "manual": "block"}}

_TEXT: dict[str, Any] = {"type": "string"}
_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
#: What ``block_when`` reads: the compaction about to happen, and the window it replaces.
VARIABLES: dict[str, Shape] = {
    "compaction": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "trigger": {"enum": ["manual", "auto"]},
            "agent": {"enum": ["claude-code", "codex"]},
            "session_id": _TEXT,
            "custom_instructions": _TEXT,
            "segments": _COUNT,
            "pinned": _COUNT,
            "tokens": _COUNT,
        },
    },
    "window": {
        "type": "array",
        "items": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "id": _TEXT,
                "kind": _TEXT,
                "text": _TEXT,
                "tokens": _COUNT,
                "pinned": {"type": "boolean"},
                "group": _TEXT,
                "facts": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": _TEXT},
                },
            },
        },
    },
}


def drop_implicit(spec: dict[str, Any]) -> None:
    """The canonical form of ``spec.compaction`` in a normalized ``spec``: fields at their
    implicit value dropped (each of ``on_error``'s, then ``on_error`` when empty), an empty
    section dropped."""
    section = spec.get(SECTION)
    if section is None:
        return
    on_error = section.get("on_error")
    if isinstance(on_error, dict):
        for trigger, value in IMPLICIT["on_error"].items():
            if on_error.get(trigger, value) == value:
                on_error.pop(trigger, None)
        if not on_error:
            section.pop("on_error")
    if section.get("block_manual", False) is False:
        section.pop("block_manual", None)
    if isinstance(section.get("block_when"), str):
        section["block_when"] = section["block_when"].strip()
    if not section:
        spec.pop(SECTION)


def effective_document(document: dict[str, Any]) -> dict[str, Any]:
    """A normalized policy document with ``spec.transition``, ``.fidelity``, ``.classify`` and
    ``.compaction`` filled in: what guardrails and ``policy diff`` compare."""
    document = classify.effective_document(document)
    spec = document.get("spec")
    if not isinstance(spec, dict):
        return document
    section = spec.get(SECTION, {})
    filled = copy.copy(document)
    filled["spec"] = {
        **spec,
        SECTION: {
            **copy.deepcopy(IMPLICIT),
            **section,
            "on_error": {**IMPLICIT["on_error"], **section.get("on_error", {})},
        },
    }
    return filled


@lru_cache(maxsize=64)
def compiled_condition(source: str) -> Expression:
    """``block_when`` compiled (once per distinct text); raises ``rules.ExpressionError``."""
    return rules.compile_expression(source, VARIABLES)


def condition_problems(data: dict[str, Any], problem: Callable[..., Problem]) -> list[Problem]:
    """``block_when`` must compile against :data:`VARIABLES`: located, one problem each."""
    spec = data.get("spec", {})
    section = spec.get(SECTION) if isinstance(spec, dict) else None
    source = section.get("block_when") if isinstance(section, dict) else None
    if not isinstance(source, str) or not source.strip():
        return []
    try:
        compiled_condition(source.strip())
    except rules.ExpressionError as exc:
        path = ("spec", SECTION, "block_when")
        return [problem(path, p.describe()) for p in exc.problems]
    return []


def compaction_settings(spec: dict[str, Any]) -> CompactionSettings:
    """The resolved settings of a normalized ``spec`` (its condition compiled)."""
    section = spec.get(SECTION, {})
    on_error = {**IMPLICIT["on_error"], **section.get("on_error", {})}
    source = section.get("block_when")
    return CompactionSettings(
        block_manual=bool(section.get("block_manual", False)),
        block_when=compiled_condition(source) if isinstance(source, str) else None,
        block_message=section.get("block_message"),
        on_error_auto=on_error["auto"],
        on_error_manual=on_error["manual"],
    )
