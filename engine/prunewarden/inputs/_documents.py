"""The request documents the typed entry points build from keyword arguments.

``Engine.authorize_eviction`` and ``Session.authorize`` (and both ``prune``\\ s) take the same
arguments and must log the same document for them, so they build it here, once; the server's
client sends the same documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def eviction_document(
    segment: Mapping[str, Any],
    score: float,
    perturbed_score: float | None,
    eviction_candidates: Iterable[str],
) -> dict[str, Any]:
    """An eviction request for one segment."""
    return {
        "check": "eviction",
        "segment": dict(segment),
        "score": score,
        "perturbed_score": perturbed_score,
        "eviction_candidates": list(eviction_candidates),
    }


def staleness_document(  # noqa: PLR0913 - mirrors the staleness document's optional fields
    spans: Iterable[Mapping[str, Any]],
    keep_top_k: int,
    *,
    turn: Mapping[str, int] | None = None,
    turns: Iterable[Mapping[str, Any]] | None = None,
    tombstones: Iterable[str] = (),
    recompute_budget: int | None = None,
) -> dict[str, Any]:
    """A prune request; optional fields appear only when given."""
    document: dict[str, Any] = {
        "check": "staleness",
        "spans": [dict(s) for s in spans],
        "keep_top_k": keep_top_k,
        "tombstones": list(tombstones),
    }
    if turn is not None:
        document["turn"] = dict(turn)
    if turns is not None:
        document["turns"] = [dict(t) for t in turns]
    if recompute_budget is not None:
        document["recompute_budget"] = recompute_budget
    return document


def plan_document(  # noqa: PLR0913 - mirrors the plan document's optional fields
    segments: Iterable[Mapping[str, Any]],
    *,
    free_tokens: int | None = None,
    keep_top_k: int | None = None,
    turn: Mapping[str, int] | None = None,
    tombstones: Iterable[str] = (),
    recompute_budget: int | None = None,
) -> dict[str, Any]:
    """A pruning pass's window and target; optional fields appear only when given."""
    document: dict[str, Any] = {
        "segments": [dict(s) for s in segments],
        "tombstones": list(tombstones),
    }
    if free_tokens is not None:
        document["free_tokens"] = free_tokens
    if keep_top_k is not None:
        document["keep_top_k"] = keep_top_k
    if turn is not None:
        document["turn"] = dict(turn)
    if recompute_budget is not None:
        document["recompute_budget"] = recompute_budget
    return document


def transition_document(  # noqa: PLR0913 - mirrors the transition document's optional fields
    before: Iterable[Mapping[str, Any]],
    after: Iterable[Mapping[str, Any]],
    *,
    tombstones: Iterable[str] = (),
    applied_by: str | None = None,
    reported: Mapping[str, int] | None = None,
    canaries: Iterable[str] = (),
) -> dict[str, Any]:
    """An edit of the window, before and after; optional fields appear only when given."""
    document: dict[str, Any] = {
        "check": "transition",
        "before": [dict(s) for s in before],
        "after": [dict(s) for s in after],
        "tombstones": list(tombstones),
        "canaries": list(canaries),
    }
    if applied_by is not None:
        document["applied_by"] = applied_by
    if reported is not None:
        document["reported"] = dict(reported)
    return document
