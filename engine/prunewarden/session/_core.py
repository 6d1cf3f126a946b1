"""What a session holds and how it keeps it: the policy it decides under, its history and halt,
and the saving of every change to its store. :class:`~prunewarden.session._session.Session` adds
the calls a harness makes (cycles, turns, evictions, prunes, plans, transitions) on top.

A session does not hold an engine: it is given a *binder*, a callable returning the policy in
force and the engine's decide step. A session of a ``ReloadingEngine`` asks it at every call, so
it follows reloads, carrying its history over as far as the new policy's windows allow (one
``session_rebound`` record says what was kept).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from prunewarden._identity import PolicyIdentity
from prunewarden._stats import pstdev
from prunewarden.audit import session_rebound_record
from prunewarden.decision import Decision, Verdict
from prunewarden.errors import Problem, SessionStateError, SessionStoreError
from prunewarden.inputs import Check, Request, Snapshot, parse_request
from prunewarden.planner._log import PassLog
from prunewarden.policy import Policy
from prunewarden.session._binding import Binder
from prunewarden.session._registry import SessionRegistry
from prunewarden.session._state import (
    STATE_FILENAME,
    Fitted,
    Halt,
    History,
    RulePins,
    fit_history,
    read_state,
    refuse_dropped,
    state_document,
)
from prunewarden.session._store import SessionStore, check_deadline
from prunewarden.session._verdicts import halt_verdict, unavailable_verdict

_diagnostics = logging.getLogger("prunewarden")


class SessionCore:
    """A session's policy, history and store; the calls are :class:`Session`'s."""

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
        the pass that pinned them (:meth:`Session.plan_request`)."""
        with self._lock:
            updated = self._history.rule_pins.with_pins(self.policy.digest, pins)
            self._history = replace(self._history, rule_pins=updated)

    def state(self) -> dict[str, Any]:
        """A JSON-serializable snapshot (``session-state.v4``) that
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

    def decide(  # noqa: PLR0913 - everything a logged decision is made of
        self,
        check: Check,
        request: Request,
        document: Any,
        gate: Verdict | None = None,
        *,
        in_pass: PassLog | None = None,
        explain: bool = False,
    ) -> Decision:
        """Decide and log under this session's id and labels; a decision ``in_pass`` is logged
        with its pass (:meth:`Session.plan_request`); ``explain``: as ``Engine.evaluate``'s (a
        refusal the session's gate decided is not explained: no guard or rule ran)."""
        return self._binding.decide(
            check,
            request,
            document,
            session_id=self.session_id,
            labels=self.labels,
            gate=gate,
            from_session=not self._stateless,
            in_pass=in_pass,
            explain=explain,
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
