"""Where session states outlive the process: the :class:`SessionStore` interface, and its
embedded default on SQLite.

A session with a store writes its whole state (``session-state.v4``) on every change, inside the
call that made it and before that call returns: a process killed right after a decision was
reported cannot come back without the halt that decision reported. One row per session, replaced
whole in one transaction, so a reader never sees half a state. Each row carries the seal of its
state (:mod:`._seal`): a row edited outside prunewarden is refused with
:class:`~prunewarden.errors.SessionIntegrityError` rather than read as a session without a halt.

:class:`SqliteSessionStore` uses the standard library's ``sqlite3`` in WAL mode. With
``synchronous="FULL"`` (the default) a committed state is on disk, not only in the OS cache: it
survives a power cut, at the price of an fsync per change. ``"NORMAL"`` survives any crash of the
process (``kill -9``) but not of the machine, without that fsync. Many threads and processes may
share one database file; SQLite serializes the writers.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, Protocol, Self, runtime_checkable

from prunewarden.decision import utc_now
from prunewarden.session._seal import key_from_env, open_state, seal_state, state_text

BUSY_TIMEOUT = 30.0  # seconds a writer waits for another process's transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    seal TEXT
)
"""
_UPSERT = """
INSERT INTO sessions (session_id, state, updated_at, seal) VALUES (?, ?, ?, ?)
ON CONFLICT (session_id) DO UPDATE
SET state = excluded.state, updated_at = excluded.updated_at, seal = excluded.seal
"""


_call = threading.local()  # the deadline of the call this thread runs, if it has one


@contextmanager
def save_deadline(deadline: float | None) -> Iterator[None]:
    """Inside the block, this thread's session saves are refused once ``time.monotonic()``
    passes ``deadline``: a call its caller gave up on (a server's request deadline) must not
    write a state over one saved since (its change is not made, as for any failed save)."""
    previous = getattr(_call, "deadline", None)
    _call.deadline = deadline
    try:
        yield
    finally:
        _call.deadline = previous


def call_deadline() -> float | None:
    """The deadline :func:`save_deadline` set for this thread, or None."""
    deadline: float | None = getattr(_call, "deadline", None)
    return deadline


class DeadlinePassedError(Exception):
    """The call's deadline passed before its state was saved."""


def check_deadline() -> None:
    """Raise :class:`DeadlinePassedError` once this thread's call is past its deadline."""
    deadline = call_deadline()
    if deadline is not None and time.monotonic() > deadline:
        msg = "the call's deadline passed before its state was saved"
        raise DeadlinePassedError(msg)


@runtime_checkable
class SessionStore(Protocol):
    """Keeps one ``session-state.v4`` document per session id.

    ``save`` must not return before the state is durable (a process killed right after may not
    lose it); ``load`` returns the last state saved, or None. Both may raise: a session whose
    state cannot be saved refuses to prune until it can (``session_state_unavailable``), and a
    change that cannot be saved is not made (:class:`~prunewarden.errors.SessionStoreError`).
    ``load`` raises :class:`~prunewarden.errors.SessionIntegrityError` for a state that was
    altered outside the store (the bundled stores seal what they write).
    """

    def load(self, session_id: str) -> dict[str, Any] | None: ...

    def save(self, session_id: str, state: Mapping[str, Any]) -> None: ...


class SqliteSessionStore:
    """A :class:`SessionStore` in one SQLite database file (created if missing).

    ``synchronous``: ``"FULL"`` (the default: each save is on disk when it returns) or
    ``"NORMAL"`` (each save survives the process, not a power cut). ``hmac_key_env``: the name
    of an environment variable holding the key (at least 32 bytes) the states are sealed with;
    without one, they are sealed by a SHA-256 digest. A database written before states were
    sealed has its rows sealed as they are when a store first opens it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        hmac_key_env: str | None = None,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            msg = f"synchronous must be FULL or NORMAL, not {synchronous!r}"
            raise ValueError(msg)
        self.path = Path(path)
        self.synchronous = synchronous
        self._key = key_from_env(hmac_key_env)
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid: int | None = None  # the process that opened the connection
        with self._lock:
            self._connect()

    def __repr__(self) -> str:
        return f"SqliteSessionStore({str(self.path)!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def load(self, session_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = (
                self._connect()
                .execute("SELECT state, seal FROM sessions WHERE session_id = ?", (session_id,))
                .fetchone()
            )
        if row is None:
            return None
        return open_state(session_id, row[0], row[1], self._key)

    def save(self, session_id: str, state: Mapping[str, Any]) -> None:
        text = state_text(state)
        seal = seal_state(session_id, text, self._key)
        with self._lock:
            connection = self._connect()
            with connection:  # one transaction: committed (and synced) when the block ends
                connection.execute(_UPSERT, (session_id, text, utc_now(), seal))

    def delete(self, session_id: str) -> None:
        """Forget a session (its next ``Engine.session`` starts afresh)."""
        with self._lock:
            connection = self._connect()
            with connection:
                connection.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))

    def session_ids(self) -> Iterator[str]:
        """Every session id held, sorted."""
        with self._lock:
            rows = (
                self._connect()
                .execute("SELECT session_id FROM sessions ORDER BY session_id")
                .fetchall()
            )
        return iter([row[0] for row in rows])

    def close(self) -> None:
        with self._lock:
            connection, self._connection = self._connection, None
            if connection is not None and self._pid == os.getpid():
                connection.close()

    def _connect(self) -> sqlite3.Connection:
        """The connection of this process (a connection inherited through fork is not used)."""
        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        # The timeout is SQLite's busy timeout: how long a statement waits for a lock.
        connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, check_same_thread=False)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(f"PRAGMA synchronous = {self.synchronous}")
        with connection:
            connection.execute(_SCHEMA)
        self._seal_unsealed(connection)
        self._connection, self._pid = connection, os.getpid()
        return connection

    def _seal_unsealed(self, connection: sqlite3.Connection) -> None:
        """A database from before states were sealed: add the column and seal every row as it
        is, once (under SQLite's write lock, so two processes opening it do it once). Later, a
        row without a seal is refused like one whose seal does not match."""
        if _has_seals(connection):
            return
        connection.execute("BEGIN IMMEDIATE")
        with connection:  # committed when the block ends, rolled back if it raises
            if _has_seals(connection):  # another process sealed it since the first look
                return
            connection.execute("ALTER TABLE sessions ADD COLUMN seal TEXT")
            rows = connection.execute("SELECT session_id, state FROM sessions").fetchall()
            connection.executemany(
                "UPDATE sessions SET seal = ? WHERE session_id = ?",
                [(seal_state(sid, text, self._key), sid) for sid, text in rows],
            )


def _has_seals(connection: sqlite3.Connection) -> bool:
    """Whether the sessions table has its seal column (a database made since states are
    sealed, or sealed once since)."""
    return "seal" in {row[1] for row in connection.execute("PRAGMA table_info(sessions)")}
