"""The audit record format: the only place that names log fields.

A record is one JSON object on one line, described by ``schemas/audit-record.v3.schema.json``
(sealed over RFC 8785 canonical JSON; ``record_version`` 3 for a pass decided over columns, 2 for
every other record). A record of ``record_version`` 1, written before the first release, is
refused by every reader, naming its version (:func:`retired_version`).

Its ``kind`` says what happened: a ``pass`` (one pruning pass and every decision in it,
:mod:`._pass`); a ``decision``; a ``policy_activated`` record holding the full canonical policy,
written before the first decision under that policy's digest in each log file; a
``policy_reload_failed``; a ``log_rotated`` header at the top of a file that continues a rotated
one; a ``write_recovered`` record after the remains of an interrupted write; a ``session_rebound``
when a session moves to a reloaded policy.

Records are chained: ``_chain`` seals a record into its line, adding ``prev_hash`` and ``hash``.
Where each field is read back from a record is in ``_fields``.
What keeps segment and span text out of a record is in ``_redaction``.

Library code never configures structlog, and writes nowhere on its own: decisions go to the audit
sink or the structlog logger the caller passed (:func:`get_logger` names the ``prunewarden``
logger), with the same fields minus the chain.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from prunewarden.__about__ import __version__
from prunewarden._identity import PolicyIdentity
from prunewarden._json import canonical_from, encode_canonical
from prunewarden.audit._redaction import erase, logged_reasons
from prunewarden.audit._transition import edit_fields
from prunewarden.decision import Decision, utc_now
from prunewarden.inputs import (
    CollapseRequest,
    EvictionRequest,
    Request,
    Span,
    StalenessRequest,
    TransitionRequest,
)
from prunewarden.policy import Policy

LOGGER_NAME = "prunewarden"
RECORD_VERSION = 2
# Every version a reader knows, both of audit-record.v3 and sealed over RFC 8785: 3 for a pass
# decided over columns (audit._columns), 2 for every other record.
RECORD_VERSIONS = (2, 3)
# Written before the first release (sealed over Python's sorted-keys JSON) and no longer read.
RETIRED_RECORD_VERSIONS = (1,)

DECISION = "decision"
PRUNING_PASS = "pass"  # noqa: S105 - a record kind, not a password
POLICY_ACTIVATED = "policy_activated"
POLICY_RELOAD_FAILED = "policy_reload_failed"
LOG_ROTATED = "log_rotated"
WRITE_RECOVERED = "write_recovered"
SESSION_REBOUND = "session_rebound"
SESSION_STATE_REJECTED = "session_state_rejected"
RECORDS_DROPPED = "records_dropped"
POLICY_ROLLBACK = "policy_rollback"
KINDS = (
    DECISION,
    PRUNING_PASS,
    POLICY_ACTIVATED,
    POLICY_RELOAD_FAILED,
    LOG_ROTATED,
    WRITE_RECOVERED,
    SESSION_REBOUND,
    SESSION_STATE_REJECTED,
    RECORDS_DROPPED,
    POLICY_ROLLBACK,
)

# Substrings a canonical record line contains, for cheap scans before parsing.
ACTIVATION_MARKER = b'"kind":"policy_activated"'
DROPPED_MARKER = b'"kind":"records_dropped"'


# structlog is imported where a logger is first made (here), not with the
# package: with it comes rich, when installed (its console renderer), together a large share of
# ``import prunewarden``, and a program deciding with no logger never needs either
# (docs/architecture.md, "Import cost"). Not to dodge a cycle: structlog imports nothing of ours.


def get_logger() -> Any:
    import structlog  # noqa: PLC0415 - deferred for import cost (above)

    return structlog.get_logger(LOGGER_NAME)


class RecordLogger:
    """An :class:`AuditLog`'s logger: ``info(kind, **fields)`` (or any level) writes the record
    ``fields`` with its ``kind``, and ``bind(**context)`` gives a logger adding ``context`` to
    each. It is what a structlog logger with the one processor ``event_to_kind`` did, without
    importing structlog (and the asyncio it loads) into every program writing an audit log."""

    __slots__ = ("_context", "_sink")

    def __init__(self, sink: Any, context: dict[str, Any] | None = None) -> None:
        self._sink = sink
        self._context = context or {}

    def msg(self, event: str, **fields: Any) -> None:
        self._sink.write({**self._context, **fields, "kind": event})

    info = warning = error = critical = debug = msg

    def bind(self, **context: Any) -> RecordLogger:
        return RecordLogger(self._sink, {**self._context, **context})


def sink_logger(sink: Any) -> RecordLogger:
    """The logger of an :class:`AuditLog`: each record handed to ``sink.write`` as one dict, the
    event name as the record's ``kind``."""
    return RecordLogger(sink)


