"""How the server holds sessions between calls: the live set and its cap, the TTL, each call's
exclusive use of its session (a lease across replicas with Redis), the tenant a session is
bound to, and the problems a store's failures become. The endpoints (:mod:`._sessions`) build
on it; see that module for what a session keeps and when it is saved.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from redis.exceptions import RedisError

from prunewarden.errors import (
    InputError,
    Problem,
    SessionIntegrityError,
    SessionStateError,
    SessionStoreError,
)
from prunewarden.limits import MAX_ID_CHARS, MAX_LIVE_SESSIONS
from prunewarden.policy import Policy
from prunewarden.server._documents import rebased
from prunewarden.server._problems import ProblemDocument, invalid_input
from prunewarden.server._redis import (
    RedisSessionStore,
    SessionBusyError,
    SessionStoreUnreachableError,
)
from prunewarden.server._service import ServiceProblemError, conflict_problem
from prunewarden.server._tenants import (
    BoundStore,
    PolicyHolder,
    Tenant,
    TenantConflictError,
    Tenants,
    stored_tenant,
)
from prunewarden.session import Session, SqliteSessionStore

# Problems a session reports about its own order (a cycle or turn that does not follow the last):
# the request is well formed but conflicts with the state (HTTP 409).
_SESSION_FILE = "<session>"
_T = TypeVar("_T")
# The labels of a call's Prunewarden-Labels header (None: no header): they choose its tenant.
Labels = Mapping[str, str] | None
# The tenant whose token a call presents (None: the server's token, or none): it chooses too.
Credential = str | None


class ServerStore(Protocol):
    """What the server needs of a session store: a :class:`~prunewarden.SessionStore` that can
    also forget a session and be closed (both bundled stores can)."""

    def load(self, session_id: str) -> dict[str, Any] | None: ...

    def save(self, session_id: str, state: Mapping[str, Any]) -> None: ...

    def delete(self, session_id: str) -> object: ...

    def close(self) -> None: ...


class SessionHolding:
    """Sessions held for the endpoints of :class:`~._sessions.SessionService`, over the
    server's tenants (or one policy holder: a server of one policy). With several tenants, each
    session is bound to the one that opened it: a call whose ``Prunewarden-Labels`` choose
    another is refused (HTTP 409 ``tenant-conflict``), and a call without labels goes to the
    session's own."""

    def __init__(
        self,
        tenants: Tenants | PolicyHolder,
        store: ServerStore,
        *,
        ttl: float,
        max_live: int = MAX_LIVE_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tenants = tenants if isinstance(tenants, Tenants) else Tenants.single(tenants)
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
        self._tenant_of: dict[str, str] = {}  # each live session's tenant
        now = clock()
        # When each session was last used (SQLite: those found in the file count as used now).
        held = store.session_ids() if isinstance(store, SqliteSessionStore) else iter(())
        self._used: dict[str, float] = dict.fromkeys(held, now)
        self._lock = threading.Lock()
        self._last_sweep = now

    @property
    def engine(self) -> PolicyHolder:
        """The default tenant's policy (the only one of a server of one policy)."""
        return self.tenants.default.holder

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
        self,
        read: Callable[[str], _T],
        session_id: str,
        tenant: Tenant,
        *,
        recorded: bool = False,
    ) -> _T:
        """``read(session_id)``; a stored state that fails its integrity check is recorded
        (unless ``read`` did: opening a session does) and answered with HTTP 409
        ``session-state-rejected``: every call is refused until a ``DELETE`` clears it."""
        try:
            return read(session_id)
        except SessionIntegrityError as exc:
            if not recorded:
                tenant.holder.engine.report_rejected_state(session_id, exc)
            detail = f"{exc.problems[0]}; DELETE the session to start it afresh"
            problem = ProblemDocument("session-state-rejected", detail, exc.problems)
            raise ServiceProblemError(problem) from None

    def _route(
        self,
        session_id: str,
        labels: Labels,
        *,
        deleting: bool = False,
        credential: Credential = None,
    ) -> Tenant:
        """The tenant of a call: the session's own (refused, HTTP 409, when ``labels`` or the
        token's tenant, ``credential``, choose another; HTTP 403 when it lists tokens and the
        call presents none of them), else the one they choose. A stored state that cannot be
        read binds nothing here: opening or reading it says what is wrong (and DELETE clears it).
        ``deleting``: a session bound to a tenant the server no longer holds may be deleted."""
        tenants = self.tenants
        if not tenants.bound:
            return tenants.default
        bound = self._bound(session_id)
        if bound is None or (tenants.get(bound) is None and deleting):
            return conflict_problem(lambda: tenants.choose(labels, credential))
        return conflict_problem(lambda: tenants.of_session(session_id, bound, labels, credential))

    def bound_tenant(self, session_id: str) -> str | None:
        """The tenant ``session_id`` is bound to, for a stateless call naming it (None: none,
        or a store that cannot say: the halt gate then refuses, fail closed)."""
        if not self.tenants.bound:
            return None
        try:
            return self._bound(session_id)
        except (RedisError, sqlite3.Error, OSError, SessionBusyError):
            return None

    def _bound(self, session_id: str) -> str | None:
        """The tenant of the live session, else the one its stored state names (None: none,
        or a state that cannot be read, which opening or reading it reports)."""
        with self._lock:
            bound = self._tenant_of.get(session_id)
            stored = self.shared or session_id in self._used
        if bound is None and stored:
            with contextlib.suppress(SessionIntegrityError):
                bound = stored_tenant(self._load(session_id))
        return bound

    def _session(self, session_id: str, tenant: Tenant, labels: Labels) -> Session:
        """The session, opened from the store when it is not live (or never kept: Redis)."""
        if self.shared:
            return self._open(session_id, tenant, labels)
        with self._lock:
            self._used[session_id] = self._clock()
            session = self._live.get(session_id)
            if session is not None:
                self._live.move_to_end(session_id)
                return session
            self._make_room()
        # Opening reads (and saves) the store: not under the lock every session call takes.
        opened = self._open(session_id, tenant, labels)
        with self._lock:
            self._tenant_of[session_id] = tenant.name
            return self._live.setdefault(session_id, opened)

    def _open(self, session_id: str, tenant: Tenant, labels: Labels) -> Session:
        """The session opened on ``tenant``'s policy; bound to it when the server has tenants
        (a new session keeps ``labels`` for its records)."""
        holder = tenant.holder
        if not self.tenants.bound:
            return holder.session(session_id)
        store = BoundStore(self.store, tenant.name)
        try:
            state = store.load(session_id)
        except SessionIntegrityError as exc:
            holder.engine.report_rejected_state(session_id, exc)
            raise
        return holder.session(
            session_id, labels if state is None else None, state=state, store=store
        )

    def _make_room(self) -> None:
        """Under the lock, before a session goes live: at the cap, send the least recently used
        live session that is idle and saved back to the store; when there is none, refuse."""
        if len(self._live) < self.max_live:
            return
        self.on_limit("live_sessions")
        for session_id, session in self._live.items():
            if session_id not in self._busy and session.unsaved is None:
                del self._live[session_id]  # saved: its next call reopens it from the store
                self._tenant_of.pop(session_id, None)
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
        self._tenant_of.pop(session_id, None)
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

    def _call(  # noqa: PLR0913 - the call, and what its body is checked against first
        self,
        session_id: str,
        labels: Labels,
        call: Callable[[Session], Any],
        prefix: str,
        text: str,
        *,
        check: Callable[[Policy], None] = lambda _policy: None,
        credential: Credential = None,
    ) -> Any:
        """A call on the session, on its tenant's policy, once ``check`` passed the body; its
        problems are about the body (``prefix`` is where the session put the body in the
        document it built), order problems and states that cannot be restored are conflicts
        (HTTP 409)."""
        check_id(session_id)
        with self._held(session_id):
            tenant = self._route(session_id, labels, credential=credential)
            check(tenant.holder.policy)
            try:
                session = self._rejecting(
                    lambda sid: self._session(sid, tenant, labels),
                    session_id,
                    tenant,
                    recorded=True,
                )
                return call(session)
            except TenantConflictError as exc:  # bound elsewhere since it was routed
                raise ServiceProblemError(ProblemDocument("tenant-conflict", str(exc))) from None
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


def check_id(session_id: str) -> None:
    if not session_id or len(session_id) > MAX_ID_CHARS:
        message = f"a session id is 1 to {MAX_ID_CHARS} characters long"
        raise ServiceProblemError(
            invalid_input([Problem("<request>", 0, 0, "$.session_id", message)])
        )
