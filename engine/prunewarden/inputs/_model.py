"""The typed requests the guards decide on (values only; :mod:`._parse` builds them)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any, Literal

import msgspec

from prunewarden._cusum import CusumTrack


class ScoreRange(msgspec.Struct, frozen=True):
    """The range a policy's scores live in; a score outside it is an input error."""

    min: float
    max: float


Check = Literal["collapse", "eviction", "staleness", "transition"]
CHECKS: tuple[Check, ...] = ("collapse", "eviction", "staleness", "transition")


class Snapshot(msgspec.Struct, frozen=True):
    cycle: int
    scores: dict[str, float]
    pinned: tuple[str, ...]


class CollapseRequest(msgspec.Struct, frozen=True):
    history: tuple[Snapshot, ...]
    baseline: dict[str, float] | None
    # The spreads of the session's first cycles (on the judged scale), which a relative spread
    # floor is relative to; None: the first cycles of ``history``. Set by a Session, which keeps
    # fewer snapshots than that; no field of an input document.
    early_spreads: tuple[float, ...] | None = None
    # The cusum spread test's track after the last cycle, kept by a Session; None: recomputed
    # over ``history`` from its first cycle. No field of an input document.
    cusum: CusumTrack | None = None


class Segment(msgspec.Struct, frozen=True):
    id: str
    kind: str
    text: str
    non_recoverable: bool
    score_dependencies: tuple[str, ...]
    tombstone_written: bool
    tokens: int | None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)  # free-form, read only by rules


class EvictionRequest(msgspec.Struct, frozen=True):
    segment: Segment
    score: float
    perturbed_score: float | None
    eviction_candidates: AbstractSet[str]  # a frozenset, or a planned pass's CandidateView


class Span(msgspec.Struct, frozen=True, eq=False):
    span_id: str
    text: str
    score: float | None
    text_sha256: str
    rewrite_count: int
    derived_from: tuple[str, ...]
    # The SHA-256 of ``text`` (lower-case hex of its UTF-8 bytes), computed once as a staleness
    # document is typed, so that the guard's binding check and the audit record's subject share
    # one pass over the text. "" when not computed, or when the text holds a lone surrogate (it
    # has no UTF-8 bytes): each then hashes the text as it always did. A cache of ``text``: not
    # compared, hashed nor shown (the methods below leave it out).
    text_digest: str = ""

    def _compared(self) -> tuple[str, str, float | None, str, int, tuple[str, ...]]:
        return (
            self.span_id,
            self.text,
            self.score,
            self.text_sha256,
            self.rewrite_count,
            self.derived_from,
        )

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Span)  # noqa: S101 - for the type checker: the class is ours
        return self._compared() == other._compared()

    def __ne__(self, other: object) -> bool:
        # Written out: a Struct without generated equality would compare identities here.
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self._compared())

    def __repr__(self) -> str:
        return (
            f"Span(span_id={self.span_id!r}, text={self.text!r}, score={self.score!r}, "
            f"text_sha256={self.text_sha256!r}, rewrite_count={self.rewrite_count!r}, "
            f"derived_from={self.derived_from!r})"
        )


class TurnStats(msgspec.Struct, frozen=True):
    spans_modified: int
    scores_invalidated: int


class Turn(msgspec.Struct, frozen=True):
    turn: int
    mean_relevance: float
    tokens: int


class StalenessRequest(msgspec.Struct, frozen=True):
    spans: tuple[Span, ...]
    keep_top_k: int
    turn: TurnStats | None
    turns: tuple[Turn, ...]
    tombstones: frozenset[str]
    recompute_budget: int | None


class WindowSegment(msgspec.Struct, frozen=True):
    """A segment of the window a pruning pass plans over, seen by both guards."""

    segment: Segment
    score: float
    perturbed_score: float | None
    span: Span  # the same segment as the staleness guard sees it
    group: str | None = None  # an eviction group: evicted with its other members or not at all


class PlanRequest(msgspec.Struct, frozen=True):
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


class TransitionSegment(msgspec.Struct, frozen=True):
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


class Edit(msgspec.Struct, frozen=True):
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


class TransitionRequest(msgspec.Struct, frozen=True):
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
