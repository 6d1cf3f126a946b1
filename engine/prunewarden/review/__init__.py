"""Reviewing audit logs as tables: ``audit sql`` over DuckDB views of the logs, and the export
of their decisions as partitioned Parquet (extras ``sql`` and ``parquet``).

A tool ring around the audit log: it reads logs through :mod:`prunewarden.audit` and nothing of
the core imports it. Line-by-line review (``query``, ``report``, ``show-policy``) stays in
:mod:`prunewarden.audit`.
"""

from __future__ import annotations

from prunewarden.review._export import export_parquet, sql_parquet
from prunewarden.review._sql import json_value, sql

__all__ = ["export_parquet", "json_value", "sql", "sql_parquet"]
