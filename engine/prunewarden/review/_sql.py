"""``prunewarden audit sql``: the logs as DuckDB views, for questions the other review commands
do not answer.

Kept apart from the streaming review (:mod:`prunewarden.audit._review`) because it is the one
part that needs the optional dependency duckdb and reads the logs through it, not line by line.

DuckDB refuses a whole file when one JSON line is longer than its ``maximum_object_size`` (16 MiB
by default), and a pass over 100,000 segments is a record of some 50 MB. The files are first read
once, in bounded chunks, for their longest line; DuckDB is then told to take lines that long, so
that no record is left out, and a line too long to be any record is refused with its place.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prunewarden.audit._rotation import order_files
from prunewarden.errors import AuditError
from prunewarden.limits import MAX_SQL_LINE_BYTES

# DuckDB's own default for the longest JSON value it reads; what the views ask for at least.
_DEFAULT_OBJECT_BYTES = 16 * 1024 * 1024
_CHUNK = 1024 * 1024

# The columns of every record kind, typed; nested parts whose shape varies stay JSON.
_COLUMNS = {
    "record_version": "INTEGER",
    "kind": "VARCHAR",
    "ts": "VARCHAR",
    "decision_id": "VARCHAR",
    "check": "VARCHAR",
    "outcome": "VARCHAR",
    "enforced": "BOOLEAN",
    "reasons": "JSON",
    "actions": "JSON",
    "subject": "JSON",
    "session_id": "VARCHAR",
    "labels": "JSON",
    "policy": (
        "STRUCT(name VARCHAR, version VARCHAR, digest VARCHAR, "
        "sources STRUCT(path VARCHAR, sha256 VARCHAR)[])"
    ),
    "engine_version": "VARCHAR",
    "input_digest": "VARCHAR",
    "pass_id": "VARCHAR",
    "pass": "VARCHAR",
    "verdicts": "JSON",
    "refusal": "VARCHAR",
    "segments": "VARCHAR[]",
    "codes": "VARCHAR[]",
    "code_actions": "VARCHAR[]",
    "allowed": "VARCHAR",
    "dependencies": "JSON",
    "plan": "JSON",
    "verdict_indices": "BIGINT[]",
    "kept": "VARCHAR[]",
    "evicted": "VARCHAR[]",
    "input": "JSON",
    "input_erased": "VARCHAR[]",
    "document": "JSON",
    "rotation": "JSON",
    "torn": "JSON",
    "error": "JSON",
    "prev_hash": "VARCHAR",
    "hash": "VARCHAR",
}

# A version 3 record's columns are expanded once per record into lists as long as its segments,
# then unnested side by side: looking a segment's place, outcome or dependencies up per row made
# the view quadratic (a 100,000-verdict pass took minutes). Both expansions sort. The places are
# the indices of the pass no plan verdict takes, in order: the indices with the taken ones twice,
# sorted, keep those that appear once. The dependencies: the entries of ``dependencies`` sorted
# with the segments' indices, each segment takes the entry just before it if that names its own
# index (a key not spelled as an index names none).
_MACROS = """
CREATE MACRO appearing_once(s) AS list_transform(list_filter(
    list_zip(s, list_prepend(NULL, s), list_concat(list_slice(s, 2, len(s)), [NULL]), true),
    lambda e: e[1] IS DISTINCT FROM e[2] AND e[1] IS DISTINCT FROM e[3]), lambda e: e[1]);
CREATE MACRO column_places(n, taken) AS
    list_slice(appearing_once(list_sort(list_concat(range(n + len(taken)), taken, taken))), 1, n);
CREATE MACRO entries_before(s) AS list_transform(list_filter(
    list_zip(s, list_prepend({'at': -1, 'segment': 1, 'ids': NULL::VARCHAR[]}, s), true),
    lambda e: e[1].segment = 1),
    lambda e: CASE WHEN e[2].segment = 0 AND e[2].at = e[1].at THEN e[2].ids END);
CREATE MACRO column_dependencies(n, by_index) AS entries_before(list_sort(list_concat(
    list_transform(
        list_filter(map_entries(by_index), lambda e: TRY_CAST(e.key AS BIGINT)::VARCHAR = e.key),
        lambda e: {'at': e.key::BIGINT, 'segment': 0, 'ids': e.value}),
    list_transform(range(n), lambda i: {'at': i, 'segment': 1, 'ids': NULL::VARCHAR[]}))));
