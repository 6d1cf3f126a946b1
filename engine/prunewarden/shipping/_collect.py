"""``prunewarden audit collect``: the receiver of shipped decision logs, over HTTP.

``POST /v1/logs`` takes a batch of records (JSON lines, gzip-compressed or not) from the replica
its ``Prunewarden-Replica`` header names, into ``DIR/REPLICA.jsonl`` (:mod:`._receiving` checks
the chain), and answers ``{"accepted", "duplicates", "dropped", "head"}`` once it is synced, or
an RFC 9457 problem document: 400 ``invalid-batch``, 401 ``unauthorized``, 403
``forbidden-replica`` (a token bound to another replica), 409 ``chain-gap``, 413
``batch-too-large``, 415 ``unsupported-media-type``, 422 ``forged-record``. ``GET /v1/replicas``
lists each replica's head and counts. The body is checked line by line as it is read and
decompressed (:mod:`._batch_body`).

The standard library's threading HTTP server: the collector needs no extra, and one replica's
batches are taken in turn (a lock per replica) while other replicas' go on.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prunewarden.limits import MAX_SHIP_BATCH_BYTES
from prunewarden.shipping._batch_body import batch_lines
from prunewarden.shipping._receiving import REPLICA_NAME, BatchRefused, ReplicaChain
from prunewarden.shipping._sinks import REPLICA_HEADER

PROBLEM_BASE = "https://prunewarden.dev/problems/"
_diagnostics = logging.getLogger("prunewarden.shipping")
_TITLES = {
    400: "The batch is not valid",
    401: "A valid bearer token is required",
    403: "The token may not ship as this replica",
    404: "No such resource",
    409: "The batch does not continue the replica's chain",
    413: "The batch is larger than the limit",
    415: "The batch must be JSON lines, gzip-compressed or not",
    422: "A record's hash does not match its content",
    500: "Internal error",
}
_STATUS = {
    "invalid-batch": 400,
    "unauthorized": 401,
    "forbidden-replica": 403,
    "not-found": 404,
    "chain-gap": 409,
    "batch-too-large": 413,
    "unsupported-media-type": 415,
    "forged-record": 422,
    "internal-error": 500,
}


class Collector:
    """Receives batches into ``directory`` (created if missing); ``token``: the bearer token a
    sender must present, as any replica (None: none); ``tokens``: tokens each bound to the one
    replica it may ship as (:func:`~prunewarden.shipping.read_collect_tokens`), instead of or
    beside ``token``; ``key``: the HMAC key to check keyed records with (None: their links are
    checked, their seals are left to ``audit verify`` with the key; with it, an unkeyed record
    is refused as a forgery); ``before_answer``: called with the replica's name once a batch is
    written and before it is acknowledged (tests hold a receiver there: a slow receiver, or a
    sender gone before its answer; the batch is read as it streams in, so a hold before it is
    read would race the sender's last bytes)."""

    def __init__(
        self,
        directory: Path,
        *,
        token: str | None = None,
        tokens: Mapping[str, str] | None = None,
        key: bytes | None = None,
        before_answer: Callable[[str], None] | None = None,
    ) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.token = token
        self.tokens = {f"Bearer {t}".encode(): name for t, name in (tokens or {}).items()}
        self.key = key
        self.before_answer = before_answer
        self._replicas: dict[str, ReplicaChain] = {}
        self._lock = threading.Lock()

    def replica(self, name: str) -> ReplicaChain:
        with self._lock:
            chain = self._replicas.get(name)
            if chain is None:
                chain = self._replicas[name] = ReplicaChain(self.directory, name, self.key)
            return chain

    def replicas(self) -> dict[str, Any]:
        with self._lock:
            chains = list(self._replicas.values())
        return {
            chain.name: {
                "head": chain.head,
                "records": chain.records,
                "dropped": chain.dropped,
                "duplicates": chain.duplicates,
            }
            for chain in chains
        }

    def serve(self, host: str, port: int) -> ThreadingHTTPServer:
        """A server bound to ``host:port`` (0: any free port), not yet serving: call its
        ``serve_forever`` (and ``shutdown`` from another thread). Raises :class:`OSError`."""
        collector = self

        class Handler(_Handler):
            pass

        Handler.collector = collector
        return _Server((host, port), Handler)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, _request: Any, client_address: Any) -> None:
        """A sender that went away before its answer (it timed out, or was killed): the batch
        is kept and the sender sends it again; reported to the ``prunewarden`` logger, not
        printed (a library is silent)."""
        _diagnostics.debug("a sender at %s went away before its answer", client_address)


