"""The only place that names log fields: one function writes a decision record.

Library code asks structlog for a logger and never configures it; the CLI or the embedding
application decides where records go.
"""

from __future__ import annotations

from typing import Any

import structlog
from prunewarden.decision import Decision

LOGGER_NAME = "prunewarden"


def get_logger() -> Any:
    return structlog.get_logger(LOGGER_NAME)


def decision_fields(decision: Decision) -> dict[str, Any]:
    """The fields of a decision record: enough to answer "why, and under which policy"."""
    return {
        "decision_id": decision.decision_id,
        "check": decision.check,
        "outcome": decision.outcome,
        "enforced": decision.enforced,
        "reasons": [reason.code for reason in decision.reasons],
        "actions": [action.to_dict() for action in decision.actions],
        "policy_name": decision.policy.name,
        "policy_version": decision.policy.version,
        "policy_digest": decision.policy.digest,
        "engine_version": decision.engine_version,
        "evaluated_at": decision.evaluated_at,
    }


def log_decision(logger: Any, decision: Decision) -> None:
    """Write one decision record; raises whatever the logger raises."""
    logger.info("decision", **decision_fields(decision))
