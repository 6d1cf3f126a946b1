"""``prunewarden audit export --parquet DIR LOG...``, and ``audit sql`` over such a folder.

Kept apart from :mod:`prunewarden.cli._audit` so that the columnar side of the audit log reads
as one piece: verify, then convert; query the folder as the logs are queried.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import IO, Any

from prunewarden.cli._printable import printable
from prunewarden.errors import ExitCode
from prunewarden.review import export_parquet, sql_parquet


def add_export(command: Any, key_env: str) -> None:
    """The ``export`` subcommand, made by ``command(name, text)`` of ``audit``."""
    export = command(
        "export",
        "verify audit logs, then write their decisions as Parquet partitioned by date and "
        "check (needs: pip install 'prunewarden[parquet]'); exit 5 if the chain is broken",
    )
    export.add_argument("--parquet", required=True, metavar="DIR", help="the folder to write")
    export.add_argument("files", nargs="*", metavar="FILE", help="log files (rotation order)")
    export.add_argument(
        "--key-env",
        metavar="NAME",
        default=key_env,
        help=f"environment variable holding the HMAC key of keyed logs (default: {key_env})",
    )


def run_export(
    args: argparse.Namespace, files: list[Path], stdout: IO[str], stderr: IO[str]
) -> int:
    key_text = os.environ.get(args.key_env, "")
    key = key_text.encode("utf-8") if key_text else None
    verification, written = export_parquet(files, args.parquet, key=key)
    for finding in verification.findings:
        (stderr if finding.fatal else stdout).write(f"{printable(str(finding))}\n")
    if not verification.ok:
        stderr.write("nothing exported: the logs do not verify\n")
        return ExitCode.UNVERIFIED
    stdout.write(f"{written} decisions from {len(verification.files)} file(s) -> {args.parquet}\n")
    return ExitCode.OK


def exported_folders(files: list[Path]) -> bool:
    """``audit sql`` was given folders written by ``audit export``, not logs."""
    return bool(files) and all(path.is_dir() for path in files)


def sql_over_folders(statement: str, files: list[Path]) -> Any:
    return sql_parquet(statement, files)
