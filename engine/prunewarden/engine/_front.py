"""The decision calls of an :class:`Engine`, with its signatures, forwarded to the engine in force.

A front that holds an engine it may replace (``ReloadingEngine`` swaps in a new snapshot on
every reload) offers the same calls as the engine, argument for argument, so that a type checker
checks its callers as it checks an engine's. Each call asks :meth:`EngineCalls._in_force` once,
when it begins, and runs to its end on that engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prunewarden.decision import Decision
from prunewarden.engine._engine import Engine
from prunewarden.pipeline import PassResult
from prunewarden.planner import Plan


class EngineCalls:
    """:class:`Engine`'s decision calls on the engine :meth:`_in_force` returns."""

    def _in_force(self) -> Engine:
        raise NotImplementedError

    def evaluate(  # noqa: PLR0913 - mirrors Engine.evaluate
        self,
        document: Mapping[str, Any],
        *,
        filename: str = "<input>",
        text: str | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        explain: bool = False,
    ) -> Decision:
        """:meth:`Engine.evaluate` on the engine in force when the call begins."""
        return self._in_force().evaluate(
            document,
            filename=filename,
            text=text,
            session_id=session_id,
            labels=labels,
            explain=explain,
        )

    def enforce(
        self,
        document: Mapping[str, Any],
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """:meth:`Engine.enforce`: raises when an enforced guard refuses."""
        return self._in_force().enforce(document, session_id=session_id, labels=labels)

    def detect_collapse(
        self,
        history: Iterable[Mapping[str, Any]],
        baseline: Mapping[str, float] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """:meth:`Engine.detect_collapse`."""
        return self._in_force().detect_collapse(
            history, baseline, session_id=session_id, labels=labels
        )

    def authorize_eviction(  # noqa: PLR0913 - mirrors Engine.authorize_eviction
        self,
        segment: Mapping[str, Any],
        score: float,
        perturbed_score: float | None = None,
        eviction_candidates: Iterable[str] = (),
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """:meth:`Engine.authorize_eviction`."""
        return self._in_force().authorize_eviction(
            segment,
            score,
            perturbed_score,
            eviction_candidates,
            session_id=session_id,
            labels=labels,
        )

    def authorize_evictions(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[Decision, ...]:
        """:meth:`Engine.authorize_evictions`: every decision of the pass under one engine."""
        return self._in_force().authorize_evictions(
            evictions, eviction_candidates, session_id=session_id, labels=labels
        )

    def authorize_pass(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> PassResult:
        """:meth:`Engine.authorize_pass`: the pass over columns, under one engine."""
        return self._in_force().authorize_pass(
            evictions, eviction_candidates, session_id=session_id, labels=labels
        )

    def prune(  # noqa: PLR0913 - mirrors Engine.prune
        self,
        spans: Iterable[Mapping[str, Any]],
        keep_top_k: int,
        *,
        turn: Mapping[str, int] | None = None,
        turns: Iterable[Mapping[str, Any]] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """:meth:`Engine.prune`."""
        return self._in_force().prune(
            spans,
            keep_top_k,
            turn=turn,
            turns=turns,
            tombstones=tombstones,
            recompute_budget=recompute_budget,
            session_id=session_id,
            labels=labels,
        )

    def plan(  # noqa: PLR0913 - mirrors Engine.plan
        self,
        document: Mapping[str, Any],
        *,
        filename: str = "<input>",
        text: str | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        explain: bool = False,
    ) -> Plan:
        """:meth:`Engine.plan`: every decision of the pass under the engine in force when the
        pass begins."""
        return self._in_force().plan(
            document,
            filename=filename,
            text=text,
            session_id=session_id,
            labels=labels,
            explain=explain,
        )
