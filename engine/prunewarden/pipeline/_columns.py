"""An eviction pass decided over columns, and the result a caller reads it through.

A pass of 200 segments used to build, per segment, a typed request, a reason with its message,
an action and a :class:`Decision`, and most callers read one boolean of each. Here the guard's
conditions run over the item dicts (:class:`~prunewarden.guards.eviction.PassCheck`) and give
one bitmask of reason codes per segment; a :class:`PassResult` answers ``allowed``, ``evict_ids``
and ``codes`` from those columns and builds a segment's :class:`Decision` only when it is read,
through the same pipeline step the general path takes, so that it is that decision field by
field.

Only what the columns decide exactly takes this path (:func:`columnar_eviction` says when); any
other policy or pass goes the general way, decision by decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, overload

from prunewarden.decision import Decision, Reason, Stamp
from prunewarden.guards import eviction
from prunewarden.guards.eviction import CODE_ACTIONS, CODES, PassCheck, PassColumns
from prunewarden.inputs import Check, Segment, eviction_request
from prunewarden.pipeline._compile import Pipeline
from prunewarden.policy import Policy

_ALLOWED = CODES.index("authorized")
_DEPENDENCIES = CODES.index("unscoreable")  # its action names the pending dependencies


class PassResult(Sequence[Decision]):
    """The decisions of one eviction pass (:meth:`Engine.authorize_pass`), in input order.

    ``allowed[i]`` says whether the verdict on segment ``i`` allows its eviction (outcome
    ``allow``), ``evict_ids`` lists the segments allowed, ``codes[i]`` holds every reason code
    of segment ``i`` (the primary first) and ``pass_id`` names the pass in the audit log.
    ``result[i]`` is the :class:`Decision` the general path builds for that segment (its id
    ``<pass_id>-<i>``), built on first access and kept; iterating builds them all. ``record``
    is the pass's audit record once it is written (None without a sink or a hook). Safe to
    read from several threads: two reading one decision at once may each build it, and get
    equal decisions.
    """

    __slots__ = (
        "_build",
        "_decisions",
        "allowed",
        "codes",
        "evaluated_at",
        "pass_id",
        "record",
        "segment_ids",
    )

    def __init__(  # noqa: PLR0913, PLR0917 - the columns, and how a decision is built
        self,
        pass_id: str,
        evaluated_at: str,
        segment_ids: Sequence[str],
        allowed: list[bool],
        codes: tuple[tuple[str, ...], ...],
        build: Callable[[int], Decision],
        decisions: list[Decision | None] | None = None,
    ) -> None:
        self.pass_id = pass_id
        self.evaluated_at = evaluated_at
        self.segment_ids = tuple(segment_ids)
        self.allowed = allowed
        self.codes = codes
        self._build = build
        self._decisions: list[Decision | None] = (
            decisions if decisions is not None else [None] * len(allowed)
        )
        self.record: Mapping[str, Any] | None = None

    @classmethod
    def of_decisions(cls, decisions: Sequence[Decision], segment_ids: Sequence[str]) -> PassResult:
        """The result of a pass the general path decided, decision by decision."""
        built: list[Decision | None] = list(decisions)
        first = decisions[0] if decisions else None
        return cls(
            first.pass_id or "" if first is not None else "",
            first.evaluated_at if first is not None else "",
            segment_ids,
            [d.outcome == "allow" for d in decisions],
            tuple(d.codes for d in decisions),
            lambda index: decisions[index],
            built,
        )

    @property
    def evict_ids(self) -> tuple[str, ...]:
        """The ids of the segments whose eviction the pass allows, in input order."""
        return tuple(i for i, ok in zip(self.segment_ids, self.allowed, strict=True) if ok)

    def __len__(self) -> int:
        return len(self.allowed)

    @overload
    def __getitem__(self, index: int) -> Decision: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Decision]: ...

    def __getitem__(self, index: int | slice) -> Decision | Sequence[Decision]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        decision = self._decisions[index]
        if decision is None:
            decision = self._build(index % len(self))
            self._decisions[index] = decision
        return decision

    def __iter__(self) -> Iterator[Decision]:
        for index in range(len(self)):
            yield self[index]

    def __repr__(self) -> str:
        allowed = sum(self.allowed)
        return f"PassResult(pass_id={self.pass_id!r}, segments={len(self)}, allowed={allowed})"


class ColumnarEviction:
    """A policy's eviction pipeline bound for passes over columns: the guard's conditions
    (:class:`PassCheck`) and the step that builds one segment's decision when it is read."""

    __slots__ = ("check", "enforced", "pipeline", "refusal")

    def __init__(self, pipeline: Pipeline, check: PassCheck) -> None:
        self.pipeline = pipeline
        self.check = check
        self.enforced = pipeline.mode == "enforce"
        self.refusal = pipeline.guard.refusal

    def decide(
        self, items: Sequence[Mapping[str, Any]], candidates: Sequence[str], stamp: Stamp
    ) -> tuple[PassColumns, PassResult] | None:
        """The pass's columns and its result (``stamp`` gives its id and time); None when the
        columns cannot decide it exactly (see :meth:`PassCheck.decide`)."""
        shared = frozenset(candidates)
        try:
            columns = self.check.decide(items, shared)
        except Exception:  # noqa: BLE001 - fail closed: the general path refuses what failed
            return None
        if columns is None:
            return None
        pipeline, pass_id, at = self.pipeline, stamp.pass_id, stamp.evaluated_at

        def build(index: int) -> Decision:
            request = eviction_request(items[index], shared)
            return pipeline.decide(request, Stamp(pass_id, index, at))

        masks = columns.masks
        allowed = [mask == 1 << _ALLOWED for mask in masks]
        result = PassResult(pass_id, at, columns.segment_ids, allowed, codes_of(masks), build)
        return columns, result

    def decide_segment(
        self,
        segment: Segment,
        score: float,
        perturbed: float | None,
        candidates: AbstractSet[str],
    ) -> tuple[int, list[str]] | None:
        """One eviction of a planned pass: its bitmask of :data:`CODES` and the pending
        dependencies it names; None when the columns cannot decide it exactly (see
        :meth:`PassCheck.decide_segment`), so that it takes the general path."""
        try:
            return self.check.decide_segment(segment, score, perturbed, candidates)
        except Exception:  # noqa: BLE001 - fail closed: the general path refuses what failed
            return None

    def codes(self, mask: int) -> tuple[str, ...]:
        """The codes of one bitmask, the primary first."""
        return _CODES_OF[mask]

    def blocks(self, mask: int) -> bool:
        """Whether the decision ``mask`` stands for blocks the caller (a refusal, enforced)."""
        return mask != 1 << _ALLOWED and self.enforced

    def verdict_entry(self, mask: int, pending: Sequence[str], segment_id: str) -> dict[str, Any]:
        """What a version 2 pass record says of the decision ``mask`` stands for (as
        ``audit.verdict_entry`` says it of the built decision): its outcome, codes, and the
        actions in its reasons' order, each once."""
        codes = _CODES_OF[mask]
        actions: list[dict[str, Any]] = []
        for bit in range(len(CODES)):
            name = CODE_ACTIONS[bit]
            if name is None or not mask >> bit & 1:
                continue
            ids = list(pending) if bit == _DEPENDENCIES else [segment_id]
            action = {"action": name, "ids": ids}
            if action not in actions:
                actions.append(action)
        return {
            "check": "eviction",
            "outcome": "allow" if mask == 1 << _ALLOWED else self.refusal,
            "enforced": self.enforced,
            "codes": list(codes),
            "actions": actions,
            "segment": segment_id,
        }

    def refused(self, result: PassResult, reason: Reason) -> PassResult:
        """The pass with every decision refused for ``reason`` (its record could not be
        written), as the general path refuses a pass."""
        pipeline, pass_id, at = self.pipeline, result.pass_id, result.evaluated_at

        def build(index: int) -> Decision:
            return pipeline.refuse(reason, stamp=Stamp(pass_id, index, at))

        codes = ((reason.code,),) * len(result)
        return PassResult(pass_id, at, result.segment_ids, [False] * len(result), codes, build)


