"""``spec.classify``: the kinds given to segments that arrive without one, and why an absent
section keeps every digest a policy had before the section existed.

The section holds ``rules`` (ordered, tried first; implicit value: none) and ``defaults``
(whether :data:`~prunewarden.rules._classify.DEFAULT_RULES` follow them; implicit value: true).
As with ``spec.transition``, the canonical document keeps only what differs from the implicit
values and drops the section when nothing does; guardrails and ``policy diff`` read the
effective document (:func:`effective_document`), with the section filled in, so that a lock on
``/spec/classify`` holds and a validator may read ``spec.classify.defaults``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from prunewarden.errors import Problem
from prunewarden.policy import _fidelity as fidelity
from prunewarden.policy._model import ClassifySettings, Policy
from prunewarden.rules._classify import ClassifyRule, SegmentClassifier, pattern_problem

SECTION = "classify"
IMPLICIT: dict[str, Any] = {"rules": [], "defaults": True}


def drop_implicit(spec: dict[str, Any]) -> None:
    """The canonical form of ``spec.classify`` in a normalized ``spec``: a rule's single role
    written as a string, fields at their implicit value dropped, an empty section dropped."""
    section = spec.get(SECTION)
    if section is None:
        return
    for rule in section.get("rules", []):
        role = rule["match"].get("role")
        if isinstance(role, list) and len(role) == 1:
            rule["match"]["role"] = role[0]
    for name, value in IMPLICIT.items():
        if section.get(name, value) == value:
            section.pop(name, None)
    if not section:
        spec.pop(SECTION)


def effective_document(document: dict[str, Any]) -> dict[str, Any]:
    """A normalized policy document with ``spec.transition``, ``spec.fidelity`` and
    ``spec.classify`` filled in: what guardrails and ``policy diff`` compare."""
    document = fidelity.effective_document(document)
    spec = document.get("spec")
    if not isinstance(spec, dict):
        return document
    filled = copy.copy(document)
    filled["spec"] = {**spec, SECTION: {**copy.deepcopy(IMPLICIT), **spec.get(SECTION, {})}}
    return filled


def classify_settings(spec: dict[str, Any]) -> ClassifySettings:
    """The resolved settings of a normalized ``spec``."""
    section = spec.get(SECTION, {})
    rules = []
    for i, rule in enumerate(section.get("rules", [])):
        match = rule["match"]
        role = match.get("role", [])
        rules.append(
            ClassifyRule(
                kind=rule["kind"],
                roles=(role,) if isinstance(role, str) else tuple(role),
                pattern=match.get("pattern"),
                tool=match.get("tool"),
                name=f"spec.classify.rules[{i}]",
            )
        )
    return ClassifySettings(tuple(rules), bool(section.get("defaults", True)))


def pattern_problems(data: dict[str, Any], problem: Callable[..., Problem]) -> list[Problem]:
    """Each rule's pattern must compile as RE2: located, one problem each."""
    spec = data.get("spec", {})
    section = spec.get(SECTION) if isinstance(spec, dict) else None
    rules = section.get("rules", []) if isinstance(section, dict) else []
    found = []
    for i, rule in enumerate(rules):
        pattern = rule.get("match", {}).get("pattern") if isinstance(rule, dict) else None
        if isinstance(pattern, str) and (why := pattern_problem(pattern)) is not None:
            found.append(problem(("spec", SECTION, "rules", i, "match", "pattern"), why))
    return found


@lru_cache(maxsize=64)
def _classifier(settings: ClassifySettings) -> SegmentClassifier:
    return SegmentClassifier(settings.ordered)


def classifier(policy: Policy) -> SegmentClassifier:
    """The policy's classifier: its ``spec.classify`` rules, then the defaults (compiled once
    per distinct section)."""
    return _classifier(policy.spec.classify)