# --- building records -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecisionContext:
    """What a record needs beyond the decision: the input's digest and the subject's ids (never
    its text), the caller's session and labels, and the input itself when a sink asks for it."""

    input_digest: str
    subject: dict[str, Any]
    session_id: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    document: Any = None
    # The request's segment and span text: never logged, only kept out of rule messages.
    texts: tuple[str, ...] = ()
    # Decided by a Session (with its history), not by a stateless engine call.
    from_session: bool = False
    # How ``input_digest`` was computed, when not as the record's version says (the document as
    # given): HASHED_TEXT_DIGEST_VERSION for a document digested with its texts as their hashes.
    input_digest_version: int | None = None


def input_digest(document: Any, encoded: bytes | None = None) -> str:
    """``sha256:`` over the RFC 8785 canonical JSON of an input document (from
    ``record_version`` 2; any language with a JCS library recomputes it). ``encoded``: orjson's
    output for the document under ``ORJSON_CANONICAL``, when validation already wrote it.

    JSON text may spell lone surrogates (``"\\ud800"``); they are hashed as their UTF-8-style
    bytes rather than refused, so that such a document is still decided and logged.
    """
    canonical = encode_canonical(document) if encoded is None else canonical_from(document, encoded)
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def text_fields(text: str) -> dict[str, Any]:
    """What a record may say about a text: its length and its hash, never the text."""
    encoded = text.encode("utf-8", "surrogatepass")
    return {"text_length": len(text), "text_sha256": hashlib.sha256(encoded).hexdigest()}


def texts_of(request: Request) -> tuple[str, ...]:
    """The segment or span text of a request."""
    if isinstance(request, EvictionRequest):
        return (request.segment.text,) if request.segment.text else ()
    if isinstance(request, StalenessRequest):
        return tuple(span.text for span in request.spans if span.text)
    if isinstance(request, TransitionRequest):
        windows = (*request.before, *request.after)
        return tuple(segment.segment.text for segment in windows if segment.segment.text)
    return ()


def subject_of(request: Request) -> dict[str, Any]:
    """The ids a decision is about: the last cycle, the segment, or the spans."""
    if isinstance(request, CollapseRequest):
        return {"cycle": request.history[-1].cycle} if request.history else {}
    if isinstance(request, EvictionRequest):
        segment = request.segment
        return {"segment": {"id": segment.id, "kind": segment.kind, **text_fields(segment.text)}}
    if isinstance(request, StalenessRequest):
        return {"spans": [_span_fields(span) for span in request.spans]}
    if isinstance(request, TransitionRequest):
        return {"transition": edit_fields(request)}
    msg = f"no subject for {type(request).__name__}"
    raise TypeError(msg)


def _span_fields(span: Span) -> dict[str, Any]:
    """A span's id and :func:`text_fields`, reusing the digest computed when it was typed."""
    if not span.text_digest:
        return {"span_id": span.span_id, **text_fields(span.text)}
    return {"span_id": span.span_id, "text_length": len(span.text), "text_sha256": span.text_digest}


def policy_fields(policy: Policy) -> dict[str, Any]:
    return {
        **policy.identity.to_dict(),
        "sources": [source.to_dict() for source in policy.sources],
    }


