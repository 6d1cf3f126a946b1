"""The decisions of a planned pass, each eviction decided over columns built when first read.

A plan of 200 candidates used to build a typed request, reasons, actions and a ``Decision`` per
candidate, and most callers read only what the plan evicts. Where the policy lets the columns
decide an eviction (:class:`~prunewarden.pipeline.ColumnarEviction`), the pass keeps what it
needs to go on (whether the verdict blocks, its codes, its entry in the pass record) and a way to
build the decision, through the same pipeline step the general path takes, when someone reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

from prunewarden.decision import Decision
from prunewarden.inputs import Request


class DeferredDecision:
    """One eviction of a pass decided over columns: whether it blocks, its codes, whether it
    pins the segment, its verdict entry in the pass record, and its decision, built once on
    first read (two threads reading at once may each build it, and get equal decisions)."""

    __slots__ = ("_build", "_decision", "blocks", "codes", "pins", "request", "verdict")

    def __init__(
        self,
        request: Callable[[], Request],
        build: Callable[[Request], Decision],
        verdict: dict[str, Any],
        *,
        blocks: bool,
        pins: bool,
    ) -> None:
        self.request = request
        """The request the decision is about, built when called."""
        self._build = build
        self._decision: Decision | None = None
        self.verdict = verdict
        self.codes: tuple[str, ...] = tuple(verdict["codes"])
        self.blocks = blocks
        self.pins = pins

    def get(self) -> Decision:
        decision = self._decision
        if decision is None:
            decision = self._decision = self._build(self.request())
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

    def __repr__(self) -> str:
        return f"PlanDecisions(decisions={len(self)})"
