"""What a server is told at start: where it listens, who may call it, and its limits.

The checks that make a deployment safe live here, before anything binds: a TCP address beyond
loopback needs a bearer token (a policy decision point that anyone on the network can call, and
whose audit log anyone can fill, is worse than none), and a token is read once, from an
environment variable or a file, never from the command line where ``ps`` shows it.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from prunewarden.bundle import BundleRules
from prunewarden.errors import PrunewardenError
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

if TYPE_CHECKING:
    from prunewarden.fidelity import Embedder
    from prunewarden.server._tenant_config import TenantsConfig

DEFAULT_LISTEN = "127.0.0.1:8181"
TOKEN_ENV = "PRUNEWARDEN_TOKEN"  # noqa: S105 - the name of the variable, not a token
UNIX_PREFIX = "unix:"
DEFAULT_SOCKET_MODE = 0o660  # the socket's owner and group may call; nobody else


class ServerConfigError(PrunewardenError):
    """A server setting that cannot be used (an address, a token file, a session store)."""


@dataclass(frozen=True, slots=True)
class Listen:
    """A TCP host and port, or the path of a unix socket (``host`` and ``port`` unused)."""

    host: str = "127.0.0.1"
    port: int = 8181
    unix_path: str | None = None

    @property
    def is_unix(self) -> bool:
        return self.unix_path is not None

    @property
    def is_loopback(self) -> bool:
        if self.unix_path is not None:
            return True
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name: it may resolve to anything

    def url(self, port: int | None = None) -> str:
        """How a client names the address (``unix:PATH`` for a socket)."""
        if self.unix_path is not None:
            return f"{UNIX_PREFIX}{self.unix_path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}"


def parse_listen(text: str) -> Listen:
    """``unix:/path.sock``, ``HOST:PORT`` or ``[V6]:PORT``."""
    if text.startswith(UNIX_PREFIX):
        path = text[len(UNIX_PREFIX) :]
        if not path:
            raise ServerConfigError(f"--listen {text!r}: the socket path is empty")
        return Listen(unix_path=path)
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ServerConfigError(f"--listen {text!r}: expected HOST:PORT or unix:PATH")
    host = host.removeprefix("[").removesuffix("]")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ServerConfigError(f"--listen {text!r}: {port!r} is not a TCP port")
    return Listen(host=host, port=int(port))


def read_token(token_file: str | None, environ: dict[str, str] | None = None) -> str | None:
    """The bearer token: the file's first line when ``token_file`` is given, else the
    ``PRUNEWARDEN_TOKEN`` environment variable, else None."""
    if token_file is not None:
        try:
            text = Path(token_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ServerConfigError(f"--token-file {token_file}: cannot read: {reason}") from None
        token = text.strip()
        if not token:
            raise ServerConfigError(f"--token-file {token_file}: the file holds no token")
        return token
    value = (environ if environ is not None else dict(os.environ)).get(TOKEN_ENV, "").strip()
    return value or None


_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything :func:`~prunewarden.server.create_app` and the runner need.

    ``audit_log``: the chained decision log (required: a decision point without a log is not
    one). ``sessions``: ``sqlite:PATH``, ``redis://...`` or ``redis+cluster://...`` (default:
    ``sessions.sqlite3`` next to the audit log). ``token``: the bearer token callers must
    present (None: none is asked).
    ``metrics_listen``: a second address, TCP on loopback only, serving ``GET /metrics`` alone
    and without the token (None: metrics only on ``listen``, behind the token). The limits are
    those of docs/limits.md ("The server").
    ``audit_key_env``: the environment variable holding the audit log's HMAC key (None: an
    unkeyed log; see docs/audit-log.md). ``cel``: the CEL backend of the policy's rules,
    ``python`` or ``native`` (None: ``PRUNEWARDEN_CEL``, else python; docs/rules.md).
    ``bundle``: a signed bundle (path or HTTP(S) URL) to take the policy from instead of
    ``policy`` (None), with ``bundle_key`` the Ed25519 public key (PEM bytes) and
    ``bundle_policy`` the policy in it (None: its first; docs/fleet.md), run with the shadow
    the bundle's manifest names for it; ``bundle_rules``: a fetch's total deadline, the lowest
    sequence run and whether a rollback is allowed (:class:`~prunewarden.bundle.BundleRules`).
    ``ship``: URLs the audit log is shipped to (docs/fleet.md), as ``ship_replica`` (None: the
    host name), with at most ``ship_buffer_records`` records and ``ship_buffer_bytes`` bytes
    read and not yet acknowledged per destination.
    ``embedder``: what the fidelity check's meaning method embeds with (``spec.fidelity.method``
    ``embedding`` or ``both``; None: none, and such a policy refuses every summary it checks
    with ``internal_error``; docs/fidelity.md).
    ``status_url``: where the ``/v1/status`` document is POSTed every ``status_interval``
    seconds and after each activation and new failure (None: nowhere; docs/fleet.md).
    ``tenants``: several policies chosen per request by labels (``serve --tenants``, read by
    :func:`~prunewarden.server.read_tenants`), instead of ``policy``; with ``bundle``, the
    tenants name policies of the bundle (docs/fleet.md). ``trusted_labels_header``: the header
    a proxy in front sets, from which alone a request's labels are read (None: the caller's
    ``Prunewarden-Labels`` and the document's ``labels``).
    """

    policy: str | None
    audit_log: str
    listen: Listen
    sessions: str | None = None
    shadow: str | None = None
    lock: str | None = None
    token: str | None = None
    audit_fsync: str = "batch"
    reload_interval: float = 1.0
    max_request_bytes: int = MAX_REQUEST_BYTES
    request_seconds: float = REQUEST_SECONDS
    session_ttl: float = SESSION_IDLE_SECONDS
    socket_mode: int = DEFAULT_SOCKET_MODE
    max_live_sessions: int = MAX_LIVE_SESSIONS
    max_connections: int = MAX_CONNECTIONS
    header_seconds: float = HEADER_SECONDS
    body_seconds: float = BODY_SECONDS
    keep_alive_seconds: float = KEEP_ALIVE_SECONDS
    metrics_listen: Listen | None = None
    audit_key_env: str | None = None
    cel: str | None = None
    bundle: str | None = None
    bundle_key: bytes | None = None
    bundle_policy: str | None = None
    bundle_rules: BundleRules = field(default_factory=BundleRules)
    embedder: Embedder | None = None
    status_url: str | None = None
    status_interval: float = 10.0
    ship: tuple[str, ...] = ()
    ship_replica: str | None = None
    ship_buffer_records: int = DEFAULT_BUFFER_RECORDS
    ship_buffer_bytes: int = DEFAULT_BUFFER_BYTES
    tenants: TenantsConfig | None = None
    trusted_labels_header: str | None = None

    def __post_init__(self) -> None:
        if self.tenants is not None:
            self._check_tenants()
        elif (self.policy is None) == (self.bundle is None):
            msg = "give a policy (--policy FILE) or a bundle (--bundle PATH|URL), not both"
            raise ServerConfigError(msg)
        if self.bundle is not None and (self.bundle_key is None or self.shadow is not None):
            msg = (
                "--bundle needs --bundle-key PUBKEY, and takes no --shadow (its manifest names it)"
            )
            raise ServerConfigError(msg)
        if self.status_url is not None and not self.status_url.startswith(("http://", "https://")):
            msg = f"--status-url {self.status_url!r}: expected an http:// or https:// URL"
            raise ServerConfigError(msg)
        header = self.trusted_labels_header
        if header is not None and not _HEADER_NAME.fullmatch(header):
            msg = f"--trusted-labels-header {header!r}: not an HTTP header name"
            raise ServerConfigError(msg)
        if self.status_interval <= 0:
            msg = f"--status-interval {self.status_interval:g}: must be positive"
            raise ServerConfigError(msg)
        self._check_listening()
        limits = (
            self.max_request_bytes,
            self.request_seconds,
            self.session_ttl,
            self.max_live_sessions,
            self.max_connections,
            self.header_seconds,
            self.body_seconds,
            self.keep_alive_seconds,
            self.ship_buffer_records,
            self.ship_buffer_bytes,
        )
        if any(limit <= 0 for limit in limits):
            msg = (
                "the request size, request time, session TTL, live sessions, connections, "
                "header, body, keep-alive and shipping buffer limits must be positive"
            )
            raise ServerConfigError(msg)

    def _check_listening(self) -> None:
        """Beyond loopback only with a token; metrics without one on loopback TCP only."""
        if not self.listen.is_loopback and self.token is None:
            msg = (
                f"refusing to listen on {self.listen.url()} without a token: set "
                f"{TOKEN_ENV} or pass --token-file (or listen on loopback or a unix socket)"
            )
            raise ServerConfigError(msg)
        metrics = self.metrics_listen
        if metrics is not None and (metrics.is_unix or not metrics.is_loopback):
            msg = (
                f"--metrics-listen {metrics.url()}: metrics without a token are served on a "
                "loopback TCP address only (127.0.0.1:PORT or [::1]:PORT)"
            )
            raise ServerConfigError(msg)

    def _check_tenants(self) -> None:
        """With tenants, each tenant names its policy, shadow and lock file."""
        given = [
            option
            for option, value in (
                ("--policy", self.policy),
                ("--shadow", self.shadow),
                ("--lock", self.lock),
                ("--bundle-policy", self.bundle_policy),
            )
            if value is not None
        ]
        if given:
            msg = f"--tenants names each tenant's policy: leave out {', '.join(given)}"
            raise ServerConfigError(msg)
        if self.bundle is not None and self.bundle_key is None:
            raise ServerConfigError("--bundle needs --bundle-key PUBKEY")
        for spec in self.tenants.tenants if self.tenants is not None else ():
            if self.token is not None and self.token in spec.tokens:
                msg = (
                    f"the server's token is also tenant {spec.name!r}'s (--tenants): give "
                    "the server and each tenant a token of its own"
                )
                raise ServerConfigError(msg)

    @property
    def session_store_url(self) -> str:
        """Where sessions are kept: as given, else a SQLite file next to the audit log."""
        if self.sessions is not None:
            return self.sessions
        return f"sqlite:{Path(self.audit_log).with_name('sessions.sqlite3')}"