"""
_VIEWS = """
CREATE VIEW records AS
    SELECT * REPLACE (ts::TIMESTAMPTZ AS ts) FROM read_json({files},
        format = 'newline_delimited', columns = {columns}, ignore_errors = true,
        filename = true, maximum_object_size = {object_bytes});
CREATE VIEW decisions AS
    SELECT decision_id, ts, "check", outcome, enforced,
        reasons->>'$[0].code' AS reason,
        json_extract_string(reasons, '$[*].code') AS reason_codes,
        policy.name AS policy_name, policy.version AS policy_version,
        policy.digest AS policy_digest, session_id, labels,
        subject->>'$.segment.id' AS segment_id,
        (subject->>'$.cycle')::BIGINT AS cycle,
        json_extract_string(subject, '$.spans[*].span_id') AS span_ids,
        kept, evicted, reasons, actions, subject, input_digest, NULL AS pass_id, filename
    FROM records WHERE kind = 'decision'
    UNION ALL
    SELECT pass_id || '-' || coalesce(verdict_indices[i], i - 1) AS decision_id, ts,
        v->>'$.check' AS "check",
        v->>'$.outcome' AS outcome, (v->>'$.enforced')::BOOLEAN AS enforced,
        v->>'$.codes[0]' AS reason,
        json_extract_string(v, '$.codes[*]') AS reason_codes,
        policy.name AS policy_name, policy.version AS policy_version,
        policy.digest AS policy_digest, session_id, labels,
        v->>'$.segment' AS segment_id, (v->>'$.cycle')::BIGINT AS cycle,
        NULL::VARCHAR[] AS span_ids, NULL::VARCHAR[] AS kept, NULL::VARCHAR[] AS evicted,
        to_json(list_transform(json_extract_string(v, '$.codes[*]'), lambda c: {{'code': c}}))
            AS reasons,
        v->'$.actions' AS actions,
        CASE WHEN v->>'$.segment' IS NULL THEN json_object('cycle', v->'$.cycle')
            ELSE json_object('segment', json_object('id', v->>'$.segment')) END AS subject,
        input_digest, pass_id, filename
    FROM (SELECT *, unnest(verdicts) AS v, generate_subscripts(verdicts, 1) AS i
          FROM (SELECT ts, policy, session_id, labels, input_digest, pass_id, filename,
                    verdicts::JSON[] AS verdicts, verdict_indices
                FROM records WHERE kind = 'pass'
                    AND (record_version < 3 OR verdict_indices IS NOT NULL)))
    UNION ALL
    SELECT pass_id || '-' || place AS decision_id, ts, "check",
        CASE WHEN allowed_bit = '1' THEN 'allow' ELSE refusal END AS outcome,
        enforced, reason_codes[1] AS reason, reason_codes,
        policy.name AS policy_name, policy.version AS policy_version,
        policy.digest AS policy_digest, session_id, labels,
        segment AS segment_id, NULL::BIGINT AS cycle,
        NULL::VARCHAR[] AS span_ids, NULL::VARCHAR[] AS kept, NULL::VARCHAR[] AS evicted,
        to_json(list_transform(reason_codes, lambda c: {{'code': c}})) AS reasons,
        to_json(list_transform(
            list_filter(bits, lambda j: code_actions[j + 1] IS NOT NULL),
            lambda j: {{'action': code_actions[j + 1],
                'ids': CASE WHEN code_actions[j + 1] = 'resolve_dependencies_first'
                    THEN depends_on ELSE [segment] END}})) AS actions,
        json_object('segment', json_object('id', segment)) AS subject,
        input_digest, pass_id, filename
    FROM (SELECT *, list_transform(bits, lambda j: codes[j + 1]) AS reason_codes
          FROM (SELECT *, list_filter(range(len(codes)), lambda j: (mask >> j) & 1 = 1) AS bits
                FROM (SELECT ts, "check", refusal, enforced, codes, code_actions, policy,
                          session_id, labels, input_digest, pass_id, filename,
                          -- each column expanded once per record, then unnested side by side
                          unnest(segments) AS segment,
                          unnest(column_places(len(segments),
                              list_distinct(coalesce(verdict_indices, [])))) AS place,
                          unnest(list_slice(string_split(allowed, ''), 1, len(segments)))
                              AS allowed_bit,
                          unnest(list_slice(reasons::BIGINT[], 1, len(segments))) AS mask,
                          unnest(column_dependencies(len(segments),
                              TRY_CAST(dependencies AS MAP(VARCHAR, VARCHAR[])))) AS depends_on
                      FROM records WHERE kind = 'pass' AND record_version = 3)));
