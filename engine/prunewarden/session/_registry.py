"""The sessions an engine knows of, so that a stateless call cannot bypass a halt.

``engine.authorize_eviction(..., session_id="s")`` decides without a session's history, but not
against its halt: when a live session of that id (or the store behind the engine) holds pruning
halted, the stateless call is refused with ``pruning_halted`` too. A registry is shared by the
engines that stand for one another (the snapshots of a ``ReloadingEngine``); it holds live
sessions weakly, so a session nobody holds is forgotten.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from prunewarden.decision import Verdict
from prunewarden.errors import SessionStateError
from prunewarden.inputs import Check, Request
from prunewarden.session._model import halt_verdict, unavailable_verdict
from prunewarden.session._state import read_state
from prunewarden.session._store import SessionStore

if TYPE_CHECKING:
    from prunewarden.session._model import Session


class SessionRegistry:
    """Live sessions by id, and the store (if any) where the others may be held."""

    def __init__(self, store: SessionStore | None = None) -> None:
        self.store = store
        self._live: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def add(self, session: Session) -> None:
        if session.session_id is not None:
            with self._lock:
                self._live[session.session_id] = session

    def gate(self, session_id: str, check: Check, request: Request) -> Verdict | None:
        """The refusal a stateless ``check`` for ``session_id`` gets, or None: the halt a live
        session holds, else the one its stored state holds. A store that cannot be read
        refuses (fail closed)."""
        with self._lock:
            session = self._live.get(session_id)
        if session is not None:
            halt = session.halt
            return halt_verdict(halt, check, request) if halt is not None else None
        if self.store is None:
            return None
        try:
            document = self.store.load(session_id)
            halt = read_state(document).history.halt if document is not None else None
        except SessionStateError:
            return unavailable_verdict(check, request, "SessionStateError: malformed state")
        except Exception as exc:  # noqa: BLE001 - a store that fails refuses pruning
            return unavailable_verdict(check, request, f"{type(exc).__name__}: {exc}")
        return halt_verdict(halt, check, request) if halt is not None else None
