"""Sessions held by the server: one per id, opened at its first call, forgotten when idle.

The endpoints under ``/v1/sessions/{id}`` feed one :class:`~prunewarden.Session` each: its cycles
and turns as they happen, its evictions, prunes and plans decided with the history it kept. A
session follows the server's policy reloads as the engine's sessions do.

Every change of a session is saved in the session store before its call returns (the
:class:`~prunewarden.SessionStore` of the engine), so a server killed and restarted comes back
with every session's history and halt. Two ways to hold them:

- one server (SQLite, the default): live sessions stay in memory between calls, each change
  saved to the database file; a session held only in the file (after a restart) is opened from
  it at its first call;
- several replicas (Redis): no replica keeps a session between calls. Each call takes the
  session's lease, opens it from Redis, decides, saves, and lets go, so any replica can take the
  next call.

A change that cannot be saved (the store failed, a Redis lease ran out, the request's deadline
passed) is not answered as made: the call gets HTTP 503 ``session-store-unavailable`` and may be
retried; a halt it decided holds meanwhile. A stored state that fails its integrity check gets
HTTP 409 ``session-state-rejected`` (and a ``session_state_rejected`` record) on every endpoint
of the session but ``DELETE``, which clears it (and records that).

Live sessions are capped (``max_live``): past the cap, the least recently used session that is
idle (no call running or waiting) and saved goes back to the store, where its next call finds it
again; one whose last save failed is never dropped, since memory is then all that holds its
change. When every live session is in use or unsaved, a new session is refused (HTTP 503
``server-busy``, retry) rather than any held one lost. Redis keeps no live sessions: no cap.

A session idle for longer than the TTL is forgotten (its history and its halt): the next call
under its id starts afresh. Redis expires it by itself; with SQLite, expiry is checked when a
session is touched and, for the others, in a sweep at most every tenth of the TTL (a session
found in the file at start counts as used then), so no thread is needed.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, Protocol, TypeVar

from redis.exceptions import RedisError

from prunewarden.errors import (
    InputError,
    Problem,
    SessionIntegrityError,
    SessionStateError,
    SessionStoreError,
)
from prunewarden.inputs import parse_plan, parse_request
from prunewarden.limits import MAX_ID_CHARS, MAX_LIVE_SESSIONS
from prunewarden.reload import ReloadingEngine
from prunewarden.server._documents import (
    check_definition,
    check_object,
    read_body,
    rebased,
    refuse_supplied,
)
from prunewarden.server._problems import ProblemDocument, invalid_input
from prunewarden.server._redis import (
    RedisSessionStore,
    SessionBusyError,
    SessionStoreUnreachableError,
)
from prunewarden.server._service import (
    Answer,
    ServiceProblemError,
    decision_answer,
    guarded,
    plan_answer,
)
from prunewarden.session import Session, SqliteSessionStore

# Problems a session reports about its own order (a cycle or turn that does not follow the last):
# the request is well formed but conflicts with the state (HTTP 409).
_SESSION_FILE = "<session>"
_T = TypeVar("_T")


class ServerStore(Protocol):
    """What the server needs of a session store: a :class:`~prunewarden.SessionStore` that can
    also forget a session and be closed (both bundled stores can)."""

    def load(self, session_id: str) -> dict[str, Any] | None: ...

    def save(self, session_id: str, state: Mapping[str, Any]) -> None: ...

    def delete(self, session_id: str) -> object: ...

    def close(self) -> None: ...


class SessionService:
    """The session endpoints over one :class:`ReloadingEngine`."""

    # POST /v1/sessions/{id}/<part>: the method answering it.
    POSTS: ClassVar[dict[str, str]] = {
        "cycles": "observe_cycle",
        "turns": "observe_turn",
        "evictions": "authorize",
        "prunes": "prune",
        "plans": "plan",
        "transitions": "verify",
    }
    # The endpoints that decide, and so take ``?explain=true`` (docs/explain.md).
    EXPLAINED: ClassVar[frozenset[str]] = frozenset(POSTS.values()) - {"observe_turn"}

    def __init__(
        self,
        engine: ReloadingEngine,
        store: ServerStore,
        *,
        ttl: float,
        max_live: int = MAX_LIVE_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.store = store
        self.ttl = ttl
        self.max_live = max_live
        self.shared = isinstance(store, RedisSessionStore)
        # Told the name of each limit reached ("live_sessions"); the app counts them.
        self.on_limit: Callable[[str], None] = lambda _limit: None
        self._clock = clock
        # Live sessions, least recently used first; and the calls running on each (not dropped).
        self._live: OrderedDict[str, Session] = OrderedDict()
        self._busy: dict[str, int] = {}
        now = clock()
        # When each session was last used (SQLite: those found in the file count as used now).
        held = store.session_ids() if isinstance(store, SqliteSessionStore) else iter(())
        self._used: dict[str, float] = dict.fromkeys(held, now)
        self._lock = threading.Lock()
        self._last_sweep = now

    # --- endpoints ---------------------------------------------------------------------------

    def observe_cycle(self, session_id: str, body: bytes, *, explain: bool = False) -> Answer:
        data, text = read_body(body)
        check_object(data)
        # The cycle may be left out (the next number), as Session.observe_cycle allows.
        check_definition({"cycle": 0, **data}, text, "snapshot")
        decision = self._call(
            session_id,
            lambda session: session.observe_cycle(
                data["scores"], data.get("pinned", ()), cycle=data.get("cycle"), explain=explain
            ),
            "$.history[0]",
            text,
        )
        return decision_answer(decision)

    def observe_turn(self, session_id: str, body: bytes) -> Answer:
        data, text = read_body(body)
        check_object(data)
        check_definition({"turn": 0, **data}, text, "turn")

        def observe(session: Session) -> Answer:
            session.observe_turn(data["mean_relevance"], data["tokens"], turn=data.get("turn"))
            state = session.state()
            identity = session.policy.identity
            return Answer(
                {
                    "session_id": session_id,
                    "turn": state["turns"][-1]["turn"] if state["turns"] else data.get("turn"),
                    "halted": session.halted,
                    "policy": identity.to_dict(),
                },
                policy=identity,
            )

        answer: Answer = self._call(session_id, observe, "$.turns[0]", text)
        return answer

    def authorize(self, session_id: str, body: bytes, *, explain: bool = False) -> Answer:
        data, text = self._document(body, "eviction")
        decision = self._call(
            session_id,
            lambda session: session.authorize(
                data["segment"],
                data["score"],
                data.get("perturbed_score"),
                data.get("eviction_candidates", ()),
                explain=explain,
            ),
            "$",
            text,
        )
        return decision_answer(decision)

    def prune(self, session_id: str, body: bytes, *, explain: bool = False) -> Answer:
        data, text = self._document(body, "staleness")
        guarded(lambda: refuse_supplied(data, "staleness", text))
        decision = self._call(
            session_id,
            lambda session: session.prune(
                data["spans"],
                data["keep_top_k"],
                turn=data.get("turn"),
                tombstones=data.get("tombstones", ()),
                recompute_budget=data.get("recompute_budget"),
                explain=explain,
            ),
            "$",
            text,
        )
        return decision_answer(decision)

    def plan(self, session_id: str, body: bytes, *, explain: bool = False) -> Answer:
        data, text = read_body(body)
        scores = self.engine.policy.spec.scores
        guarded(lambda: parse_plan(data, scores, filename="<request>", text=text))
        guarded(lambda: refuse_supplied(data, "plan", text))
        plan = self._call(
            session_id,
            lambda session: session.plan(
                data["segments"],
                free_tokens=data.get("free_tokens"),
                keep_top_k=data.get("keep_top_k"),
                turn=data.get("turn"),
                tombstones=data.get("tombstones", ()),
                recompute_budget=data.get("recompute_budget"),
                explain=explain,
            ),
            "$",
            text,
        )
        return plan_answer(plan)

    def verify(self, session_id: str, body: bytes, *, explain: bool = False) -> Answer:
        """``POST /v1/sessions/{id}/transitions``: an edit of the window, judged with the
        session's halt, canaries and rule pins (``Session.verify``)."""
        data, text = self._document(body, "transition")
        guarded(lambda: refuse_supplied(data, "transition", text))
        decision = self._call(
            session_id,
            lambda session: session.verify(
                data["before"],
                data["after"],
                tombstones=data.get("tombstones", ()),
                applied_by=data.get("applied_by"),
                reported=data.get("reported"),
                canaries=data.get("canaries", ()),
                explain=explain,
            ),
            "$",
            text,
        )
        return decision_answer(decision)

    def state(self, session_id: str, _body: bytes) -> Answer:
        """``GET /v1/sessions/{id}``: the session's ``session-state.v3`` document; 404 when the
        server holds none."""
        _check_id(session_id)
        with self._held(session_id):
            live = self._live.get(session_id) if not self.shared else None
            document = live.state() if live is not None else self._rejecting(self._load, session_id)
        if document is None:
            raise ServiceProblemError(
                ProblemDocument("not-found", f"no session {session_id!r} is held")
            )
        identity = self.engine.policy.identity
        return Answer(
            {
                "session_id": session_id,
                "halted": document["halt"] is not None,
                "state": document,
                "policy": identity.to_dict(),
            },
            policy=identity,
        )

    def delete(self, session_id: str, _body: bytes) -> Answer:
        """``DELETE /v1/sessions/{id}``: forget the session (its history and its halt)."""
        _check_id(session_id)
        with self._held(session_id):
            found = self._forget(session_id)
        identity = self.engine.policy.identity
        return Answer(
            {"session_id": session_id, "deleted": found, "policy": identity.to_dict()},
            policy=identity,
        )

    @property
    def live_count(self) -> int:
        """Sessions held in memory now."""
        return len(self._live)

    def close(self) -> None:
        """Close the store: every change was saved when it was made."""
        with self._lock:
            self._live.clear()
        self.store.close()

    # --- holding sessions --------------------------------------------------------------------

    @contextmanager
    def _held(self, session_id: str) -> Iterator[None]:
        """Exclusive use of the session for one call: its lease across replicas (Redis), and
        expiry first (SQLite). A store that cannot be reached is a 503, a busy lease a 409."""
        try:
            if self.shared:
                assert isinstance(self.store, RedisSessionStore)  # noqa: S101 - shared means Redis
                with self.store.locked(session_id):
                    yield
                return
            now = self._clock()
            with self._lock:
                self._sweep(now)
                used = self._used.get(session_id)
                if used is not None and now - used > self.ttl:
                    self._forget_locked(session_id)
                self._busy[session_id] = self._busy.get(session_id, 0) + 1
            try:
                yield
            finally:
                with self._lock:
                    self._busy[session_id] -= 1
                    if not self._busy[session_id]:
                        del self._busy[session_id]
        except SessionBusyError as exc:
            raise ServiceProblemError(ProblemDocument("session-conflict", str(exc))) from None
        except (RedisError, sqlite3.Error, OSError) as exc:
            raise ServiceProblemError(
                ProblemDocument("session-store-unavailable", _store_failure(exc))
            ) from None

    def _rejecting(
        self, read: Callable[[str], _T], session_id: str, *, recorded: bool = False
    ) -> _T:
        """``read(session_id)``; a stored state that fails its integrity check is recorded
        (unless ``read`` did: opening a session does) and answered with HTTP 409
        ``session-state-rejected``: every call is refused until a ``DELETE`` clears it."""
        try:
            return read(session_id)
        except SessionIntegrityError as exc:
            if not recorded:
                self.engine.engine.report_rejected_state(session_id, exc)
            detail = f"{exc.problems[0]}; DELETE the session to start it afresh"
            problem = ProblemDocument("session-state-rejected", detail, exc.problems)
            raise ServiceProblemError(problem) from None

    def _session(self, session_id: str) -> Session:
        """The session, opened from the store when it is not live (or never kept: Redis)."""
        if self.shared:
            return self.engine.session(session_id)
        with self._lock:
            self._used[session_id] = self._clock()
            session = self._live.get(session_id)
            if session is not None:
                self._live.move_to_end(session_id)
                return session
            self._make_room()
        # Opening reads (and saves) the store: not under the lock every session call takes.
        opened = self.engine.session(session_id)
        with self._lock:
            return self._live.setdefault(session_id, opened)

    def _make_room(self) -> None:
        """Under the lock, before a session goes live: at the cap, send the least recently used
        live session that is idle and saved back to the store; when there is none, refuse."""
        if len(self._live) < self.max_live:
            return
        self.on_limit("live_sessions")
        for session_id, session in self._live.items():
            if session_id not in self._busy and session.unsaved is None:
                del self._live[session_id]  # saved: its next call reopens it from the store
                return
        detail = f"{self.max_live} live sessions, each in use or not yet saved: try again"
        raise ServiceProblemError(
            ProblemDocument("server-busy", detail, extra={"limit": "live_sessions"})
        )

    def _load(self, session_id: str) -> dict[str, Any] | None:
        """The stored state; with Redis, without renewing its TTL (reading is not using)."""
        if isinstance(self.store, RedisSessionStore):
            return self.store.peek(session_id)
        return self.store.load(session_id)

    def _forget(self, session_id: str) -> bool:
        with self._lock:
            return self._forget_locked(session_id)

    def _forget_locked(self, session_id: str) -> bool:
        """Drop the session everywhere: live, stored, and the halt the engine remembers by id."""
        live = self._live.pop(session_id, None)
        self._used.pop(session_id, None)
        try:
            stored = self.store.load(session_id) is not None
        except SessionIntegrityError as exc:  # cleared, and the record says what was
            self.engine.engine.report_rejected_state(session_id, exc, deleted=True)
            stored = True
        self.store.delete(session_id)
        self.engine.engine.sessions.note(session_id, None)
        return live is not None or stored

    def _sweep(self, now: float) -> None:
        """Forget sessions idle past the TTL (at most every tenth of the TTL; under the lock)."""
        if now - self._last_sweep < self.ttl / 10:
            return
        self._last_sweep = now
        for session_id in [k for k, used in self._used.items() if now - used > self.ttl]:
            self._forget_locked(session_id)

    def _document(self, body: bytes, check: str) -> tuple[dict[str, Any], str]:
        """The body as an input document of ``check`` (valid under the policy in force), with
        its text for locating errors; another check is refused at ``$.check``."""
        data, text = read_body(body)
        scores = self.engine.policy.spec.scores
        guarded(lambda: parse_request(data, scores, filename="<request>", text=text))
        if data["check"] != check:
            article = "an" if check[0] in "aeiou" else "a"
            message = f"{data['check']!r}: this endpoint takes {article} {check} document"
            raise ServiceProblemError(
                invalid_input([Problem("<request>", 0, 0, "$.check", message)])
            )
        return data, text

    def _call(self, session_id: str, call: Callable[[Session], Any], prefix: str, text: str) -> Any:
        """A call on the session; its problems are about the body (``prefix`` is where the
        session put the body in the document it built), order problems and states that cannot
        be restored are conflicts (HTTP 409)."""
        _check_id(session_id)
        with self._held(session_id):
            try:
                return call(self._rejecting(self._session, session_id, recorded=True))
            except SessionStoreError as exc:
                problem = ProblemDocument(
                    "session-store-unavailable",
                    f"the change was not saved, so it is not made ({exc.error}); retry the call",
                    extra={"decision_ids": list(exc.decision_ids)},
                )
                raise ServiceProblemError(problem) from None
            except SessionStateError as exc:
                raise ServiceProblemError(invalid_input(exc.problems, "session-conflict")) from None
            except InputError as exc:
                moved = rebased(exc, prefix, text) if prefix != "$" else exc
                conflict = all(p.file == _SESSION_FILE for p in exc.problems)
                kind = "session-conflict" if conflict else "invalid-input"
                raise ServiceProblemError(invalid_input(moved.problems, kind)) from None


def _store_failure(exc: Exception) -> str:
    """What failed, without where: a Redis client's error names the server's address."""
    if isinstance(exc, RedisError) and not isinstance(exc, SessionStoreUnreachableError):
        return f"{type(exc).__name__} in the session store"
    return f"{type(exc).__name__}: {exc}"


def _check_id(session_id: str) -> None:
    if not session_id or len(session_id) > MAX_ID_CHARS:
        message = f"a session id is 1 to {MAX_ID_CHARS} characters long"
        raise ServiceProblemError(
            invalid_input([Problem("<request>", 0, 0, "$.session_id", message)])
        )
