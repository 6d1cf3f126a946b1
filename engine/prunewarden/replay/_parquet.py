"""A replay's decisions as partitioned Parquet, for DuckDB, Spark or a warehouse.

``replay --decisions DIR --format parquet`` writes one row per decision (a pass contributes one
per decision in it) into ``DIR/date=YYYY-MM-DD/check=NAME/part-N-I.parquet`` (Hive partitioning,
``date`` from the decision's ``evaluated_at`` in UTC), so a query over one day or one guard reads
only its files. The columns are :data:`DECISION_COLUMNS`, documented in docs/scale.md. The rows
come from the lines a run writes anyway, read back one at a time and written a batch at a time
(:mod:`prunewarden._parquet`), so memory stays bounded whatever the number of decisions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import IO, Any

from prunewarden._parquet import write_partitioned

# name -> Arrow type name (see arrow_schema); the partition columns come last.
DECISION_COLUMNS: dict[str, str] = {
    "trace": "string",
    "session_id": "string",
    "event": "int64",
    "line": "int64",
    "type": "string",
    "cycle": "int64",
    "decision_id": "string",
    "evaluated_at": "timestamp",
    "outcome": "string",
    "enforced": "bool",
    "reason": "string",
    "reason_codes": "list<string>",
    "policy_name": "string",
    "policy_version": "string",
    "policy_digest": "string",
    "kept": "list<string>",
    "evicted": "list<string>",
    "engine_version": "string",
    "date": "string",
    "check": "string",
}


def decision_rows(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """One row per decision in the event records ``lines`` (as ``--decisions`` writes them)."""
    for text in lines:
        if not text.strip():
            continue
        record = json.loads(text)
        plan = record.get("plan")
        decisions = plan["decisions"] if plan is not None else [record.get("decision")]
        for decision in decisions:
            if decision is not None:
                yield _row(record, decision)


def _row(record: dict[str, Any], decision: dict[str, Any]) -> dict[str, Any]:
    codes = [reason["code"] for reason in decision.get("reasons", ())]
    policy = decision.get("policy", {})
    evaluated_at = str(decision.get("evaluated_at", ""))
    return {
        "trace": record["trace"],
        "session_id": record["session_id"],
        "event": record["event"],
        "line": record["line"],
        "type": record["type"],
        "cycle": record.get("cycle"),
        "decision_id": decision.get("decision_id"),
        "evaluated_at": evaluated_at,
        "outcome": decision.get("outcome"),
        "enforced": decision.get("enforced"),
        "reason": codes[0] if codes else None,
        "reason_codes": codes,
        "policy_name": policy.get("name"),
        "policy_version": policy.get("version"),
        "policy_digest": policy.get("digest"),
        "kept": decision.get("kept"),
        "evicted": decision.get("evicted"),
        "engine_version": decision.get("engine_version"),
        "date": evaluated_at[:10],
        "check": decision.get("check"),
    }


def write_decisions_parquet(lines: IO[str], directory: str) -> int:
    """The event records in ``lines`` as partitioned Parquet under ``directory``; return how
    many decisions were written."""
    return write_partitioned(decision_rows(lines), directory, DECISION_COLUMNS)
