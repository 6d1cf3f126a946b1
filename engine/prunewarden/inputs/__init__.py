"""Request documents: the typed requests (model), their parsing and validation with located
errors, the fast acceptor of well-formed documents, and eviction passes.
"""

from __future__ import annotations

from prunewarden.inputs._model import (
    CHECKS,
    Check,
    CollapseRequest,
    EvictionRequest,
    PlanRequest,
    Request,
    ScoreRange,
    Segment,
    Snapshot,
    Span,
    StalenessRequest,
    Turn,
    TurnStats,
    WindowSegment,
)
from prunewarden.inputs._parse import parse_plan, parse_request, refused_unchecked
from prunewarden.inputs._passes import CandidateView, PassCandidates, parse_evictions

__all__ = [
    "CHECKS",
    "CandidateView",
    "Check",
    "CollapseRequest",
    "EvictionRequest",
    "PassCandidates",
    "PlanRequest",
    "Request",
    "ScoreRange",
    "Segment",
    "Snapshot",
    "Span",
    "StalenessRequest",
    "Turn",
    "TurnStats",
    "WindowSegment",
    "parse_evictions",
    "parse_plan",
    "parse_request",
    "refused_unchecked",
]
