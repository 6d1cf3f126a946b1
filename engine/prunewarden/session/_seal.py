"""The integrity seal over a stored session state, so that an edit of the store cannot lift a
halt unseen.

A store keeps each state as the exact JSON text it wrote and a seal over that text and the
session id: ``hmac-sha256:`` + HMAC-SHA-256 under the store's key (the way a keyed audit log is
keyed: an environment variable holding at least ``MIN_KEY_BYTES`` bytes), or ``sha256:`` + its
SHA-256 digest without one. A digest catches an edit by hand or a stray write (``"halt": null``,
``null``, a row copied from another session); only a key also stops someone who can write the
store and recompute a digest. A store with a key accepts only keyed seals, so a forger cannot
fall back to a plain digest.

A state whose seal does not match, that has none, or that is not a JSON object is refused with
:class:`~prunewarden.errors.SessionIntegrityError`, located at the session's stored state.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from typing import Any, NoReturn

from prunewarden.errors import Problem, SessionIntegrityError
from prunewarden.limits import MIN_KEY_BYTES

SESSION_KEY_ENV = "PRUNEWARDEN_SESSION_KEY"
_KEYED, _PLAIN = "hmac-sha256:", "sha256:"


def key_from_env(env: str | None) -> bytes | None:
    """The key in the environment variable ``env`` (None: states are sealed by a digest only);
    :class:`ValueError` when it is set but empty or shorter than ``MIN_KEY_BYTES``."""
    if env is None or env not in os.environ:
        return None
    key = os.environ[env].encode("utf-8")
    if len(key) < MIN_KEY_BYTES:
        msg = (
            f"the session state key in {env} is {len(key)} bytes; at least {MIN_KEY_BYTES} "
            "are needed"
        )
        raise ValueError(msg)
    return key


def state_text(state: Mapping[str, Any]) -> str:
    """The JSON text a store writes for ``state`` (and seals)."""
    return json.dumps(state, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def seal_state(session_id: str, text: str, key: bytes | None) -> str:
    """The seal over a state's ``text`` as stored for ``session_id``."""
    body = session_id.encode("utf-8") + b"\n" + text.encode("utf-8")
    if key is None:
        return _PLAIN + hashlib.sha256(body).hexdigest()
    return _KEYED + hmac.new(key, body, hashlib.sha256).hexdigest()


def open_state(session_id: str, text: str, seal: str | None, key: bytes | None) -> dict[str, Any]:
    """The state ``text`` holds, once its ``seal`` is checked; else
    :class:`SessionIntegrityError`."""
    if seal is None:
        _refuse(session_id, "it has no integrity seal (it was not written by this version)")
    if key is None and seal.startswith(_KEYED):
        _refuse(session_id, f"it is sealed with a key ({_KEYED[:-1]}); give the key to read it")
    if key is not None and not seal.startswith(_KEYED):
        _refuse(session_id, "it is not sealed with the key, although the store has one")
    if not hmac.compare_digest(
        seal.encode("ascii", "replace"), seal_state(session_id, text, key).encode("ascii")
    ):
        _refuse(session_id, "its integrity seal does not match: it was altered outside prunewarden")
    try:
        state = json.loads(text)
    except ValueError:
        state = None
    if not isinstance(state, dict):
        _refuse(session_id, "it is not a JSON object")
    return state


def _refuse(session_id: str, why: str) -> NoReturn:
    message = f"the stored state of session {session_id!r} is refused: {why}"
    raise SessionIntegrityError([Problem("<session-store>", 0, 0, "$", message)])