CREATE VIEW policies AS
    SELECT policy.name AS policy_name, policy.version AS policy_version,
        policy.digest AS policy_digest, any_value(document) AS document,
        min(ts) AS first_activated
    FROM records WHERE kind = 'policy_activated'
    GROUP BY ALL;
"""


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_GLOB_CHARACTERS = re.compile(r"([*?\[])")


def _glob_literal(path: str) -> str:
    """``path`` as a DuckDB file pattern matching only itself: DuckDB expands ``*``, ``?`` and
    ``[...]`` in every file name it reads, so each becomes a one-character class (``[*]``)."""
    return _GLOB_CHARACTERS.sub(r"[\1]", path)


def longest_line(path: Path) -> tuple[int, int]:
    """The length of the longest line of a file (without its newline) and its 1-based number,
    read in bounded chunks."""
    longest = number = 0
    current, line = 0, 1
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            at = 0
            while (newline := chunk.find(b"\n", at)) != -1:
                if current + newline - at > longest:
                    longest, number = current + newline - at, line
                current, line, at = 0, line + 1, newline + 1
            current += len(chunk) - at
    if current > longest:
        longest, number = current, line
    return longest, number


def _object_bytes(files: list[str]) -> int:
    """The ``maximum_object_size`` that reads every line of ``files``; raises
    :class:`AuditError` for a line longer than any record (``MAX_SQL_LINE_BYTES``)."""
    needed = _DEFAULT_OBJECT_BYTES
    for name in files:
        length, number = longest_line(Path(name))
        if length > MAX_SQL_LINE_BYTES:
            msg = (
                f"audit sql: {name}:{number}: a line of {length} bytes, longer than any record "
                f"(MAX_SQL_LINE_BYTES, {MAX_SQL_LINE_BYTES}): not a record (prunewarden audit "
                "verify names what it is)"
            )
            raise AuditError(msg)
        needed = max(needed, length + 1)
    return needed


def sql(
    statement: str, paths: Iterable[str | os.PathLike[str]]
) -> tuple[list[str], list[str], Iterator[tuple[Any, ...]]]:
    """Run ``statement`` over views ``records``, ``decisions`` and ``policies`` of the logs;
    return the column names, their types and the rows (streamed).

    Needs the optional dependency duckdb (``pip install 'prunewarden[sql]'``).
    """
    try:
        import duckdb  # noqa: PLC0415 - optional: only this command needs it
    except ImportError:
        msg = "audit sql needs duckdb: pip install 'prunewarden[sql]'"
        raise AuditError(msg) from None
    files = [str(path) for path in order_files(paths)]
    for name in files:
        if not Path(name).is_file():
            msg = f"cannot read {name}: no such file"
            raise AuditError(msg)
    try:
        object_bytes = _object_bytes(files)
    except OSError as exc:
        msg = f"cannot read {exc.filename}: {exc.strerror}"
        raise AuditError(msg) from None
    connection = duckdb.connect(":memory:")
    try:
        connection.execute("SET TimeZone = 'UTC'")
        columns = "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in _COLUMNS.items())
        views = _VIEWS.format(
            files="[" + ", ".join(_literal(_glob_literal(name)) for name in files) + "]",
            columns=columns + "}",
            object_bytes=object_bytes,
        )
        connection.execute(_MACROS)
        connection.execute(views)
        cursor = connection.execute(statement)
    except duckdb.Error as exc:
        connection.close()
        msg = f"audit sql: {exc}"
        raise AuditError(msg) from None
    description = cursor.description or []
    names = [str(column[0]) for column in description]
    types = [str(column[1]) for column in description]

    def rows() -> Iterator[tuple[Any, ...]]:
        try:
            while batch := cursor.fetchmany(10_000):
                yield from batch
        except duckdb.Error as exc:
            msg = f"audit sql: {exc}"
            raise AuditError(msg) from None
        finally:
            connection.close()

    return names, types, rows()


def json_value(value: Any, sql_type: str) -> Any:
    """A SQL result value as JSON: JSON columns decoded, times in RFC 3339."""
    if sql_type == "JSON" and isinstance(value, str):
        return json.loads(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value
