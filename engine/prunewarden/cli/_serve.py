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
from prunewarden.cli._common import UsageError, load_embedder
from prunewarden.cli._evaluate_audit import ENV_KEY
from prunewarden.cli._serve_bundle import bundle_rules
from prunewarden.cli._serve_config import (
    Effective,
    add_config_options,
    print_config,
    resolve,
    unset_defaults,
)
from prunewarden.cli._serve_options import (
    add_access_options,
    add_connection_limits,
    add_fleet_reporting,
    add_policy_sources,
    add_request_limits,
    add_stores,
)
from prunewarden.errors import AuditError, ExitCode
from prunewarden.limits import MAX_POLICY_BYTES

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
    add_policy_sources(serve)
    add_stores(serve)
    serve.add_argument(
        "--listen",
        metavar="ADDRESS",
        default="127.0.0.1:8181",
        help="HOST:PORT or unix:/path.sock (default: 127.0.0.1:8181, loopback only)",
    )
    serve.add_argument("--shadow", metavar="FILE", help="candidate policy decided beside it")
    serve.add_argument("--lock", metavar="FILE", help="lock file (default: policy.lock beside)")
    add_access_options(serve)
    add_request_limits(serve)
    add_connection_limits(serve)
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
    add_fleet_reporting(serve)
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
    config = _server_config(args, server)
    # The library is silent; the command shows its diagnostics (warnings and worse).
    logging.basicConfig(stream=stderr, level=logging.WARNING, format="prunewarden: %(message)s")
    try:
        built = server.build_app(config)
    except (AuditError, server.ServerConfigError) as exc:
        raise UsageError(f"prunewarden serve: {exc}") from None
    sock, metrics_sock = _bind(server, config, built, stdout)

    def announce() -> None:
        where = server.bound_url(config.listen, sock)
        stdout.write(f"prunewarden serve: listening on {where} ({_held(built)})\n")
        stdout.flush()

    server.run(built, sock, config.listen, metrics_sock, announce=announce)
    stdout.write("prunewarden serve: stopped\n")
    return ExitCode.OK


def _server_config(args: argparse.Namespace, server: ModuleType) -> Any:
    """The server's configuration as the options give it; a value it refuses is a usage error."""
    bundle_key, tenants = _policy_sources(args, server)
    try:
        socket_mode = int(args.socket_mode, 8)
        listen = server.parse_listen(args.listen)
        metrics_listen = (
            server.parse_listen(args.metrics_listen) if args.metrics_listen is not None else None
        )
        return server.ServerConfig(
            policy=args.policy,
            audit_log=args.audit_log,
            listen=listen,
            sessions=args.sessions,
            shadow=args.shadow,
            lock=args.lock,
            token=server.read_token(args.token_file),
            audit_fsync=args.audit_fsync,
            reload_interval=args.reload_interval,
            socket_mode=socket_mode,
            metrics_listen=metrics_listen,
            # Set but empty is a key that went missing, not a request for an unkeyed log.
            audit_key_env=ENV_KEY if ENV_KEY in os.environ else None,
            cel=args.cel,
            bundle=args.bundle,
            bundle_key=bundle_key,
            bundle_policy=args.bundle_policy,
            bundle_rules=bundle_rules(args),
            embedder=load_embedder(args),
            tenants=tenants,
            trusted_labels_header=args.trusted_labels_header,
            **_limits(args),
            **_fleet_reporting(args),
        )
    except ValueError:
        raise UsageError(
            f"prunewarden serve: --socket-mode {args.socket_mode!r} is not octal"
        ) from None
    except server.ServerConfigError as exc:
        raise UsageError(f"prunewarden serve: {exc}") from None


def _policy_sources(args: argparse.Namespace, server: ModuleType) -> tuple[bytes | None, Any]:
    """The bundle's key (with ``--bundle``) and the tenants (with ``--tenants``)."""
    if args.tenants is None and (args.policy is None) == (args.bundle is None):
        raise UsageError("prunewarden serve: give --policy FILE or --bundle PATH|URL (one)")
    bundle_key = _bundle_key(args.bundle_key) if args.bundle is not None else None
    tenants = (
        server.read_tenants(args.tenants, bundle=args.bundle is not None)
        if args.tenants is not None
        else None
    )
    return bundle_key, tenants


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    """The limits on requests, sessions and connections."""
    return {
        "max_request_bytes": args.max_request_bytes,
        "request_seconds": args.request_timeout,
        "session_ttl": args.session_ttl,
        "max_live_sessions": args.max_live_sessions,
        "max_connections": args.max_connections,
        "header_seconds": args.header_timeout,
        "body_seconds": args.body_timeout,
        "keep_alive_seconds": args.keep_alive_timeout,
    }


def _fleet_reporting(args: argparse.Namespace) -> dict[str, Any]:
    """Where the status is pushed and the audit log shipped."""
    return {
        "status_url": args.status_url,
        "status_interval": args.status_interval,
        "ship": tuple(args.ship),
        "ship_replica": args.ship_replica,
        "ship_buffer_records": args.ship_buffer_records,
        "ship_buffer_bytes": args.ship_buffer_bytes,
    }


def _bind(server: ModuleType, config: Any, built: Any, stdout: IO[str]) -> tuple[Any, Any]:
    """The sockets of ``--listen`` and ``--metrics-listen`` (or None); a socket that cannot be
    bound closes what was opened before it and is a usage error."""
    try:
        sock = server.bind(config.listen, config.socket_mode)
    except server.ServerConfigError as exc:
        built.close()
        raise UsageError(f"prunewarden serve: {exc}") from None
    if config.metrics_listen is None:
        return sock, None
    try:
        metrics_sock = server.bind(config.metrics_listen, config.socket_mode)
    except server.ServerConfigError as exc:
        sock.close()
        if config.listen.unix_path is not None:
            Path(config.listen.unix_path).unlink(missing_ok=True)
        built.close()
        raise UsageError(f"prunewarden serve: --metrics-listen: {exc}") from None
    metrics_url = server.bound_url(config.metrics_listen, metrics_sock)
    stdout.write(f"prunewarden serve: metrics without a token on {metrics_url}/metrics\n")
    return sock, metrics_sock


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
