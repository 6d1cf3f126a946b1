"""Reading audit records' fields: the one place that knows where each field of a record is.

Kept apart from building records (:mod:`._record`): writers and readers of the format meet only
in the field names, and the review, verification and export read records without building any.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prunewarden._json import canonical_digest
from prunewarden.audit._transition import edit_ids


def kind_of(record: Mapping[str, Any]) -> str:
    return str(record.get("kind", ""))


def hash_of(record: Mapping[str, Any]) -> str:
    return str(record.get("hash", ""))


def prev_hash_of(record: Mapping[str, Any]) -> str:
    return str(record.get("prev_hash", ""))


def policy_of(record: Mapping[str, Any]) -> dict[str, Any]:
    policy = record.get("policy")
    return policy if isinstance(policy, dict) else {}


def policy_digest_of(record: Mapping[str, Any]) -> str:
    return str(policy_of(record).get("digest", ""))


def shadow_digest_of(record: Mapping[str, Any]) -> str:
    """The digest of the shadow policy a decision record names, or ""."""
    shadow = record.get("shadow")
    policy = shadow.get("policy") if isinstance(shadow, dict) else None
    return str(policy.get("digest", "")) if isinstance(policy, dict) else ""


def document_of(record: Mapping[str, Any]) -> Any:
    return record.get("document")


def torn_of(record: Mapping[str, Any]) -> list[Any]:
    torn = record.get("torn")
    return torn if isinstance(torn, list) else []


def dropped_of(record: Mapping[str, Any]) -> dict[str, Any]:
    dropped = record.get("dropped")
    return dropped if isinstance(dropped, dict) else {}


def rotation_of(record: Mapping[str, Any]) -> dict[str, Any]:
    rotation = record.get("rotation")
    return rotation if isinstance(rotation, dict) else {}


def reason_codes(record: Mapping[str, Any]) -> list[str]:
    reasons = record.get("reasons")
    if not isinstance(reasons, list):
        return []
    return [str(r.get("code")) for r in reasons if isinstance(r, dict)]


def subject_ids(record: Mapping[str, Any]) -> list[str]:
    """Every id a record is about: its segment, its spans, its cycle (as text)."""
    subject = record.get("subject")
    if not isinstance(subject, dict):
        return []
    ids: list[str] = []
    if "cycle" in subject:
        ids.append(str(subject["cycle"]))
    segment = subject.get("segment")
    if isinstance(segment, dict):
        ids.append(str(segment.get("id")))
    spans = subject.get("spans")
    if isinstance(spans, list):
        ids.extend(str(s.get("span_id")) for s in spans if isinstance(s, dict))
    ids.extend(edit_ids(subject))
    return ids


def digest_matches_document(record: Mapping[str, Any]) -> bool:
    """A ``policy_activated`` record's document hashes to the digest it names (RFC 8785)."""
    document = document_of(record)
    if document is None:
        return False
    try:
        return canonical_digest(document) == policy_digest_of(record)
    except (TypeError, ValueError):
        return False


# Filters of ``audit query`` and ``audit report``: how to read each from a record, and a
# substring every matching canonical line contains (a cheap test before parsing the line).
FIELD_READERS: dict[str, Any] = {
    "kind": kind_of,
    "decision_id": lambda r: r.get("decision_id"),
    "check": lambda r: r.get("check"),
    "outcome": lambda r: r.get("outcome"),
    "session_id": lambda r: r.get("session_id"),
    "policy_name": lambda r: policy_of(r).get("name"),
    "policy_version": lambda r: policy_of(r).get("version"),
    "policy_digest": policy_digest_of,
    "ts": lambda r: r.get("ts"),
}


def record_ts(record: Mapping[str, Any]) -> str:
    return str(record.get("ts", ""))


def authorization_header(decision: Mapping[str, Any], activation: Mapping[str, Any]) -> list[str]:
    """Three lines saying which policy authorized a decision, for ``audit show-policy``, and a
    fourth naming the CEL backend that evaluated its rules when the record names one."""
    policy = policy_of(activation)
    sources = policy.get("sources") or []
    backend = decision.get("cel")
    rules = [f"rules evaluated by the {backend} CEL backend"] if backend else []
    return [
        f"policy {policy.get('name')}@{policy.get('version')} {policy.get('digest')}",
        (
            f"authorized decision {decision.get('decision_id')} ({decision.get('check')} "
            f"{decision.get('outcome')}) at {decision.get('ts')}"
        ),
        "sources: "
        + (", ".join(f"{s.get('path')} (sha256 {s.get('sha256')})" for s in sources) or "-"),
        *rules,
    ]


def report_key(record: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
    """What ``audit report`` counts by: policy name and version, check, outcome, primary
    reason."""
    policy = policy_of(record)
    codes = reason_codes(record)
    return (
        str(policy.get("name")),
        str(policy.get("version")),
        str(record.get("check")),
        str(record.get("outcome")),
        codes[0] if codes else "",
    )


def describe(record: Mapping[str, Any]) -> dict[str, Any]:
    """The columns ``audit query`` prints for a decision record."""
    policy = policy_of(record)
    return {
        "ts": record.get("ts"),
        "decision_id": record.get("decision_id"),
        "check": record.get("check"),
        "outcome": record.get("outcome"),
        "enforced": record.get("enforced"),
        "reasons": ",".join(reason_codes(record)),
        "subject": ",".join(subject_ids(record)),
        "policy": f"{policy.get('name')}@{policy.get('version')}",
        "session_id": record.get("session_id"),
    }
