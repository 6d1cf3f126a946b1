"""The options of ``prunewarden serve``, one function per group, in the order ``--help`` lists
them: where the policy comes from, where records and sessions are kept, who may connect, the limits
on requests, sessions and connections, and what the server reports to a fleet."""

from __future__ import annotations

import argparse

from prunewarden.cli._serve_bundle import add_bundle_rules
from prunewarden.limits import (
    BODY_SECONDS,
    HEADER_SECONDS,
    KEEP_ALIVE_SECONDS,
    MAX_CONNECTIONS,
    MAX_LIVE_SESSIONS,
    MAX_REQUEST_BYTES,
    REQUEST_SECONDS,
    SESSION_IDLE_SECONDS,
)
from prunewarden.shipping import DEFAULT_BUFFER_BYTES, DEFAULT_BUFFER_RECORDS


def add_policy_sources(serve: argparse.ArgumentParser) -> None:
    """``--policy``, ``--bundle`` and its key, policy and rules, ``--tenants`` and the header
    a proxy sets a request's labels in."""
    serve.add_argument("--policy", metavar="FILE", help="policy YAML (reloaded when it changes)")
    serve.add_argument(
        "--bundle",
        metavar="PATH|URL",
        help="a signed policy bundle instead of --policy, fetched again every reload interval "
        "(docs/fleet.md)",
    )
    serve.add_argument(
        "--bundle-key", metavar="PEM", help="the Ed25519 public key the bundle must be signed with"
    )
    serve.add_argument(
        "--bundle-policy", metavar="NAME", help="the bundle's policy to run (default: its first)"
    )
    add_bundle_rules(serve)
    serve.add_argument(
        "--tenants",
        metavar="FILE",
        help="several policies, chosen per request by its labels (tenants.v1 YAML; with "
        "--bundle, the tenants name policies of the bundle; docs/fleet.md)",
    )
    serve.add_argument(
        "--trusted-labels-header",
        metavar="NAME",
        help="read a request's labels from this header alone, which a proxy in front sets; a "
        "Prunewarden-Labels header or a document's labels is then refused (400)",
    )


def add_stores(serve: argparse.ArgumentParser) -> None:
    """Where decisions are logged (``--audit-log``, ``--audit-fsync``) and sessions kept."""
    serve.add_argument(
        "--audit-log",
        metavar="PATH",
        default="prunewarden-audit.jsonl",
        help="chained decision log (default: prunewarden-audit.jsonl)",
    )
    serve.add_argument(
        "--audit-fsync",
        choices=["always", "batch", "never"],
        default="batch",
        help="when records reach the disk (default: batch)",
    )
    serve.add_argument(
        "--sessions",
        metavar="STORE",
        help="sqlite:PATH, redis://HOST:PORT/DB or redis+cluster://HOST:PORT,HOST:PORT,... "
        "(default: sessions.sqlite3 next to the audit log)",
    )


def add_access_options(serve: argparse.ArgumentParser) -> None:
    """Who may connect: the bearer token's file, a unix socket's permissions."""
    serve.add_argument("--token-file", metavar="FILE", help="file holding the bearer token")
    serve.add_argument(
        "--socket-mode",
        metavar="OCTAL",
        default="660",
        help="permissions of a unix socket (default: 660, owner and group)",
    )


def add_request_limits(serve: argparse.ArgumentParser) -> None:
    """How large and how long a request may be, and how long and how many sessions are kept."""
    serve.add_argument(
        "--max-request-bytes",
        type=int,
        default=MAX_REQUEST_BYTES,
        metavar="N",
        help=f"largest request body (default: {MAX_REQUEST_BYTES})",
    )
    serve.add_argument(
        "--request-timeout",
        type=float,
        default=REQUEST_SECONDS,
        metavar="SECONDS",
        help=f"longest a request may take (default: {REQUEST_SECONDS:g})",
    )
    serve.add_argument(
        "--session-ttl",
        type=float,
        default=SESSION_IDLE_SECONDS,
        metavar="SECONDS",
        help=f"forget sessions idle this long (default: {SESSION_IDLE_SECONDS:g})",
    )
    serve.add_argument(
        "--max-live-sessions",
        type=int,
        default=MAX_LIVE_SESSIONS,
        metavar="N",
        help="sessions kept in memory; the least recently used go back to the store "
        f"(default: {MAX_LIVE_SESSIONS})",
    )


def add_connection_limits(serve: argparse.ArgumentParser) -> None:
    """How many connections at once, and how slow a client may be before it is let go."""
    serve.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        metavar="N",
        help=f"connections open at once; more are answered 503 (default: {MAX_CONNECTIONS})",
    )
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=HEADER_SECONDS,
        metavar="SECONDS",
        help=f"longest a client may take to send a request's headers (default: {HEADER_SECONDS:g})",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        default=BODY_SECONDS,
        metavar="SECONDS",
        help="longest a client may take to send a body, or leave an answer unread "
        f"(default: {BODY_SECONDS:g})",
    )
    serve.add_argument(
        "--keep-alive-timeout",
        type=float,
        default=KEEP_ALIVE_SECONDS,
        metavar="SECONDS",
        help=f"close a keep-alive connection idle this long (default: {KEEP_ALIVE_SECONDS:g})",
    )


def add_fleet_reporting(serve: argparse.ArgumentParser) -> None:
    """What the server tells a fleet: its status pushes, and where its audit log is shipped."""
    serve.add_argument(
        "--status-url",
        metavar="URL",
        help="POST the /v1/status document to this http(s) URL (audit collect's "
        "http://HOST:PORT/v1/status keeps it as the --ship-replica's, shown at /v1/fleet), "
        "periodically and after each activation and new failure; a failed push never delays "
        "a decision (docs/fleet.md)",
    )
    serve.add_argument(
        "--status-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds between two status pushes (default: 10)",
    )
    serve.add_argument(
        "--ship",
        action="append",
        default=[],
        metavar="URL",
        help="also ship the audit log to URL (repeatable): http(s)://HOST/v1/logs (prunewarden "
        "audit collect), otlp+http(s)://HOST:4318/v1/logs (extra: ship) or "
        "kafka://HOST:PORT/TOPIC (extra: kafka); see docs/fleet.md",
    )
    serve.add_argument(
        "--ship-replica",
        metavar="NAME",
        help="the name this server ships (and pushes its status) as (default: the host name)",
    )
    serve.add_argument(
        "--ship-buffer-records",
        type=int,
        default=DEFAULT_BUFFER_RECORDS,
        metavar="N",
        help="records read and not yet acknowledged, per destination, before records are "
        f"dropped (default: {DEFAULT_BUFFER_RECORDS})",
    )
    serve.add_argument(
        "--ship-buffer-bytes",
        type=int,
        default=DEFAULT_BUFFER_BYTES,
        metavar="N",
        help=f"the same in bytes (default: {DEFAULT_BUFFER_BYTES})",
    )
