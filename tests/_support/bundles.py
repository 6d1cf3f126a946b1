"""Signed bundles for the fleet tests, and a real HTTP server on loopback serving one.

The server answers ``GET`` with the bundle and its ``ETag``, ``304`` to a matching
``If-None-Match``, and, on demand, one fault: HTTP 500, a download cut short of its
``Content-Length``, no server at all (stopped: connections are refused), or a skewed clock (a
``Date`` of another time, one ETag reused for new bytes). It records what each request asked
for.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from prunewarden.bundle import KeyPair, build_bundle, generate_key_pair, sign_bundle
from prunewarden.policy._lock import update as update_lock
from prunewarden.policy._overlay import resolve_file

Fault = Literal["500", "partial"] | None

BASE = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: base, version: 1.0.0}
spec:
  collapse: {canary_margin: 0.25}
"""


def prod(stability_delta: float, version: str) -> str:
    """The example eviction is allowed at 0.25 and denied (unstable_score) at 0.01."""
    return (
        "apiVersion: prunewarden/v1\nkind: Policy\nextends: base.yaml\n"
        f"metadata: {{name: prod, version: {version}}}\n"
        f"spec:\n  eviction: {{stability_delta: {stability_delta}}}\n"
    )


@dataclass(frozen=True)
class Bundles:
    """Two signed revisions of one policy (r1 allows the example eviction, r2 denies it), the
    key pair that signed them, and another key pair."""

    r1: bytes
    r2: bytes
    keys: KeyPair
    other: KeyPair


def signed_bundle(folder: Path, text: str, revision: str, keys: KeyPair) -> bytes:
    """``text`` as prod.yaml (extending base.yaml), locked, built and signed as ``revision``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base.yaml").write_text(BASE, encoding="utf-8")
    (folder / "prod.yaml").write_text(text, encoding="utf-8")
    update_lock(folder / "policy.lock", [resolve_file(folder / "prod.yaml")])
    built = build_bundle([folder / "prod.yaml"], revision=revision, built_at="2026-12-01T00:00:00Z")
    return sign_bundle(built, keys.private_pem)


def make_bundles(folder: Path) -> Bundles:
    keys = generate_key_pair()
    return Bundles(
        signed_bundle(folder / "r1", prod(0.25, "1.0.0"), "r1", keys),
        signed_bundle(folder / "r2", prod(0.01, "1.1.0"), "r2", keys),
        keys,
        generate_key_pair(),
    )


class BundleServer:
    """What the loopback server serves now; change it between requests."""

    def __init__(self) -> None:
        self.body = b""
        self.fault: Fault = None
        self.etags = True  # False: a server that sends no ETag (and so never answers 304)
        # Clock skew: a Date header of another time than now (None: the real one), and one
        # ETag given to whatever is served (None: the bytes' SHA-256), answered with 304 when
        # it is asked for unless ``conditional`` is False (a server ignoring If-None-Match).
        self.date: str | None = None
        self.reused_etag: str | None = None
        self.conditional = True
        self.requests: list[tuple[str | None, int]] = []  # (If-None-Match, status answered)
        self.url = ""
        self._lock = threading.Lock()
        self._running: tuple[http.server.ThreadingHTTPServer, threading.Thread] | None = None

    def attach(self, server: http.server.ThreadingHTTPServer, thread: threading.Thread) -> None:
        self._running = (server, thread)

    def stop(self) -> None:
        """Stop serving: from now on, connections to the URL are refused."""
        running, self._running = self._running, None
        if running is not None:
            server, thread = running
            server.shutdown()
            server.server_close()
            thread.join()

    def serve(self, body: bytes, fault: Fault = None) -> None:
        with self._lock:
            self.body, self.fault = body, fault

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest() + '"'

    def answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        with self._lock:
            body, fault = self.body, self.fault
            etag: str | None = self.reused_etag or self.etag
        asked = handler.headers.get("If-None-Match")
        if not self.etags:
            asked = etag = None
        if fault == "500":
            status, payload = 500, b"internal error"
        elif etag is not None and asked == etag and self.conditional:
            status, payload = 304, b""
        else:
            status, payload = 200, body
        self.requests.append((asked, status))
        if self.date is None:
            handler.send_response(status)
        else:
            handler.send_response_only(status)
            handler.send_header("Date", self.date)
        if etag is not None:
            handler.send_header("ETag", etag)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        # A partial download: the announced length, half the bytes, then the connection closes.
        handler.wfile.write(payload[: len(payload) // 2] if fault == "partial" else payload)
        handler.close_connection = True


@contextmanager
def bundle_server() -> Iterator[BundleServer]:
    """A :class:`BundleServer` on 127.0.0.1 (a port the kernel chose), stopped on exit."""
    state = BundleServer()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.answer(self)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
            """Silent: the tests read ``state.requests``."""

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/bundle.tar.gz"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.attach(server, thread)
    try:
        yield state
    finally:
        state.stop()
