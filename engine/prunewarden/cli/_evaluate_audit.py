"""Where ``evaluate`` writes its audit records, and the caller fields it records (``mcp`` takes
the same). ``prunewarden audit`` reads the logs: :mod:`prunewarden.cli._audit`.

``evaluate`` writes records to ``--audit-log PATH``, else to the file named by
``$PRUNEWARDEN_AUDIT_LOG``, else to standard error. ``--audit-log -`` writes them to standard
output for a log shipper; the decision document then goes to standard error, so that standard
output carries nothing but records.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from typing import IO, Any

from prunewarden.audit import DEFAULT_MASKS, FSYNC_MODES, AuditLog
from prunewarden.errors import AuditError, InputError, Problem

ENV_LOG = "PRUNEWARDEN_AUDIT_LOG"
ENV_KEY = "PRUNEWARDEN_AUDIT_KEY"


def add_evaluate_options(parser: argparse.ArgumentParser) -> None:
    """The audit options of ``evaluate``."""
    parser.add_argument(
        "--audit-log",
        metavar="PATH",
        help=(
            f"append chained decision records (JSON lines) to PATH (default: ${ENV_LOG}, else "
            "standard error); - writes them to standard output and the decision to standard error"
        ),
    )
    parser.add_argument(
        "--audit-fsync",
        choices=FSYNC_MODES,
        default="batch",
        help="when records reach the disk: every record, in batches (default), or as the OS likes",
    )
    parser.add_argument(
        "--audit-inputs",
        action="store_true",
        help="log the input document too, with " + " and ".join(DEFAULT_MASKS) + " erased",
    )
    parser.add_argument(
        "--audit-mask",
        action="append",
        metavar="POINTER",
        help="log the input document with this JSON pointer erased (repeatable; '*' matches "
        "every member; replaces the default masks)",
    )
    parser.add_argument("--session-id", metavar="ID", help="session id to record with the decision")
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="label to record with the decision (repeatable)",
    )


@contextlib.contextmanager
def evaluation_audit(
    args: argparse.Namespace, stdout: IO[str], stderr: IO[str]
) -> Iterator[tuple[AuditLog, IO[str]]]:
    """The audit sink ``evaluate`` writes to, and the stream its decision goes to."""
    target = args.audit_log or os.environ.get(ENV_LOG) or None
    inputs: Any = args.audit_mask or args.audit_inputs or None
    settings: dict[str, Any] = {
        "fsync": args.audit_fsync,
        "inputs": inputs,
        # Set but empty is a key that went missing, not a request for an unkeyed log.
        "hmac_key_env": ENV_KEY if ENV_KEY in os.environ else None,
    }
    out = stdout
    if target is None:
        audit = AuditLog(stderr, **settings)
    elif target == "-":
        audit, out = AuditLog(stdout, **settings), stderr
    else:
        audit = AuditLog(target, **settings)
        try:
            audit.open()
        except AuditError as exc:
            raise AuditError(str(exc).replace("cannot write", "cannot open")) from None
    try:
        yield audit, out
    finally:
        audit.close()


def caller_fields(args: argparse.Namespace) -> dict[str, Any]:
    """``session_id`` and ``labels`` from ``--session-id`` and ``--label KEY=VALUE``."""
    labels: dict[str, str] = {}
    for label in args.label:
        key, sep, value = label.partition("=")
        if not sep or not key:
            message = f"{label!r} is not KEY=VALUE"
            raise InputError([Problem("<arguments>", 0, 0, "$.labels", message)])
        labels[key] = value
    return {"session_id": args.session_id, "labels": labels}
