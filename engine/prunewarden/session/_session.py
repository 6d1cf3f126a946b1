"""A session: what one agent loop has shown the engine so far, kept only as long as needed.

The collapse guard needs the last ``consecutive_cycles + 1`` snapshots and each canary's baseline;
the drift signal needs the last ``drift_consecutive_turns + 1`` turns. A session keeps exactly
that, whatever its length, so a harness can report each cycle and turn as it happens and ask for
decisions that use the history.

Once the collapse guard halts (enforced), pruning stays halted: every eviction, prune and plan
is refused with ``pruning_halted`` until a later cycle passes the guard.

A session does not hold an engine: it is given a *binder*, a callable returning the policy in
force and the engine's decide step. A session of a ``ReloadingEngine`` asks it at every call, so
it follows reloads, carrying its history over as far as the new policy's windows allow (one
``session_rebound`` record says what was kept).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, NoReturn

from prunewarden._identity import PolicyIdentity
from prunewarden._observation import public_call
from prunewarden._stats import pstdev
from prunewarden.audit import session_rebound_record
from prunewarden.decision import Decision, Verdict
from prunewarden.errors import REFUSALS, InputError, Problem, SessionStateError, SessionStoreError
from prunewarden.inputs import (
    Check,
    CollapseRequest,
    EvictionRequest,
    PlanRequest,
    Request,
    Snapshot,
    TransitionRequest,
    eviction_document,
    parse_plan,
    parse_request,
    plan_document,
    staleness_document,
    transition_document,
)
from prunewarden.planner import PassInputs, PassLog, Plan, plan_pass
from prunewarden.policy import Policy
from prunewarden.session._binding import Binder
from prunewarden.session._registry import SessionRegistry
from prunewarden.session._state import (
    STATE_FILENAME,
    Fitted,
    Halt,
    History,
    RulePins,
    advance_cusum,
    fit_history,
    read_state,
    refuse_dropped,
    remember_baseline,
    state_document,
)
from prunewarden.session._store import SessionStore, check_deadline
from prunewarden.session._transitions import follow_after, with_session, without_halt
from prunewarden.session._verdicts import halt_verdict, unavailable_verdict

_diagnostics = logging.getLogger("prunewarden")


class Session:
    """Created by :meth:`Engine.session`; safe to share between threads.

    With a ``store``, the state is saved on every change before the call returns. A change
    that cannot be saved is not made: the call raises :class:`SessionStoreError` and the
    session is as before it, except that a halt the call decided holds; while the state cannot
    be saved, pruning is refused (``session_state_unavailable``).
    """

    def __init__(  # noqa: PLR0913 - where the session's policy, history and state come from
        self,
        bind: Binder,
        session_id: str | None,
        labels: dict[str, str],
        *,
        history: History | None = None,
        store: SessionStore | None = None,
        registry: SessionRegistry | None = None,
        stateless: bool = False,
    ) -> None:
        self._bind = bind
        self._binding = bind()
        self.session_id = session_id
        self.labels = labels
        self._lock = threading.RLock()
        self._registry = registry  # told of every halt, for the engine's stateless calls
        self._history = history or History(spread_scale=self.policy.spec.calibration)
        if registry is not None and store is not None:  # a halt it holds was not saved
            self._history = registry.keep_held_halt(session_id, self._history)
        self._store = store
        self._unsaved: str | None = None  # why the last save failed, while it stays unsaved
        # A session for one stateless call (Engine.plan): its decisions are not a session's.
        self._stateless = stateless

    @property
    def policy(self) -> Policy:
        """The policy the session decides under now."""
        return self._binding.policy

    @property
    def halted(self) -> bool:
        """The last collapse decision halted pruning, and the policy enforced it."""
        return self._history.halt is not None

    @property
    def halt(self) -> Halt | None:
        return self._history.halt

    @property
    def unsaved(self) -> str | None:
        """Why the last save to the store failed, while the state stays unsaved; else None."""
        return self._unsaved

    @property
    def rule_pins(self) -> RulePins:
        """The segments custom rules pinned in this session's passes, pinned for the later
        passes while their text is unchanged (kept in :meth:`state`)."""
        return self._history.rule_pins

    def pin_by_rule(self, pins: Mapping[str, str]) -> None:
        """Keep ``pins`` (segment id -> the text a rule pinned) for the later passes; saved with
        the pass that pinned them (:meth:`plan_request`)."""
        with self._lock:
            updated = self._history.rule_pins.with_pins(self.policy.digest, pins)
            self._history = replace(self._history, rule_pins=updated)

    def state(self) -> dict[str, Any]:
        """A JSON-serializable snapshot (``session-state.v3``) that
        ``Engine.session(id, state=...)`` restores."""
        with self._lock:
            return state_document(self._history, self.policy.identity, self.session_id, self.labels)

    def restore(self, state: Mapping[str, Any], *, keep_labels: bool = False) -> None:
        """Take over a ``Session.state()`` document of this session (its labels too, unless
        ``keep_labels``). A state kept under another policy is carried over where this policy's
        windows can use it, with one ``session_rebound`` record; otherwise
        :class:`SessionStateError` says which part cannot be used and why."""
        restored = read_state(state)
        if restored.session_id != self.session_id:
            message = f"the state is of session {restored.session_id!r}, not {self.session_id!r}"
            raise SessionStateError([Problem(STATE_FILENAME, 0, 0, "$.session_id", message)])
        with self._lock:
            fitted = fit_history(restored.history, self.policy)
            refuse_dropped(fitted, self.policy)
            self._history = fitted.history
            if self._registry is not None and self._store is not None:
                self._history = self._registry.keep_held_halt(self.session_id, fitted.history)
            if not keep_labels:
                self.labels = restored.labels
            self._publish(pending=True)
            if restored.policy.digest != self.policy.digest:
                self._record_rebound(restored.policy, fitted)

    def save(self) -> None:
        """Save the state to the store now (every change already is); without a store, nothing.

        A failure is not raised: pruning is refused until a save succeeds (the state stays as
        it is, to be saved then)."""
        with self._lock:
            self._save()

    @public_call("prunewarden.observe_cycle")
    def observe_cycle(
        self, scores: Mapping[str, float], pinned: Iterable[str] = (), *, cycle: int | None = None
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
            decision = self.decide("collapse", request, document)
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
    ) -> Decision:
        """The eviction guard for one segment, refused while pruning is halted."""
        document = eviction_document(segment, score, perturbed_score, eviction_candidates)
        with self._lock:
            self._follow()
            request = self._parse(document)
            return self.decide("eviction", request, document, self.gate("eviction"))

    @public_call("prunewarden.prune")
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
        document = staleness_document(
            spans, keep_top_k, turn=turn, tombstones=tombstones, recompute_budget=recompute_budget
        )
        with self._lock:
            self._follow()
            document["turns"] = [_turn_dict(t) for t in self._history.turns]
            request = self._parse(document)
            return self.decide("staleness", request, document, self.gate("staleness", request))

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
            return self.plan_request(request, document)

    def plan_request(self, request: PlanRequest, document: Mapping[str, Any]) -> Plan:
        """Plan a validated pass: one audit record, which digests the document."""
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

    @public_call("prunewarden.evaluate")
    def evaluate(self, document: Mapping[str, Any]) -> Decision:
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
                    self.observe_cycle(s.scores, s.pinned, cycle=s.cycle) for s in request.history
                ]
                return decisions[-1]
            if isinstance(request, EvictionRequest):
                return self.authorize(
                    data["segment"],
                    data["score"],
                    data.get("perturbed_score"),
                    data.get("eviction_candidates", ()),
                )
            if isinstance(request, TransitionRequest):
                return self._verify(request, data)
            for turn in data.get("turns", ()):
                self.observe_turn(turn["mean_relevance"], turn["tokens"], turn=turn["turn"])
            return self.prune(
                data["spans"],
                data["keep_top_k"],
                turn=data.get("turn"),
                tombstones=data.get("tombstones", ()),
                recompute_budget=data.get("recompute_budget"),
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
            return self._verify(self._parse(document), document)

    def _verify(self, parsed: Request, document: Mapping[str, Any]) -> Decision:
        assert isinstance(parsed, TransitionRequest)  # noqa: S101 - a transition document
        request, gate = without_halt(with_session(parsed, self._history), self.gate("transition"))
        decision = self.decide("transition", request, document, gate)
        followed = follow_after(self._history, request, decision)
        if followed is not self._history:
            self._history = followed
            self._save()
        return decision

    @public_call("prunewarden.enforce")
    def enforce(self, document: Mapping[str, Any]) -> Decision:
        """Like :meth:`evaluate`, but raise when an enforced guard refuses (as
        :meth:`Engine.enforce` does): :class:`RelevanceCollapseError`,
        :class:`UntrustedEvictionError` or :class:`StaleScoreError`, carrying the decision."""
        decision = self.evaluate(document)
        if decision.blocks:
            raise REFUSALS[decision.check](decision)
        return decision

    def decide(
        self,
        check: Check,
        request: Request,
        document: Any,
        gate: Verdict | None = None,
        *,
        in_pass: PassLog | None = None,
    ) -> Decision:
        """Decide and log under this session's id and labels; a decision ``in_pass`` is logged
        with its pass (:meth:`plan_request`)."""
        return self._binding.decide(
            check,
            request,
            document,
            session_id=self.session_id,
            labels=self.labels,
            gate=gate,
            from_session=not self._stateless,
            in_pass=in_pass,
        )

    def gate(self, check: Check, request: Request | None = None) -> Verdict | None:
        """The refusal that stands in for the guard while pruning is halted (or while the state
        cannot be saved), else None."""
        if self._unsaved is not None:
            self._save()
            if self._unsaved is not None:
                return unavailable_verdict(check, request, self._unsaved)
        halt = self._history.halt
        return halt_verdict(halt, check, request) if halt is not None else None

    def _follow(self) -> None:
        """Take the binder's policy if it changed; carry the history over to it."""
        binding = self._bind()
        previous = self._binding
        if binding is previous:
            return
        self._binding = binding
        if binding.policy.digest == previous.policy.digest:
            return  # the same content from other files: nothing to carry over
        fitted = fit_history(self._history, binding.policy)
        self._history = fitted.history
        self._record_rebound(previous.policy.identity, fitted)
        self._save()

    def _record_rebound(self, previous: PolicyIdentity, fitted: Fitted) -> None:
        """One ``session_rebound`` record: the policy left, the one taken, what carried over."""
        record = session_rebound_record(
            self.session_id,
            self.labels,
            previous,
            self.policy,
            kept=fitted.kept,
            dropped=fitted.dropped,
        )
        try:
            self._binding.write_record(record)
        except Exception:  # noqa: BLE001 - the rebound stands; the failure is reported
            _diagnostics.exception("session_rebound could not be recorded")

    def _publish(self, *, pending: bool = False, decided: bool = False) -> None:
        """Tell the registry the halt this session holds (:meth:`SessionRegistry.publish`):
        the history is ``saved`` unless ``pending`` or a save failed."""
        if self._registry is not None:
            stored = self._store is not None and self._store is self._registry.store
            saved = stored and not pending and self._unsaved is None
            self._registry.publish(self.session_id, self._history.halt, saved, decided=decided)

    def _commit(self, before: History, decision_ids: tuple[str, ...]) -> None:
        """Save the change this call made to the history (``before`` is what it was). When it
        cannot be saved, the change is not made: the history goes back to ``before``, with the
        halt the call decided, or the one it would have lifted (fail closed), and
        :class:`SessionStoreError` is raised."""
        if self._save():
            return
        after = self._history
        self._history = replace(before, halt=after.halt or before.halt)
        self._publish()
        raise SessionStoreError(self.session_id or "", self._unsaved or "", decision_ids)

    def _save(self) -> bool:
        """Save the state (True when saved, or when there is no store)."""
        if self._store is None or self.session_id is None:
            return True
        try:
            check_deadline()  # a call its caller gave up on writes nothing
            self._store.save(self.session_id, self.state())
        except Exception as exc:  # noqa: BLE001 - a store that fails refuses pruning
            self._unsaved = f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(Exception):
                _diagnostics.warning(
                    "session %s: state not saved (%s)", self.session_id, self._unsaved
                )
        else:
            self._unsaved = None
        self._publish()
        return self._unsaved is None

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


def _turn_dict(turn: Any) -> dict[str, Any]:
    return {"turn": turn.turn, "mean_relevance": turn.mean_relevance, "tokens": turn.tokens}
