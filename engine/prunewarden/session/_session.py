"""A session: what one agent loop has shown the engine so far, kept only as long as needed.

The collapse guard needs the last ``consecutive_cycles + 1`` snapshots and each canary's baseline;
the drift signal needs the last ``drift_consecutive_turns + 1`` turns. A session keeps exactly
that, whatever its length, so a harness can report each cycle and turn as it happens and ask for
decisions that use the history.

Once the collapse guard halts (enforced), pruning stays halted: every eviction, prune and plan
is refused with ``pruning_halted`` until a later cycle passes the guard.

This module holds the calls a harness makes; what a session holds, and how it follows reloads
and saves every change, is :class:`~prunewarden.session._core.SessionCore`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, NoReturn

from prunewarden._observation import public_call
from prunewarden.decision import Decision
from prunewarden.errors import REFUSALS, InputError, Problem
from prunewarden.inputs import (
    CollapseRequest,
    EvictionRequest,
    PlanRequest,
    Request,
    TransitionRequest,
    eviction_document,
    parse_plan,
    plan_document,
    staleness_document,
    transition_document,
)
from prunewarden.pipeline import ColumnarEviction
from prunewarden.planner import PassInputs, Plan, plan_pass
from prunewarden.planner._log import PassLog
from prunewarden.session._core import SessionCore
from prunewarden.session._state import Halt, advance_cusum, remember_baseline
from prunewarden.session._transitions import (
    follow_after,
    seen_pinned,
    with_session,
    without_halt,
)


class Session(SessionCore):
    """Created by :meth:`Engine.session`; safe to share between threads.

    With a ``store``, the state is saved on every change before the call returns. A change
    that cannot be saved is not made: the call raises :class:`SessionStoreError` and the
    session is as before it, except that a halt the call decided holds; while the state cannot
    be saved, pruning is refused (``session_state_unavailable``).

    Every call that decides takes ``explain`` (``Engine.evaluate``'s): each refusing reason of
    the guard carries ``detail.would_allow`` and the decision an ``explanation`` (docs/explain.md).
    """

    @public_call("prunewarden.observe_cycle")
    def observe_cycle(
        self,
        scores: Mapping[str, float],
        pinned: Iterable[str] = (),
        *,
        cycle: int | None = None,
        explain: bool = False,
    ) -> Decision:
        """Record one rewrite cycle's scores and return the collapse decision on the history."""
        with self._lock:
            self._follow()
            history = self._history
            last = history.snapshots[-1].cycle if history.snapshots else None
            number = cycle if cycle is not None else (last or 0) + 1
            document = {
                "check": "collapse",
                "history": [{"cycle": number, "scores": dict(scores), "pinned": list(pinned)}],
            }
            (snapshot,) = self._parse(document).history  # type: ignore[union-attr]
            if last is not None and snapshot.cycle <= last:
                _refuse_order("cycle", snapshot.cycle, last)
            baseline = remember_baseline(history.baseline, snapshot)
            settings = self.policy.spec.collapse
            window = (*history.snapshots, snapshot)[-(settings.consecutive_cycles + 1) :]
            early = history.early_spreads
            judgeable = len(snapshot.scores) >= settings.min_live_entries
            if len(early) < settings.early_cycles and (judgeable or settings.cusum is None):
                early = (*early, self._spread(snapshot))
            relative = settings.spread_floor_mode == "relative"
            track, basis = advance_cusum(history, self.policy, snapshot, early, self._spread)
            request = CollapseRequest(window, baseline, early if relative else None, track)
            decision = self.decide("collapse", request, document, explain=explain)
            halt = None
            if decision.blocks:
                code = decision.reasons[0].code
                halt = Halt(decision.decision_id, code, snapshot.cycle, self.policy.digest)
            self._history = replace(
                history,
                snapshots=window,
                baseline=baseline,
                early_spreads=early,
                cycles_seen=history.cycles_seen + 1,
                halt=halt,
                cusum=track if track is not None else history.cusum,
                cusum_basis=basis,
            )
            self._publish(pending=True, decided=True)
            self._commit(history, (decision.decision_id,))
            return decision

    def observe_turn(self, mean_relevance: float, tokens: int, *, turn: int | None = None) -> None:
        """Record one turn's mean relevance and token count, for the relevance-inflation signal."""
        with self._lock:
            self._follow()
            turns = self._history.turns
            last = turns[-1].turn if turns else None
            number = turn if turn is not None else (last or 0) + 1
            entry = {"turn": number, "mean_relevance": mean_relevance, "tokens": tokens}
            document = {"check": "staleness", "spans": [], "keep_top_k": 0, "turns": [entry]}
            (parsed,) = self._parse(document).turns  # type: ignore[union-attr]
            if last is not None and parsed.turn <= last:
                _refuse_order("turn", parsed.turn, last)
            keep = self.policy.spec.staleness.drift_consecutive_turns + 1
            before = self._history
            self._history = replace(before, turns=(*turns, parsed)[-keep:])
            self._commit(before, ())

    @public_call("prunewarden.authorize")
    def authorize(
        self,
        segment: Mapping[str, Any],
        score: float,
        perturbed_score: float | None = None,
        eviction_candidates: Iterable[str] = (),
        *,
        explain: bool = False,
    ) -> Decision:
        """The eviction guard for one segment, refused while pruning is halted."""
        document = eviction_document(segment, score, perturbed_score, eviction_candidates)
        with self._lock:
            self._follow()
            request = self._parse(document)
            gate = self.gate("eviction")
            return self.decide("eviction", request, document, gate, explain=explain)

    @public_call("prunewarden.prune")
    def prune(  # noqa: PLR0913 - mirrors the staleness document's optional fields
        self,
        spans: Iterable[Mapping[str, Any]],
        keep_top_k: int,
        *,
        turn: Mapping[str, int] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
        explain: bool = False,
    ) -> Decision:
        """The staleness guard on a prune request, with the turns this session has seen."""
        document = staleness_document(
            spans, keep_top_k, turn=turn, tombstones=tombstones, recompute_budget=recompute_budget
        )
        with self._lock:
            self._follow()
            document["turns"] = [_turn_dict(t) for t in self._history.turns]
            request = self._parse(document)
            gate = self.gate("staleness", request)
            return self.decide("staleness", request, document, gate, explain=explain)

    @public_call("prunewarden.plan")
    def plan(  # noqa: PLR0913 - mirrors the plan document's optional fields
        self,
        segments: Iterable[Mapping[str, Any]],
        *,
        free_tokens: int | None = None,
        keep_top_k: int | None = None,
        turn: Mapping[str, int] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
        explain: bool = False,
    ) -> Plan:
        """Plan one pruning pass over ``segments`` toward ``free_tokens`` or ``keep_top_k``."""
        document = plan_document(
            segments,
            free_tokens=free_tokens,
            keep_top_k=keep_top_k,
            turn=turn,
            tombstones=tombstones,
            recompute_budget=recompute_budget,
        )
        with self._lock:
            self._follow()
            document["turns"] = [_turn_dict(t) for t in self._history.turns]
            request = parse_plan(document, self.policy.spec.scores)
            return self.plan_request(request, document, explain=explain)

    def plan_request(
        self, request: PlanRequest, document: Mapping[str, Any], *, explain: bool = False
    ) -> Plan:
        """Plan a validated pass: one audit record, which digests the document; ``explain``:
        every decision of the pass explained."""
        with self._lock:
            log = PassLog()
            before = self._history
            pins = before.rule_pins
            inputs = PassInputs(
                eviction=self.policy.spec.eviction,
                pinned_by_rule=pins.holds,
                gate=self.gate,
                decide=self.decide,
                pin_by_rule=self.pin_by_rule,
                explain=explain,
                columnar=self._plan_columns(explain=explain),
            )
            plan = plan_pass(inputs, request, document, log)
            recorded = self._binding.record_pass(
                log,
                plan,
                document,
                session_id=self.session_id,
                labels=self.labels,
                from_session=not self._stateless,
            )
            if self._history.rule_pins is not pins:
                self._commit(before, tuple(d.decision_id for d in recorded.decisions))
            return recorded

    def _plan_columns(self, *, explain: bool) -> ColumnarEviction | None:
        """The eviction this plan may decide over columns: none explained (the columns give no
        ``would_allow``). The planner decides its evictions ungated, as the decide step would
        (a halt gates the staleness decision before them)."""
        columns = self._binding.plan_columns
        if explain or columns is None:
            return None
        return columns(self.session_id, not self._stateless)

    @public_call("prunewarden.evaluate")
    def evaluate(self, document: Mapping[str, Any], *, explain: bool = False) -> Decision:
        """Decide one input document (as :meth:`Engine.evaluate` takes it) with this session's
        history: a collapse document's snapshots are observed in order (the last decision is
        returned), a staleness document's turns are observed before the prune, a transition is
        :meth:`verify`."""
        with self._lock:
            self._follow()
            data = dict(document)
            request = self._parse(data)
            if isinstance(request, CollapseRequest):
                if "baseline" in data:
                    message = "a session keeps its own baselines (each canary's first pinned score)"
                    raise InputError([Problem("<input>", 0, 0, "$.baseline", message)])
                decisions = [
                    self.observe_cycle(s.scores, s.pinned, cycle=s.cycle, explain=explain)
                    for s in request.history
                ]
                return decisions[-1]
            if isinstance(request, EvictionRequest):
                return self.authorize(
                    data["segment"],
                    data["score"],
                    data.get("perturbed_score"),
                    data.get("eviction_candidates", ()),
                    explain=explain,
                )
            if isinstance(request, TransitionRequest):
                return self._verify(request, data, explain=explain)
            for turn in data.get("turns", ()):
                self.observe_turn(turn["mean_relevance"], turn["tokens"], turn=turn["turn"])
            return self.prune(
                data["spans"],
                data["keep_top_k"],
                turn=data.get("turn"),
                tombstones=data.get("tombstones", ()),
                recompute_budget=data.get("recompute_budget"),
                explain=explain,
            )

    @public_call("prunewarden.verify")
    def verify(  # noqa: PLR0913 - mirrors the transition document's optional fields
        self,
        before: Iterable[Mapping[str, Any]],
        after: Iterable[Mapping[str, Any]],
        *,
        tombstones: Iterable[str] = (),
        applied_by: str | None = None,
        reported: Mapping[str, int] | None = None,
        canaries: Iterable[str] = (),
        explain: bool = False,
    ) -> Decision:
        """The transition guard on an edit of the window from ``before`` to ``after``, made by
        any code, with this session's canaries, rule pins and halt (docs/transitions.md)."""
        document = transition_document(
            before,
            after,
            tombstones=tombstones,
            applied_by=applied_by,
            reported=reported,
            canaries=canaries,
        )
        with self._lock:
            self._follow()
            return self._verify(self._parse(document), document, explain=explain)

    def _verify(
        self, parsed: Request, document: Mapping[str, Any], *, explain: bool = False
    ) -> Decision:
        assert isinstance(parsed, TransitionRequest)  # noqa: S101 - a transition document
        request, gate = without_halt(with_session(parsed, self._history), self.gate("transition"))
        decision = self.decide("transition", request, document, gate, explain=explain)
        seen = seen_pinned(self._history, request, self.policy.spec.transition.pinned_kinds)
        followed = follow_after(seen, request, decision)
        if followed is not self._history:
            self._history = followed
            self._save()
        return decision

    @public_call("prunewarden.enforce")
    def enforce(self, document: Mapping[str, Any], *, explain: bool = False) -> Decision:
        """Like :meth:`evaluate`, but raise when an enforced guard refuses (as
        :meth:`Engine.enforce` does): :class:`RelevanceCollapseError`,
        :class:`UntrustedEvictionError` or :class:`StaleScoreError`, carrying the decision."""
        decision = self.evaluate(document, explain=explain)
        if decision.blocks:
            raise REFUSALS[decision.check](decision)
        return decision


def _refuse_order(field: str, number: int, last: int) -> NoReturn:
    message = f"{number} does not follow {field} {last}: {field}s must increase"
    raise InputError([Problem("<session>", 0, 0, f"$.{field}", message)])


def _turn_dict(turn: Any) -> dict[str, Any]:
    return {"turn": turn.turn, "mean_relevance": turn.mean_relevance, "tokens": turn.tokens}
