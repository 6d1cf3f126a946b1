"""The sessions an engine knows of, so that a stateless call cannot bypass a halt.

``engine.authorize_eviction(..., session_id="s")`` decides without a session's history, but not
against its halt: when a live session of that id (or the store behind the engine) holds pruning
halted, the stateless call is refused with ``pruning_halted`` too. A registry is shared by the
engines that stand for one another (the snapshots of a ``ReloadingEngine``). It keeps only the
halts in force, by session id (a few fields each), so a halt outlives the session object that
reported it for as long as the engine lives. With a store, it keeps a halt only until the session
has saved it: the store is then the one answer, so a halt another replica lifted, a delete or a
TTL expiry is seen at once, and a replica's memory does not grow with every halted session.

The registry is the authority on the halts it holds: a halt whose save failed stays here, and a
state read from the store that does not show it (an older one) does not lift it
(:meth:`SessionRegistry.keep_held_halt`). Only a cycle that passes the guard, a save that
stored the halt, or a delete of the session lets it go.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from prunewarden.decision import Verdict
from prunewarden.errors import SessionStateError
from prunewarden.inputs import Check, Request
from prunewarden.session._state import Halt, History, read_state
from prunewarden.session._store import SessionStore
from prunewarden.session._verdicts import halt_verdict, unavailable_verdict


class SessionRegistry:
    """The halts live sessions hold, by session id, and the store (if any) where the other
    sessions may be held."""

    def __init__(self, store: SessionStore | None = None) -> None:
        self.store = store
        self._halts: dict[str, Halt] = {}
        self._lock = threading.Lock()

    def note(self, session_id: str | None, halt: Halt | None) -> None:
        """A live session of ``session_id`` now holds ``halt`` (None: it holds none)."""
        if session_id is None:
            return
        with self._lock:
            if halt is None:
                self._halts.pop(session_id, None)
            else:
                self._halts[session_id] = halt

    def publish(
        self, session_id: str | None, halt: Halt | None, saved: bool, *, decided: bool = False
    ) -> None:
        """A live session of ``session_id`` holds ``halt``. Once its history is ``saved`` in
        this registry's store, the store says it: the halt is let go, so one lifted or deleted
        elsewhere (another replica, a TTL) is not kept alive here. Otherwise it is kept,
        unless a cycle that passed the guard lifted it (``decided``): never because a state
        was read that does not show it."""
        if saved or (halt is None and decided):
            self.note(session_id, None)
        elif halt is not None:
            self.note(session_id, halt)

    def held(self, session_id: str) -> Halt | None:
        """The halt a live session of ``session_id`` noted, if it holds one."""
        with self._lock:
            return self._halts.get(session_id)

    def keep_held_halt(self, session_id: str | None, history: History) -> History:
        """``history`` of a session with a store, with the halt held for ``session_id`` when it
        does not show one: a halt decided in this process and not saved stands over a state
        read since (the store may hold an older one). A state in which a later cycle passed
        the guard lifted it. (Without a store, opening an id again starts a new history.)"""
        if session_id is None or history.halt is not None:
            return history
        held = self.held(session_id)
        if held is None:
            return history
        last = history.snapshots[-1].cycle if history.snapshots else None
        if held.cycle is not None and last is not None and last > held.cycle:
            return history
        return replace(history, halt=held)

    def gate(self, session_id: str, check: Check, request: Request | None) -> Verdict | None:
        """The refusal a stateless ``check`` for ``session_id`` gets, or None: the halt a live
        session holds, else the one its stored state holds. A store that cannot be read
        refuses (fail closed)."""
        with self._lock:
            halt = self._halts.get(session_id)
        if halt is not None:
            return halt_verdict(halt, check, request)
        if self.store is None:
            return None
        try:
            document = self.store.load(session_id)
            halt = read_state(document).history.halt if document is not None else None
        except SessionStateError as exc:  # malformed, or altered outside prunewarden
            error = f"{type(exc).__name__}: the stored state cannot be used"
            return unavailable_verdict(check, request, error)
        except Exception as exc:  # noqa: BLE001 - a store that fails refuses pruning
            return unavailable_verdict(check, request, f"{type(exc).__name__}: {exc}")
        return halt_verdict(halt, check, request) if halt is not None else None
