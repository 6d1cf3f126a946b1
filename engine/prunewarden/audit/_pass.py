"""One audit record per pruning pass, and the decisions a reader finds in it.

A pruning pass (``Engine.authorize_evictions``, ``Engine.plan``, ``Session.plan``) is one
decision event: one ``pass`` record (``audit-record.v3``; a pass decided over columns writes
version 3, :mod:`._columns`) with the pass's id and time, the digest of its input document, the
policy, and a compact verdict per decision in the order they were made (check, outcome,
enforced, reason codes, actions, and the segment or cycle it is about). Logging a record per
segment cost more than deciding it; an auditor still finds every segment, because
readers (``audit query``, ``report``, ``sql``, ``show-policy``) see a pass record as the
decisions it holds (:func:`decision_rows`), each with the id ``<pass_id>-<index>`` its
:class:`~prunewarden.decision.Decision` carries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prunewarden.__about__ import __version__
from prunewarden.audit._columns import COLUMNS_VERSION, column_rows
from prunewarden.audit._fields import kind_of
from prunewarden.audit._record import (
    DECISION,
    PRUNING_PASS,
    RECORD_VERSION,
    policy_fields,
)
from prunewarden.audit._redaction import erase
from prunewarden.decision import Decision
from prunewarden.inputs import CollapseRequest, EvictionRequest, Request
from prunewarden.policy import Policy

PASS_KINDS = ("evictions", "plan")


def verdict_entry(decision: Decision, request: Request | None) -> dict[str, Any]:
    """What a pass record says of one decision: no messages (rule messages may quote text; the
    codes name the findings), and the segment or cycle it is about."""
    entry: dict[str, Any] = {
        "check": decision.check,
        "outcome": decision.outcome,
        "enforced": decision.enforced,
        "codes": [reason.code for reason in decision.reasons],
        "actions": [action.to_dict() for action in decision.actions],
    }
    if isinstance(request, EvictionRequest):
        entry["segment"] = request.segment.id
    elif isinstance(request, CollapseRequest) and request.history:
        entry["cycle"] = request.history[-1].cycle
    return entry


def pass_record(  # noqa: PLR0913 - everything one pass record is made of
    pass_kind: str,
    decisions: Sequence[Decision],
    requests: Sequence[Request | None],
    *,
    input_digest: str,
    policy: Policy,
    session_id: str | None,
    labels: Mapping[str, str],
    from_session: bool = False,
    plan: Mapping[str, Any] | None = None,
    masks: tuple[str, ...] | None = None,
    document: Any = None,
    shadow_policy: Policy | None = None,
    verdicts: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The record of one pass: its decisions (all of one pass: the first names its id and time)
    and the requests they decided, in order. ``verdicts``: the record's verdict entries where
    the caller has them without the decisions (a plan decided over columns); ``decisions`` then
    holds those of them that are built."""
    first = decisions[0] if decisions else None
    record: dict[str, Any] = {
        "record_version": RECORD_VERSION,
        "kind": PRUNING_PASS,
        "pass": pass_kind,
        "pass_id": first.pass_id if first is not None else "",
        "ts": first.evaluated_at if first is not None else "",
        "verdicts": (
            [verdict_entry(d, r) for d, r in zip(decisions, requests, strict=True)]
            if verdicts is None
            else [dict(v) for v in verdicts]
        ),
        "session_id": session_id,
        "from_session": from_session,
        "labels": dict(labels),
        "policy": policy_fields(policy),
        "engine_version": __version__,
        "input_digest": input_digest,
    }
    if plan is not None:
        record["plan"] = dict(plan)
    if masks is not None and document is not None:
        record["input"], record["input_erased"] = erase(document, masks)
    if any(d.shadow is not None for d in decisions):
        if shadow_policy is None:
            msg = "a decision with a shadow result is logged with the shadow's policy"
            raise ValueError(msg)
        record["shadow"] = {
            "policy": policy_fields(shadow_policy),
            "verdicts": [_shadow_entry(d) for d in decisions],
        }
    return record


def _shadow_entry(decision: Decision) -> dict[str, Any]:
    shadow = decision.shadow
    if shadow is None:
        return {"error": "not decided by the candidate", "agrees": False}
    if shadow.error is not None:
        return {"error": shadow.error, "agrees": False}
    return {
        "outcome": shadow.outcome,
        "enforced": shadow.enforced,
        "codes": [reason.code for reason in shadow.reasons],
        "agrees": shadow.agrees_with(decision),
    }


def decision_rows(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The decisions a record holds, each shaped as a ``decision`` record: itself for a
    ``decision`` record (``record_version`` 1 or 2), one per verdict for a ``pass`` record
    (``decision_id`` ``<pass_id>-<index>``, reasons by code; a ``record_version`` 3 pass holds
    them as columns, :mod:`._columns`), none for other kinds."""
    kind = kind_of(record)
    if kind == DECISION:
        return [dict(record)]
    if kind != PRUNING_PASS:
        return []
    verdicts = record.get("verdicts")
    pass_id = str(record.get("pass_id", ""))
    shared = {
        "record_version": record.get("record_version"),
        "kind": DECISION,
        "pass_id": pass_id,
        "ts": record.get("ts"),
        "session_id": record.get("session_id"),
        "labels": record.get("labels"),
        "policy": record.get("policy"),
        "engine_version": record.get("engine_version"),
        "input_digest": record.get("input_digest"),
    }
    if "cel" in record:
        shared["cel"] = record["cel"]
    if record.get("record_version") == COLUMNS_VERSION:
        # A plan's columns fill the places its verdicts (each with its index) do not take.
        rows = column_rows(record, shared)
        places = record.get("verdict_indices")
        if isinstance(verdicts, list) and isinstance(places, list):
            rows.extend(
                _verdict_row(shared, pass_id, index, verdict)
                for index, verdict in zip(places, verdicts, strict=False)
                if isinstance(index, int) and isinstance(verdict, dict)
            )
            rows.sort(key=lambda row: row["index"])
        return rows
    return [
        _verdict_row(shared, pass_id, index, verdict)
        for index, verdict in enumerate(verdicts if isinstance(verdicts, list) else [])
        if isinstance(verdict, dict)
    ]


def _verdict_row(
    shared: Mapping[str, Any], pass_id: str, index: int, verdict: Mapping[str, Any]
) -> dict[str, Any]:
    """One compact verdict entry of a pass, shaped as a ``decision`` record."""
    codes = verdict.get("codes")
    subject: dict[str, Any] = {}
    if "segment" in verdict:
        subject["segment"] = {"id": verdict["segment"]}
    if "cycle" in verdict:
        subject["cycle"] = verdict["cycle"]
    return {
        **shared,
        "decision_id": f"{pass_id}-{index}",
        "index": index,
        "check": verdict.get("check"),
        "outcome": verdict.get("outcome"),
        "enforced": verdict.get("enforced"),
        "reasons": [{"code": code} for code in codes] if isinstance(codes, list) else [],
        "actions": verdict.get("actions"),
        "subject": subject,
    }
