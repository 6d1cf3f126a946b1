"""The typed requests the guards decide on (values only; :mod:`._parse` builds them)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Literal

from prunewarden._cusum import CusumTrack


@dataclass(frozen=True, slots=True)
class ScoreRange:
    """The range a policy's scores live in; a score outside it is an input error."""

    min: float
    max: float


Check = Literal["collapse", "eviction", "staleness", "transition"]
CHECKS: tuple[Check, ...] = ("collapse", "eviction", "staleness", "transition")


@dataclass(frozen=True, slots=True)
class Snapshot:
    cycle: int
    scores: dict[str, float]
    pinned: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CollapseRequest:
    history: tuple[Snapshot, ...]
    baseline: dict[str, float] | None
    # The spreads of the session's first cycles (on the judged scale), which a relative spread
    # floor is relative to; None: the first cycles of ``history``. Set by a Session, which keeps
    # fewer snapshots than that; no field of an input document.
    early_spreads: tuple[float, ...] | None = None
    # The cusum spread test's track after the last cycle, kept by a Session; None: recomputed
    # over ``history`` from its first cycle. No field of an input document.
    cusum: CusumTrack | None = None


@dataclass(frozen=True, slots=True)
class Segment:
    id: str
    kind: str
    text: str
    non_recoverable: bool
    score_dependencies: tuple[str, ...]
    tombstone_written: bool
    tokens: int | None
    metadata: dict[str, Any] = field(default_factory=dict)  # free-form, read only by rules


@dataclass(frozen=True, slots=True)
class EvictionRequest:
    segment: Segment
    score: float
    perturbed_score: float | None
    eviction_candidates: AbstractSet[str]  # a frozenset, or a planned pass's CandidateView


@dataclass(frozen=True, slots=True)
class Span:
    span_id: str
    text: str
    score: float | None
    text_sha256: str
    rewrite_count: int
    derived_from: tuple[str, ...]
    # The SHA-256 of ``text`` (lower-case hex of its UTF-8 bytes), computed once as a staleness
    # document is typed, so that the guard's binding check and the audit record's subject share
    # one pass over the text. "" when not computed, or when the text holds a lone surrogate (it
    # has no UTF-8 bytes): each then hashes the text as it always did.
    text_digest: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class TurnStats:
    spans_modified: int
    scores_invalidated: int


@dataclass(frozen=True, slots=True)
class Turn:
    turn: int
    mean_relevance: float
    tokens: int


@dataclass(frozen=True, slots=True)
class StalenessRequest:
    spans: tuple[Span, ...]
    keep_top_k: int
    turn: TurnStats | None
    turns: tuple[Turn, ...]
    tombstones: frozenset[str]
    recompute_budget: int | None


@dataclass(frozen=True, slots=True)
class WindowSegment:
    """A segment of the window a pruning pass plans over, seen by both guards."""

    segment: Segment
    score: float
    perturbed_score: float | None
    span: Span  # the same segment as the staleness guard sees it
    group: str | None = None  # an eviction group: evicted with its other members or not at all


@dataclass(frozen=True, slots=True)
class PlanRequest:
    segments: tuple[WindowSegment, ...]
    free_tokens: int | None
    keep_top_k: int | None
    history: tuple[Snapshot, ...] | None
    baseline: dict[str, float] | None
    turn: TurnStats | None
    turns: tuple[Turn, ...]
    tombstones: frozenset[str]
    recompute_budget: int | None
    session_id: str | None
    labels: dict[str, str]


@dataclass(frozen=True, slots=True)
class TransitionSegment:
    """A segment of the window before or after an edit (``$defs/transition_segment``)."""

    id: str  # segment.id, read on every derivation step: a field, not a property
    segment: Segment  # as the eviction guard sees it (tombstone_written: as the document says)
    score: float | None
    perturbed_score: float | None
    text_sha256: str  # the declared binding of ``score``; "" when unbound
    text_digest: str  # the SHA-256 of ``segment.text``, computed once as the document is typed
    derived_from: tuple[str, ...] = ()
    group: str | None = None
    tombstone_for: tuple[str, ...] = ()
    rewrite_count: int = 0


@dataclass(frozen=True, slots=True)
class Edit:
    """The edit a transition made, derived by content (:func:`prunewarden.inputs.derive_edit`).

    Every id of ``before`` is in exactly one of ``kept``, ``rewritten``, ``folded`` and
    ``removed``; every id of ``after`` in exactly one of ``kept``, ``rewritten``, ``summaries``
    and ``added``. Each tuple is in its window's order.
    """

    kept: tuple[str, ...]
    rewritten: tuple[str, ...]
    folded: tuple[str, ...]  # gone from after, named by an after segment's derived_from
    removed: tuple[str, ...]
    summaries: tuple[str, ...]  # new ids deriving from others
    added: tuple[str, ...]  # new ids deriving from nothing (tombstone segments among them)
    tombstoned: frozenset[str]  # ids of before a tombstone records (the list or tombstone_for)
    scored_rewrites: tuple[str, ...]  # rewritten ids whose before segment carried a score


@dataclass(frozen=True, slots=True)
class TransitionRequest:
    """A window before and after an edit made by any code (``check: transition``)."""

    before: tuple[TransitionSegment, ...]
    after: tuple[TransitionSegment, ...]
    tombstones: frozenset[str]
    applied_by: str | None
    reported: TurnStats | None
    canaries: frozenset[str]
    session_id: str | None
    labels: dict[str, str]
    edit: Edit
    # Ids pinned beyond the document: a session's canaries and rule pins (Session.verify); no
    # field of an input document.
    pinned: frozenset[str] = frozenset()
    # The session's halt while it holds (its collapse decision and cycle); no document field.
    halt: dict[str, Any] | None = None


Request = CollapseRequest | EvictionRequest | StalenessRequest | TransitionRequest
