"""Starting and stopping a server: the engine, the audit log and the sessions behind one ASGI app
on uvicorn, on a socket bound here.

The socket is bound before uvicorn starts, for two reasons: a unix socket gets the permissions
asked for from its first instant (uvicorn makes its own world-writable), and a TCP port 0 is
known before the first request, so the caller can say where the server listens.

Shutdown (SIGTERM or SIGINT) lets uvicorn finish the requests in flight, then stops the policy
watcher, closes the sessions and closes the audit log, which syncs what ``fsync=batch`` had not
synced yet: a server stopped this way loses nothing it answered.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from prometheus_client import CollectorRegistry
from redis.exceptions import RedisError
from starlette.applications import Starlette

from prunewarden.audit import AuditLog
from prunewarden.errors import AuditError
from prunewarden.metrics import DecisionMetrics
from prunewarden.reload import ReloadingEngine
from prunewarden.server._app import create_app
from prunewarden.server._config import Listen, ServerConfig, ServerConfigError
from prunewarden.server._redis import RedisSessionStore
from prunewarden.server._service import DecisionService
from prunewarden.server._sessions import ServerStore, SessionService
from prunewarden.session import SqliteSessionStore

GRACEFUL_SECONDS = 10  # how long requests in flight may take to finish once asked to stop
# With --audit-fsync batch, the log is synced in the background this often (when records are
# pending), so that a request almost never waits for a disk sync: at 2,000 decisions a second,
# ten milliseconds is twenty records, far under the batch a writer would sync inline.
SYNC_SECONDS = 0.01

_diagnostics = logging.getLogger("prunewarden.server")


@dataclass(frozen=True, slots=True)
class Built:
    """An app and what it stands on; ``close`` releases them (idempotent)."""

    app: Starlette
    engine: ReloadingEngine
    audit: AuditLog
    sessions: SessionService
    close: Callable[[], None]


def build_app(config: ServerConfig) -> Built:
    """The app for ``config``: the audit log opened (raises :class:`AuditError` when it cannot
    be written), the policy loaded (raises :class:`PolicyError`)."""
    audit = AuditLog(
        config.audit_log,
        fsync=config.audit_fsync,  # type: ignore[arg-type]
        hmac_key_env=config.audit_key_env,
    )
    try:
        audit.open()
    except AuditError as exc:
        raise AuditError(str(exc).replace("cannot write", "cannot open")) from None
    try:
        store = open_store(config.session_store_url, config.session_ttl)
    except BaseException:
        audit.close()
        raise
    # The decision metrics of docs/observability.md, on a registry of this app's own: a process
    # may build more than one app (tests do), and each counts only its engine's decisions.
    registry = CollectorRegistry()
    metrics = DecisionMetrics(registry)
    try:
        engine = ReloadingEngine(
            config.policy,
            shadow=config.shadow,
            lock=config.lock,
            interval=config.reload_interval,
            audit=audit,
            store=store,
            on_decision=metrics,
        )
    except BaseException:
        store.close()
        audit.close()
        raise
    metrics.watch(engine)
    sessions = SessionService(engine, store, ttl=config.session_ttl)
    syncer = _Syncer(audit) if config.audit_fsync == "batch" else None
    closed: list[bool] = []

    def close() -> None:
        if closed:
            return
        closed.append(True)
        try:
            engine.close()
            sessions.close()
            if syncer is not None:
                syncer.stop()
        finally:
            audit.close()

    app = create_app(
        config,
        DecisionService(engine, audit),
        sessions,
        on_shutdown=close,
        decision_metrics=registry,
    )
    return Built(app, engine, audit, sessions, close)


def open_store(url: str, ttl: float) -> ServerStore:
    """The session store ``url`` names: ``sqlite:PATH`` or ``redis://HOST:PORT/DB`` (also
    ``rediss://`` and ``unix://``); :class:`ServerConfigError` when it cannot be used."""
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:")
        try:
            return SqliteSessionStore(path)
        except (sqlite3.Error, OSError) as exc:
            raise ServerConfigError(f"--sessions {url}: {exc}") from None
    if url.startswith(("redis://", "rediss://", "unix://")):
        store = RedisSessionStore(url, ttl=ttl)
        try:
            store.ping()
        except RedisError as exc:
            store.close()
            raise ServerConfigError(f"--sessions {url}: {exc}") from None
        return store
    raise ServerConfigError(f"--sessions {url!r}: expected sqlite:PATH or redis://HOST:PORT/DB")


def bind(listen: Listen, socket_mode: int) -> socket.socket:
    """A listening socket for ``listen``; a unix socket with ``socket_mode`` permissions."""
    if listen.unix_path is None:
        family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
        # without it a response written in two parts waits ~40 ms for a delayed ACK.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((listen.host, listen.port))
        except OSError as exc:
            sock.close()
            raise ServerConfigError(f"cannot listen on {listen.url()}: {exc.strerror}") from None
    else:
        path = Path(listen.unix_path)
        _remove_stale_socket(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Never world-accessible, not even between bind and chmod.
        previous = os.umask(0o177)
        try:
            sock.bind(str(path))
        except OSError as exc:
            sock.close()
            raise ServerConfigError(f"cannot listen on {listen.url()}: {exc.strerror}") from None
        finally:
            os.umask(previous)
        path.chmod(socket_mode)
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def bound_url(listen: Listen, sock: socket.socket) -> str:
    """Where ``sock`` listens, as a client names it (the real port when 0 was asked)."""
    if listen.unix_path is not None:
        return listen.url()
    return listen.url(port=sock.getsockname()[1])


def run(built: Built, sock: socket.socket, listen: Listen) -> None:
    """Serve until SIGTERM or SIGINT; then release everything (the socket file too)."""
    config = uvicorn.Config(
        built.app,
        log_config=None,
        access_log=False,
        server_header=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
    )
    try:
        _Server(config).run(sockets=[sock])
    finally:
        built.close()
        sock.close()
        if listen.unix_path is not None:
            with contextlib.suppress(OSError):
                Path(listen.unix_path).unlink()


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


class _Server(uvicorn.Server):
    """uvicorn, asked to stop by SIGTERM or SIGINT, returns instead of re-raising the signal
    once it has stopped: the caller still has its socket file to remove and its exit code to
    give (0: stopped as asked)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        stopping = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in stopping}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _remove_stale_socket(path: Path) -> None:
    """A socket file left by a server that died is removed; a live one is in use."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ServerConfigError(f"cannot listen on unix:{path}: the file exists, not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        path.unlink()
        return
    finally:
        probe.close()
    raise ServerConfigError(f"cannot listen on unix:{path}: another server is listening there")
