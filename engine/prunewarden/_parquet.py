"""Rows written as Hive-partitioned Parquet, a batch at a time: what replay's decisions and
an audit log's export share.

Partitioned by ``date`` and ``check`` (``DIR/date=2026-11-30/check=collapse/part-0-0.parquet``),
a query over one day or one guard reads only its files, in DuckDB, Spark or any warehouse. Rows
are gathered :data:`BATCH_ROWS` at a time, so memory stays bounded whatever their number.
pyarrow is optional (``pip install 'prunewarden[parquet]'``).
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from prunewarden._optional import optional_module

PARQUET_EXTRA = "pip install 'prunewarden[parquet]'"
BATCH_ROWS = 65_536
PARTITIONS = ("date", "check")


class ParquetError(OSError):
    """pyarrow is missing, or the folder cannot be written."""


def pyarrow_modules() -> tuple[Any, Any]:
    """``pyarrow`` and ``pyarrow.dataset``; :class:`ParquetError` saying what to install."""
    needed = f"Parquet output needs pyarrow: {PARQUET_EXTRA}"
    try:
        return optional_module("pyarrow", needed), optional_module("pyarrow.dataset", needed)
    except OSError as exc:
        raise ParquetError(errno.ENOENT, exc.strerror) from None


def arrow_schema(pyarrow: Any, columns: dict[str, str]) -> Any:
    """The Arrow schema of ``columns`` (times are UTC microseconds)."""
    types = {
        "string": pyarrow.string(),
        "int64": pyarrow.int64(),
        "bool": pyarrow.bool_(),
        "timestamp": pyarrow.timestamp("us", tz="UTC"),
        "list<string>": pyarrow.list_(pyarrow.string()),
    }
    return pyarrow.schema([(name, types[kind]) for name, kind in columns.items()])


def write_partitioned(
    rows: Iterable[dict[str, Any]], directory: str, columns: dict[str, str]
) -> int:
    """Write ``rows`` under ``directory`` partitioned by date and check, a batch at a time;
    return how many were written. Timestamps are given as RFC 3339 text."""
    pyarrow, dataset = pyarrow_modules()
    schema = arrow_schema(pyarrow, columns)
    times = [name for name, kind in columns.items() if kind == "timestamp"]
    partitioning = dataset.partitioning(
        pyarrow.schema([schema.field(name) for name in PARTITIONS]), flavor="hive"
    )
    written = 0
    for number, batch in enumerate(_batches(rows)):
        for row in batch:
            for name in times:
                row[name] = _timestamp(row[name])
        table = pyarrow.Table.from_pylist(batch, schema=schema)
        try:
            dataset.write_dataset(
                table,
                directory,
                format="parquet",
                partitioning=partitioning,
                basename_template=f"part-{number}-{{i}}.parquet",
                existing_data_behavior="overwrite_or_ignore",
            )
        except (OSError, pyarrow.ArrowException) as exc:
            raise ParquetError(errno.EIO, f"cannot write {directory}: {exc}") from None
        written += len(batch)
    return written


def _timestamp(text: Any) -> Any:
    if not text:
        return None
    return datetime.fromisoformat(str(text))


def _batches(rows: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= BATCH_ROWS:
            yield batch
            batch = []
    if batch:
        yield batch
