"""``prunewarden serve``: run the policy decision point (see docs/server.md).

The server lives in :mod:`prunewarden.server`, which needs the ``serve`` extra; it is imported
when the command runs, not when the CLI starts, so that every other command works without
Starlette and uvicorn installed (an optional dependency, not a cycle).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from prunewarden._files import read_regular
from prunewarden.cli._audit import ENV_KEY
from prunewarden.cli._common import UsageError, load_embedder
from prunewarden.cli._serve_bundle import add_bundle_rules, bundle_rules
from prunewarden.cli._serve_config import (
    Effective,
    add_config_options,
    print_config,
    resolve,
    unset_defaults,
)
from prunewarden.errors import AuditError, ExitCode
from prunewarden.limits import (
    BODY_SECONDS,
    HEADER_SECONDS,
    KEEP_ALIVE_SECONDS,
    MAX_CONNECTIONS,
    MAX_LIVE_SESSIONS,
    MAX_POLICY_BYTES,
    MAX_REQUEST_BYTES,
    REQUEST_SECONDS,
    SESSION_IDLE_SECONDS,
)
from prunewarden.shipping import DEFAULT_BUFFER_BYTES, DEFAULT_BUFFER_RECORDS

SERVE_EXIT_CODES = """\
exit codes:
  0   stopped by SIGTERM or SIGINT, after the requests in flight were answered
  2   usage error: an address, a token file, a session store, the audit log cannot be used,
      or a --config, --set or --tenants that is not valid (each problem on a line:
      file:line:column: path: message)
  3   invalid policy (with --tenants: any tenant's)
  5   --bundle: the first bundle cannot be fetched or fails verification
  70  internal error (a bug: please report it)

The bearer token comes from --token-file, else $PRUNEWARDEN_TOKEN. A TCP address other than
loopback is refused without one. When $PRUNEWARDEN_AUDIT_KEY is set, the audit log is keyed with
it, as with evaluate.
"""


def add_serve(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the policy decision point over HTTP (API v1; docs/server.md)",
        description="Serve API v1: decisions, plans and sessions as the CLI's JSON documents, "
        "every decision logged before it is returned. Needs prunewarden[serve].",
        epilog=SERVE_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    serve.add_argument(
        "--listen",
        metavar="ADDRESS",
        default="127.0.0.1:8181",
        help="HOST:PORT or unix:/path.sock (default: 127.0.0.1:8181, loopback only)",
    )
    serve.add_argument("--shadow", metavar="FILE", help="candidate policy decided beside it")
    serve.add_argument("--lock", metavar="FILE", help="lock file (default: policy.lock beside)")
    serve.add_argument("--token-file", metavar="FILE", help="file holding the bearer token")
    serve.add_argument(
        "--socket-mode",
        metavar="OCTAL",
        default="660",
        help="permissions of a unix socket (default: 660, owner and group)",
    )
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
    serve.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="also serve GET /metrics, without the token, on this loopback address (for a "
        "Prometheus scrape; default: only on --listen, behind the token)",
    )
    serve.add_argument(
        "--reload-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how often the policy files are checked for changes (0: never; default: 1)",
    )
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
    serve.add_argument(
        "--print-openapi",
        action="store_true",
        help="print the OpenAPI document the server serves, and exit",
    )
    add_config_options(serve)
    unset_defaults(serve)


def run_serve(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    if args.print_openapi:
        stdout.write(json.dumps(_server_package().openapi_document(), indent=2) + "\n")
        return ExitCode.OK
    effective = resolve(args)
    if args.print_config:
        print_config(effective, stdout)
        return ExitCode.OK
    effective.apply(args)
    server = _server_package()
    try:
        return _serve(args, server, stdout, stderr)
    except UsageError as exc:
        raise UsageError(_explained(effective, str(exc))) from None


_PREFIX = "prunewarden serve: "


def _explained(effective: Effective, message: str) -> str:
    """A usage error naming the config file's keys where the file gave the values."""
    if not message.startswith(_PREFIX):
        return effective.explain(message)
    return _PREFIX + effective.explain(message.removeprefix(_PREFIX))


def _serve(args: argparse.Namespace, server: ModuleType, stdout: IO[str], stderr: IO[str]) -> int:
    if args.tenants is None and (args.policy is None) == (args.bundle is None):
        raise UsageError("prunewarden serve: give --policy FILE or --bundle PATH|URL (one)")
    bundle_key = _bundle_key(args.bundle_key) if args.bundle is not None else None
    tenants = (
        server.read_tenants(args.tenants, bundle=args.bundle is not None)
        if args.tenants is not None
        else None
    )
    try:
        socket_mode = int(args.socket_mode, 8)
        listen = server.parse_listen(args.listen)
        metrics_listen = (
            server.parse_listen(args.metrics_listen) if args.metrics_listen is not None else None
        )
        config = server.ServerConfig(
            policy=args.policy,
            audit_log=args.audit_log,
            listen=listen,
            sessions=args.sessions,
            shadow=args.shadow,
            lock=args.lock,
            token=server.read_token(args.token_file),
            audit_fsync=args.audit_fsync,
            reload_interval=args.reload_interval,
            max_request_bytes=args.max_request_bytes,
            request_seconds=args.request_timeout,
            session_ttl=args.session_ttl,
            socket_mode=socket_mode,
            max_live_sessions=args.max_live_sessions,
            max_connections=args.max_connections,
            header_seconds=args.header_timeout,
            body_seconds=args.body_timeout,
            keep_alive_seconds=args.keep_alive_timeout,
            metrics_listen=metrics_listen,
            # Set but empty is a key that went missing, not a request for an unkeyed log.
            audit_key_env=ENV_KEY if ENV_KEY in os.environ else None,
            cel=args.cel,
            bundle=args.bundle,
            bundle_key=bundle_key,
            bundle_policy=args.bundle_policy,
            bundle_rules=bundle_rules(args),
            embedder=load_embedder(args),
            status_url=args.status_url,
            status_interval=args.status_interval,
            ship=tuple(args.ship),
            ship_replica=args.ship_replica,
            ship_buffer_records=args.ship_buffer_records,
            ship_buffer_bytes=args.ship_buffer_bytes,
            tenants=tenants,
            trusted_labels_header=args.trusted_labels_header,
        )
    except ValueError:
        raise UsageError(
            f"prunewarden serve: --socket-mode {args.socket_mode!r} is not octal"
        ) from None
    except server.ServerConfigError as exc:
        raise UsageError(f"prunewarden serve: {exc}") from None
    # The library is silent; the command shows its diagnostics (warnings and worse).
    logging.basicConfig(stream=stderr, level=logging.WARNING, format="prunewarden: %(message)s")
    try:
        built = server.build_app(config)
    except (AuditError, server.ServerConfigError) as exc:
        raise UsageError(f"prunewarden serve: {exc}") from None
    try:
        sock = server.bind(listen, socket_mode)
    except server.ServerConfigError as exc:
        built.close()
        raise UsageError(f"prunewarden serve: {exc}") from None
    metrics_sock = None
    if metrics_listen is not None:
        try:
            metrics_sock = server.bind(metrics_listen, socket_mode)
        except server.ServerConfigError as exc:
            sock.close()
            if listen.unix_path is not None:
                Path(listen.unix_path).unlink(missing_ok=True)
            built.close()
            raise UsageError(f"prunewarden serve: --metrics-listen: {exc}") from None
        metrics_url = server.bound_url(metrics_listen, metrics_sock)
        stdout.write(f"prunewarden serve: metrics without a token on {metrics_url}/metrics\n")
    stdout.write(
        f"prunewarden serve: listening on {server.bound_url(listen, sock)} ({_held(built)})\n"
    )
    stdout.flush()
    server.run(built, sock, listen, metrics_sock)
    stdout.write("prunewarden serve: stopped\n")
    return ExitCode.OK


def _held(built: Any) -> str:
    """What the server decides with, as its start line says: the policy (and bundle
    revision), or each tenant's."""
    policy = built.engine.policy
    revision = policy.identity.bundle_revision
    in_bundle = f", bundle revision {revision}" if revision is not None else ""
    if not built.tenants.bound:
        return f"policy {policy.name}@{policy.version}{in_bundle}"
    held = ", ".join(
        f"{tenant.name} {tenant.holder.policy.name}@{tenant.holder.policy.version}"
        for tenant in built.tenants.all
    )
    return f"tenants {held}; default {built.tenants.default.name}{in_bundle}"


def _bundle_key(path: str | None) -> bytes:
    if path is None:
        raise UsageError("prunewarden serve: --bundle needs --bundle-key PEM")
    try:
        return read_regular(path, MAX_POLICY_BYTES)
    except OSError as exc:
        raise UsageError(f"prunewarden serve: --bundle-key {path}: cannot read: {exc}") from None


def _server_package() -> ModuleType:
    try:
        return importlib.import_module("prunewarden.server")
    except ImportError as exc:
        message = (
            f"prunewarden serve needs the serve extra: pip install 'prunewarden[serve]' ({exc})"
        )
        raise UsageError(message) from None
