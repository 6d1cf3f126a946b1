"""``spec.fidelity``: whether a summary must still say what its parents said, and why an absent
section keeps every digest a policy had before the section existed.

An absent section is ``mode: off``: fidelity is checked only by a policy that asks for it, and
``spec: {fidelity: {mode: enforce}}`` (or ``fidelity: {}``) is enough, every other field taking its
implicit value: ``method: facts``, ``scope: protected``, every fact kind, ``min_kept_share: 1.0``,
``embedding_floor: 0.5``, the default error patterns and ``opaque: keep_pinned``. The canonical
document (what the digest hashes) keeps the mode and only the fields that differ from their
implicit value, and drops the section when its mode is ``off``: spelling the implicit values out
changes nothing. As with ``spec.transition``, the implicit values belong to the policy format
(``policy.v1``), not to an engine release, so one digest means one behaviour.

Guardrails and ``policy diff`` read the *effective* document (:func:`effective_document`), with
the section filled in.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from prunewarden.errors import Problem
from prunewarden.fidelity import DEFAULT_ERROR_PATTERNS, FACT_KINDS, FidelitySettings
from prunewarden.policy import _transition as transition

SECTION = "fidelity"

IMPLICIT: dict[str, Any] = {
    "method": "facts",
    "scope": "protected",
    "kinds": list(FACT_KINDS),
    "min_kept_share": 1.0,
    "embedding_floor": 0.5,
    "error_patterns": list(DEFAULT_ERROR_PATTERNS),
    "opaque": "keep_pinned",
}


def drop_implicit(spec: dict[str, Any]) -> None:
    """The canonical form of ``spec.fidelity`` in a normalized ``spec``: the mode always (an
    absent one is ``enforce``), numbers as floats, kinds in :data:`FACT_KINDS` order (a set),
    fields at their implicit value dropped, the section dropped when its mode is ``off``."""
    section = spec.get(SECTION)
    if section is None:
        return
    section.setdefault("mode", "enforce")
    if section["mode"] == "off":
        spec.pop(SECTION)
        return
    if "kinds" in section:
        section["kinds"] = [kind for kind in FACT_KINDS if kind in section["kinds"]]
    for name in ("min_kept_share", "embedding_floor"):
        if name in section:
            section[name] = float(section[name])
    for name, value in IMPLICIT.items():
        if section.get(name, value) == value:
            section.pop(name, None)


def effective_document(document: dict[str, Any]) -> dict[str, Any]:
    """A normalized policy document with ``spec.transition`` and ``spec.fidelity`` filled in
    (fidelity ``mode: off`` when the policy has none): what guardrails and ``policy diff``
    compare. Not what the digest hashes."""
    document = transition.effective_document(document)
    spec = document.get("spec")
    if not isinstance(spec, dict):
        return document
    section = spec.get(SECTION, {"mode": "off"})
    filled = copy.copy(document)
    filled["spec"] = {**spec, SECTION: {"mode": "enforce", **IMPLICIT, **section}}
    return filled


def fidelity_settings(spec: dict[str, Any]) -> FidelitySettings:
    """The resolved settings of a normalized ``spec`` (``mode: off`` without the section)."""
    section = spec.get(SECTION)
    if section is None:
        return FidelitySettings(mode="off")
    fields = {"mode": "enforce", **IMPLICIT, **section}
    return FidelitySettings(
        mode=fields["mode"],
        method=fields["method"],
        scope=fields["scope"],
        kinds=frozenset(fields["kinds"]),
        min_kept_share=float(fields["min_kept_share"]),
        embedding_floor=float(fields["embedding_floor"]),
        error_patterns=tuple(fields["error_patterns"]),
        opaque=fields["opaque"],
    )


def pattern_problems(data: dict[str, Any], problem: Callable[..., Problem]) -> list[Problem]:
    """Each error pattern must compile (Python ``re`` syntax): located, one problem each."""
    spec = data.get("spec", {})
    section = spec.get(SECTION) if isinstance(spec, dict) else None
    patterns = section.get("error_patterns", []) if isinstance(section, dict) else []
    found = []
    for i, pattern in enumerate(patterns):
        try:
            re.compile(pattern)
        except re.error as exc:
            message = f"{pattern!r} is not a regular expression ({exc})"
            found.append(problem(("spec", SECTION, "error_patterns", i), message))
    return found
