"""The decisions of a planned pass, each eviction decided over columns built when first read.

A plan of 200 candidates used to build a typed request, reasons, actions and a ``Decision`` per
candidate, and most callers read only what the plan evicts. Where the policy lets the columns
decide an eviction (:class:`~prunewarden.pipeline.ColumnarEviction`), the pass keeps what it
needs to go on (whether the verdict blocks, its codes, its entry in the pass record) and a way to
build the decision, through the same pipeline step the general path takes, when someone reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from prunewarden.decision import Decision, Stamp
from prunewarden.inputs import EvictionRequest, Segment
from prunewarden.pipeline import ColumnarEviction


class DeferredDecision:
    """One eviction of a pass decided over columns: its bitmask of codes and pending
    dependencies, what the pass reads of it (whether it blocks, its codes, whether it pins the
    segment), its verdict entry in the pass record, and its decision, built once on first read
    (two threads reading at once may each build it, and get equal decisions)."""

    __slots__ = (
        "_decision",
        "columnar",
        "mask",
        "pending",
        "perturbed",
        "score",
        "segment",
        "stamp",
    )

    def __init__(  # noqa: PLR0913, PLR0917 - the eviction as offered, what the columns found
        self,
        columnar: ColumnarEviction,
        segment: Segment,
        score: float,
        perturbed: float | None,
        stamp: Stamp,
        found: tuple[int, list[str]],
    ) -> None:
        self.columnar = columnar
        self.segment = segment
        self.score = score
        self.perturbed = perturbed
        self.stamp = stamp
        self.mask, self.pending = found
        self._decision: Decision | None = None

    @property
    def blocks(self) -> bool:
        return self.columnar.blocks(self.mask)

    @property
    def codes(self) -> tuple[str, ...]:
        return self.columnar.codes(self.mask)

    @property
    def pins(self) -> bool:
        """Whether the refusal pins the segment (a ``pin`` action naming it)."""
        return "pinned" in self.codes

    @property
    def verdict(self) -> dict[str, Any]:
        """What a version 2 pass record says of the decision."""
        return self.columnar.verdict_entry(self.mask, self.pending, self.segment.id)

    def request(self) -> EvictionRequest:
        """The request as the guard reads it: of the candidates, only the pending dependencies
        and the segment itself matter (so none of the pass's later picks or rollbacks)."""
        candidates = frozenset((*self.pending, self.segment.id))
        return EvictionRequest(self.segment, self.score, self.perturbed, candidates)

    def get(self) -> Decision:
        decision = self._decision
        if decision is None:
            decision = self._decision = self.columnar.pipeline.decide(self.request(), self.stamp)
        return decision


Entry = Decision | DeferredDecision


class PlanDecisions(Sequence[Decision]):
    """The decisions of a pass in order, as a sequence: an eviction the columns decided is built
    on first read and kept. Equal to any sequence of equal decisions (a tuple of them too)."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._entries: list[Entry] = list(entries)

    def append(self, entry: Entry) -> None:
        self._entries.append(entry)

    @property
    def entries(self) -> Sequence[Entry]:
        """The entries as they stand: decisions, and deferred ones not built for reading."""
        return self._entries

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> Decision: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Decision]: ...

    def __getitem__(self, index: int | slice) -> Decision | Sequence[Decision]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(len(self))[index])
        entry = self._entries[index]
        return entry.get() if isinstance(entry, DeferredDecision) else entry

    def __iter__(self) -> Iterator[Decision]:
        for index in range(len(self)):
            yield self[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __reduce__(self) -> tuple[type[PlanDecisions], tuple[tuple[Decision, ...]]]:
        # Pickled built (a plan sent to another process): a deferred one holds the pipeline.
        return (PlanDecisions, (tuple(self),))

    def __repr__(self) -> str:
        return f"PlanDecisions(decisions={len(self)})"
