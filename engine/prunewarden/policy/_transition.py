"""``spec.transition``: how edits made by any code are judged, and why an absent section keeps
every digest a policy had before the section existed.

Each field of the section has an implicit value: ``mode: enforce``, ``require_scores: false``,
and ``require_tombstones`` and ``pinned_kinds`` following the eviction section
(``eviction.require_tombstone``, ``eviction.pinned_kinds``). The canonical document (what the
digest hashes) keeps only the fields that differ from their implicit value, and drops the section
when none does, as the optional calibration settings are dropped: a policy that does not mention
transitions digests as it did, and spelling the implicit values out changes nothing. That is
sound because the implicit values are part of the policy format (``policy.v1``), not of an engine
release: they are fixed, so one digest means one behaviour.

Guardrails and ``policy diff`` read the *effective* document (:func:`effective_document`), with the
section filled in, so that a lock on ``/spec/transition/pinned_kinds`` holds when an overlay
changes ``eviction.pinned_kinds`` under it, and a validator can read ``spec.transition.mode``.
"""

from __future__ import annotations

import copy
from typing import Any

from prunewarden.policy._model import TransitionSettings

SECTION = "transition"


def _implicit(spec: dict[str, Any]) -> dict[str, Any]:
    """The value each field takes when the section does not set it."""
    eviction = spec["eviction"]
    return {
        "mode": "enforce",
        "require_tombstones": bool(eviction["require_tombstone"]),
        "require_scores": False,
        "pinned_kinds": sorted(eviction["pinned_kinds"]),
    }


def drop_implicit(spec: dict[str, Any]) -> None:
    """The canonical form of ``spec.transition`` in a normalized ``spec`` (its eviction section
    already normalized): pinned kinds sorted (a set), fields at their implicit value dropped,
    and the section dropped when nothing is left."""
    section = spec.get(SECTION)
    if section is None:
        return
    if "pinned_kinds" in section:
        section["pinned_kinds"] = sorted(section["pinned_kinds"])
    for name, value in _implicit(spec).items():
        if section.get(name, value) == value:
            section.pop(name, None)
    if not section:
        spec.pop(SECTION)


def effective_document(document: dict[str, Any]) -> dict[str, Any]:
    """A normalized policy document with ``spec.transition`` filled in: what guardrails and
    ``policy diff`` compare. Not what the digest hashes."""
    spec = document.get("spec")
    if not isinstance(spec, dict) or "eviction" not in spec:
        return document
    filled = copy.copy(document)
    filled["spec"] = {**spec, SECTION: {**_implicit(spec), **spec.get(SECTION, {})}}
    return filled


def transition_settings(spec: dict[str, Any]) -> TransitionSettings:
    """The resolved settings of a normalized ``spec``."""
    fields = {**_implicit(spec), **spec.get(SECTION, {})}
    return TransitionSettings(
        mode=fields["mode"],
        require_tombstones=fields["require_tombstones"],
        require_scores=fields["require_scores"],
        pinned_kinds=frozenset(fields["pinned_kinds"]),
    )
