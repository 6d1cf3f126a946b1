"""A session: what one agent loop has shown the engine so far, kept only as long as needed.

The collapse guard needs the last ``consecutive_cycles + 1`` snapshots and each canary's baseline;
the drift signal needs the last ``drift_consecutive_turns + 1`` turns. A session keeps exactly
that, whatever its length, so a harness can report each cycle and turn as it happens and ask for
decisions that use the history.

Once the collapse guard halts (enforced), pruning stays halted: every eviction, prune and plan
is refused with ``pruning_halted`` until a later cycle passes the guard.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn, Protocol

from prunewarden._stats import pstdev
from prunewarden.decision import HALT_ACTIONS, Decision, Reason, Verdict
from prunewarden.errors import InputError, Problem
from prunewarden.inputs import (
    Check,
    CollapseRequest,
    PlanRequest,
    Request,
    Snapshot,
    StalenessRequest,
    Turn,
    parse_plan,
    parse_request,
)
from prunewarden.planner import Plan, plan_pass
from prunewarden.policy import Policy


class DecideRequest(Protocol):
    """How a session decides: the engine's decide-and-log step, with the caller's identity and
    the gate that stands in for the guard while pruning is halted."""

    def __call__(  # noqa: PLR0913 - everything a logged decision is made of
        self,
        check: Check,
        request: Request,
        data: Any,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        gate: Verdict | None = None,
    ) -> Decision: ...


class Session:
    """Created by :meth:`Engine.session`; safe to share between threads."""

    def __init__(
        self,
        policy: Policy,
        decide: DecideRequest,
        session_id: str | None,
        labels: dict[str, str],
    ) -> None:
        self.policy = policy
        self._decide = decide
        self.session_id = session_id
        self.labels = labels
        self._lock = threading.RLock()
        self._snapshots: deque[Snapshot] = deque()
        self._baseline: dict[str, float] = {}  # each canary's score when first seen pinned
        self._turns: deque[Turn] = deque()
        self._last_collapse: Decision | None = None
        # A relative spread floor's reference: the spreads of the first relative_to.first_cycles
        # cycles, on the judged scale (at most that many, however long the session runs).
        self._early_spreads: tuple[float, ...] = ()
        # Segments a rule pinned in a pruning pass (id -> text), pinned for the later passes.
        self.rule_pins: dict[str, str] = {}

    @property
    def halted(self) -> bool:
        """The last collapse decision halted pruning, and the policy enforces it."""
        return self._last_collapse is not None and self._last_collapse.blocks

    def observe_cycle(
        self, scores: Mapping[str, float], pinned: Iterable[str] = (), *, cycle: int | None = None
    ) -> Decision:
        """Record one rewrite cycle's scores and return the collapse decision on the history."""
        with self._lock:
            last = self._snapshots[-1].cycle if self._snapshots else None
            number = cycle if cycle is not None else (last or 0) + 1
            document = {
                "check": "collapse",
                "history": [{"cycle": number, "scores": dict(scores), "pinned": list(pinned)}],
            }
            (snapshot,) = self._parse(document).history  # type: ignore[union-attr]
            if last is not None and snapshot.cycle <= last:
                _refuse_order("cycle", snapshot.cycle, last)
            baseline = {c: self._baseline[c] for c in snapshot.pinned if c in self._baseline}
            baseline.update(
                {
                    c: snapshot.scores[c]
                    for c in snapshot.pinned
                    if c not in baseline and c in snapshot.scores
                }
            )
            settings = self.policy.spec.collapse
            keep = settings.consecutive_cycles + 1
            history = (*self._snapshots, snapshot)[-keep:]
            early = None
            if settings.spread_floor_mode == "relative":
                early = self._early_spreads
                if len(early) < settings.relative_first_cycles:
                    early = (*early, self._spread(snapshot))
            request = CollapseRequest(history, baseline, early)
            decision = self.decide("collapse", request, document)
            self._early_spreads = early or ()
            self._snapshots = deque(history)
            self._baseline = baseline
            self._last_collapse = decision
            return decision

    def observe_turn(self, mean_relevance: float, tokens: int, *, turn: int | None = None) -> None:
        """Record one turn's mean relevance and token count, for the relevance-inflation signal."""
        with self._lock:
            last = self._turns[-1].turn if self._turns else None
            number = turn if turn is not None else (last or 0) + 1
            entry = {"turn": number, "mean_relevance": mean_relevance, "tokens": tokens}
            document = {"check": "staleness", "spans": [], "keep_top_k": 0, "turns": [entry]}
            (parsed,) = self._parse(document).turns  # type: ignore[union-attr]
            if last is not None and parsed.turn <= last:
                _refuse_order("turn", parsed.turn, last)
            keep = self.policy.spec.staleness.drift_consecutive_turns + 1
            self._turns = deque((*self._turns, parsed)[-keep:])

    def authorize(
        self,
        segment: Mapping[str, Any],
        score: float,
        perturbed_score: float | None = None,
        eviction_candidates: Iterable[str] = (),
    ) -> Decision:
        """The eviction guard for one segment, refused while pruning is halted."""
        document = {
            "check": "eviction",
            "segment": dict(segment),
            "score": score,
            "perturbed_score": perturbed_score,
            "eviction_candidates": list(eviction_candidates),
        }
        with self._lock:
            request = self._parse(document)
            return self.decide("eviction", request, document, self.gate("eviction"))

    def prune(
        self,
        spans: Iterable[Mapping[str, Any]],
        keep_top_k: int,
        *,
        turn: Mapping[str, int] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
    ) -> Decision:
        """The staleness guard on a prune request, with the turns this session has seen."""
        document: dict[str, Any] = {
            "check": "staleness",
            "spans": [dict(s) for s in spans],
            "keep_top_k": keep_top_k,
            "tombstones": list(tombstones),
        }
        _optional(document, turn=turn, recompute_budget=recompute_budget)
        with self._lock:
            document["turns"] = [_turn_dict(t) for t in self._turns]
            request = self._parse(document)
            return self.decide("staleness", request, document, self.gate("staleness", request))

    def plan(  # noqa: PLR0913 - mirrors the plan document's optional fields
        self,
        segments: Iterable[Mapping[str, Any]],
        *,
        free_tokens: int | None = None,
        keep_top_k: int | None = None,
        turn: Mapping[str, int] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
    ) -> Plan:
        """Plan one pruning pass over ``segments`` toward ``free_tokens`` or ``keep_top_k``."""
        document: dict[str, Any] = {
            "segments": [dict(s) for s in segments],
            "tombstones": list(tombstones),
        }
        _optional(
            document,
            free_tokens=free_tokens,
            keep_top_k=keep_top_k,
            turn=turn,
            recompute_budget=recompute_budget,
        )
        with self._lock:
            document["turns"] = [_turn_dict(t) for t in self._turns]
            request = parse_plan(document, self.policy.spec.scores)
            return self.plan_request(request, document)

    def plan_request(self, request: PlanRequest, document: Mapping[str, Any]) -> Plan:
        """Plan a validated pass (the document is what the audit records digest)."""
        with self._lock:
            return plan_pass(self, request, document)

    def decide(
        self, check: Check, request: Request, document: Any, gate: Verdict | None = None
    ) -> Decision:
        """Decide and log under this session's id and labels."""
        return self._decide(
            check, request, document, session_id=self.session_id, labels=self.labels, gate=gate
        )

    def gate(self, check: Check, request: Request | None = None) -> Verdict | None:
        """The refusal that stands in for the guard while pruning is halted, else None."""
        last = self._last_collapse
        if last is None or not last.blocks:
            return None
        cycle = self._snapshots[-1].cycle if self._snapshots else None
        reason = Reason(
            "pruning_halted",
            f"the collapse guard halted pruning at cycle {cycle} ({last.reasons[0].code}); "
            f"no {check} is authorized until a later cycle passes it",
            {"collapse_decision": last.decision_id, "cycle": cycle},
        )
        kept = None
        if isinstance(request, StalenessRequest):
            kept = tuple(span.span_id for span in request.spans)
        return Verdict(
            True, [reason], [HALT_ACTIONS[0]], kept=kept, evicted=() if kept is not None else None
        )

    def _spread(self, snapshot: Snapshot) -> float:
        """A cycle's spread on the scale the guard judges it."""
        scale = self.policy.spec.calibration
        values = snapshot.scores.values()
        return pstdev(values if scale is None else [scale.apply(v) for v in values])

    def _parse(self, document: dict[str, Any]) -> Request:
        return parse_request(document, self.policy.spec.scores)[1]


def _refuse_order(field: str, number: int, last: int) -> NoReturn:
    message = f"{number} does not follow {field} {last}: {field}s must increase"
    raise InputError([Problem("<session>", 0, 0, f"$.{field}", message)])


def _turn_dict(turn: Turn) -> dict[str, Any]:
    return {"turn": turn.turn, "mean_relevance": turn.mean_relevance, "tokens": turn.tokens}


def _optional(document: dict[str, Any], **fields: Any) -> None:
    document.update({name: value for name, value in fields.items() if value is not None})
