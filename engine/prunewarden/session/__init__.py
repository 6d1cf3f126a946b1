"""Sessions: the history one agent loop has shown the engine, the halt that holds, and where a
session's state outlives its process (snapshots and stores).

Imports the planner and the layers below it; nothing above it.
"""

from __future__ import annotations

from prunewarden.session._binding import Binder, SessionBinding
from prunewarden.session._registry import SessionRegistry
from prunewarden.session._seal import SESSION_KEY_ENV
from prunewarden.session._session import Session
from prunewarden.session._state import Fitted, Halt, RulePins
from prunewarden.session._store import (
    DeadlinePassedError,
    SessionStore,
    SqliteSessionStore,
    save_deadline,
)
from prunewarden.session._transitions import without_halt

__all__ = [
    "SESSION_KEY_ENV",
    "Binder",
    "DeadlinePassedError",
    "Fitted",
    "Halt",
    "RulePins",
    "Session",
    "SessionBinding",
    "SessionRegistry",
    "SessionStore",
    "SqliteSessionStore",
    "save_deadline",
    "without_halt",
]
