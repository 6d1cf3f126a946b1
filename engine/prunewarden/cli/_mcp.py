"""``prunewarden mcp``: serve the tools and resources of Model Context Protocol (docs/mcp.md).

The server lives in :mod:`prunewarden.mcp`, which needs the ``mcp`` extra; it is imported when
the command runs, not when the CLI starts, so that every other command works without the SDK
installed (an optional dependency, not a cycle).

Over stdio, standard output carries the protocol and nothing else: the command's own lines go
to standard error, and the audit log to a file (``--audit-log -`` is refused).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any

from prunewarden.audit import DEFAULT_MASKS, FSYNC_MODES, AuditLog
from prunewarden.cli import _policy
from prunewarden.cli._common import UsageError, exit_codes_epilog, load_embedder
from prunewarden.cli._evaluate_audit import ENV_KEY, caller_fields
from prunewarden.engine import Engine
from prunewarden.errors import AuditError, ExitCode, PrunewardenError
from prunewarden.reload import ReloadingEngine

if TYPE_CHECKING:
    from prunewarden.fidelity import Embedder

_MCP_EXITS = {
    ExitCode.OK: "the client closed standard input (stdio), or SIGTERM or SIGINT stopped the "
    "server (http)",
    ExitCode.USAGE: "usage error: an address or the audit log cannot be used, or the mcp extra is "
    "missing",
    ExitCode.POLICY: "invalid policy",
    ExitCode.INTERNAL: "internal error (a bug: please report it)",
}
MCP_EXIT_CODES = (
    exit_codes_epilog(_MCP_EXITS)
    + "\nWhen $PRUNEWARDEN_AUDIT_KEY is set, the audit log is keyed with it, as with evaluate.\n"
)
DEFAULT_LISTEN = "127.0.0.1:8765"


def add_mcp(commands: Any) -> None:
    mcp = commands.add_parser(
        "mcp",
        help="serve evaluate, explain, plan and verify_transition to MCP hosts (docs/mcp.md)",
        description="A Model Context Protocol server: tools evaluate, explain, plan and "
        "verify_transition answering with the CLI's documents, resources for the policy in "
        "force and the JSON Schemas; every decision logged. Needs prunewarden[mcp].",
        epilog=MCP_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_transport(mcp)
    mcp.add_argument(
        "--policy",
        metavar="FILE",
        help="policy YAML, reloaded when it changes (default: the bundled default policy)",
    )
    mcp.add_argument(
        "--reload-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how often --policy's files are checked for changes (0: never; default: 1)",
    )
    _add_audit_options(mcp)
    _policy.add_evaluate_options(mcp)


def _add_transport(mcp: argparse.ArgumentParser) -> None:
    """``--transport`` and the address of its http transport."""
    mcp.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio: one client on standard input and output (default); http: streamable HTTP "
        "at /mcp on --listen",
    )
    mcp.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=DEFAULT_LISTEN,
        help=f"address of the http transport, loopback only; port 0 picks one (default: "
        f"{DEFAULT_LISTEN})",
    )


def _add_audit_options(mcp: argparse.ArgumentParser) -> None:
    """Where every decision is logged and how, and the caller fields recorded with it."""
    mcp.add_argument(
        "--audit-log",
        metavar="PATH",
        default="prunewarden-audit.jsonl",
        help="chained decision log (default: prunewarden-audit.jsonl)",
    )
    mcp.add_argument(
        "--audit-fsync",
        choices=FSYNC_MODES,
        # A model calls tools a few times a second at most: syncing each record costs little,
        # and a server idle between calls has no later write to sync a batch with.
        default="always",
        help="when records reach the disk (default: always, before each answer)",
    )
    mcp.add_argument(
        "--audit-inputs",
        action="store_true",
        help="log each input document too, with " + " and ".join(DEFAULT_MASKS) + " erased",
    )
    mcp.add_argument(
        "--audit-mask",
        action="append",
        metavar="POINTER",
        help="log each input document with this JSON pointer erased (repeatable; '*' matches "
        "every member; replaces the default masks)",
    )
    mcp.add_argument("--session-id", metavar="ID", help="session id to record with every decision")
    mcp.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="label to record with every decision (repeatable)",
    )


def run_mcp(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    package = _mcp_package()
    if args.audit_log == "-":
        raise UsageError(
            "prunewarden mcp: --audit-log -: records cannot share the protocol's stream"
        )
    caller = caller_fields(args)
    embedder = load_embedder(args)  # before anything opens: a missing extra leaves nothing
    sock = _http_socket(args, package)
    # The library is silent; the command shows its diagnostics (warnings and worse), on standard
    # error, which stdio leaves free.
    logging.basicConfig(stream=stderr, level=logging.WARNING, format="prunewarden: %(message)s")
    audit = _audit_log(args)
    try:
        audit.open()
        engine = _engine(args, audit, embedder)
    except AuditError as exc:
        _close(sock)
        raise UsageError(f"prunewarden mcp: {exc}") from None
    except PrunewardenError:
        _close(sock)
        raise
    server = package.create_server(
        engine, package.Caller(caller["session_id"], caller["labels"] or None)
    )
    policy = engine.policy
    try:
        if sock is None:
            stderr.write(
                f"prunewarden mcp: serving stdio (policy {policy.name}@{policy.version})\n"
            )
            stderr.flush()
            package.run_stdio(server)
        else:
            stdout.write(
                f"prunewarden mcp: listening on {package.endpoint_url(sock)} "
                f"(policy {policy.name}@{policy.version})\n"
            )
            stdout.flush()
            package.run_http(server, sock)
            stdout.write("prunewarden mcp: stopped\n")
    finally:
        if isinstance(engine, ReloadingEngine):
            engine.close()
        audit.close()
        _close(sock)
    return ExitCode.OK


def _http_socket(args: argparse.Namespace, package: ModuleType) -> Any:
    """The socket of the http transport on ``--listen`` (None over stdio)."""
    if args.transport != "http":
        return None
    try:
        return package.bind(*package.parse_listen(args.listen))
    except package.ListenError as exc:
        raise UsageError(f"prunewarden mcp: {exc}") from None


def _audit_log(args: argparse.Namespace) -> AuditLog:
    """The audit log every decision is written to (not opened yet)."""
    return AuditLog(
        args.audit_log,
        fsync=args.audit_fsync,
        inputs=args.audit_mask or args.audit_inputs or None,
        # Set but empty is a key that went missing, not a request for an unkeyed log.
        hmac_key_env=ENV_KEY if ENV_KEY in os.environ else None,
    )


def _engine(
    args: argparse.Namespace, audit: AuditLog, embedder: Embedder | None
) -> Engine | ReloadingEngine:
    """The engine every tool decides through: ``--policy`` reloaded when its files change
    (as ``serve`` does), else the bundled default policy; ``embedder`` for the fidelity
    check's meaning method (``--embedder``)."""
    if args.policy is None:
        active, shadow = _policy.evaluation_policies(args)
        return Engine(active, audit=audit, shadow=shadow, embedder=embedder)
    return ReloadingEngine(
        args.policy,
        shadow=args.shadow,
        lock=_policy.lock_option(args),
        base_dirs=_policy.base_dirs(args),
        interval=args.reload_interval,
        audit=audit,
        embedder=embedder,
    )


def _close(sock: Any) -> None:
    if sock is not None:
        sock.close()


def _mcp_package() -> ModuleType:
    try:
        return importlib.import_module("prunewarden.mcp")
    except ImportError as exc:
        message = f"prunewarden mcp needs the mcp extra: pip install 'prunewarden[mcp]' ({exc})"
        raise UsageError(message) from None
