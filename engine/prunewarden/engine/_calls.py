"""The calls that decide, declared once: what an :class:`~prunewarden.engine.Engine` offers and
every front of one (``ReloadingEngine``, the server's tenants) forwards, argument for argument.

A Protocol rather than a base class: :class:`Engine` implements it (the type checker holds it
to these signatures), :class:`~prunewarden.engine.EngineCalls` forwards each call by reading
its declaration here, and the server's ``PolicyHolder`` extends it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from prunewarden.decision import Decision
from prunewarden.pipeline import PassResult
from prunewarden.planner import Plan


class DecidingCalls(Protocol):
    """The deciding calls of an engine; each is documented on :class:`Engine`."""

    def evaluate(  # noqa: PLR0913 - each option is keyword-only and independent
        self,
        document: Mapping[str, Any],
        *,
        filename: str = "<input>",
        text: str | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        explain: bool = False,
    ) -> Decision:
        """Decide on one input document (``{"check": ..., ...}``)."""
        ...

    def enforce(
        self,
        document: Mapping[str, Any],
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """Like :meth:`evaluate`, but raise when an enforced guard refuses."""
        ...

    def detect_collapse(
        self,
        history: Iterable[Mapping[str, Any]],
        baseline: Mapping[str, float] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """Collapse guard over ``{cycle, scores, pinned}`` snapshots, oldest first."""
        ...

    def authorize_eviction(  # noqa: PLR0913 - mirrors the eviction document's fields
        self,
        segment: Mapping[str, Any],
        score: float,
        perturbed_score: float | None = None,
        eviction_candidates: Iterable[str] = (),
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """Eviction guard for one segment scheduled for deletion."""
        ...

    def authorize_evictions(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[Decision, ...]:
        """Eviction guard for a whole pruning pass: one decision per item, one record."""
        ...

    def authorize_pass(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> PassResult:
        """:meth:`authorize_evictions`, answered as columns."""
        ...

    def prune(  # noqa: PLR0913 - mirrors the staleness document's optional fields
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
        """Staleness guard for a prune request."""
        ...

    def plan(  # noqa: PLR0913 - each option is keyword-only and independent
        self,
        document: Mapping[str, Any],
        *,
        filename: str = "<input>",
        text: str | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        explain: bool = False,
    ) -> Plan:
        """Plan one pruning pass over a window."""
        ...


#: The names of the deciding calls, in the order they are declared.
DECIDING_CALLS = (
    "evaluate",
    "enforce",
    "detect_collapse",
    "authorize_eviction",
    "authorize_evictions",
    "authorize_pass",
    "prune",
    "plan",
)
