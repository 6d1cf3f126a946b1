"""Request documents: the typed requests (model), their parsing and validation with located
errors, the compiled yes or no for valid documents, and eviction passes.
"""

from __future__ import annotations

from prunewarden.inputs._checks import check_caller_fields
from prunewarden.inputs._documents import (
    eviction_document,
    plan_document,
    staleness_document,
    transition_document,
)
from prunewarden.inputs._edits import TOMBSTONE_KIND, derive_edit
from prunewarden.inputs._model import (
    CHECKS,
    Check,
    CollapseRequest,
    Edit,
    EvictionRequest,
    PlanRequest,
    Request,
    ScoreRange,
    Segment,
    Snapshot,
    Span,
    StalenessRequest,
    TransitionRequest,
    TransitionSegment,
    Turn,
    WindowSegment,
)
from prunewarden.inputs._parse import (
    eviction_request,
    parse_plan,
    parse_request,
    parse_request_encoded,
    refused_unchecked,
)
from prunewarden.inputs._passes import (
    PassCandidates,
    WellFormedPass,
    parse_evictions,
    pass_lists,
    well_formed_pass,
)

__all__ = [
    "CHECKS",
    "TOMBSTONE_KIND",
    "Check",
    "CollapseRequest",
    "Edit",
    "EvictionRequest",
    "PassCandidates",
    "PlanRequest",
    "Request",
    "ScoreRange",
    "Segment",
    "Snapshot",
    "Span",
    "StalenessRequest",
    "TransitionRequest",
    "TransitionSegment",
    "Turn",
    "WellFormedPass",
    "WindowSegment",
    "check_caller_fields",
    "derive_edit",
    "eviction_document",
    "eviction_request",
    "parse_evictions",
    "parse_plan",
    "parse_request",
    "parse_request_encoded",
    "pass_lists",
    "plan_document",
    "refused_unchecked",
    "staleness_document",
    "transition_document",
    "well_formed_pass",
]