class _Handler(BaseHTTPRequestHandler):
    collector: Collector
    protocol_version = "HTTP/1.1"
    timeout = 60  # seconds a sender may take to send a batch, or leave the answer unread
    server_version = "prunewarden-collect"
    sys_version = ""

    def log_message(self, *_args: Any) -> None:
        return  # silent: the collector's files are its record

    def do_GET(self) -> None:
        if self.path.split("?")[0] != "/v1/replicas":
            self._problem("not-found", f"GET {self.path}: the collector serves GET /v1/replicas")
            return
        if self._sender() is not None:
            self._json(200, self.collector.replicas())

    def do_POST(self) -> None:
        if self.path.split("?")[0] != "/v1/logs":
            self._problem("not-found", f"POST {self.path}: batches go to POST /v1/logs")
            return
        sender = self._sender()
        if sender is None:
            return
        try:
            replica, body = self._batch()
            _refuse_another_replica(sender, replica)
            accepted = self.collector.replica(replica).accept(body)
            if self.collector.before_answer is not None:
                self.collector.before_answer(replica)
        except BatchRefused as exc:
            self._problem(exc.kind, exc.detail)
            return
        except OSError as exc:
            self._problem("internal-error", f"cannot write the batch: {exc.strerror}")
            return
        self._json(
            200,
            {
                "accepted": accepted.accepted,
                "duplicates": accepted.duplicates,
                "dropped": accepted.dropped,
                "head": accepted.head,
            },
        )

    def _sender(self) -> str | None:
        """Who the request's token says the sender is: the replica its token is bound to,
        ``""`` for any replica (the shared token, or none asked), or None (answered 401)."""
        token, bound = self.collector.token, self.collector.tokens
        if token is None and not bound:
            return ""
        given = self.headers.get("Authorization", "").encode()
        if token is not None and hmac.compare_digest(given, f"Bearer {token}".encode()):
            return ""
        replica = bound.get(given)  # a lookup by the token's bytes: its hash, not a scan
        if replica is not None:
            return replica
        self._problem("unauthorized", "a valid bearer token is required")
        return None

    def _batch(self) -> tuple[str, Iterator[bytes]]:
        replica = self.headers.get(REPLICA_HEADER, "")
        if not REPLICA_NAME.fullmatch(replica):
            detail = f"the {REPLICA_HEADER} header must name the replica ([A-Za-z0-9._-], 1-128)"
            raise BatchRefused("invalid-batch", detail)
        media = self.headers.get("Content-Type", "").split(";")[0].strip()
        if media not in {"application/x-ndjson", "application/jsonl", "application/json-seq"}:
            raise BatchRefused("unsupported-media-type", f"Content-Type {media!r}")
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            raise BatchRefused("invalid-batch", "a Content-Length is required")
        if int(length) > MAX_SHIP_BATCH_BYTES:
            raise BatchRefused("batch-too-large", f"{length} bytes; at most {MAX_SHIP_BATCH_BYTES}")
        encoding = self.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in {"gzip", "identity"}:
            raise BatchRefused("unsupported-media-type", f"Content-Encoding {encoding!r}")
        return replica, batch_lines(self.rfile, int(length), encoding)

    def _problem(self, kind: str, detail: str) -> None:
        status = _STATUS[kind]
        document = {
            "type": PROBLEM_BASE + kind,
            "title": _TITLES[status],
            "status": status,
            "detail": detail,
        }
        # A refused body may be unread: the connection is not used again.
        self.close_connection = True
        self._json(status, document, "application/problem+json")

    def _json(self, status: int, document: Any, media: str = "application/json") -> None:
        content = json.dumps(document, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)


def _refuse_another_replica(sender: str, replica: str) -> None:
    """A token bound to replica ``sender`` may ship as that replica only."""
    if sender and sender != replica:
        detail = f"this token ships as replica {sender!r}, not {replica!r}"
        raise BatchRefused("forbidden-replica", detail)
