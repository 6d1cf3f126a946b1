"""Sessions: the history one agent loop has shown the engine, the halt that holds, and where a
session's state outlives its process (snapshots and stores).

Imports the planner and the layers below it; nothing above it.
"""

from __future__ import annotations

from prunewarden.session._binding import Binder, DecideRequest, SessionBinding
from prunewarden.session._session import Session
from prunewarden.session._registry import SessionRegistry
from prunewarden.session._state import (
    STATE_VERSION,
    Fitted,
    Halt,
    History,
    RestoredState,
    RulePins,
    fit_history,
    read_state,
    refuse_dropped,
    state_document,
)
from prunewarden.session._store import SessionStore, SqliteSessionStore
from prunewarden.session._verdicts import halt_verdict, unavailable_verdict

__all__ = [
    "STATE_VERSION",
    "Binder",
    "DecideRequest",
    "Fitted",
    "Halt",
    "History",
    "RestoredState",
    "RulePins",
    "Session",
    "SessionBinding",
    "SessionRegistry",
    "SessionStore",
    "SqliteSessionStore",
    "fit_history",
    "halt_verdict",
    "read_state",
    "refuse_dropped",
    "state_document",
    "unavailable_verdict",
]