def columnar_eviction(
    pipelines: Mapping[Check, Pipeline], policy: Policy, *, shadow: bool
) -> ColumnarEviction | None:
    """The columnar eviction of a policy, or None when its passes take the general path: rules
    (they read each typed request), score calibration, a guard that is not enforcing (off, or
    ``audit``, a dry run), a shadow policy deciding beside it, or a guard other than the one
    whose conditions :class:`PassCheck` states (one replaced in ``GUARDS``)."""
    pipeline = pipelines["eviction"]
    if (
        shadow
        or pipeline.rules
        or pipeline.calibration is not None
        or pipeline.mode != "enforce"
        or pipeline.guard.evaluate is not eviction.evaluate
    ):
        return None
    return ColumnarEviction(pipeline, PassCheck.bind(policy.spec.eviction, policy.spec.scores))


# Every bitmask's codes, in CODES order (the guard's): 64 tuples, shared by every pass.
_CODES_OF = tuple(
    tuple(code for bit, code in enumerate(CODES) if mask >> bit & 1)
    for mask in range(1 << len(CODES))
)


def codes_of(masks: Sequence[int]) -> tuple[tuple[str, ...], ...]:
    """Each bitmask as its codes, the primary first."""
    table = _CODES_OF
    return tuple([table[mask] for mask in masks])
