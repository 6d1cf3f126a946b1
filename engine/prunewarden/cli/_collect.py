"""``prunewarden audit collect --listen HOST:PORT --out DIR``: receive shipped decision logs
(or ``--from kafka://...``: read them from the topic a ``serve --ship kafka://...`` produces to,
:mod:`prunewarden.cli._collect_kafka`).

Kept apart from :mod:`prunewarden.cli._audit`: the one audit command that serves rather than
reads. It runs until SIGTERM or SIGINT (exit 0). ``--listen`` serves on ``prunewarden serve``'s
stack (:class:`prunewarden.server.CollectorServer`, the ``serve`` extra), imported only then.
"""

from __future__ import annotations

import argparse
import importlib
import ipaddress
import os
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from prunewarden.cli._collect_kafka import collect_from_kafka
from prunewarden.cli._common import UsageError
from prunewarden.errors import ExitCode
from prunewarden.limits import BODY_SECONDS, MAX_CONNECTIONS
from prunewarden.shipping import Collector, read_collect_tokens

TOKEN_ENV = "PRUNEWARDEN_COLLECT_TOKEN"  # noqa: S105 - the name of the variable, not a token


def add_collect(command: Any, key_env: str) -> None:
    """The ``collect`` subcommand, made by ``command(name, text)`` of ``audit``."""
    collect = command(
        "collect",
        "receive audit logs shipped by servers (POST /v1/logs, or read from a Kafka topic "
        "with --from) into one file per replica, each batch taken only where it continues "
        "that replica's chain",
    )
    collect.add_argument("--listen", metavar="HOST:PORT", help="where to listen (port 0: any)")
    collect.add_argument(
        "--from",
        dest="source",
        metavar="URL",
        help="instead of --listen: kafka://HOST:PORT[,HOST:PORT]/TOPIC[?NAME=VALUE&...], the "
        "topic to consume (extra: kafka; group.id default prunewarden-collect)",
    )
    collect.add_argument("--out", required=True, metavar="DIR", help="the folder of the files")
    collect.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"file holding the bearer token senders must present (else ${TOKEN_ENV}; "
        "required beyond loopback)",
    )
    collect.add_argument(
        "--tokens",
        metavar="FILE",
        help="YAML file of bearer tokens each bound to the replica it may ship as "
        "(collect-tokens.v1): a token for one replica cannot extend another's chain",
    )
    collect.add_argument(
        "--key-env",
        metavar="NAME",
        default=key_env,
        help="environment variable holding the HMAC key keyed records are checked with "
        f"(default: {key_env}; unset: their links are checked, their seals by audit verify)",
    )
    collect.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        metavar="N",
        help=f"connections open at once; one more is answered 503 (default: {MAX_CONNECTIONS})",
    )
    collect.add_argument(
        "--body-timeout",
        type=float,
        default=BODY_SECONDS,
        metavar="SECONDS",
        help="seconds a sender may take to send a batch once its headers are in; past it 408 "
        f"(default: {BODY_SECONDS:g})",
    )


def run_collect(
    args: argparse.Namespace,
    _files: list[Path],
    stdout: IO[str],
    stderr: IO[str],
) -> int:
    if (args.listen is None) == (args.source is None):
        raise UsageError("prunewarden audit collect: give one of --listen HOST:PORT, --from URL")
    if args.source is not None:
        return collect_from_kafka(args, stdout, stderr)
    host, port = _address(args.listen)
    token = _token(args.token_file)
    tokens = read_collect_tokens(args.tokens) if args.tokens is not None else None
    if token is None and tokens is None and not _is_loopback(host):
        msg = (
            f"prunewarden audit collect: refusing to listen on {host} without a token: pass "
            f"--tokens, --token-file or set {TOKEN_ENV} (or listen on loopback)"
        )
        raise UsageError(msg)
    if args.max_connections < 1 or not args.body_timeout > 0:
        raise UsageError("prunewarden audit collect: --max-connections and --body-timeout > 0")
    key_text = os.environ.get(args.key_env, "")
    server_package = _server_package()
    try:
        collector = Collector(
            Path(args.out),
            token=token,
            tokens=tokens,
            key=key_text.encode("utf-8") if key_text else None,
        )
        server = server_package.CollectorServer(
            collector,
            host,
            port,
            max_connections=args.max_connections,
            body_seconds=args.body_timeout,
        )
    except OSError as exc:
        raise UsageError(f"prunewarden audit collect: {exc.strerror or exc}") from None
    except server_package.ServerConfigError as exc:
        raise UsageError(f"prunewarden audit collect: {exc}") from None

    def announce() -> None:
        stdout.write(
            f"prunewarden audit collect: listening on {server.url}, writing to {args.out}\n"
        )
        stdout.flush()

    server.run(announce)
    stdout.write("prunewarden audit collect: stopped\n")
    return ExitCode.OK


def _server_package() -> ModuleType:
    try:
        return importlib.import_module("prunewarden.server")
    except ImportError as exc:
        message = (
            "prunewarden audit collect --listen needs the serve extra: "
            f"pip install 'prunewarden[serve]' ({exc})"
        )
        raise UsageError(message) from None


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"prunewarden audit collect: --listen {text!r}: expected HOST:PORT")
    return host.removeprefix("[").removesuffix("]"), int(port)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _token(token_file: str | None) -> str | None:
    if token_file is None:
        return os.environ.get(TOKEN_ENV, "").strip() or None
    try:
        token = Path(token_file).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UsageError(f"prunewarden audit collect: --token-file: {reason}") from None
    if not token:
        raise UsageError(f"prunewarden audit collect: --token-file {token_file}: no token")
    return token