def decision_record(  # noqa: PLR0913 - the record's parts; the optional ones keyword-only
    decision: Decision,
    context: DecisionContext,
    policy: Policy,
    masks: tuple[str, ...] | None = None,
    *,
    shadow_policy: Policy | None = None,
    cel: str | None = None,
) -> dict[str, Any]:
    """The fields of a decision record, without the chain; ``masks`` (JSON pointers) opt in to
    logging the input document with those paths erased. A decision with a shadow result needs
    the shadow's ``shadow_policy``: its rules say which rule messages to withhold. ``cel``, the
    CEL backend of the engine, is recorded when the policy (or its shadow) has rules: a record
    of a policy without rules had nothing for a backend to evaluate."""
    record: dict[str, Any] = {
        "record_version": RECORD_VERSION,
        "kind": DECISION,
        "decision_id": decision.decision_id,
        "ts": decision.evaluated_at,
        "check": decision.check,
        "outcome": decision.outcome,
        "enforced": decision.enforced,
        "reasons": logged_reasons(decision.reasons, policy.rules, context.texts),
        "actions": [action.to_dict() for action in decision.actions],
        "subject": context.subject,
        "session_id": context.session_id,
        "from_session": context.from_session,
        "labels": dict(context.labels),
        "policy": policy_fields(policy),
        "engine_version": decision.engine_version,
        "input_digest": context.input_digest,
    }
    if context.input_digest_version is not None:
        record["input_digest_version"] = context.input_digest_version
    if cel is not None and (policy.rules or (shadow_policy is not None and shadow_policy.rules)):
        record["cel"] = cel
    if decision.kept is not None:
        record["kept"] = list(decision.kept)
    if decision.evicted is not None:
        record["evicted"] = list(decision.evicted)
    if masks is not None and context.document is not None:
        record["input"], record["input_erased"] = erase(context.document, masks)
    if decision.shadow is not None:
        if shadow_policy is None:
            msg = "a decision with a shadow result is logged with the shadow's policy"
            raise ValueError(msg)
        record["shadow"] = shadow_fields(decision, shadow_policy, context.texts)
    return record


