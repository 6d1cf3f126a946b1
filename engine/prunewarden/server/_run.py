"""Starting and stopping a server: the engine, the audit log and the sessions behind one ASGI app
on uvicorn, on a socket bound before it starts (:mod:`._listening`).

Shutdown (SIGTERM or SIGINT) lets uvicorn finish the requests in flight, then stops the policy
watcher, closes the sessions and closes the audit log, which syncs what ``fsync=batch`` had not
synced yet: a server stopped this way loses nothing it answered.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import socket
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from prunewarden.audit import AuditLog
from prunewarden.errors import AuditError
from prunewarden.metrics import DecisionMetrics
from prunewarden.reload import ReloadingEngine
from prunewarden.server._app import create_app, problem_response
from prunewarden.server._config import Listen, ServerConfig, ServerConfigError
from prunewarden.server._connections import ConnectionLimits
from prunewarden.server._fleet import FleetStatus
from prunewarden.server._holding import ServerStore
from prunewarden.server._listening import StoppingServer, bound_url, uvicorn_config
from prunewarden.server._metrics import ServerMetrics, ShippingMetrics, StatusMetrics
from prunewarden.server._problems import ProblemDocument
from prunewarden.server._push import StatusPush
from prunewarden.server._redis import RedisSessionStore
from prunewarden.server._service import DecisionService
from prunewarden.server._sessions import SessionService
from prunewarden.server._tenants import PolicyHolder, Tenants, open_tenants
from prunewarden.session import SESSION_KEY_ENV, SessionRegistry, SqliteSessionStore
from prunewarden.shipping import LogShipper, ShipError
from prunewarden.shipping._sinks import TOKEN_ENV as SHIP_TOKEN_ENV

REDIS_SCHEMES = ("redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://")
# With --audit-fsync batch, the log is synced in the background this often (when records are
# pending), so that a request almost never waits for a disk sync: at 2,000 decisions a second,
# ten milliseconds is twenty records, far under the batch a writer would sync inline.
SYNC_SECONDS = 0.01

_diagnostics = logging.getLogger("prunewarden.server")


@dataclass(frozen=True, slots=True)
class Built:
    """An app and what it stands on; ``close`` releases them (idempotent). ``limits``: what
    each connection may hold, for :func:`run`. ``engine``: the default tenant's policy (the
    only one without ``--tenants``); ``tenants``: every tenant's; ``status_push``: the push
    of ``--status-url``, started by :func:`run` once the server's address is known (None:
    none)."""

    app: Starlette
    engine: PolicyHolder
    audit: AuditLog
    sessions: SessionService
    close: Callable[[], None]
    limits: ConnectionLimits
    tenants: Tenants
    status_push: StatusPush | None = None


def build_app(config: ServerConfig) -> Built:
    """The app for ``config``: the audit log opened (raises :class:`AuditError` when it cannot
    be written), the policy loaded (raises :class:`PolicyError`)."""
    exporting = _status_exporting(config)  # before anything is opened: the extra may be missing
    audit = _open_audit(config)
    try:
        store = open_store(config.session_store_url, config.session_ttl)
    except BaseException:
        audit.close()
        raise
    # The decision metrics of docs/observability.md, on a registry of this app's own: a process
    # may build more than one app (tests do), and each counts only its engine's decisions.
    registry = CollectorRegistry()
    metrics = DecisionMetrics(registry)
    fleet = FleetStatus()
    try:
        tenants = _tenants(config, audit, store, on_decision=[metrics, fleet])
    except BaseException:
        store.close()
        audit.close()
        raise
    for holder in tenants.holders():
        metrics.watch(holder)
        fleet.watch(holder)
    engine = tenants.default.holder
    push = _status_push(config, fleet, tenants)
    try:
        shipper = _start_shipping(config, audit, fleet, registry)
    except BaseException:
        tenants.close()
        store.close()
        audit.close()
        raise
    sessions = SessionService(
        tenants, store, ttl=config.session_ttl, max_live=config.max_live_sessions
    )
    export = _status_export(exporting, config, fleet, tenants, sessions)
    server_metrics = ServerMetrics(registry)
    registry.register(StatusMetrics(lambda: fleet.document(tenants)))
    limits = _connection_limits(config, server_metrics)
    syncer = _Syncer(audit) if config.audit_fsync == "batch" else None
    close = _closer(audit, tenants, sessions, (push, export, syncer, shipper))
    app = create_app(
        config,
        DecisionService(tenants, audit, fleet),
        sessions,
        on_shutdown=close,
        decision_metrics=registry,
        server_metrics=server_metrics,
    )
    return Built(app, engine, audit, sessions, close, limits, tenants, push)


def _connection_limits(config: ServerConfig, metrics: ServerMetrics) -> ConnectionLimits:
    """What each connection may hold, as ``config`` says, counted on ``metrics``."""
    return ConnectionLimits(
        max_connections=config.max_connections,
        header_seconds=config.header_seconds,
        body_seconds=config.body_seconds,
        keep_alive_seconds=config.keep_alive_seconds,
        metrics=metrics,
    )


def _closer(
    audit: AuditLog,
    tenants: Tenants,
    sessions: SessionService,
    optional: tuple[StatusPush | None, _Closing | None, _Syncer | None, LogShipper | None],
) -> Callable[[], None]:
    """What closes an app's parts, once: the status push, the last status export, the
    tenants, the sessions, the batch syncer and the shipping, the audit log last (whatever
    failed before it). ``optional``: the push, export, syncer and shipper (each None when not
    configured)."""
    push, export, syncer, shipper = optional
    closed: list[bool] = []

    def close() -> None:
        if closed:
            return
        closed.append(True)
        try:
            if push is not None:
                push.stop()
            if export is not None:
                export.close()  # a last export of the status, while it still holds
            tenants.close()
            sessions.close()
            if syncer is not None:
                syncer.stop()
            if shipper is not None:
                shipper.close()  # before the log: it may write a records_dropped record
        finally:
            audit.close()

    return close


def _open_audit(config: ServerConfig) -> AuditLog:
    """The audit log of ``config``, opened (:class:`AuditError` says it cannot be opened)."""
    audit = AuditLog(
        config.audit_log,
        fsync=config.audit_fsync,  # type: ignore[arg-type]
        hmac_key_env=config.audit_key_env,
    )
    try:
        audit.open()
    except AuditError as exc:
        raise AuditError(str(exc).replace("cannot write", "cannot open")) from None
    return audit


def _status_push(config: ServerConfig, fleet: FleetStatus, tenants: Tenants) -> StatusPush | None:
    """The push of ``--status-url``, told of every tenant's activations (None without);
    started by :func:`run` once the address is bound."""
    if config.status_url is None:
        return None
    push = StatusPush(
        config.status_url,
        lambda: fleet.document(tenants),
        interval=config.status_interval,
        replica=config.ship_replica or socket.gethostname(),
        token=os.environ.get(SHIP_TOKEN_ENV, "").strip() or None,
    )
    fleet.push = push
    for holder in tenants.holders():
        holder.add_reload_hook(push.observe)
    return push


class _Closing(Protocol):
    def close(self) -> None: ...


def _status_exporting(config: ServerConfig) -> ModuleType | None:
    """:mod:`._otlp_status` when ``--ship`` names an OTLP destination (None: none);
    :class:`ServerConfigError` without the ``ship`` extra."""
    if not any(url.startswith(("otlp+http://", "otlp+https://")) for url in config.ship):
        return None
    # The ship extra, imported on use (not to dodge a cycle: that module imports none of these).
    try:
        return importlib.import_module("prunewarden.server._otlp_status")
    except ImportError as exc:
        msg = "--ship otlp+http(s)://...: needs the ship extra: pip install 'prunewarden[ship]'"
        raise ServerConfigError(f"{msg} ({exc})") from None


def _status_export(
    module: ModuleType | None,
    config: ServerConfig,
    fleet: FleetStatus,
    tenants: Tenants,
    sessions: SessionService,
) -> _Closing | None:
    """The status exported as OTLP metrics beside the first OTLP destination of ``--ship``
    (:mod:`._otlp_status`), every ``--status-interval`` seconds (None: no OTLP destination)."""
    if module is None:
        return None
    otlp = next(url for url in config.ship if url.startswith(("otlp+http://", "otlp+https://")))
    export: _Closing = module.StatusExport(
        module.metrics_endpoint(otlp),
        lambda: fleet.document(tenants),
        lambda: sessions.live_count,
        replica=config.ship_replica or socket.gethostname(),
        interval=config.status_interval,
    )
    return export


def _start_shipping(
    config: ServerConfig, audit: AuditLog, fleet: FleetStatus, registry: CollectorRegistry
) -> LogShipper | None:
    """The shipper of ``--ship``, started, in the status and the metrics (None without);
    :class:`ServerConfigError` for a URL that names no destination, or one whose extra
    (``ship``, ``kafka``) is not installed."""
    if not config.ship:
        return None
    try:
        shipper = LogShipper(
            audit,
            config.ship,
            replica=config.ship_replica,
            buffer_records=config.ship_buffer_records,
            buffer_bytes=config.ship_buffer_bytes,
        )
    except ShipError as exc:
        raise ServerConfigError(str(exc)) from None
    except ImportError as exc:  # the extra a destination needs (the message names it)
        raise ServerConfigError(str(exc)) from None
    fleet.shipper = shipper
    registry.register(ShippingMetrics(shipper))
    shipper.start()
    return shipper


def _tenants(config: ServerConfig, audit: AuditLog, store: ServerStore, **options: Any) -> Tenants:
    """The policies of ``config``: its tenants, or one policy (a file or a bundle's)."""
    common = {"audit": audit, "cel": config.cel, "embedder": config.embedder, **options}
    if config.tenants is None:
        engine = ReloadingEngine(
            config.policy,
            bundle=config.bundle,
            bundle_key=config.bundle_key,
            bundle_policy=config.bundle_policy,
            bundle_rules=config.bundle_rules,
            shadow=config.shadow,
            lock=config.lock,
            interval=config.reload_interval,
            store=store,
            **common,
        )
        return Tenants.single(engine)
    bundle = (config.bundle, config.bundle_key or b"") if config.bundle is not None else None
    # One registry of live sessions for every tenant: a halt one tenant's session holds gates
    # a stateless call naming its id whatever tenant that call chooses.
    registry = SessionRegistry(store)
    return open_tenants(
        config.tenants,
        bundle,
        interval=config.reload_interval,
        bundle_rules=config.bundle_rules,
        sessions=registry,
        **common,
    )


def open_store(url: str, ttl: float) -> ServerStore:
    """The session store ``url`` names: ``sqlite:PATH``, ``redis://HOST:PORT/DB`` (also
    ``rediss://`` and ``unix://``) or ``redis+cluster://HOST:PORT,...`` (also
    ``rediss+cluster://``); :class:`ServerConfigError` when it cannot be used."""
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:")
        try:
            return SqliteSessionStore(path, hmac_key_env=SESSION_KEY_ENV)
        except (sqlite3.Error, OSError, ValueError) as exc:
            raise ServerConfigError(f"--sessions {url}: {exc}") from None
    if url.startswith(REDIS_SCHEMES):
        try:
            store = RedisSessionStore(url, ttl=ttl, hmac_key_env=SESSION_KEY_ENV)
        except (ValueError, RedisError) as exc:
            raise ServerConfigError(f"--sessions {url}: {exc}") from None
        try:
            store.ping()
            if store.is_cluster_node():
                store.close()
                msg = "a node of a Redis Cluster: name it redis+cluster://HOST:PORT[,HOST:PORT...]"
                raise ServerConfigError(f"--sessions {url}: {msg}")
            store.tag_untagged()
            store.seal_unsealed()
        except RedisError as exc:
            store.close()
            raise ServerConfigError(f"--sessions {url}: {exc}") from None
        return store
    expected = "expected sqlite:PATH, redis://HOST:PORT/DB or redis+cluster://HOST:PORT,..."
    raise ServerConfigError(f"--sessions {url!r}: {expected}")


def run(
    built: Built,
    sock: socket.socket,
    listen: Listen,
    metrics_sock: socket.socket | None = None,
    announce: Callable[[], None] = lambda: None,
) -> None:
    """Serve until SIGTERM or SIGINT; then release everything (the socket file too). With
    ``metrics_sock`` (bound for ``--metrics-listen``), that socket serves ``GET /metrics`` alone,
    without the token. ``announce`` is called once either signal stops the server cleanly."""
    app: ASGIApp = built.app
    if built.status_push is not None:
        built.status_push.start(bound_url(listen, sock))
    sockets = [sock]
    if metrics_sock is not None:
        app = _with_metrics_listener(built, metrics_sock.getsockname()[:2])
        sockets.append(metrics_sock)
    config = uvicorn_config(app, built.limits)
    try:
        StoppingServer(config).run_announced(sockets, announce)
    finally:
        built.close()
        sock.close()
        if metrics_sock is not None:
            metrics_sock.close()
        if listen.unix_path is not None:
            with contextlib.suppress(OSError):
                Path(listen.unix_path).unlink()


def _with_metrics_listener(built: Built, address: tuple[str, int]) -> ASGIApp:
    """The app, but for requests arriving at ``address`` (the metrics listener): those get the
    Prometheus text at ``GET /metrics`` and a 404 problem for anything else, with no token."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server")
        if scope["type"] != "http" or server is None or tuple(server) != address:
            await built.app(scope, receive, send)
            return
        if scope["path"] == "/metrics" and scope["method"] in {"GET", "HEAD"}:
            text = generate_latest(REGISTRY) + generate_latest(built.limits.metrics.registry)
            response = Response(text, media_type=CONTENT_TYPE_LATEST)
        else:
            detail = f"{scope['method']} {scope['path']}: the metrics listener serves GET /metrics"
            response = problem_response(ProblemDocument("not-found", detail), {})
        await response(scope, receive, send)

    return app


class _Syncer:
    """Syncs the audit log in a daemon thread every :data:`SYNC_SECONDS` (see
    :meth:`AuditLog.sync`); a failed sync is reported and tried again, and the writers' own
    batch rule still bounds what is unsynced."""

    def __init__(self, audit: AuditLog) -> None:
        self._audit = audit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="prunewarden-sync", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        reported = None  # the failure last reported: a lasting one is reported once
        while not self._stop.wait(SYNC_SECONDS):
            try:
                self._audit.sync()
            except Exception as exc:  # noqa: BLE001 - the syncer outlives one failed sync
                failure = f"{type(exc).__name__}: {exc}"
                if failure != reported:
                    _diagnostics.warning("audit log sync failed: %s", failure)
                reported = failure
            else:
                reported = None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
