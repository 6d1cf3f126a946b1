"""What one append writes: a batch of records with the policy activations they need, sealed
after a chain's last hash.

Kept apart from :mod:`._log`, whose append protocol (locks, catching up, recovery, rotation)
calls these for a file, a FIFO and a stream alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prunewarden.audit import _fields, _record
from prunewarden.audit._chain import seal
from prunewarden.audit._file_state import Chain
from prunewarden.errors import AuditError

Sealed = tuple[bytes, str, set[str]]


def with_activation(
    chain: Chain, batch: list[dict[str, Any]], policies: Mapping[str, dict[str, Any]], sink: str
) -> list[dict[str, Any]]:
    """``batch`` with a ``policy_activated`` record before the first decision (or pass) under
    each policy the chain has not activated yet; ``policies`` holds the activations by digest.

    Raises :class:`AuditError` for a policy ``sink`` was not given (``AuditLog.add_policy``).
    """
    out: list[dict[str, Any]] = []
    activated: set[str] = set()
    for record in batch:
        if _fields.kind_of(record) in (_record.DECISION, _record.PRUNING_PASS):
            # The policy that decided, and a shadow policy beside it: both reconstructible.
            needed = [_fields.policy_digest_of(record), _fields.shadow_digest_of(record)]
            for digest in dict.fromkeys(needed):
                if not digest or digest in chain.activated or digest in activated:
                    continue
                activation = policies.get(digest)
                if activation is None:
                    msg = f"policy {digest} was not added to {sink} (AuditLog.add_policy)"
                    raise AuditError(msg)
                out.append(_record.restamped(activation))
                activated.add(digest)
        out.append(record)
    return out


def seal_batch(chain: Chain, records: list[dict[str, Any]], key: bytes | None) -> Sealed:
    """The lines for ``records`` after the chain's last hash, the new last hash, and the
    digests they activate."""
    lines: list[bytes] = []
    last, activated = chain.last, set()
    for record in records:
        line, last = seal(record, last, key)
        lines.append(line)
        if _fields.kind_of(record) == _record.POLICY_ACTIVATED:
            activated.add(_fields.policy_digest_of(record))
    return b"".join(lines), last, activated
