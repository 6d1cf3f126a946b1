"""``spec.classify`` at run time: the kind a segment that arrives without one is given.

A transcript's records and a framework's messages carry a role, not a kind the policy can pin
(``constraint``, ``definition``): the classifier's ordered rules give them one. A rule matches
when every field it names matches — ``role`` (one role or several), ``pattern`` (RE2, searched in
the segment's text), ``tool`` (the tool whose call or result the segment is) — and the first rule
that matches names the kind. The policy's own rules come first, then (unless ``defaults: false``)
:data:`DEFAULT_RULES`; a segment no rule matches keeps the kind its role gives it.

Patterns are RE2 (linear time, no backreferences), compiled once with bounded memory and logging
off, and searched over at most :data:`MAX_CLASSIFY_CHARS` of the text, fewer when the pattern's
program is large, so that one search costs at most :data:`~prunewarden.limits.MAX_MATCH_STEPS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # read by the layer contracts; imported on first use below
    import re2

from prunewarden.limits import MAX_MATCH_MEMORY_BYTES, MAX_MATCH_PATTERN_CHARS, MAX_MATCH_STEPS

#: The roles a rule may name: what the adapters map messages, items and records to.
ROLES: Final = ("system", "user", "assistant", "tool")
#: The most of a segment's text a pattern is searched in (its start: where instructions are).
MAX_CLASSIFY_CHARS: Final = 16_384


@dataclass(frozen=True, slots=True)
class ClassifyRule:
    """One rule of ``spec.classify``: the ``kind`` of a segment every given field matches."""

    kind: str
    roles: tuple[str, ...] = ()  # empty: any role
    pattern: str | None = None
    tool: str | None = None
    name: str = ""  # how :class:`Classification` names it: its JSON path, or the default's name

    def to_dict(self) -> dict[str, Any]:
        """The rule as the policy document writes it."""
        match: dict[str, Any] = {}
        if self.roles:
            match["role"] = self.roles[0] if len(self.roles) == 1 else list(self.roles)
        if self.pattern is not None:
            match["pattern"] = self.pattern
        if self.tool is not None:
            match["tool"] = self.tool
        return {"match": match, "kind": self.kind}


#: The defaults: instructions in imperative form are constraints, "X means Y" a definition.
DEFAULT_RULES: Final = (
    ClassifyRule(
        "constraint",
        ("system", "user"),
        r"(?i)\b(never|always|must|must not|mustn't|do not|don't|shall not|may not|"
        r"under no circumstances|only ever)\b",
        name="default constraint: an instruction with never, always, must, do not",
    ),
    ClassifyRule(
        "definition",
        ("system", "user"),
        r"(?i)^[^.!?\n]{1,80}?\b(means|refers to|is defined as|stands for|is short for)\b",
        name='default definition: "X means / refers to / is defined as ..."',
    ),
)


@dataclass(frozen=True, slots=True)
class Classification:
    """What a segment became and why: the kind and the name of the rule that gave it."""

    kind: str
    rule: str


@lru_cache(maxsize=1)
def _re2() -> tuple[ModuleType, re2.Options]:
    """RE2 and the options every classifier pattern compiles with, on first use: a policy read
    or a decision made without a classifier pattern to match does not load RE2, which
    ``import prunewarden``'s start-up budget leaves out (tests/test_startup.py), as
    :mod:`prunewarden.rules` defers cel-python."""
    engine = importlib.import_module("re2")
    options = engine.Options()
    options.max_mem = MAX_MATCH_MEMORY_BYTES
    options.log_errors = False  # RE2 would print the pattern on stderr
    return engine, options


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    engine, options = _re2()
    return engine.compile(pattern, options)


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be a classifier's pattern, or None (never quoting it)."""
    if len(pattern) > MAX_MATCH_PATTERN_CHARS:
        return f"a pattern holds at most {MAX_MATCH_PATTERN_CHARS} characters"
    try:
        _compiled(pattern)
    except _re2()[0].error:
        return "not a valid RE2 pattern within the memory limit (RE2 has no backreferences)"
    return None


def _searched(pattern: str, text: str) -> bool:
    compiled = _compiled(pattern)
    # Priced as the NFA's worst case: bytes searched times the program's size.
    budget = max(1, MAX_MATCH_STEPS // max(1, int(compiled.programsize)) // 4)  # 4 bytes a char
    return compiled.search(text[: min(MAX_CLASSIFY_CHARS, budget)]) is not None


class SegmentClassifier:
    """The ordered rules of a policy's ``spec.classify`` (defaults included), ready to match."""

    def __init__(self, rules: Sequence[ClassifyRule]) -> None:
        self.rules = tuple(rules)
        for rule in self.rules:
            if rule.pattern is not None:
                _compiled(rule.pattern)

    def classify(self, role: str, text: str, tool: str | None = None) -> Classification | None:
        """The kind the first matching rule gives a segment of ``role`` with ``text`` (the call
        or result of ``tool``), or None when no rule matches."""
        for rule in self.rules:
            if rule.roles and role not in rule.roles:
                continue
            if rule.tool is not None and rule.tool != tool:
                continue
            if rule.pattern is not None and not _searched(rule.pattern, text):
                continue
            return Classification(rule.kind, rule.name)
        return None


__all__ = [
    "DEFAULT_RULES",
    "MAX_CLASSIFY_CHARS",
    "ROLES",
    "Classification",
    "ClassifyRule",
    "SegmentClassifier",
    "pattern_problem",
]
