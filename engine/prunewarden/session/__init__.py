"""Sessions: the history one agent loop has shown the engine, the halt that holds, and where a
session's state outlives its process (snapshots and stores).

Imports the planner and the layers below it; nothing above it.
"""

from __future__ import annotations

from prunewarden.session._binding import Binder, SessionBinding
from prunewarden.session._registry import SessionRegistry
from prunewarden.session._session import Session
from prunewarden.session._state import Fitted, Halt, RulePins
from prunewarden.session._store import SessionStore, SqliteSessionStore

__all__ = [
    "Binder",
    "Fitted",
    "Halt",
    "RulePins",
    "Session",
    "SessionBinding",
    "SessionRegistry",
    "SessionStore",
    "SqliteSessionStore",
]
