"""Sessions held by the server: one per id, opened at its first call, forgotten when idle.

The endpoints under ``/v1/sessions/{id}`` feed one :class:`~prunewarden.Session` each: its cycles
and turns as they happen, its evictions, prunes and plans decided with the history it kept. A
session follows the server's policy reloads as the engine's sessions do.

A session idle for longer than the TTL is forgotten (its history and its halt): the next call
under its id starts afresh. Expiry is checked when a session is touched and, for the others, in
a sweep at most every tenth of the TTL, so no thread is needed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from prunewarden.errors import InputError, Problem
from prunewarden.inputs import parse_plan, parse_request
from prunewarden.limits import MAX_ID_CHARS
from prunewarden.reload import ReloadingEngine
from prunewarden.server._documents import (
    check_definition,
    check_object,
    read_body,
    rebased,
    refuse_supplied,
)
from prunewarden.server._problems import ProblemDocument, invalid_input
from prunewarden.server._service import (
    Answer,
    ServiceProblemError,
    decision_answer,
    guarded,
    plan_answer,
)
from prunewarden.session import Session

# Problems a session reports about its own order (a cycle or turn that does not follow the last):
# the request is well formed but conflicts with the state (HTTP 409).
_SESSION_FILE = "<session>"


@dataclass(slots=True)
class _Live:
    session: Session
    last_used: float


class SessionService:
    """The session endpoints over one :class:`ReloadingEngine`."""

    # POST /v1/sessions/{id}/<part>: the method answering it.
    POSTS: ClassVar[dict[str, str]] = {
        "cycles": "observe_cycle",
        "turns": "observe_turn",
        "evictions": "authorize",
        "prunes": "prune",
        "plans": "plan",
    }

    def __init__(
        self,
        engine: ReloadingEngine,
        *,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.ttl = ttl
        self._clock = clock
        self._live: dict[str, _Live] = {}
        self._lock = threading.Lock()
        self._last_sweep = clock()

    # --- endpoints ---------------------------------------------------------------------------

    def observe_cycle(self, session_id: str, body: bytes) -> Answer:
        data, text = read_body(body)
        check_object(data)
        # The cycle may be left out (the next number), as Session.observe_cycle allows.
        check_definition({"cycle": 0, **data}, text, "snapshot")
        session = self._open(session_id)
        decision = self._call(
            lambda: session.observe_cycle(
                data["scores"], data.get("pinned", ()), cycle=data.get("cycle")
            ),
            "$.history[0]",
            text,
        )
        return decision_answer(decision)

    def observe_turn(self, session_id: str, body: bytes) -> Answer:
        data, text = read_body(body)
        check_object(data)
        check_definition({"turn": 0, **data}, text, "turn")
        session = self._open(session_id)
        self._call(
            lambda: session.observe_turn(
                data["mean_relevance"], data["tokens"], turn=data.get("turn")
            ),
            "$.turns[0]",
            text,
        )
        return Answer(
            {
                "session_id": session_id,
                "turn": data.get("turn"),
                "halted": session.halted,
                "policy": session.policy.identity.to_dict(),
            }
        )

    def authorize(self, session_id: str, body: bytes) -> Answer:
        data, text = read_body(body)
        scores = self.engine.policy.spec.scores
        guarded(lambda: parse_request(data, scores, filename="<request>", text=text))
        if data["check"] != "eviction":
            message = f"{data['check']!r}: this endpoint takes an eviction document"
            raise ServiceProblemError(
                invalid_input([Problem("<request>", 0, 0, "$.check", message)])
            )
        session = self._open(session_id)
        decision = self._call(
            lambda: session.authorize(
                data["segment"],
                data["score"],
                data.get("perturbed_score"),
                data.get("eviction_candidates", ()),
            ),
            "$",
            text,
        )
        return decision_answer(decision)

    def prune(self, session_id: str, body: bytes) -> Answer:
        data, text = read_body(body)
        scores = self.engine.policy.spec.scores
        guarded(lambda: parse_request(data, scores, filename="<request>", text=text))
        if data["check"] != "staleness":
            message = f"{data['check']!r}: this endpoint takes a staleness document"
            raise ServiceProblemError(
                invalid_input([Problem("<request>", 0, 0, "$.check", message)])
            )
        guarded(lambda: refuse_supplied(data, "staleness", text))
        session = self._open(session_id)
        decision = self._call(
            lambda: session.prune(
                data["spans"],
                data["keep_top_k"],
                turn=data.get("turn"),
                tombstones=data.get("tombstones", ()),
                recompute_budget=data.get("recompute_budget"),
            ),
            "$",
            text,
        )
        return decision_answer(decision)

    def plan(self, session_id: str, body: bytes) -> Answer:
        data, text = read_body(body)
        scores = self.engine.policy.spec.scores
        guarded(lambda: parse_plan(data, scores, filename="<request>", text=text))
        guarded(lambda: refuse_supplied(data, "plan", text))
        session = self._open(session_id)
        plan = self._call(
            lambda: session.plan(
                data["segments"],
                free_tokens=data.get("free_tokens"),
                keep_top_k=data.get("keep_top_k"),
                turn=data.get("turn"),
                tombstones=data.get("tombstones", ()),
                recompute_budget=data.get("recompute_budget"),
            ),
            "$",
            text,
        )
        return plan_answer(plan)

    def state(self, session_id: str, _body: bytes) -> Answer:
        """``GET /v1/sessions/{id}``: what the session keeps; 404 when the server holds none."""
        _check_id(session_id)
        live = self._find(session_id)
        if live is None:
            raise ServiceProblemError(
                ProblemDocument("not-found", f"no session {session_id!r} is held")
            )
        session = live.session
        return Answer(
            {
                "session_id": session_id,
                "labels": dict(session.labels),
                "halted": session.halted,
                "policy": session.policy.identity.to_dict(),
            }
        )

    def delete(self, session_id: str, _body: bytes) -> Answer:
        """``DELETE /v1/sessions/{id}``: forget the session (its history and its halt)."""
        _check_id(session_id)
        with self._lock:
            found = self._live.pop(session_id, None)
        return Answer(
            {
                "session_id": session_id,
                "deleted": found is not None,
                "policy": self.engine.policy.identity.to_dict(),
            }
        )

    def close(self) -> None:
        """Nothing is left to write: every change was saved when it was made."""

    # --- holding sessions --------------------------------------------------------------------

    def _open(self, session_id: str) -> Session:
        _check_id(session_id)
        now = self._clock()
        with self._lock:
            self._sweep(now)
            live = self._live.get(session_id)
            if live is None:
                live = self._live[session_id] = _Live(self.engine.session(session_id), now)
            live.last_used = now
            return live.session

    def _find(self, session_id: str) -> _Live | None:
        now = self._clock()
        with self._lock:
            self._sweep(now)
            return self._live.get(session_id)

    def _sweep(self, now: float) -> None:
        """Forget sessions idle past the TTL (at most every tenth of the TTL; under the lock)."""
        if now - self._last_sweep < self.ttl / 10:
            return
        self._last_sweep = now
        for session_id in [k for k, v in self._live.items() if now - v.last_used > self.ttl]:
            del self._live[session_id]

    def _call(self, call: Callable[[], Any], prefix: str, text: str) -> Any:
        """A session call; its problems are about the body (``prefix`` is where the session put
        the body in the document it built), and order problems are conflicts (HTTP 409)."""
        try:
            return call()
        except InputError as exc:
            moved = rebased(exc, prefix, text) if prefix != "$" else exc
            conflict = all(p.file == _SESSION_FILE for p in exc.problems)
            kind = "session-conflict" if conflict else "invalid-input"
            raise ServiceProblemError(invalid_input(moved.problems, kind)) from None


def _check_id(session_id: str) -> None:
    if not session_id or len(session_id) > MAX_ID_CHARS:
        message = f"a session id is 1 to {MAX_ID_CHARS} characters long"
        raise ServiceProblemError(
            invalid_input([Problem("<request>", 0, 0, "$.session_id", message)])
        )
