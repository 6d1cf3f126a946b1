"""The hash chain: how a record is sealed into a line, and how a line is split back.

Records are chained: ``hash`` is SHA-256 (or HMAC-SHA-256, in keyed mode) over the record's
canonical form without ``hash`` - RFC 8785, so that a verifier in any language can recompute it -
which includes
``prev_hash``, the hash of the record before it. The line on disk is that canonical form with
``"hash"`` appended as its last member, so a verifier hashes the bytes it read instead of
re-serializing them. The writer and the verifier both take these bytes from here, so that they
cannot disagree about them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Mapping
from typing import Any

from prunewarden._json import encode_canonical
from prunewarden.errors import AuditError
from prunewarden.limits import MIN_KEY_BYTES

# prev_hash of the first record of a chain.
GENESIS = "sha256:" + "0" * 64

_HASH_TAIL = re.compile(rb',"hash":"((?:sha256|hmac-sha256):[0-9a-f]{64})"}$')


def canonical_record(record: Mapping[str, Any]) -> bytes:
    """Sorted keys, no spaces, ASCII only (any text survives, escaped), no NaN: for a field of
    printable ASCII, the bytes it has in a sealed line too (what ``audit query`` looks for)."""
    text = json.dumps(
        record, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )
    return text.encode("ascii")


def record_hash(body: bytes, key: bytes | None) -> str:
    """``sha256:`` (or ``hmac-sha256:`` with a key) over a record's canonical form."""
    if key is None:
        return "sha256:" + hashlib.sha256(body).hexdigest()
    return "hmac-sha256:" + hmac.new(key, body, hashlib.sha256).hexdigest()


def sealed_form(record: Mapping[str, Any]) -> bytes:
    """The bytes a record's hash covers: its RFC 8785 canonical form."""
    return encode_canonical(record)


def seal(record: Mapping[str, Any], prev_hash: str, key: bytes | None) -> tuple[bytes, str]:
    """The line for ``record`` chained after ``prev_hash``, and the record's hash: the canonical
    form is computed once, and the line is it with the hash appended."""
    body = sealed_form({**record, "prev_hash": prev_hash})
    digest = record_hash(body, key)
    return body[:-1] + b',"hash":"' + digest.encode("ascii") + b'"}\n', digest


def unseal(line: bytes) -> tuple[bytes, str] | None:
    """Split a line (without its newline) into the hashed body and the hash it claims."""
    found = _HASH_TAIL.search(line)
    if found is None:
        return None
    return line[: found.start()] + b"}", found.group(1).decode("ascii")


def is_keyed(digest: str) -> bool:
    return digest.startswith("hmac-")


def parse_record(line: bytes) -> dict[str, Any] | None:
    """A line as a record, or None when it is not one (torn, foreign, or not an object)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("hash"), str):
        return None
    return record


def key_from_env(env: str | None) -> bytes | None:
    """The HMAC key in the environment variable ``env`` (None: an unkeyed log); raises
    :class:`AuditError` when it is unset, empty or shorter than ``MIN_KEY_BYTES``."""
    if env is None:
        return None
    value = os.environ.get(env, "")
    if not value:
        msg = f"keyed audit log: the environment variable {env} is not set or empty"
        raise AuditError(msg)
    key = value.encode("utf-8")
    if len(key) < MIN_KEY_BYTES:
        msg = (
            f"keyed audit log: the key in {env} is {len(key)} bytes; at least {MIN_KEY_BYTES} "
            "are needed"
        )
        raise AuditError(msg)
    return key
