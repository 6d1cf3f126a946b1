"""Audit logs exported as partitioned Parquet, and SQL over the export.

A month of a fleet's decisions is billions of lines; DuckDB, Spark or a warehouse reads them far
faster as columns. ``audit export --parquet DIR LOG...`` verifies the chain of the logs first
(an export of a log that does not verify would launder it) and then writes one row per decision
(:data:`AUDIT_COLUMNS`) under ``DIR/date=YYYY-MM-DD/check=NAME/``, ``date`` being the day of the
record's ``ts`` in UTC. Logs of ``record_version`` 1 (a record per decision) and 2 (a ``pass``
record holding every decision of a pruning pass) give the same rows: a pass is read as the
decisions it holds (:func:`~prunewarden.audit._pass.decision_rows`: ids ``<pass_id>-<index>``).
Policy activations and the other kinds of record stay in the log: the export is for counting
decisions, the log remains the evidence. ``audit sql`` given the folder
instead of logs runs the same statements over a ``decisions`` view of the Parquet files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from prunewarden._parquet import write_partitioned
from prunewarden.audit import _fields
from prunewarden.audit._chain import parse_record
from prunewarden.audit._pass import decision_rows
from prunewarden.audit._reading import iter_lines
from prunewarden.audit._rotation import order_files
from prunewarden.audit._verify import Verification, verify_files
from prunewarden.errors import AuditError

AUDIT_COLUMNS: dict[str, str] = {
    "decision_id": "string",
    "ts": "timestamp",
    "outcome": "string",
    "enforced": "bool",
    "reason": "string",
    "reason_codes": "list<string>",
    "policy_name": "string",
    "policy_version": "string",
    "policy_digest": "string",
    "session_id": "string",
    "labels": "string",
    "subject": "string",
    "input_digest": "string",
    "kept": "list<string>",
    "evicted": "list<string>",
    "engine_version": "string",
    "record_version": "int64",
    "file": "string",
    "line": "int64",
    "date": "string",
    "check": "string",
}


def export_parquet(
    paths: Iterable[str | os.PathLike[str]], directory: str, *, key: bytes | None = None
) -> tuple[Verification, int]:
    """Verify ``paths`` as one chain; when it holds, write their decisions as Parquet under
    ``directory``. The verification, and how many rows were written (0 when it failed)."""
    files = order_files(paths)
    verification = verify_files(files, key=key)
    if not verification.ok:
        return verification, 0
    try:
        written = write_partitioned(_rows(files), directory, AUDIT_COLUMNS)
    except OSError as exc:
        raise AuditError(f"audit export: {exc.strerror}") from None
    return verification, written


def _rows(files: Iterable[Path]) -> Iterator[dict[str, Any]]:
    for path in files:
        for number, line, ended in iter_lines(path):
            record = parse_record(line) if ended else None
            if record is None:
                continue
            for decision in decision_rows(record):
                yield _row(decision, str(path), number)


def _row(record: Mapping[str, Any], file: str, line: int) -> dict[str, Any]:
    codes = _fields.reason_codes(record)
    policy = _fields.policy_of(record)
    ts = _fields.record_ts(record)
    return {
        "decision_id": record.get("decision_id"),
        "ts": ts,
        "outcome": record.get("outcome"),
        "enforced": record.get("enforced"),
        "reason": codes[0] if codes else None,
        "reason_codes": codes,
        "policy_name": policy.get("name"),
        "policy_version": policy.get("version"),
        "policy_digest": policy.get("digest"),
        "session_id": record.get("session_id"),
        "labels": _json_text(record.get("labels")),
        "subject": _json_text(record.get("subject")),
        "input_digest": record.get("input_digest"),
        "kept": record.get("kept"),
        "evicted": record.get("evicted"),
        "engine_version": record.get("engine_version"),
        "record_version": record.get("record_version"),
        "file": file,
        "line": line,
        "date": ts[:10],
        "check": record.get("check"),
    }


def _json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


PARQUET_VIEWS = """
CREATE VIEW decisions AS
    SELECT * REPLACE (labels::JSON AS labels, subject::JSON AS subject)
    FROM read_parquet({files}, hive_partitioning = true, union_by_name = true);
"""


def parquet_view_sql(directories: Iterable[str | os.PathLike[str]]) -> str:
    """The statement creating the ``decisions`` view over exported folders."""
    globs = []
    for directory in directories:
        if not Path(directory).is_dir():
            msg = f"cannot read {os.fspath(directory)}: not a folder of Parquet files"
            raise AuditError(msg)
        globs.append(str(Path(directory) / "**" / "*.parquet"))
    listed = ", ".join("'" + glob.replace("'", "''") + "'" for glob in globs)
    return PARQUET_VIEWS.format(files=f"[{listed}]")


def sql_parquet(
    statement: str, directories: Iterable[str | os.PathLike[str]]
) -> tuple[list[str], list[str], Iterator[tuple[Any, ...]]]:
    """:func:`~prunewarden.review._sql.sql` over exported folders: ``statement`` runs over the
    view ``decisions`` of their Parquet files. Column names, their types, and the rows."""
    try:
        import duckdb  # noqa: PLC0415 - optional: only this command needs it
    except ImportError:
        msg = "audit sql needs duckdb: pip install 'prunewarden[sql]'"
        raise AuditError(msg) from None
    views = parquet_view_sql(directories)
    connection = duckdb.connect(":memory:")
    try:
        connection.execute("SET TimeZone = 'UTC'")
        connection.execute(views)
        cursor = connection.execute(statement)
        description = cursor.description or []
        rows = cursor.fetchall()
    except duckdb.Error as exc:
        msg = f"audit sql: {exc}"
        raise AuditError(msg) from None
    finally:
        connection.close()
    names = [str(column[0]) for column in description]
    types = [str(column[1]) for column in description]
    return names, types, iter(rows)