def shadow_fields(
    decision: Decision, shadow_policy: Policy, texts: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A decision record's ``shadow`` block: what the candidate policy decided on the same
    request (or why it could not), and whether it agrees with the decision."""
    shadow = decision.shadow
    if shadow is None:
        msg = "the decision has no shadow"
        raise ValueError(msg)
    block: dict[str, Any] = {"policy": policy_fields(shadow_policy)}
    if shadow.error is not None:
        block.update(error=shadow.error, agrees=False)
        return block
    block.update(
        outcome=shadow.outcome,
        enforced=shadow.enforced,
        reasons=logged_reasons(shadow.reasons, shadow_policy.rules, texts),
        actions=[action.to_dict() for action in shadow.actions],
        agrees=shadow.agrees_with(decision),
    )
    return block


def policy_activated_record(policy: Policy) -> dict[str, Any]:
    """The full canonical policy, so that every decision under its digest can be re-derived."""
    return _event(POLICY_ACTIVATED, policy=policy_fields(policy), document=policy.document)


def policy_reload_failed_record(
    path: str, problems: Iterable[str], active: PolicyIdentity | None
) -> dict[str, Any]:
    """A policy file that failed to load; ``active`` is the policy still in force, if any."""
    return _event(
        POLICY_RELOAD_FAILED,
        error={"path": path, "problems": list(problems)},
        policy=active.to_dict() if active is not None else None,
    )


def policy_rollback_record(
    location: str,
    previous: Mapping[str, Any],
    current: Mapping[str, Any],
    policy: PolicyIdentity,
) -> dict[str, Any]:
    """A bundle older than the one in force was activated because the server allows it
    (``serve --bundle-allow-rollback``): ``previous`` and ``current`` each give ``revision``
    and ``sequence`` (None: a manifest without one); ``policy`` is the one now in force."""
    return _event(
        POLICY_ROLLBACK,
        rollback={"location": location, "from": dict(previous), "to": dict(current)},
        policy=policy.to_dict(),
    )


def session_rebound_record(  # noqa: PLR0913 - the two identities and what carried over
    session_id: str | None,
    labels: Mapping[str, str],
    previous: PolicyIdentity,
    policy: Policy,
    *,
    kept: Iterable[str],
    dropped: Mapping[str, str],
) -> dict[str, Any]:
    """A session moved from the ``previous`` policy to ``policy`` (a reload, or a state restored
    under another policy): which parts of its history it ``kept``, and why it ``dropped`` the
    others."""
    return _event(
        SESSION_REBOUND,
        session_id=session_id,
        labels=dict(labels),
        previous_policy=previous.to_dict(),
        policy=policy_fields(policy),
        kept=list(kept),
        dropped=dict(dropped),
    )


def session_state_rejected_record(
    session_id: str, problems: Iterable[str], *, deleted: bool = False
) -> dict[str, Any]:
    """A session's stored state was refused (its seal does not match, or it cannot be read):
    the located ``problems``, and whether an operator's delete cleared it (``deleted``)."""
    return _event(
        SESSION_STATE_REJECTED, session_id=session_id, problems=list(problems), deleted=deleted
    )


def log_rotated_record(previous_file: str, sequence: int) -> dict[str, Any]:
    """The header of a file that continues the chain of ``previous_file``."""
    return _event(LOG_ROTATED, rotation={"previous_file": previous_file, "sequence": sequence})


def write_recovered_record(torn: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Follows the remains of interrupted writes (lines that are not records), naming each by
    length and hash (``torn_fields``) so a verifier can tell them from lines inserted later."""
    return _event(WRITE_RECOVERED, torn=[dict(fields) for fields in torn])


def records_dropped_record(
    sink: str, count: int, after: str, first: str, last: str
) -> dict[str, Any]:
    """A shipper to ``sink`` skipped ``count`` records, ``first`` to ``last``, after the record
    hashed ``after``: written right after ``last``, so that a receiver's chain goes on from
    ``after`` to it."""
    dropped = {"sink": sink, "count": count, "after": after, "first": first, "last": last}
    return _event(RECORDS_DROPPED, dropped=dropped)


def torn_fields(line: bytes) -> dict[str, Any]:
    return {"bytes": len(line), "sha256": hashlib.sha256(line).hexdigest()}


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "record_version": RECORD_VERSION,
        "kind": kind,
        "ts": utc_now(),
        "engine_version": __version__,
        **fields,
    }


def restamped(record: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a prepared record with ``ts`` set to now, as it is written."""
    return {**record, "ts": utc_now()}


def log_decision(logger: Any, record: Mapping[str, Any]) -> None:
    """Write one record through a structlog logger; raises whatever the logger raises."""
    fields = dict(record)
    logger.info(fields.pop("kind"), **fields)


def log_policy_reload_failed(
    logger: Any, path: str, problems: Iterable[str], active: PolicyIdentity | None
) -> None:
    log_decision(logger, policy_reload_failed_record(path, problems, active))


def log_policy_rollback(
    logger: Any,
    location: str,
    previous: Mapping[str, Any],
    current: Mapping[str, Any],
    policy: PolicyIdentity,
) -> None:
    log_decision(logger, policy_rollback_record(location, previous, current, policy))


def log_policy_reloaded(logger: Any, previous: PolicyIdentity, current: Policy) -> None:
    """A changed policy loaded and is now in force. An event for the application's structlog
    logger, not an audit record: an audit log records the new policy in a ``policy_activated``
    record before the first decision under it."""
    logger.info("policy_reloaded", previous=previous.to_dict(), policy=policy_fields(current))


def event_to_kind(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: the event name is the record's ``kind``; the result is handed to the
    sink as keyword arguments."""
    event_dict["kind"] = event_dict.pop("event")
    return event_dict


def retired_version(record: Mapping[str, Any]) -> str | None:
    """Why a record of a version written before the first release is not read (None for any
    other record): one line naming its version and what to do."""
    version = record.get("record_version")
    if type(version) is not int or version not in RETIRED_RECORD_VERSIONS:
        return None
    return (
        f"record_version {version} was written before the first release and is no longer read "
        f"(only {' and '.join(map(str, RECORD_VERSIONS))}): keep the log as it is, and start a "
        "new one"
    )
